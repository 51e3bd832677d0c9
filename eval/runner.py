"""Evaluate a checkpoint (or base model) with an experiment's config: build or read the test
records, write predictions as they come (resuming from those already written), then score
them with the same code as `eval/score.py`."""
from __future__ import annotations

import json
from pathlib import Path

from omegaconf import DictConfig
from transformers import AutoConfig

from data_builders.schema import write_jsonl
from data_builders.sources import build_records, read_splits
from eval.predict import predict_records, select_eval_records
from eval.report import report_text
from eval.scoring import score_files
from models.annotator import load_annotator
from models.builders import load_tokenizer, resolve_model_path


def _test_records(cfg: DictConfig, tokenizer) -> list[dict]:
    if cfg.data.source == "records":
        return read_splits(Path(cfg.data.root))["test"]
    records, _ = build_records(cfg, tokenizer)
    return records["test"]


def _done(path: Path) -> set[str]:
    if not path.exists():
        return set()
    return {json.loads(line)["id"] for line in path.read_text(encoding="utf-8").splitlines() if line.strip()}


def run_eval(cfg: DictConfig) -> dict:
    path = resolve_model_path(cfg.checkpoint or cfg.model.name_or_path, key="checkpoint")
    tokenizer = load_tokenizer(path)
    records = select_eval_records(_test_records(cfg, tokenizer), list(cfg.eval.buckets), cfg.eval.max_per_bucket)
    if not records:
        raise ValueError(f"eval.buckets={list(cfg.eval.buckets)}: no test records in these buckets")
    out = Path(cfg.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    write_jsonl(out / "gold.jsonl", records)
    preds_path = out / "predictions.jsonl"
    done = _done(preds_path)
    todo = [r for r in records if r["id"] not in done]
    print(f"{len(records)} records, {len(done)} predicted already, {len(todo)} to go", flush=True)
    if todo:
        model = load_annotator(path, cfg.task.kind, cfg.task.head, cfg.model.dtype, cfg.model.attn_implementation)
        threshold = getattr(AutoConfig.from_pretrained(path), "decision_threshold", None)
        with open(preds_path, "a", encoding="utf-8") as f:
            def write(row: dict) -> None:
                if threshold is not None and "probs" in row:
                    row["threshold"] = threshold
                f.write(json.dumps(row, ensure_ascii=False) + "\n")
                f.flush()

            predict_records(model, tokenizer, todo, cfg.task.kind, cfg.task.template, cfg.eval.max_new_tokens,
                            progress=True, on_result=write, batch_size=cfg.eval.batch_size)
    metrics = score_files(cfg.task.scorer, out / "gold.jsonl", preds_path, out / "scores")
    print(report_text(out / "scores"), end="")
    return metrics
