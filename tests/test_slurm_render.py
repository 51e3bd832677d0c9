"""sbatch scripts rendered from the experiment config (no cluster needed)."""
import subprocess
import sys
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir

import configs.schema  # noqa: F401
from configs.schema import typed
from slurm.render import checkpoint_name, eval_script, job_overrides, train_script
from tests.conftest import REPO
from train.memory_plan import GB, RunPlan, host_bytes_per_node, host_request_gb, model_shape


def _cfg(overrides):
    with initialize_config_dir(config_dir=str(REPO / "configs"), version_base="1.3"):
        return typed(compose("sft", overrides=overrides))


def test_job_overrides_drop_slurm_and_script_keys():
    kept = job_overrides(["+exp=x", "slurm.nodes=2", "+slurm.qos=hi", "output_dir=/a", "optim.lr=1e-5"],
                         ("output_dir",))
    assert kept == ["+exp=x", "optim.lr=1e-5"]


def test_train_script_multi_node(tmp_path, qwen3_8b):
    ov = ["+exp=longnovel_curriculum", f"model.name_or_path={qwen3_8b}", "slurm.nodes=2", "slurm.gpus_per_node=8",
          "slurm.partition=gpu", "slurm.account=lab", f"output_dir={tmp_path}", "parallel=sp4"]
    script = train_script(_cfg(ov), ov, REPO, tmp_path / "logs")
    for line in ("#SBATCH --nodes=2", "#SBATCH --gpus-per-node=8", "#SBATCH --partition=gpu",
                 "#SBATCH --account=lab", "#SBATCH --signal=B:USR1@300", "#SBATCH --requeue",
                 '--nnodes "$SLURM_NNODES" --nproc_per_node 8 --max-restarts 1',
                 '--rdzv_endpoint "$HEAD_NODE:29500"'):
        assert line in script, line
    job = script.split("train/sft.py", 1)[1].split("&", 1)[0]
    assert "slurm." not in job and f"output_dir={tmp_path}" in job and "resume=auto" in job and "parallel=sp4" in job
    assert "--qos" not in script


def test_train_script_asks_for_the_plans_host_memory_and_offload_threads(tmp_path, qwen3_8b):
    ov = ["+exp=longnovel_curriculum", f"model.name_or_path={qwen3_8b}", "slurm.nodes=2", f"output_dir={tmp_path}"]
    cfg = _cfg(ov)
    m = model_shape(str(qwen3_8b))
    lay = RunPlan.of_run(cfg, 16, m).layout
    script = train_script(cfg, ov, REPO, tmp_path / "logs")
    mem = host_request_gb(m, lay)
    # ZeRO-3 offload of an 8B model over 16 ranks: half the fp32 master, moments, grads and bf16 params per node
    assert host_bytes_per_node(m, lay) / GB == pytest.approx(8.19 * 18 / 2, rel=0.01)
    assert mem * GB > host_bytes_per_node(m, lay) and f"#SBATCH --mem={mem}G" in script
    assert "#SBATCH --cpus-per-task=64" in script and "export OMP_NUM_THREADS=8" in script
    given = train_script(_cfg(ov + ["slurm.mem=900G", "slurm.cpus_per_task=32"]), ov, REPO, tmp_path / "logs")
    assert "#SBATCH --mem=900G" in given and "#SBATCH --cpus-per-task=32" in given and "OMP_NUM_THREADS=4" in given
    no_model = ["+exp=longnovel_curriculum", "model.name_or_path=/nonexistent/q", f"output_dir={tmp_path}"]
    with pytest.raises(ValueError, match="slurm.mem"):
        train_script(_cfg(no_model), no_model, REPO, tmp_path / "logs")


@pytest.mark.parametrize("parallel, key", [
    ("parallel=sp4", "parallel.sp_size=4"),
    ("curriculum.stages=[{name: long, bucket: L, max_seq_len: 36864, sp_size: 4}]",
     "curriculum stage 'long' sp_size=4")])
def test_world_size_must_divide_by_every_sp_degree(tmp_path, parallel, key):
    ov = ["+exp=longnovel_curriculum", "slurm.nodes=1", "slurm.gpus_per_node=2", parallel]
    with pytest.raises(ValueError, match=key):
        train_script(_cfg(ov), ov, REPO, tmp_path)


def test_eval_array_covers_checkpoints_times_buckets(tmp_path):
    ov = ["+exp=longnovel_curriculum", "slurm.mode=eval", "slurm.checkpoints=[/r/checkpoints/3-sft/hf,/models/q]",
          "eval.buckets=[S,M,L]", f"output_dir={tmp_path}", "eval.max_new_tokens=64"]
    script, n = _eval_script(_cfg(ov), ov, tmp_path)
    assert n == 6 and "#SBATCH --array=0-5" in script and "--signal" not in script
    assert "NAMES=(3-sft-hf models-q)" in script and "BUCKETS=(S M L)" in script
    assert "eval.max_new_tokens=64" in script and "eval.buckets=[S,M,L]" not in script
    assert checkpoint_name("embedded:qwen3-tiny") == "embedded-qwen3-tiny"
    with pytest.raises(ValueError, match="slurm.checkpoints"):
        _eval_script(_cfg(["slurm.mode=eval"]), [], tmp_path)


def _eval_script(cfg, overrides: list[str], tmp_path: Path) -> tuple[str, int]:
    return eval_script(cfg.slurm, cfg.deepspeed, list(cfg.eval.buckets), f"{cfg.exp_name}-eval", tmp_path, overrides,
                       REPO, tmp_path)


def test_dry_run_prints_and_submits_nothing(tmp_path):
    done = subprocess.run([sys.executable, "slurm/submit.py", "+exp=longnovel_curriculum_demo", "slurm.dry_run=true",
                           "slurm.gpus_per_node=0", "slurm.procs_per_node=2", f"output_dir={tmp_path}"],
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith("#!/bin/bash") and "--gpus-per-node" not in done.stdout
    assert not (tmp_path / "slurm").exists()
