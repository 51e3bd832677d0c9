"""What `eval/run.py` runs over the test records: the annotator, the RAG baseline around it,
or an NLI-matrix baseline. Each predictor writes one row per record through `write`."""
from __future__ import annotations

import json
import logging
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import torch
from transformers import AutoConfig

from configs.choices import TokenSpans
from configs.schema import (
    DataConfig,
    EvalConfig,
    GroundingConfig,
    JudgeConfig,
    ModelConfig,
    NliConfig,
    RagConfig,
    SFTConfig,
    TaskConfig,
    VllmConfig,
)
from data_builders.common.progress import progress
from data_builders.model_inputs.evidence import evidence_records
from data_builders.model_inputs.prompts import traits
from data_builders.model_inputs.retrieval import EmbeddingRanker
from data_builders.records import gold_spans
from data_builders.sources import train_split
from eval.aggregation import by_sentence
from eval.aggregation.by_keyword import keyword_row, keyword_units
from eval.backends.backend import Write
from eval.backends.in_process import ONE_PROCESS, InProcess, Shard, select_eval_records
from eval.backends.served import Judge, Served
from eval.backends.vllm import Vllm
from eval.baselines import rag as rag_baseline
from eval.scorers.decisions import binary_decision
from eval.scorers.parsers import parse_consistency_answer
from eval.scorers.scoring import scorer
from eval.thresholds import (
    DEFAULT,
    Threshold,
    choose_group_thresholds,
    choose_run_threshold,
    choose_span_threshold,
    choose_threshold,
    field_value,
    flagged_spans,
    is_hallucinated,
    resolve_threshold,
)
from models.annotator import load_annotator
from models.builders import load_tokenizer, resolve_model_path
from models.export_spec import AnnotatorSpec
from models.kinds import kind_of

logger = logging.getLogger(__name__)

ENCODER_CHECKPOINTS = "encoder_checkpoints"   # in a grounding run's output_dir while its unit encoders train
KEYWORD_RECORDS = 64        # UHGEval items judged together (about 270 keyword prompts), then written


@dataclass(frozen=True)
class Inference:
    """How an annotator's predictions are made: the weights' dtype and attention, the decoding
    backend, the batches, and which validation records choose a decision threshold."""
    backend: str = "hf"
    max_new_tokens: int = 256
    batch_size: int = 8
    batch_tokens: int | None = 16384
    dtype: str = "auto"
    attn_implementation: str = "sdpa"
    vllm: VllmConfig | None = None         # for backend=vllm
    judge: JudgeConfig | None = None       # for backend=openai
    buckets: tuple[str, ...] = ("all",)    # validation records: these buckets, at most max_per_bucket each
    max_per_bucket: int | None = None
    threshold_by: str | None = None        # a record field: a binary head's threshold per value of it
    threshold_for: str = "balanced_accuracy"   # what a threshold chosen on records maximises (or f1)
    padded_batches: bool = False           # greedy decoding: prompts of any length in a batch, left-padded

    @classmethod
    def of(cls, model: ModelConfig, evaluation: EvalConfig) -> Inference:
        e = evaluation
        return cls(str(e.backend), e.max_new_tokens, e.batch_size, e.batch_tokens, str(model.dtype),
                   model.attn_implementation, e.vllm, e.judge, tuple(e.buckets), e.max_per_bucket,
                   e.threshold_by, str(e.threshold_for), e.padded_batches)

    def validation(self, splits: dict[str, list[dict]]) -> list[dict]:
        return select_eval_records(splits.get("val") or [], list(self.buckets), self.max_per_bucket)


@dataclass(frozen=True)
class PredictorConfig:
    """What building a predictor reads of a run's config (`eval/run.py`'s, or a fold's)."""
    task: TaskConfig
    model: ModelConfig
    evaluation: EvalConfig
    data: DataConfig
    checkpoint: str | None = None      # the weights to evaluate; None: model.name_or_path
    progress: bool = True              # progress lines (trainer.progress)

    @classmethod
    def of_run(cls, cfg: SFTConfig) -> PredictorConfig:
        return cls(cfg.task, cfg.model, cfg.eval, cfg.data, cfg.checkpoint, cfg.trainer.progress)

    @property
    def inference(self) -> Inference:
        return Inference.of(self.model, self.evaluation)

    def weights(self) -> str:
        return resolve_model_path(self.checkpoint or self.model.name_or_path, key="checkpoint")


class AnnotatorPredictor:
    """The checkpoint (or base model) itself: generations, or head probabilities with a decision
    threshold. The one prediction path of `eval/run.py`, of the trainer's final evaluation and of
    `eval.annotate`. `task` says what the model was trained to do (kind, head, template, scorer,
    evidence units): a run's `task` config, or an export's `AnnotatorSpec`.

    A binary head's threshold follows `eval.thresholds.resolve_threshold`: the one stored in the
    model's config (`decision_threshold`), else one chosen on the validation split, else 0.5;
    `threshold_source` says which. Thresholds per value of a record field (`eval.threshold_by`, stored
    as `decision_thresholds_by`) take precedence for the records that have such a value.
    """

    def __init__(self, task: TaskConfig | AnnotatorSpec, inference: Inference, path: str, shard: Shard = ONE_PROCESS,
                 progress: bool = True):
        self.task, self.inference, self.path, self.shard, self.progress = task, inference, path, shard, progress
        self.kind = kind_of(task)
        self.threshold: float | None = None
        self.threshold_source: str | None = None
        self.thresholds_by: dict | None = None    # {"field": a record path, "values": {value: threshold}}
        self._group_of: dict[str, str] = {}

    @classmethod
    def from_config(cls, c: PredictorConfig) -> AnnotatorPredictor:
        """`eval/run.py`'s annotator: `checkpoint`, else `model.name_or_path`."""
        return cls(c.task, c.inference, c.weights(), progress=c.progress)

    @cached_property
    def tokenizer(self):
        return load_tokenizer(self.path)

    def prepare(self, splits: dict[str, list[dict]], out: Path | None = None) -> None:
        i, t = self.inference, self.task
        if i.backend == "vllm" and self.kind.generates:            # vLLM loads the model itself
            self.backend = Vllm(self.path, self.tokenizer, t.template, i.max_new_tokens, i.vllm)
            return
        if i.backend == "openai" and self.kind.generates:
            self.judge = Judge(i.judge, i.max_new_tokens)
            self.backend = Served(self.judge, self.tokenizer if i.judge.completions else None, t.template)
            return
        device = "cuda" if torch.cuda.is_available() else "cpu"
        self.model = load_annotator(self.path, t.kind, t.head, i.dtype, i.attn_implementation).to(device)
        self.backend = InProcess(self.model, self.tokenizer, t, i.max_new_tokens, i.batch_size, i.batch_tokens,
                                 i.padded_batches, self.shard)
        if self.kind.thresholded(t):
            self._binary_threshold(splits)

    def _binary_threshold(self, splits: dict[str, list[dict]]) -> None:
        config = AutoConfig.from_pretrained(self.path)     # read once, before the final evaluation may rewrite it
        value = getattr(config, "decision_threshold", None)
        stored = Threshold(value, "stored in the model's config") if value is not None else None
        val, t, objective = self.inference.validation(splits), self.task, self.inference.threshold_for
        scores: dict[str, float] = {}

        def scores_of(recs: list[dict]) -> list[float]:
            """Records' scores (a sentence-level annotator's: its worst sentence's)."""
            scores.update({row["id"]: row["probs"][1] for row in self.rows(recs, progress=False)})
            return [scores[r["id"]] for r in recs]

        if t.evidence_sentences and scorer(t.scorer).unit_threshold and objective == "balanced_accuracy":
            units = [u for r in val for u in evidence_records(r, t.evidence_sentences, unit=t.evidence_unit)]
            chosen = resolve_threshold(None, stored, units, lambda recs: [
                row["probs"][1] for row in self._predicted(recs, progress=False)], what=f"{t.evidence_unit}s")
        elif self.kind.token_probs and scorer(t.scorer).span_f1:
            chosen = resolve_threshold(None, stored, val, None, choose=self._span_threshold,
                                       objective="character F1")
        elif objective == "f1":
            chosen = resolve_threshold(None, stored, val, None, objective="F1", choose=lambda recs: choose_threshold(
                [r["label"] for r in recs], scores_of(recs), objective))
        else:
            chosen = resolve_threshold(None, stored, val, scores_of)
        if not self.kind.token_probs:
            self.thresholds_by = self._group_thresholds(val, scores, scores_of,
                                                        getattr(config, "decision_thresholds_by", None))
        self.threshold, self.threshold_source = chosen.value, chosen.source

    def _group_thresholds(self, val: list[dict], scores: dict, scores_of: Callable, stored: dict | None) -> dict | None:
        """Thresholds per value of `eval.threshold_by`: the stored ones, else chosen on validation."""
        path = self.inference.threshold_by
        if stored or not path or not val:
            return stored or None
        if len(scores) < len(val):
            scores_of(val)
        values = choose_group_thresholds(val, scores, path, self.inference.threshold_for)
        return {"field": path, "values": values} if values else None

    def _span_threshold(self, records: list[dict]) -> float:
        rows = self._predicted(records, progress=False)
        return choose_span_threshold([row["token_probs"] for row in rows],
                                     [gold_spans(r) for r in records])

    def rows(self, records: list[dict], progress: bool | None = None, on_result: Write | None = None) -> list[dict]:
        """One row per record, in record order, on every process (each predicts its share)."""
        if self.thresholds_by:
            path = self.thresholds_by["field"]
            self._group_of.update({r["id"]: str(field_value(r, path)) for r in records})
        if traits(self.task.template).per_keyword:
            return self._keyword_rows(records, progress, on_result)
        if self.task.evidence_sentences:
            return self._sentence_rows(records, progress, on_result)
        return self._predicted(records, progress, lambda row: self._stamp(row, on_result))

    def _threshold_of(self, record_id: str) -> float | None:
        """The decision threshold of a record: its group's (`eval.threshold_by`), else the overall one."""
        by = (self.thresholds_by or {}).get("values") or {}
        return by.get(self._group_of.get(record_id), self.threshold)

    def _predicted(self, records: list[dict], progress: bool | None, on_result: Write | None = None) -> list[dict]:
        return self.backend.rows(records, self.progress if progress is None else progress, on_result)

    def _stamp(self, row: dict, on_result: Write | None) -> None:
        if "output" in row and traits(self.task.template).yes_means_faithful:    # read here
            row["label"] = parse_consistency_answer(row["output"])
        if self.threshold is not None and "probs" in row:
            row["threshold"] = self._threshold_of(row["id"])
        if "token_probs" in row:      # a span annotator: its spans at the decision threshold
            row["spans"] = flagged_spans(row["token_probs"], row.get("threshold", DEFAULT))
        if on_result is not None:
            on_result(row)

    def _sentence_rows(self, records: list[dict], progress: bool | None, on_result: Write | None) -> list[dict]:
        """Each record's row from its sentences' rows (`task.evidence_sentences`)."""
        k = self.task.evidence_sentences
        sentences = {r["id"]: evidence_records(r, k, labelled=False, unit=self.task.evidence_unit) for r in records}
        flat = [e for r in records for e in sentences[r["id"]]]
        by_id = {row["id"]: row for row in self._predicted(flat, progress)}
        rows = []
        for r in records:
            parts = sentences[r["id"]]
            row = by_sentence.aggregate(r["id"], [by_id[e["id"]] for e in parts], [e["response"] for e in parts])
            row["spans"] = [[parts[i]["meta"]["start"], parts[i]["meta"]["end"]]
                            for i in by_sentence.flagged_sentences(row, self._threshold_of(r["id"]))]
            self._stamp(row, on_result)
            rows.append(row)
        return rows

    def _keyword_rows(self, records: list[dict], progress: bool | None, on_result: Write | None) -> list[dict]:
        """Each record's row from its keywords' answers (eval/aggregation/by_keyword.py), KEYWORD_RECORDS records at a
        time: their rows are written as they are done, so a stopped run continues from them."""
        rows = []
        for at in range(0, len(records), KEYWORD_RECORDS):
            part = records[at:at + KEYWORD_RECORDS]
            units = {r["id"]: keyword_units(r) for r in part}
            answered = {row["id"]: row for row in self._predicted([u for r in part for u in units[r["id"]]], progress)}
            for r in part:
                rows.append(keyword_row(r["id"], units[r["id"]], [answered[u["id"]] for u in units[r["id"]]]))
                if on_result is not None:
                    on_result(rows[-1])
        return rows

    def predict(self, records: list[dict], write: Write) -> None:
        self.rows(records, on_result=write)


class RagPredictor(AnnotatorPredictor):
    """Appendix D: the annotator judges each summary block against its aligned article window."""

    def __init__(self, task: TaskConfig, inference: Inference, path: str, rag: RagConfig):
        super().__init__(task, inference, path)
        self.rag = rag

    @classmethod
    def from_config(cls, c: PredictorConfig) -> RagPredictor:
        return cls(c.task, c.inference, c.weights(), c.evaluation.rag)

    def prepare(self, splits, out) -> None:
        if scorer(self.task.scorer).one_sentence:
            raise ValueError("eval.method=rag judges summaries block by block; it needs task.scorer "
                             f"longnovel or binary, found {self.task.scorer}")
        super().prepare(splits, out)
        self.embedder = EmbeddingRanker(self.rag.embedder)

    def predict(self, records: list[dict], write: Write) -> None:
        r = self.rag
        for rec in progress(records, desc="rag"):
            blocks = rag_baseline.block_records(rec, self.embedder, r.article_chars, r.summary_chars, r.top_k)
            rows = self.rows(blocks, progress=False)
            labels = [binary_decision(row)[0] for row in rows]
            write(rag_baseline.aggregate(rec["id"], labels, [row.get("output") or row.get("probs") for row in rows]))


class NliPredictor:
    """SummaC zero-shot or HaluMap scores, thresholded at a value chosen on the validation split."""

    def __init__(self, nli: NliConfig, inference: Inference, tokenizer_path: str | None):
        self.nli, self.inference, self.tokenizer_path = nli, inference, tokenizer_path

    @classmethod
    def from_config(cls, c: PredictorConfig) -> NliPredictor:
        return cls(c.evaluation.nli, c.inference, c.model.name_or_path)

    @cached_property
    def tokenizer(self):      # only for building the embedded records (token counts per bucket)
        return load_tokenizer(resolve_model_path(self.tokenizer_path))

    def _score(self, rec: dict) -> dict:
        from eval.baselines.nli import score_record

        return score_record(self.model, rec, self.nli)

    def prepare(self, splits: dict[str, list[dict]], out: Path) -> None:
        from eval.baselines.nli import NLIModel

        n = self.nli
        self.model = NLIModel(n.model, n.batch_size)
        saved = out / "threshold.json"
        chosen = resolve_threshold(n.threshold, self._cached_threshold(saved), self.inference.validation(splits),
                                   lambda recs: [self._score(r)["score"] for r in
                                                 progress(recs, desc="nli threshold (val)")],
                                   default=None)    # NLI scores are not probabilities: no default
        self.threshold = chosen.value
        if chosen.source.startswith("validation"):
            saved.write_text(json.dumps({"threshold": chosen.value, "source": chosen.source, **self._settings()}))

    def _settings(self) -> dict:
        n = self.nli
        return {"method": str(n.method), "score": str(n.score), "calibrate": n.calibrate, "model": n.model,
                "block_chars": n.block_chars}

    def _cached_threshold(self, saved: Path) -> Threshold | None:
        """A threshold chosen by an earlier run in this output_dir, if it scored the same way."""
        if not saved.exists():
            return None
        cached = json.loads(saved.read_text())
        if {k: cached.get(k) for k in self._settings()} != self._settings():
            logger.info(f"{saved}: chosen for other eval.nli settings; choosing again on the validation split")
            return None
        return Threshold(cached["threshold"], f"{saved.name} ({cached.get('source', 'validation split')})")

    def predict(self, records: list[dict], write: Write) -> None:
        for rec in progress(records, desc=f"nli {self.nli.method}"):
            s = self._score(rec)
            write({"id": rec["id"], "label": is_hallucinated(s["score"], self.threshold), "score": s["score"],
                   "threshold": self.threshold, "per_segment": s["per_segment"]})


class GroundingPredictor:
    """What each response sentence says that its source does not, weighed by two logistic regressions
    fitted on the train split (eval/baselines/grounding.py); the response threshold chosen on the validation split
    for `eval.threshold_for` (balanced accuracy, or F1), one per value of `eval.threshold_by` where set,
    the spans' for character F1. The fitted model, its thresholds and where they came from are written
    to grounding.json in the output directory."""

    tokenizer = None          # records are read as they are (data.source=records): nothing is tokenised

    def __init__(self, grounding: GroundingConfig, inference: Inference, data_root: str | None = None,
                 fold_by: str = "source"):
        if grounding.encoder_fitted or grounding.encoder_from:
            from eval.baselines.grounding import continued_encoder_config, fitted_encoder_config

            resolve = fitted_encoder_config if grounding.encoder_fitted else continued_encoder_config
            grounding = resolve(grounding)
        self.grounding, self.inference, self.data_root, self.fold_by = grounding, inference, data_root, fold_by
        self.choice: dict | None = None     # with eval.grounding.choose_among: what was chosen, and why
        self.checkpoints: Path | None = None     # where the unit encoders save their training (`prepare`'s out)
        self.encoders = None                     # the fold's fine-tuned unit encoders, once fitted

    @classmethod
    def from_config(cls, c: PredictorConfig) -> GroundingPredictor:
        return cls(c.evaluation.grounding, c.inference, c.data.root, c.data.fold_by)

    def prepare(self, splits: dict[str, list[dict]], out: Path) -> None:
        train = train_split(splits, self.data_root, "eval.method=grounding")
        self.checkpoints, self.encoders = out / ENCODER_CHECKPOINTS, None
        if self.grounding.choose_among:
            self._choose(splits, train)
        g = self.grounding
        for reader in filter(None, (g.embedder, g.lm)):
            logger.info(f"grounding: reading the units of {len(train)} train records with {reader}")
        model, fitted_on, val, scored, chosen_on = self._fitted(splits, train)
        response = self._response_threshold(model, val, scored, chosen_on)
        span = (resolve_threshold(
            g.span_threshold, None, [r for r in val if r.get("spans")], None, what="hallucinated responses",
            objective="character F1", chosen_on=chosen_on,
            choose=lambda recs: choose_span_threshold([scored[r["id"]][1] for r in recs],
                                                      [gold_spans(r) for r in recs]))
                if model.sentence else Threshold(DEFAULT, "unused: no gold spans in the train split, none marked"))
        model.threshold, model.span_threshold = response.value, span.value
        token = self._token_threshold(model, val, scored, chosen_on)
        model.token_threshold, model.thresholds_by = token.value, self._group_thresholds(model, val, scored)
        model.save(out / "grounding.json", {"threshold_source": response.source, "span_threshold_source": span.source,
                                            "token_threshold_source": token.source, "train_records": fitted_on,
                                            "features_chosen": self.choice})
        groups = model.thresholds_by and "; by {}: {}".format(model.thresholds_by["field"], ", ".join(
            f"{value} {t:.3f}" for value, t in model.thresholds_by["values"].items()))
        logger.info(f"grounding: fitted on {fitted_on} records; response threshold {response.value:.3f} "
                    f"({response.source}){groups or ''}, span threshold {span.value:.3f} ({span.source})"
                    + ("" if g.encoder_token_spans == TokenSpans.whole_units else
                       f", token threshold {token.value:.3f} ({token.source})"))
        self.model = model

    def _choose(self, splits: dict[str, list[dict]], train: list[dict]) -> None:
        """`eval.grounding.choose_among`: the fold's features, chosen on its train and val parts alone. Unit encoders
        fine-tuned by this fold (`encoder`, `encoder_from`) are fitted first, once, and every candidate reads them."""
        from eval.baselines.grounding import choose_features

        g = self.grounding
        encoders = self._unit_encoders(self._fit_records(splits, train)) if not g.encoder_fitted else None
        self.grounding, self.choice = choose_features(train + (splits.get("val") or []), g, self.fold_by, encoders)
        logger.info("grounding: features {} chosen ({} inner folds by {}; ROC AUC {})".format(
                  self.choice["chosen"], self.choice["inner_folds"], self.fold_by,
                  ", ".join(f"{c} {a:.4f}" for c, a in self.choice["roc_auc"].items())))

    def _fitted(self, splits: dict[str, list[dict]], train: list[dict]) -> tuple:
        """The model, how many records it fitted on, the records its thresholds are chosen on, their scores,
        and what those records are: the validation split, or with `cross_fit_by` both splits cross-fitted."""
        from eval.baselines.grounding import cross_fitted_scores, fit

        g = self.grounding
        records = self._fit_records(splits, train)
        encoders = self._unit_encoders(records)           # the inner fits share them
        if not g.cross_fit_by:
            model, val = fit(records, g, encoders), self.inference.validation(splits)
            return model, len(records), val, {r["id"]: model.scores(r) for r in val}, "validation split"
        return (fit(records, g, encoders), len(records), records,
                cross_fitted_scores(records, g, g.cross_fit_by, encoders),
                f"train and val splits cross-fitted by {g.cross_fit_by}")

    def _fit_records(self, splits: dict[str, list[dict]], train: list[dict]) -> list[dict]:
        """What the fold's model fits on: the train split, or with `cross_fit_by` the train and val splits."""
        return train + (splits.get("val") or []) if self.grounding.cross_fit_by else train

    def _unit_encoders(self, records: list[dict]):
        """With `eval.grounding.encoder`, the fold's unit encoders fitted on `records`, once (`unit_encoders`)."""
        from eval.baselines.grounding import unit_encoders

        if self.grounding.encoder and self.encoders is None:
            self.encoders = unit_encoders(records, self.grounding, self.checkpoints)
        return self.encoders

    def _response_threshold(self, model, val: list[dict], scored: dict, chosen_on: str) -> Threshold:
        """Configured, else chosen on the validation responses (`chosen_on`) for `eval.threshold_for`."""
        if not model.response:
            return Threshold(DEFAULT, "unused: every train record is hallucinated, its marked spans decide")
        objective = self.inference.threshold_for

        def scores_of(recs: list[dict]) -> list[float]:
            return [scored[r["id"]][0] for r in recs]

        choose = None if objective == "balanced_accuracy" else (
            lambda recs: choose_threshold([r["label"] for r in recs], scores_of(recs), objective))
        return resolve_threshold(self.grounding.threshold, None, val, scores_of, what="responses", choose=choose,
                                 objective=objective.upper(), chosen_on=chosen_on)

    def _token_threshold(self, model, val: list[dict], scored: dict, chosen_on: str) -> Threshold:
        """Configured (0.5: a positive logit), else chosen on the validation responses' token runs for character F1;
        cross-fitted, each response's tokens read by the encoder that never saw it."""
        from eval.baselines.grounding import held_out_readers

        g = self.grounding
        if g.encoder_token_spans == TokenSpans.whole_units:
            return Threshold(DEFAULT, "unused: encoder_token_spans=whole_units, whole units are marked")
        located = [r for r in val if r.get("spans")]
        if g.encoder_token_threshold is None and not located:
            return Threshold(DEFAULT, "default: no validation response has gold spans to choose it on")
        readers = held_out_readers(val, g, model.encoders) if g.cross_fit_by and not g.encoder_fitted else {}
        return resolve_threshold(
            g.encoder_token_threshold, None, located, None, what="hallucinated responses",
            objective="character F1", chosen_on=chosen_on,
            choose=lambda recs: choose_run_threshold([model.token_runs(r, scored[r["id"]][1], readers.get(r["id"]))
                                                      for r in recs], [gold_spans(r) for r in recs]))

    def _group_thresholds(self, model, val: list[dict], scored: dict) -> dict | None:
        """A response threshold per value of `eval.threshold_by` (RAGTruth's task types), chosen on the
        validation responses of that value; values with too few keep the overall one."""
        path = self.inference.threshold_by
        if not (path and model.response and val):
            return None
        values = choose_group_thresholds(val, {i: score for i, (score, _) in scored.items()}, path,
                                         self.inference.threshold_for)
        return {"field": path, "values": values} if values else None

    def predict(self, records: list[dict], write: Write) -> None:
        for rec in progress(records, desc="grounding"):
            write(self.model.predict(rec))
        self.discard_checkpoints()

    def discard_checkpoints(self) -> None:
        """The unit encoders' training checkpoints, once nothing is left to resume: the fitted encoders lie
        beside grounding.json."""
        if self.checkpoints:
            shutil.rmtree(self.checkpoints, ignore_errors=True)


PREDICTORS = {"annotator": AnnotatorPredictor, "rag": RagPredictor, "nli": NliPredictor,
              "grounding": GroundingPredictor}
