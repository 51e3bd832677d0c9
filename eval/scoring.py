"""Score predictions against gold records: one dispatch for every task, used by `eval/score.py`,
`eval/run.py` and the trainer's final evaluation."""
from __future__ import annotations

from pathlib import Path

from eval.anah import score_anah
from eval.binary import score_binary
from eval.inputs import read_gold, read_predictions
from eval.longnovel import score_longnovel
from eval.report import write_eval

SCORERS = {"longnovel": score_longnovel, "anah": score_anah, "binary": score_binary}


def score_records(task: str, gold: list[dict], preds: dict[str, dict], bertscore=None) -> tuple[dict, list[dict]]:
    """Metrics and per-record rows. `bertscore` (eval.config.BertScoreConfig) adds `bertscore_f1`
    to ANAH scores; the other tasks ignore it."""
    if task not in SCORERS:
        raise ValueError(f"task: expected one of {sorted(SCORERS)}, found {task!r}")
    return SCORERS[task](gold, preds, bertscore)


def score_files(task: str, gold_path: str, predictions_path: str, output_dir: str | Path,
                plots: bool = True, bertscore=None) -> dict:
    gold = read_gold(gold_path, task)
    preds = read_predictions(predictions_path, {r["id"] for r in gold})
    metrics, rows = score_records(task, gold, preds, bertscore)
    write_eval(Path(output_dir), task, metrics, rows, plot=plots)
    return metrics
