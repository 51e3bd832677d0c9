"""What `eval/run.py` runs over the test records: the annotator, the RAG baseline around it,
or an NLI-matrix baseline. Each predictor writes one row per record through `write`."""
from __future__ import annotations

import json
from collections.abc import Callable
from functools import cached_property
from pathlib import Path

from omegaconf import DictConfig
from tqdm import tqdm

from eval.predict import predict_records, select_eval_records
from eval.predictions import binary_decision
from models.builders import load_tokenizer, resolve_model_path

Write = Callable[[dict], None]


class AnnotatorPredictor:
    """The checkpoint (or base model) itself: generations, or head probabilities with the stored threshold."""

    def __init__(self, cfg: DictConfig):
        self.cfg = cfg

    @cached_property
    def path(self) -> str:
        return resolve_model_path(self.cfg.checkpoint or self.cfg.model.name_or_path, key="checkpoint")

    @cached_property
    def tokenizer(self):
        return load_tokenizer(self.path)

    def prepare(self, splits: dict[str, list[dict]], out: Path) -> None:
        from transformers import AutoConfig

        from models.annotator import load_annotator

        c = self.cfg
        if c.eval.backend not in ("hf", "vllm"):
            raise ValueError(f"eval.backend: expected hf | vllm, found {c.eval.backend!r}")
        self.threshold = None
        if c.eval.backend == "vllm" and c.task.kind == "generative":
            return                # vLLM loads the model itself
        self.model = load_annotator(self.path, c.task.kind, c.task.head, c.model.dtype, c.model.attn_implementation)
        self.threshold = getattr(AutoConfig.from_pretrained(self.path), "decision_threshold", None)

    def rows(self, records: list[dict], progress: bool, on_result: Write | None = None) -> list[dict]:
        c = self.cfg
        if c.eval.backend == "vllm" and c.task.kind == "generative":
            return self._vllm_rows(records, on_result)

        def stamp(row: dict) -> None:
            if self.threshold is not None and "probs" in row:
                row["threshold"] = self.threshold
            if on_result is not None:
                on_result(row)

        return predict_records(self.model, self.tokenizer, records, c.task.kind, c.task.template,
                               c.eval.max_new_tokens, progress=progress, on_result=stamp,
                               batch_size=c.eval.batch_size)

    def _vllm_rows(self, records: list[dict], on_result: Write | None) -> list[dict]:
        from data_builders.prompts import render_messages
        from eval.vllm_backend import vllm_generate

        c = self.cfg
        texts = [self.tokenizer.apply_chat_template(render_messages(r, c.task.template), tokenize=False,
                                                    add_generation_prompt=True) for r in records]
        outputs = vllm_generate(self.path, texts, c.eval.max_new_tokens, c.eval.vllm.yarn,
                                c.eval.vllm.tensor_parallel_size, c.eval.vllm.max_model_len)
        rows = [{"id": r["id"], "output": o} for r, o in zip(records, outputs)]
        for row in rows:
            if on_result is not None:
                on_result(row)
        return rows

    def predict(self, records: list[dict], write: Write) -> None:
        self.rows(records, progress=True, on_result=write)


class RagPredictor(AnnotatorPredictor):
    """Appendix D: the annotator judges each summary block against its aligned article window."""

    def prepare(self, splits, out) -> None:
        from data_builders.retrieval import EmbeddingRanker

        if self.cfg.task.scorer == "anah":
            raise ValueError("eval.method=rag judges summaries block by block; it needs task.scorer "
                             "longnovel or binary, found anah")
        super().prepare(splits, out)
        self.embedder = EmbeddingRanker(self.cfg.eval.rag.embedder)

    def predict(self, records: list[dict], write: Write) -> None:
        from eval.rag import aggregate, block_records

        r = self.cfg.eval.rag
        for rec in tqdm(records, desc="rag", dynamic_ncols=True):
            blocks = block_records(rec, self.embedder, r.article_chars, r.summary_chars, r.top_k)
            rows = self.rows(blocks, progress=False)
            labels = [binary_decision(row)[0] for row in rows]
            write(aggregate(rec["id"], labels, [row.get("output") or row.get("probs") for row in rows]))


class NliPredictor:
    """SummaC zero-shot or HaluMap scores, thresholded at a value chosen on the validation split."""

    def __init__(self, cfg: DictConfig):
        from eval.nli import METHODS

        self.cfg, n = cfg, cfg.eval.nli
        if not n.model:
            raise ValueError("eval.method=nli needs eval.nli.model=<a local Hugging Face NLI model directory>")
        if n.method not in METHODS:
            raise ValueError(f"eval.nli.method: expected one of {list(METHODS)}, found {n.method!r}")

    @cached_property
    def tokenizer(self):      # only for building the embedded records (token counts per bucket)
        return load_tokenizer(resolve_model_path(self.cfg.model.name_or_path))

    def _score(self, rec: dict) -> dict:
        from eval.nli import score_record

        return score_record(self.model, rec, self.cfg.eval.nli)

    def prepare(self, splits: dict[str, list[dict]], out: Path) -> None:
        from eval.nli import NLIModel
        from eval.thresholds import choose_threshold

        n = self.cfg.eval.nli
        self.model = NLIModel(n.model, n.batch_size)
        saved = out / "threshold.json"
        if n.threshold is not None:
            self.threshold = float(n.threshold)
        elif saved.exists():
            self.threshold = json.loads(saved.read_text())["threshold"]
        else:
            c = self.cfg.eval
            val = select_eval_records(splits.get("val") or [], list(c.buckets), c.max_per_bucket)
            if not val:
                raise ValueError("eval.method=nli chooses its threshold on the validation split, and there is none "
                                 "(add val.jsonl / data.corpus.val_books, or set eval.nli.threshold)")
            scores = [self._score(r)["score"] for r in tqdm(val, desc="nli threshold (val)", dynamic_ncols=True)]
            self.threshold = choose_threshold([r["label"] for r in val], scores)
            saved.write_text(json.dumps({"threshold": self.threshold, "n_val": len(val), "method": n.method}))

    def predict(self, records: list[dict], write: Write) -> None:
        for rec in tqdm(records, desc=f"nli {self.cfg.eval.nli.method}", dynamic_ncols=True):
            s = self._score(rec)
            write({"id": rec["id"], "label": int(s["score"] >= self.threshold), "score": s["score"],
                   "threshold": self.threshold, "per_segment": s["per_segment"]})


PREDICTORS = {"annotator": AnnotatorPredictor, "rag": RagPredictor, "nli": NliPredictor}
