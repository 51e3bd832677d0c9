"""Evaluate an annotator or a baseline with an experiment's config: build or read the test
records, write predictions as they come (resuming from those already written), then score
them with the same code as `eval/score.py`.

`eval.method`: `annotator` (the checkpoint's generations or head probabilities), `rag` (the
annotator on aligned article windows, Appendix D), or `nli` (SummaC zero-shot / HaluMap with
a threshold chosen on the validation split).
"""
from __future__ import annotations

import json
from pathlib import Path

from configs.schema import SFTConfig
from data_builders.schema import read_jsonl_to_append, write_jsonl
from data_builders.sources import DataRequest, build_records, check_data_config, needed_buckets
from eval.predict import select_eval_records
from eval.predictors import PREDICTORS
from eval.report import report_text
from eval.scoring import score_files


def data_request(cfg: SFTConfig) -> DataRequest:
    """What a run (training, or `eval/run.py`) wants of its data: its template, the length buckets of
    its stages and evaluation, its seed."""
    stages = [s.bucket for s in cfg.curriculum.stages]
    return DataRequest(cfg.task.template, tuple(needed_buckets(stages, list(cfg.eval.buckets), cfg.eval.enabled)),
                       cfg.trainer.seed)


def _done(path: Path) -> set[str]:
    """Ids already predicted: a torn last line (the run was killed mid-row) is dropped, and redone."""
    return {row["id"] for row in read_jsonl_to_append(path)}


def run_eval(cfg: SFTConfig) -> dict:
    if cfg.data.folds:
        raise ValueError(f"data.folds={cfg.data.folds}: eval/run.py scores one model on one test split; a fold's "
                         "export is scored with data.folds=0 data.root=<run>/folds/fold_<i>")
    check_data_config(cfg.data)
    predictor = PREDICTORS[cfg.eval.method].from_config(cfg)
    splits = build_records(cfg.data, data_request(cfg), predictor.tokenizer)[0]
    records = select_eval_records(splits["test"], list(cfg.eval.buckets), cfg.eval.max_per_bucket)
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
        predictor.prepare(splits, out)
        with open(preds_path, "a", encoding="utf-8") as f:
            def write(row: dict) -> None:
                f.write(json.dumps(row, ensure_ascii=False) + "\n")
                f.flush()

            predictor.predict(todo, write)
        if getattr(predictor, "judge", None) is not None:
            _record_judge(predictor.judge, out)
    metrics = score_files(cfg.task.scorer, out / "gold.jsonl", preds_path, out / "scores", bertscore=cfg.eval.bertscore)
    print(report_text(out / "scores"), end="")
    return metrics


def _record_judge(judge, out: Path) -> None:
    """The judge's requests, tokens and speed (and cost, with prices) beside the predictions."""
    from eval.judge import usage_record

    record = usage_record(judge.usage, judge.config)
    (out / "judge_usage.json").write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    print(record["line"], flush=True)
