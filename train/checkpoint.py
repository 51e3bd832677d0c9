"""Checkpoints and `resume=auto`.

Layout under <output_dir>/checkpoints/<index>-<stage>/:
  step-000040/   DeepSpeed state (tag 'state') + trainer_state.json, mid-stage; the run keeps
                 its newest `trainer.keep_checkpoints` of them (train/disk.py)
  hf/            consolidated Hugging Face export when the stage is done
  done.json      written last: the stage is complete and hf/ is whole
Every directory is written under a temporary name and renamed, so an
interrupted write never replaces a good checkpoint.

A ZeRO checkpoint is sharded over the ranks that saved it. Resumed on another number of ranks, it
is converted once to DeepSpeed's universal checkpoint (`step-N/universal`, by `ds_to_universal`),
which any number of ranks loads (`load_universal`).
"""
from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from train.disk import STEP_GLOB, check_free_space, prune_checkpoints
from train.distributed import barrier, on_main_rank, world_size

logger = logging.getLogger(__name__)


def stage_dir(run_dir: Path, index: int, name: str) -> Path:
    return run_dir / "checkpoints" / f"{index}-{name}"


@dataclass
class ResumePoint:
    stage_index: int            # the stage to run next (== number of stages when all are done)
    step: int                   # optimizer steps of that stage already done
    global_step: int            # optimizer steps done in the whole run
    state_dir: Path | None      # DeepSpeed state to load, for a mid-stage resume


def save_state(engine, run_dir: Path, stage_index: int, stage_name: str, step: int, global_step: int,
               is_main: bool, keep: int | None = None, estimate: float = 0.0, global_batch: int | None = None) -> Path:
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
        state = {"stage_index": stage_index, "stage": stage_name, "step": step, "global_step": global_step,
                 "world_size": world_size(), "global_batch": global_batch}
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


UNIVERSAL = "universal"


def saved_world_size(state_dir: Path) -> int:
    """The number of ranks that saved a mid-stage checkpoint (`trainer_state.json`; earlier checkpoints:
    their ZeRO shard files)."""
    recorded = json.loads((state_dir / "trainer_state.json").read_text()).get("world_size")
    return recorded or max(1, len(list((state_dir / "state").glob("zero_pp_rank_*_mp_rank_00_model_states.pt"))))


def checkpoint_tag(state_dir: Path, world: int, zero_stage: int, is_main: bool) -> str:
    """The tag to load a checkpoint from on `world` ranks: 'state' as saved, or 'universal' when ZeRO
    shards were saved on another number of ranks, converted here once (rank 0; the others wait)."""
    saved = saved_world_size(state_dir)
    if zero_stage == 0 or saved == world:
        return "state"
    target = state_dir / UNIVERSAL
    if is_main and not target.exists():
        logger.info(f"{state_dir} was saved on {saved} ranks and this run has {world}: converting it once to "
                    f"DeepSpeed's universal checkpoint ({target})")
        tmp = target.with_name(UNIVERSAL + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        done = subprocess.run([sys.executable, "-m", "deepspeed.checkpoint.ds_to_universal", "--input_folder",
                               str(state_dir / "state"), "--output_folder", str(tmp), "--num_extract_workers", "1",
                               "--num_merge_workers", "1"], capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"ds_to_universal failed on {state_dir / 'state'}:\n{done.stderr[-3000:]}")
        os.rename(tmp, target)
    barrier()
    return UNIVERSAL


def check_global_batch(state_dir: Path, per_step: int, is_main: bool) -> None:
    """Say so when a resumed stage takes another global batch than the checkpoint's run did: its steps
    then differ from an uninterrupted run's (on another number of ranks, optim.grad_accum keeps it)."""
    saved = json.loads((state_dir / "trainer_state.json").read_text()).get("global_batch")
    if is_main and saved is not None and saved != per_step:
        logger.warning(f"note: {state_dir} was saved with a global batch of {saved} samples per step, this run takes "
                       f"{per_step}: set optim.grad_accum (or the stage's grad_accum) so that data-parallel x "
                       "micro-batch x grad_accum is the same, and the resumed steps equal an uninterrupted run's")
