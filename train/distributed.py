"""Process-group setup and the few collectives the trainer needs.

This is the only module that creates or destroys process groups. On a machine
without CUDA, DeepSpeed runs on its CPU accelerator with the gloo backend.
"""
from __future__ import annotations

import gc
import importlib
import os
import sys
import warnings
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import timedelta
from typing import TypeVar

import torch
import torch.distributed as dist

from data_builders.common.user_errors import USER_ERRORS
from train.host_memory import return_freed_memory
from train.parallel_dims import ParallelDims
from train.quiet import held_stdout

T = TypeVar("T")


@dataclass(frozen=True)
class DistInfo:
    """This rank, its device and its current layout (`dims`); the SP / DP arithmetic is the
    layout's (`train.parallel_dims.ParallelDims`)."""
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


def init_distributed(sp_sizes: int | list[int] = 1, timeout_s: int = 1800, verbose: bool = False) -> DistInfo:
    """Join the torchrun group (or form a group of one), build the SP groups of every degree in
    `sp_sizes` (the first is the one returned), pick the device. DeepSpeed's build chatter is shown
    only when `verbose` (`train.quiet`)."""
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
    local_rank = int(os.environ["LOCAL_RANK"])
    if cuda:
        torch.cuda.set_device(local_rank)
    _import_before_any_group()
    with held_stdout(verbose):
        import deepspeed

        if not cuda:
            _skip_the_shared_memory_all_reduce()
        deepspeed.init_distributed(dist_backend="nccl" if cuda else "gloo", timeout=timedelta(seconds=timeout_s),
                                   init_method=_init_method())
    device = torch.device("cuda", local_rank) if cuda else torch.device("cpu")
    rank, world = dist.get_rank(), dist.get_world_size()
    groups = {k: _sp_group(ParallelDims(world, k), rank) for k in sorted(set(sp_sizes)) if k > 1}
    return DistInfo(rank, world, local_rank, device, sp_groups=groups).with_sp(sp_sizes[0])


ATTEMPT_SCHEME = "torchrun-attempt"


def _init_method() -> str | None:
    """Under torchrun, env:// with the attempt's own key prefix; None (env://) elsewhere.

    A job that torchrun restarts (`--max-restarts`, after a rank died) meets its ranks again in the
    store of the failed attempt, which still holds the dead ranks' keys: their gloo / NCCL addresses.
    A new rank that reads one before its peer has written the new one connects to a dead address and
    fails. A prefix per attempt (`TORCHELASTIC_RESTART_COUNT`) keeps the attempts apart."""
    attempt = os.environ.get("TORCHELASTIC_RESTART_COUNT")
    if attempt is None:
        return None
    handlers = importlib.import_module("torch.distributed.rendezvous")     # the module, not dist.rendezvous
    if ATTEMPT_SCHEME not in handlers._rendezvous_handlers:
        handlers.register_rendezvous_handler(ATTEMPT_SCHEME, _attempt_rendezvous)
    return f"{ATTEMPT_SCHEME}://?attempt={attempt}"


def _attempt_rendezvous(url: str, timeout: timedelta, **kwargs):
    from urllib.parse import parse_qs, urlparse

    attempt = parse_qs(urlparse(url).query)["attempt"][0]
    store, rank, world = next(dist.rendezvous("env://", timeout=timeout))
    yield dist.PrefixStore(f"attempt_{attempt}", store), rank, world
    raise RuntimeError(f"{ATTEMPT_SCHEME}:// cannot re-rendezvous: torchrun restarts the processes instead")


def join_gloo_group(rank: int, world: int, port: int) -> None:
    """A spawned rank's gloo group on 127.0.0.1:`port` (tests and benchmarks; torchrun's ranks call
    `init_distributed`). Leave it with `teardown()`."""
    _import_before_any_group()
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)


def _skip_the_shared_memory_all_reduce() -> None:
    """DeepSpeed's CPU backend compiles a shared-memory all-reduce when it joins the group (70 s on a
    2-core machine, on the first run under a HOME) that only its tensor-parallel inference calls; training
    here reduces through gloo. DeepSpeed builds only the ops its compatibility table allows."""
    import deepspeed.ops

    deepspeed.ops.__compatible_ops__["deepspeed_shm_comm"] = False


def _import_before_any_group() -> None:
    """torch.distributed.nn.functional's collectives default to `group=group.WORLD`, evaluated at
    import: imported once the world group exists (transformers does, loading a model), they keep it
    alive past `teardown()`. Imported before, the default is None."""
    import torch.distributed.nn.functional  # noqa: F401


def _sp_group(dims: ParallelDims, rank: int):
    """Every rank creates every SP group (new_group is collective); each keeps its own."""
    mine = None
    for ranks in dims.sp_groups():
        group = dist.new_group(ranks)
        if rank in ranks:
            mine = group
    return mine


def teardown() -> int:
    """Destroy every process group (DeepSpeed's references to them too) and free them now, while
    the interpreter is alive; returns how many are still referenced elsewhere.

    Why now: a gloo worker thread releases each finished collective after the caller has moved on,
    and that release can take the GIL (a tensor's or a saved-tensors hook's Python object). Once
    Python is finalizing, taking the GIL ends the thread mid-C++ and the process aborts with
    "terminate called without an active exception". Freeing a group joins its threads first.
    Call it where the run's objects (engine, DistInfo) are already gone: a group they hold
    outlives this call, and a warning names how many (not while an error propagates).
    """
    if not (dist.is_available() and dist.is_initialized()):
        return 0
    groups = [weakref.ref(pg) for pg in dist.distributed_c10d._world.pg_map]
    deepspeed_comm = sys.modules.get("deepspeed.comm")
    if deepspeed_comm is not None and deepspeed_comm.is_initialized():
        deepspeed_comm.destroy_process_group()
    else:
        dist.destroy_process_group()
    gc.collect()
    alive = sum(ref() is not None for ref in groups)
    if alive and sys.exc_info()[1] is None:       # after an error, its traceback holds the run's frames
        warnings.warn(f"{alive} of {len(groups)} process groups are still referenced after teardown(); "
                      "their gloo threads may abort the process at exit", RuntimeWarning, stacklevel=2)
    return alive


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


class RankError(ValueError):
    """A user error raised on the main rank, raised again on the others (its message)."""


def on_main_rank(fn: Callable[[], T], is_main: bool) -> T | None:
    """`fn()` on the main rank (None elsewhere). A user error it raises (a bad record, a corpus too
    small) is raised on every rank, so that all of them stop together with the same message
    (`data_builders.common.user_errors` prints it once) instead of the others failing in a collective."""
    out, message = None, None
    if is_main:
        try:
            out = fn()
        except USER_ERRORS as e:
            message = str(e)
            broadcast_object(message)
            raise
    message = broadcast_object(message)
    if message is not None:
        raise RankError(message)
    return out


def world_size() -> int:
    return dist.get_world_size() if dist.is_initialized() else 1


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
