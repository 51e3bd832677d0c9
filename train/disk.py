"""Checkpoint disk: the size of a mid-stage checkpoint and of a stage export, the peak a run needs under
`trainer.keep_checkpoints`, the free-space check before a save, and the retention that deletes the
oldest mid-stage checkpoints once a newer one is complete.

A DeepSpeed checkpoint holds, per trained parameter, the fp32 master weight and Adam's two moments
(12 bytes, split over the ranks under ZeRO); below ZeRO-3 it also holds the module's weights once.
Under ZeRO-3 the 16-bit weights are not saved (they are rebuilt from the fp32 partitions): measured on
the tiny model by `tests/test_cluster_runs.py`. A stage export is the full model in its dtype.
"""
from __future__ import annotations

import shutil
from pathlib import Path

GB = 1e9
OPTIMIZER_BYTES = 12       # fp32 master weight + Adam's exp_avg and exp_avg_sq, per trained parameter
FREE_SPACE_MARGIN = 1.1    # a save needs the checkpoint's size and this much slack
STEP_GLOB = "step-[0-9]*[0-9]"


class DiskSpaceError(OSError):
    """Too little free space for the next checkpoint (a user error: the run stops, its last good
    checkpoint intact)."""


def checkpoint_bytes(params: int, trainable: int, zero_stage: int, dtype_bytes: int) -> float:
    module = 0 if zero_stage == 3 else params * dtype_bytes
    return OPTIMIZER_BYTES * trainable + module


def module_checkpoint_bytes(module, zero_stage: int) -> float:
    """`checkpoint_bytes` of a (possibly ZeRO-3-partitioned) module: its full parameter counts."""
    params = list(module.parameters())
    count = lambda ps: sum(getattr(p, "ds_numel", p.numel()) for p in ps)  # noqa: E731
    return checkpoint_bytes(count(params), count(p for p in params if p.requires_grad), zero_stage,
                            params[0].element_size())


def export_bytes(params: int, dtype_bytes: int) -> float:
    return params * dtype_bytes


def peak_disk_bytes(n_stages: int, checkpoint: float, export: float, keep: int | None,
                    saves_mid_stage: bool) -> float:
    """Every stage's export, and the mid-stage checkpoints kept plus the one being written (an older
    one is deleted only after the new one is complete). keep=None keeps all: unbounded."""
    if not saves_mid_stage:
        return n_stages * export
    if keep is None:
        return float("inf")
    return n_stages * export + (keep + 1) * checkpoint


def mid_stage_checkpoints(run_dir: Path) -> list[Path]:
    """The run's complete mid-stage checkpoints, oldest first (by stage index, then step)."""
    found = [p for p in (Path(run_dir) / "checkpoints").glob(f"*/{STEP_GLOB}")
             if (p / "trainer_state.json").exists()]
    return sorted(found, key=lambda p: (int(p.parent.name.split("-", 1)[0]), p.name))


def dir_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def check_free_space(run_dir: Path, estimate: float, stage: str, step: int) -> None:
    """Raise DiskSpaceError when `run_dir`'s filesystem cannot hold the next checkpoint (the newest one's
    measured DeepSpeed state, else `estimate`)."""
    existing = mid_stage_checkpoints(run_dir)
    needed = (dir_bytes(existing[-1] / "state") if existing else estimate) * FREE_SPACE_MARGIN
    free = shutil.disk_usage(run_dir).free
    if free < needed:
        last = existing[-1] if existing else "none yet (the run restarts from its last stage export)"
        raise DiskSpaceError(
            f"output_dir={run_dir}: {free / GB:.3f} GB free, and the checkpoint of stage {stage!r} step {step} needs "
            f"about {needed / GB:.3f} GB; stopping before writing it. The last good checkpoint is {last}. Free "
            "space, or lower trainer.keep_checkpoints (python -m train.tools.plan prints the run's peak disk), then "
            "continue with resume=auto")


def prune_checkpoints(run_dir: Path, keep: int | None) -> list[Path]:
    """Delete all but the newest `keep` complete mid-stage checkpoints of the run (stage exports are
    never touched); returns what was deleted. Each is renamed first, so that a crash mid-deletion leaves
    no half-deleted directory that looks like a checkpoint; leftovers of such a crash go too."""
    for leftover in (Path(run_dir) / "checkpoints").glob("*/step-*.deleting"):
        shutil.rmtree(leftover, ignore_errors=True)
    if keep is None:
        return []
    old = mid_stage_checkpoints(run_dir)[:-keep]
    for path in old:
        doomed = path.with_name(path.name + ".deleting")
        path.rename(doomed)
        shutil.rmtree(doomed)
    return old
