"""k-fold cross-validation in one launch (`data.folds=k`): the records of `data.root` are dealt
into k folds grouped by source (`data_builders/folds.py`), each fold is trained and evaluated as
its own run, and every record is scored once, by the fold's annotator that never saw its source.

    <output_dir>/folds/fold_<i>/{train,val,test}.jsonl   the fold's records (val: its threshold)
                /fold_<i>/                               the fold's run directory
                /eval/metrics.json, report.md            pooled over the k test parts, per fold below
"""
from __future__ import annotations

import json
from pathlib import Path

from configs.choices import Scorer
from configs.schema import BertScoreConfig, DataConfig, SFTConfig, with_changes
from data_builders.folds import deal_folds
from data_builders.schema import read_jsonl, read_records
from eval.report import write_eval
from eval.scoring import scorer
from train.distributed import DistInfo, barrier, on_main_rank
from train.run_dir import agree_on_output_dir
from train.trainer import train

FOLDS_REPORT = "folds_report.txt"


def fold_config(cfg: SFTConfig, run_dir: Path, i: int) -> SFTConfig:
    """The config of fold i: an ordinary records run in <run_dir>/fold_<i>."""
    return with_changes(cfg, {"data": {"folds": 0, "root": str(run_dir / "folds" / f"fold_{i}")},
                                 "output_dir": str(run_dir / f"fold_{i}"),
                                 "logger": {"group": cfg.logger.group or run_dir.name}})


def deal_once(data: DataConfig, folds_dir: Path) -> None:
    """The folds, dealt by the first launch (a resumed run keeps them)."""
    if not (folds_dir / FOLDS_REPORT).exists():
        print(deal_folds(data, folds_dir), end="", flush=True)


def fold_done(run_dir: Path, i: int) -> bool:
    return (run_dir / f"fold_{i}" / "eval" / "metrics.json").is_file()


def train_folds(cfg: SFTConfig, info: DistInfo) -> dict | None:
    """Train and evaluate every fold (a finished fold is kept when resuming), then score the pooled
    predictions; the pooled metrics on rank 0, None elsewhere or when a fold stopped early."""
    cfg, run_dir = agree_on_output_dir(cfg, info)
    folds_dir = run_dir / "folds"
    on_main_rank(lambda: deal_once(cfg.data, folds_dir), info.is_main)     # every rank enters; rank 0 looks
    barrier()
    for i in range(cfg.data.folds):
        if cfg.resume == "auto" and fold_done(run_dir, i):
            if info.is_main:
                print(f"fold {i}: finished earlier, kept ({run_dir / f'fold_{i}'})", flush=True)
            continue
        if info.is_main:
            print(f"== fold {i} of {cfg.data.folds}", flush=True)
        train(fold_config(cfg, run_dir, i), info, continue_dir=run_dir)
        barrier()
        if not fold_done(run_dir, i):          # stopped early: the trainer said how to continue
            return None
    if not info.is_main:
        return None
    metrics = pool_folds(cfg.task.scorer, cfg.data.folds, cfg.eval.bertscore, run_dir)
    print(f"== cross-validation, {cfg.data.folds} folds pooled\n"
          + (run_dir / "eval" / "report.md").read_text(encoding="utf-8"), flush=True)
    return metrics


def pool_folds(scorer_name: Scorer, folds: int, bertscore: BertScoreConfig, run_dir: Path,
               metrics_file: str = "metrics.json") -> dict:
    """The k test parts scored together (each record once) into <run_dir>/eval, with each fold's
    own figures (<run_dir>/fold_<i>/eval/<metrics_file>) in the report."""
    s = scorer(scorer_name)
    gold, predictions, per_fold = [], {}, []
    for i in range(folds):
        gold += read_records(run_dir / "folds" / f"fold_{i}" / "test.jsonl")
        predictions.update({row["id"]: row for row in read_jsonl(run_dir / f"fold_{i}" / "eval" / "predictions.jsonl")})
        per_fold.append(json.loads((run_dir / f"fold_{i}" / "eval" / metrics_file).read_text(encoding="utf-8")))
    metrics, rows = s.score(gold, predictions, bertscore)
    metrics["folds"] = per_fold
    out = run_dir / "eval"
    write_eval(out, s, metrics, rows)
    report = out / "report.md"
    report.write_text(report.read_text(encoding="utf-8") + "\n" + "\n".join(fold_lines(s, per_fold)) + "\n",
                      encoding="utf-8")
    return metrics


def fold_lines(s, per_fold: list[dict]) -> list[str]:
    """The scorer's own table with a row (or rows) per fold and its decision threshold."""
    lines = ["## Per fold (pooled above: each record scored once, by its fold's annotator)", ""]
    for i, m in enumerate(per_fold):
        header, rule, *rows = s.markdown(m)
        t = m.get("decision_threshold")
        if i == 0:
            lines += ["| fold | threshold " + header, "|---|---" + rule]
        lines += [f"| {i} | {'-' if t is None else f'{t:.3f}'} " + row for row in rows if row.startswith("|")]
    return lines
