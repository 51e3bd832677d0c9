"""The end of a run frees every process group before the interpreter finalizes
(train.distributed.teardown): a gloo worker thread still releasing a finished collective then
takes the GIL of a finalizing interpreter and aborts the process ("terminate called without an
active exception", seen in CI). A group is freed only once nothing references it, so these tests
check what keeps groups alive: torch.distributed.nn.functional imported after the group exists
(transformers does, loading a model), and DeepSpeed's references to a destroyed engine."""
import json
import os
import subprocess
import sys
import warnings

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from tests.conftest import REPO
from train.distributed import free_port, join_gloo_group, teardown


def _rank(rank, port, hold, queue):
    from models.builders import load_causal_lm, resolve_model_path

    join_gloo_group(rank, 2, port)
    load_causal_lm(resolve_model_path("embedded:qwen3-tiny"), "float32", "sdpa")
    held = dist.group.WORLD if hold else None
    dist.all_reduce(torch.ones(4))
    with torch.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: t):
        dist.barrier()                 # the aborting shape: the work's thread state holds Python hooks
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        alive = teardown()
    queue.put((rank, alive, [str(w.message) for w in caught if w.category is RuntimeWarning]))
    del held                           # freed here, before this process finalizes


@pytest.mark.parametrize("hold", [False, True], ids=["nothing-held", "caller-holds-the-group"])
def test_teardown_frees_the_groups_unless_a_caller_holds_one(hold):
    queue = mp.get_context("spawn").SimpleQueue()
    mp.start_processes(_rank, args=(free_port(), hold, queue), nprocs=2, join=True, start_method="spawn")
    for rank, alive, warned in sorted(queue.get() for _ in range(2)):
        assert alive == int(hold), rank
        assert bool(warned) == hold and all("1 of 1 process groups are still referenced" in w for w in warned)


RELEASE = """
import gc, json, weakref, torch
from train.tools.bench import _compose
from train.distributed import init_distributed, teardown
from train.engine import build_engine, release_engine
from models.loss import token_loss_sum
from models.builders import resolve_model_path

cfg = _compose(["deepspeed=zero3_offload", "trainer.loss_chunk_tokens=16"])
init_distributed(1)
engine = build_engine(cfg, resolve_model_path(cfg.model.name_or_path), 1, 1e-3, 2)
ids = torch.randint(3, 100, (1, 64))
loss, _ = token_loss_sum(engine, {"input_ids": ids, "shift_labels": ids, "position_ids": torch.arange(64)[None]})
engine.backward(loss)
engine.step()
ref = weakref.ref(engine)
if __import__("sys").argv[1] == "release":
    release_engine(engine)
else:
    engine.destroy()
del engine, loss
gc.collect()
print(json.dumps({"engine_alive": ref() is not None, "groups_alive": teardown()}))
"""


@pytest.mark.slow
def test_a_released_zero3_engine_and_its_groups_are_freed():
    """After one ZeRO-3 offload step, `engine.destroy()` alone leaves the engine (its model,
    optimizer state and groups) alive; `release_engine` frees it. (If a DeepSpeed release stops
    leaking, the first assertion says that release_engine's workarounds can go.)"""
    def run(how):
        proc = subprocess.run([sys.executable, "-c", RELEASE, how], cwd=REPO, capture_output=True, text=True,
                              timeout=300, env={**os.environ, "OMP_NUM_THREADS": "1"})
        assert proc.returncode == 0, proc.stderr[-3000:]
        return json.loads(proc.stdout.strip().splitlines()[-1])

    leaked = run("destroy")
    assert leaked["engine_alive"] and leaked["groups_alive"] > 0
    assert run("release") == {"engine_alive": False, "groups_alive": 0}
