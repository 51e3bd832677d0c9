"""The folds of a cross-validation run, dealt once and pooled once, for both launchers: training
(`train/cross_validation.py`, `data.folds` of train/sft.py) and a method prepared per fold
(`eval/harness.py::run_eval_folds`, `data.folds` of eval/run.py).

    <output_dir>/folds/fold_<i>/{train,val,test}.jsonl   the fold's records (val: its threshold)
                /fold_<i>/eval/                          the fold's predictions and figures
                /eval/metrics.json, report.md            pooled over the k test parts, per fold below
"""
from __future__ import annotations

import json
from pathlib import Path

from configs.choices import Scorer
from configs.schema import BertScoreConfig, DataConfig, SFTConfig, with_changes
from data_builders.folds import deal_folds
from data_builders.records import read_jsonl, read_records
from eval.reports.writer import write_eval
from eval.scorers.scoring import scorer

FOLDS_REPORT = "folds_report.txt"


def fold_config(cfg: SFTConfig, run_dir: Path, i: int) -> SFTConfig:
    """The config of fold i: an ordinary records run in <run_dir>/fold_<i>. It writes no export: `eval.export` is
    the model fitted on every record after the folds (`eval/harness.py::run_eval_folds`), not a fold's."""
    return with_changes(cfg, {"data": {"folds": 0, "root": str(run_dir / "folds" / f"fold_{i}")},
                                 "eval": {"export": None},
                                 "output_dir": str(run_dir / f"fold_{i}"),
                                 "logger": {"group": cfg.logger.group or run_dir.name}})


def deal_once(data: DataConfig, folds_dir: Path) -> None:
    """The folds, dealt by the first launch (a resumed run keeps them)."""
    if not (folds_dir / FOLDS_REPORT).exists():
        print(deal_folds(data, folds_dir), end="", flush=True)


def pool_folds(scorer_name: Scorer, folds: int, bertscore: BertScoreConfig, run_dir: Path,
               metrics_file: str = "metrics.json") -> dict:
    """The k test parts scored together (each record once) into <run_dir>/eval, with each fold's
    own figures (<run_dir>/fold_<i>/eval/<metrics_file>) in the report."""
    s = scorer(scorer_name)
    gold, predictions, per_fold = [], {}, []
    for i in range(folds):
        gold += read_records(run_dir / "folds" / f"fold_{i}" / "test.jsonl")
        rows = read_jsonl(run_dir / f"fold_{i}" / "eval" / "predictions.jsonl")
        predictions.update({row["id"]: row for row in rows})
        per_fold.append(json.loads((run_dir / f"fold_{i}" / "eval" / metrics_file).read_text(encoding="utf-8")))
        thresholds = {row["threshold"] for row in rows if row.get("threshold") is not None}
        if len(thresholds) == 1:        # a method prepared on the fold (grounding, nli) writes it on each row
            per_fold[-1].setdefault("decision_threshold", thresholds.pop())
    metrics, rows = s.score(gold, predictions, bertscore)
    metrics["folds"] = per_fold
    out = run_dir / "eval"
    write_eval(out, s, metrics, rows)
    report = out / "report.md"
    report.write_text(report.read_text(encoding="utf-8") + "\n" + "\n".join(fold_lines(s, per_fold)) + "\n",
                      encoding="utf-8")
    return metrics


def fold_lines(s, per_fold: list[dict]) -> list[str]:
    """The scorer's own (first) table with a row (or rows) per fold and its decision threshold; the tables
    after it (SummEdits' published systems) stay in each fold's own report."""
    lines = ["## Per fold (pooled above: each record scored once, by its fold's annotator)", ""]
    for i, m in enumerate(per_fold):
        header, rule, *rows = s.markdown(m)
        t = m.get("decision_threshold")
        if i == 0:
            lines += ["| fold | threshold " + header, "|---|---" + rule]
        first_table = rows[:next((j for j, row in enumerate(rows) if not row.startswith("|")), len(rows))]
        lines += [f"| {i} | {'-' if t is None else f'{t:.3f}'} " + row for row in first_table]
    return lines
