"""k-fold cross-validation in one launch (`data.folds=k`): the records of `data.root` are dealt
into k folds grouped by source (`data_builders/folds.py`), each fold is trained and evaluated as
its own run, and every record is scored once, by the fold's annotator that never saw its source
(dealing and pooling: `eval/fold_pooling.py`, shared with eval/run.py's folds).

    <output_dir>/folds/fold_<i>/{train,val,test}.jsonl   the fold's records (val: its threshold)
                /fold_<i>/                               the fold's run directory
                /eval/metrics.json, report.md            pooled over the k test parts, per fold below
"""
from __future__ import annotations

import logging
from pathlib import Path

from configs.schema import SFTConfig
from eval.fold_pooling import deal_once, fold_config, pool_folds
from train.distributed import DistInfo, barrier, on_main_rank
from train.run_dir import agree_on_output_dir
from train.trainer import Trainer

logger = logging.getLogger(__name__)


def fold_done(run_dir: Path, i: int) -> bool:
    return (run_dir / f"fold_{i}" / "eval" / "metrics.json").is_file()


def train_folds(cfg: SFTConfig, info: DistInfo) -> dict | None:
    """Train and evaluate every fold (`data.only_folds`: those; a finished fold is kept when resuming),
    then, once every fold is finished, score the pooled predictions; the pooled metrics on rank 0,
    None elsewhere, when a fold stopped early or while folds are left to other launches."""
    cfg, run_dir = agree_on_output_dir(cfg, info)
    folds_dir = run_dir / "folds"
    on_main_rank(lambda: deal_once(cfg.data, folds_dir), info.is_main)     # every rank enters; rank 0 looks
    barrier()
    only = cfg.data.only_folds
    for i in range(cfg.data.folds) if only is None else sorted(set(only)):
        if cfg.resume == "auto" and fold_done(run_dir, i):
            if info.is_main:
                logger.info(f"fold {i}: finished earlier, kept ({run_dir / f'fold_{i}'})")
            continue
        if info.is_main:
            logger.info(f"== fold {i} of {cfg.data.folds}")
        Trainer(fold_config(cfg, run_dir, i), info, continue_dir=run_dir).run()
        barrier()
        if not fold_done(run_dir, i):          # stopped early: the trainer said how to continue
            return None
    left = [i for i in range(cfg.data.folds) if not fold_done(run_dir, i)]
    if not info.is_main or left:
        if left and info.is_main:
            logger.info(f"folds {left} are not finished: the launch that finishes the last of them pools the "
                        f"{cfg.data.folds}, as does a launch with output_dir={run_dir} resume=auto")
        return None
    metrics = pool_folds(cfg.task.scorer, cfg.data.folds, cfg.eval.bertscore, run_dir)
    print(f"== cross-validation, {cfg.data.folds} folds pooled\n"
          + (run_dir / "eval" / "report.md").read_text(encoding="utf-8"), flush=True)
    return metrics
