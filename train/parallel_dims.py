"""The layout of a job's ranks: how many there are, and how they split into sequence-parallel
groups and data-parallel replicas (pure arithmetic; the one home of both).

`job_world_size` is the world size of a SLURM job as rendered (`slurm/render.py`) and planned
(`train/memory_plan.py`); a launched process reads its own from torchrun (`launched_world_size`). Ranks form
SP groups of `sp_size` consecutive ranks; data parallelism runs across groups. `configs.schema.stage_sp_size`
is the one reader of the configured degrees (a curriculum stage's own `sp_size`, else `parallel.sp_size`).
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field

from configs.rules import check_sp, sp_key
from configs.schema import CurriculumConfig, ParallelConfig, SlurmConfig, StageConfig, stage_sp_size


def procs_per_node(slurm: SlurmConfig) -> int:
    """torchrun processes per node: one per GPU, or `slurm.procs_per_node` (default 1) in a CPU job."""
    return slurm.gpus_per_node if slurm.gpus_per_node > 0 else (slurm.procs_per_node or 1)


def job_world_size(slurm: SlurmConfig) -> int:
    """The ranks of a SLURM job: nodes x processes per node."""
    return slurm.nodes * procs_per_node(slurm)


def launched_world_size() -> int:
    """The ranks of this launch, as torchrun sets them (1 outside torchrun)."""
    return int(os.environ.get("WORLD_SIZE", "1"))


@dataclass(frozen=True)
class ParallelDims:
    world_size: int
    sp_size: int
    key: str = field(default="parallel.sp_size", compare=False)     # the config key, for errors

    def __post_init__(self):
        check_sp(self.key, self.sp_size, self.world_size)

    @property
    def dp_size(self) -> int:
        return self.world_size // self.sp_size

    def dp_rank(self, rank: int) -> int:
        return rank // self.sp_size

    def sp_rank(self, rank: int) -> int:
        return rank % self.sp_size

    def sp_groups(self) -> list[list[int]]:
        return [list(range(g * self.sp_size, (g + 1) * self.sp_size)) for g in range(self.dp_size)]


def stage_dims(parallel: ParallelConfig, stage: StageConfig | None, world_size: int) -> ParallelDims:
    """The validated layout of a stage (None: the run's default), its errors naming the key."""
    return ParallelDims(world_size, stage_sp_size(parallel, stage), sp_key(stage))


def sp_sizes(parallel: ParallelConfig, curriculum: CurriculumConfig) -> list[int]:
    """Every SP degree the run uses, `parallel.sp_size` first (process groups are built for each)."""
    return [parallel.sp_size] + [stage_sp_size(parallel, s) for s in curriculum.stages]
