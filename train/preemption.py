"""Graceful stops before a job's time limit (SLURM `--signal`): the batch script touches
`<run_dir>/PREEMPT`; the trainer sees it at the next step end on every rank (one collective,
so all ranks agree), saves a checkpoint, writes `preempted.json` and exits; the script then
requeues the job, which resumes with `resume=auto`."""
from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path

from train.distributed import all_reduce_sum

logger = logging.getLogger(__name__)

STOP_FILE = "PREEMPT"
MARK_FILE = "preempted.json"


def stop_requested(run_dir: Path) -> bool:
    """True on every rank when any rank sees the stop file."""
    return all_reduce_sum([float((Path(run_dir) / STOP_FILE).exists())])[0] > 0


@dataclass(frozen=True)
class Stop:
    """Why a run stops after a step: a preemption signal, or `trainer.stop_at_step` reached."""
    preempted: bool = False
    step_reached: bool = False

    def __bool__(self) -> bool:
        return self.preempted or self.step_reached


def stop_after(run_dir: Path, stop_at_step: int | None, global_step: int) -> Stop:
    """The one stop rule, checked at every step end and stage end (a collective: every rank calls it)."""
    return Stop(stop_requested(run_dir), stop_at_step is not None and global_step >= stop_at_step)


def mark_preempted(run_dir: Path, stage: str, global_step: int, is_main: bool) -> None:
    if is_main:
        (Path(run_dir) / MARK_FILE).write_text(json.dumps({"stage": stage, "global_step": global_step}))
        logger.info(f"stop requested: checkpoint saved at stage {stage!r} global step {global_step}; "
                    "exiting for requeue")
