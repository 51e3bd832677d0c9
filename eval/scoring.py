"""Score one predictions file against gold records and write the report."""
from __future__ import annotations

from pathlib import Path

from eval.anah import score_anah
from eval.binary import score_binary
from eval.inputs import read_gold, read_predictions
from eval.longnovel import score_longnovel
from eval.report import write_eval

SCORERS = {"longnovel": score_longnovel, "anah": score_anah, "binary": score_binary}


def score_files(task: str, gold_path: str, predictions_path: str, output_dir: str | Path,
                plots: bool = True, bertscore=None) -> dict:
    """`bertscore` (eval.config.BertScoreConfig) adds `bertscore_f1` to ANAH scores."""
    if task not in SCORERS:
        raise ValueError(f"task: expected one of {sorted(SCORERS)}, found {task!r}")
    gold = read_gold(gold_path, task)
    preds = read_predictions(predictions_path, {r["id"] for r in gold})
    metrics, rows = score_anah(gold, preds, bertscore) if task == "anah" else SCORERS[task](gold, preds)
    write_eval(Path(output_dir), task, metrics, rows, plot=plots)
    return metrics
