"""Scoring through the registered scorers (`eval/scorers/`, one module each). `eval/score.py`, `eval/run.py` and the
trainer's final evaluation all score through `score_records` / `score_files`."""
from __future__ import annotations

from pathlib import Path

from eval.reports.writer import write_eval
from eval.scorers import SCORERS, Scorer, Summary
from eval.scorers.inputs import read_gold, read_predictions

__all__ = ["SCORERS", "Scorer", "Summary", "scorer", "score_records", "score_files"]


def scorer(name: str) -> Scorer:
    if name not in SCORERS:
        raise ValueError(f"task: expected one of {sorted(SCORERS)}, found {name!r}")
    return SCORERS[name]


def score_records(task: str, gold: list[dict], preds: dict[str, dict], bertscore=None) -> tuple[dict, list[dict]]:
    """Metrics and per-record rows. `bertscore` (configs.schema.BertScoreConfig) adds `bertscore_f1`
    to ANAH scores; the other tasks ignore it."""
    return scorer(task).score(gold, preds, bertscore)


def score_files(task: str, gold_path: str, predictions_path: str, output_dir: str | Path,
                plots: bool = True, bertscore=None) -> dict:
    s = scorer(task)
    gold = read_gold(gold_path, s.name, s.gold_fields)
    preds = read_predictions(predictions_path, {r["id"] for r in gold})
    metrics, rows = s.score(gold, preds, bertscore)
    write_eval(Path(output_dir), s, metrics, rows, plot=plots)
    return metrics
