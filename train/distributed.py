"""Process-group setup and the few collectives the trainer needs.

This is the only module that creates or destroys process groups. On a machine
without CUDA, DeepSpeed runs on its CPU accelerator with the gloo backend.
"""
from __future__ import annotations

import os
import warnings
from dataclasses import dataclass, field, replace
from datetime import timedelta

import torch
import torch.distributed as dist

from train.host_memory import return_freed_memory
from train.sequence_parallel import ParallelDims


@dataclass(frozen=True)
class DistInfo:
    """This rank, its device and its current layout (`dims`); the SP / DP arithmetic is the
    layout's (`train.sequence_parallel.ParallelDims`)."""
    rank: int
    world_size: int
    local_rank: int
    device: torch.device
    dims: ParallelDims | None = None
    sp_group: object = None          # this rank's sequence-parallel group (None when sp_size == 1)
    sp_groups: dict = field(default_factory=dict)   # sp degree -> this rank's group, for every degree built

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def sp_size(self) -> int:
        return self.dims.sp_size if self.dims else 1

    @property
    def sp_rank(self) -> int:
        return self.dims.sp_rank(self.rank) if self.dims else 0

    @property
    def dp_rank(self) -> int:
        return self.dims.dp_rank(self.rank) if self.dims else self.rank

    @property
    def dp_size(self) -> int:
        return self.dims.dp_size if self.dims else self.world_size

    def with_sp(self, sp_size: int) -> DistInfo:
        """The same ranks under another SP degree (a curriculum stage's own); its groups were built
        by `init_distributed`."""
        if sp_size > 1 and sp_size not in self.sp_groups:
            raise ValueError(f"sequence-parallel degree {sp_size} has no process groups; built: "
                             f"{sorted(self.sp_groups) or [1]}")
        return replace(self, dims=ParallelDims(self.world_size, sp_size), sp_group=self.sp_groups.get(sp_size))


def init_distributed(sp_sizes: int | list[int] = 1, timeout_s: int = 1800) -> DistInfo:
    """Join the torchrun group (or form a group of one), build the SP groups of every degree in
    `sp_sizes` (the first is the one returned), pick the device."""
    sp_sizes = [sp_sizes] if isinstance(sp_sizes, int) else list(sp_sizes)
    cuda = torch.cuda.is_available()
    if not cuda:
        os.environ.setdefault("DS_ACCELERATOR", "cpu")
        return_freed_memory()                 # activations live in host memory
        warnings.filterwarnings("ignore", category=FutureWarning, module="torch.distributed")
    for name, default in (("RANK", "0"), ("WORLD_SIZE", "1"), ("LOCAL_RANK", "0"),
                          ("MASTER_ADDR", "127.0.0.1")):
        os.environ.setdefault(name, default)
    if "MASTER_PORT" not in os.environ:
        os.environ["MASTER_PORT"] = str(free_port())
    import deepspeed

    local_rank = int(os.environ["LOCAL_RANK"])
    if cuda:
        torch.cuda.set_device(local_rank)
    deepspeed.init_distributed(dist_backend="nccl" if cuda else "gloo",
                               timeout=timedelta(seconds=timeout_s))
    device = torch.device("cuda", local_rank) if cuda else torch.device("cpu")
    rank, world = dist.get_rank(), dist.get_world_size()
    groups = {k: _sp_group(ParallelDims(world, k), rank) for k in sorted(set(sp_sizes)) if k > 1}
    return DistInfo(rank, world, local_rank, device, sp_groups=groups).with_sp(sp_sizes[0])


def _sp_group(dims: ParallelDims, rank: int):
    """Every rank creates every SP group (new_group is collective); each keeps its own."""
    mine = None
    for ranks in dims.sp_groups():
        group = dist.new_group(ranks)
        if rank in ranks:
            mine = group
    return mine


def wait_for_peers() -> None:
    """The end of a finished run: return once every rank is here, so that no rank closes its gloo
    connections while a peer still holds them (rank 1, done with the final evaluation while rank 0
    scored, was seen to abort at exit: "terminate called without an active exception"). Never
    after an error: it would wait for a peer that may be stuck in a collective."""
    if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
        dist.barrier()


def teardown() -> None:
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def barrier() -> None:
    if dist.is_initialized() and dist.get_world_size() > 1:
        dist.barrier()


def broadcast_object(obj, src: int = 0):
    if not dist.is_initialized() or dist.get_world_size() == 1:
        return obj
    box = [obj]
    dist.broadcast_object_list(box, src=src)
    return box[0]


def all_gather_objects(obj) -> list:
    if not dist.is_initialized() or dist.get_world_size() == 1:
        return [obj]
    out = [None] * dist.get_world_size()
    dist.all_gather_object(out, obj)
    return out


def all_reduce_sum(values: list[float]) -> list[float]:
    """Sum a few floats over all ranks (float64, so token counts stay exact)."""
    t = torch.tensor(values, dtype=torch.float64)
    if dist.is_initialized() and dist.get_world_size() > 1:
        if dist.get_backend() == "nccl":
            t = t.cuda()
        dist.all_reduce(t)
    return t.cpu().tolist()
