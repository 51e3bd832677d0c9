"""Checkpoints and `resume=auto`.

Layout under <output_dir>/checkpoints/<index>-<stage>/:
  step-000040/   DeepSpeed state (tag 'state') + trainer_state.json, mid-stage; the run keeps
                 its newest `trainer.keep_checkpoints` of them (train/disk.py)
  hf/            consolidated Hugging Face export when the stage is done
  done.json      written last: the stage is complete and hf/ is whole
Every directory is written under a temporary name and renamed, so an
interrupted write never replaces a good checkpoint.
"""
from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from train.disk import STEP_GLOB, check_free_space, prune_checkpoints
from train.distributed import barrier, on_main_rank


def stage_dir(run_dir: Path, index: int, name: str) -> Path:
    return run_dir / "checkpoints" / f"{index}-{name}"


@dataclass
class ResumePoint:
    stage_index: int            # the stage to run next (== number of stages when all are done)
    step: int                   # optimizer steps of that stage already done
    global_step: int            # optimizer steps done in the whole run
    state_dir: Path | None      # DeepSpeed state to load, for a mid-stage resume


def save_state(engine, run_dir: Path, stage_index: int, stage_name: str, step: int,
               global_step: int, is_main: bool, keep: int | None = None, estimate: float = 0.0) -> Path:
    """Mid-stage checkpoint: rank 0 checks the free space (the newest checkpoint's size, else
    `estimate`), every rank writes its shard, rank 0 renames when all are done and then deletes all
    but the newest `keep` checkpoints of the run."""
    final = stage_dir(run_dir, stage_index, stage_name) / f"step-{step:06d}"
    tmp = final.with_name(final.name + ".tmp")
    on_main_rank(lambda: check_free_space(run_dir, estimate, stage_name, step), is_main)
    if is_main:
        shutil.rmtree(tmp, ignore_errors=True)
    barrier()
    engine.save_checkpoint(str(tmp), tag="state")
    barrier()
    if is_main:
        state = {"stage_index": stage_index, "stage": stage_name, "step": step, "global_step": global_step}
        (tmp / "trainer_state.json").write_text(json.dumps(state), encoding="utf-8")
        if final.exists():
            shutil.rmtree(final)
        os.rename(tmp, final)
        prune_checkpoints(run_dir, keep)
    barrier()
    return final


def mark_stage_done(run_dir: Path, stage_index: int, stage_name: str, global_step: int) -> None:
    path = stage_dir(run_dir, stage_index, stage_name) / "done.json"
    tmp = path.with_name("done.json.tmp")
    tmp.write_text(json.dumps({"stage_index": stage_index, "stage": stage_name,
                               "global_step": global_step}), encoding="utf-8")
    os.rename(tmp, path)


def find_resume_point(run_dir: Path, stage_names: list[str]) -> ResumePoint:
    """The furthest consistent point of a previous run in `run_dir`."""
    done, global_step = -1, 0
    for i, name in enumerate(stage_names):
        marker = stage_dir(run_dir, i, name) / "done.json"
        if not marker.exists():
            break
        done, global_step = i, json.loads(marker.read_text())["global_step"]
    nxt = done + 1
    if nxt == len(stage_names):
        return ResumePoint(nxt, 0, global_step, None)
    steps = sorted(stage_dir(run_dir, nxt, stage_names[nxt]).glob(STEP_GLOB))
    steps = [p for p in steps if (p / "trainer_state.json").exists()]
    if not steps:
        return ResumePoint(nxt, 0, global_step, None)
    state = json.loads((steps[-1] / "trainer_state.json").read_text())
    return ResumePoint(nxt, state["step"], state["global_step"], steps[-1])


def stage_weights(run_dir: Path, stage_index: int, stage_names: list[str], base_path: str) -> str:
    """Weights a stage starts from: the previous stage's export, or the base model."""
    if stage_index == 0:
        return base_path
    return str(stage_dir(run_dir, stage_index - 1, stage_names[stage_index - 1]) / "hf")
