"""One world size for a SLURM job: what the sbatch script launches, what the memory plan assumes,
and what the trainer's ranks see under torchrun agree, for GPU and CPU jobs."""
import re
import subprocess
import sys

import pytest
from hydra import compose, initialize_config_dir

import configs.schema  # noqa: F401
from configs.schema import typed
from slurm.render import train_script
from tests.conftest import REPO
from train.memory_plan import RunPlan, planned_world_size
from train.parallel_dims import job_world_size, procs_per_node

# ids that are not the `gpu` marker's keyword (tests/conftest.py skips items carrying it without CUDA)
JOBS = {"two_nodes_of_8": ["slurm.nodes=2", "slurm.gpus_per_node=8"],
        "one_node_2_processes": ["slurm.nodes=1", "slurm.gpus_per_node=0", "slurm.procs_per_node=2"]}


def _cfg(overrides):
    with initialize_config_dir(config_dir=str(REPO / "configs"), version_base="1.3"):
        return typed(compose("sft", overrides=overrides))


def _launched(script: str) -> tuple[int, int]:
    """(nodes, processes per node) as the rendered script asks SLURM and torchrun for them."""
    nodes = int(re.search(r"#SBATCH --nodes=(\d+)", script).group(1))
    procs = int(re.search(r"--nproc_per_node (\d+)", script).group(1))
    return nodes, procs


@pytest.mark.parametrize("job", sorted(JOBS))
def test_render_and_plan_agree_on_the_world_size(tmp_path, job):
    ov = ["+exp=longnovel_curriculum_demo", f"output_dir={tmp_path}", *JOBS[job]]
    cfg = _cfg(ov)
    nodes, procs = _launched(train_script(cfg, ov, REPO, tmp_path / "logs"))
    world = planned_world_size(cfg.plan, cfg.slurm)
    assert world == nodes * procs == job_world_size(cfg.slurm)
    assert RunPlan.of_run(cfg, world).layout.ranks_per_node == procs == procs_per_node(cfg.slurm)


@pytest.mark.slow
def test_the_trainers_ranks_see_the_rendered_world_size(tmp_path):
    """The CPU job's torchrun line, launched here: every rank reads the world size the plan used."""
    ov = ["+exp=longnovel_curriculum_demo", f"output_dir={tmp_path}", *JOBS["one_node_2_processes"]]
    cfg = _cfg(ov)
    nodes, procs = _launched(train_script(cfg, ov, REPO, tmp_path / "logs"))
    code = ("import os, sys; from train.parallel_dims import launched_world_size; "    # one write a rank
            "os.write(sys.stdout.fileno(), f'world={launched_world_size()}\\n'.encode())")
    done = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nnodes={nodes}",
                           f"--nproc_per_node={procs}", "--no-python", sys.executable, "-c", code],
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == [f"world={planned_world_size(cfg.plan, cfg.slurm)}"] * procs
