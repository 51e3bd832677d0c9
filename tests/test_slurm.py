"""slurm/submit.py against a real one-node SLURM cluster (slurm-wlm + munge, started by the test):
the CPU demo runs to completion, a job asked to stop before its time limit checkpoints, requeues
itself and finishes with the uninterrupted losses, and an evaluation sweep runs as a job array."""
import json
import os
import re
import subprocess
import sys
import time

import pytest

from tests.conftest import REPO
from tests.slurm_cluster import LocalSlurm, slurm_available
from tests.test_trainer_e2e import TINY as E2E_TINY
from train.run_dir import read_train_log

pytestmark = pytest.mark.slow

# stage s2k is long enough (40 steps, ~5 s) that the signal sent after step 4 lands inside it
TINY = [o for o in E2E_TINY if not o.startswith("curriculum.stages=")] + [
    "curriculum.stages=[{name: s2k, bucket: S, max_seq_len: 2048, max_steps: 40},"
    "{name: s4k, bucket: M, max_seq_len: 4096, max_steps: 2}]"]
CPU_JOB = ["slurm.gpus_per_node=0", "slurm.procs_per_node=2", "slurm.cpus_per_task=2", "slurm.time=00:30:00"]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    if not slurm_available() or os.geteuid() != 0:
        if os.environ.get("CI"):
            pytest.fail("CI must run the SLURM tests: install slurm-wlm and munge (README) and run as root")
        pytest.skip("needs Debian's slurm-wlm and munge, run as root (see README)")
    slurm = LocalSlurm(tmp_path_factory.mktemp("slurm")).start()
    yield slurm
    slurm.stop()


def submit(cluster, overrides: list[str]) -> str:
    done = subprocess.run([sys.executable, str(REPO / "slurm" / "submit.py"), *overrides], cwd=REPO,
                          env={**cluster.env, "OMP_NUM_THREADS": "1"}, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    return re.search(r"submitted .* (\d+):", done.stdout).group(1)


def _job_log(run_dir) -> str:
    return "".join(p.read_text() for p in (run_dir / "slurm" / "logs").glob("*.out"))


@pytest.fixture(scope="module")
def reference_run(cluster, tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("slurm_run_a")
    job = submit(cluster, TINY + CPU_JOB + [f"output_dir={run_dir}"])
    assert cluster.wait_job(job) == "COMPLETED", _job_log(run_dir) + cluster.logs()
    return run_dir


@pytest.mark.over_budget("builds the module's reference run, a SLURM job that the other tests compare with")
def test_demo_job_completes_with_the_run_directory_contract(reference_run):
    assert [r["step"] for r in read_train_log(reference_run)] == list(range(1, 43))
    assert (reference_run / "config.yaml").exists() and (reference_run / "eval" / "metrics.json").exists()
    assert (reference_run / "checkpoints" / "1-s4k" / "hf" / "config.json").exists()
    script = (reference_run / "slurm" / "train.sbatch").read_text()
    assert "--nnodes \"$SLURM_NNODES\" --nproc_per_node 2" in script and "resume=auto" in script
    assert "slurm." not in script.split("train/sft.py", 1)[1]          # slurm.* keys never reach the job


@pytest.mark.over_budget("a real SLURM job signalled, checkpointed, requeued and finished")
def test_signalled_job_checkpoints_requeues_and_matches(cluster, reference_run, tmp_path):
    run_dir = tmp_path / "run_b"
    job = submit(cluster, TINY + CPU_JOB + [f"output_dir={run_dir}"])
    log = run_dir / "train_log.jsonl"
    deadline = time.time() + 300
    while not (log.exists() and len(log.read_text().splitlines()) >= 4):
        assert time.time() < deadline and cluster.job_state(job) in ("PENDING", "RUNNING"), _job_log(run_dir)
        time.sleep(0.3)
    cluster.run("scancel", "--signal=USR1", "--batch", job)      # what --signal=B:USR1@N does at the limit
    assert cluster.wait_job(job) == "COMPLETED", _job_log(run_dir) + cluster.logs()
    text = _job_log(run_dir)
    assert "requeueing job" in text and "restart 1" in text and "resuming at stage 0" in text, text[-3000:]
    resumed, reference = read_train_log(run_dir), read_train_log(reference_run)
    assert [r["step"] for r in resumed] == [r["step"] for r in reference]
    for a, b in zip(resumed, reference):
        assert a["loss"] == pytest.approx(b["loss"], rel=1e-5), (a, b)
    assert json.loads((run_dir / "eval" / "metrics.json").read_text())["overall"]["n"] == 4


def test_eval_sweep_runs_as_a_job_array(cluster, reference_run, tmp_path):
    ckpts = [str(reference_run / "checkpoints" / "1-s4k" / "hf"), "embedded:qwen3-tiny"]
    job = submit(cluster, TINY + ["slurm.mode=eval", "slurm.gpus_per_node=0", "slurm.cpus_per_task=1",
                                  f"slurm.checkpoints=[{ckpts[0]},{ckpts[1]}]", "eval.buckets=[S]",
                                  f"output_dir={tmp_path}"])
    end = time.time() + 600
    while any(s in cluster.run("squeue", "-h", "-j", job, "-o", "%T", check=False) for s in ("PENDING", "RUNNING")):
        assert time.time() < end, _job_log(tmp_path)
        time.sleep(1)
    for name in ("1-s4k-hf", "embedded-qwen3-tiny"):
        metrics = json.loads((tmp_path / name / "S" / "scores" / "metrics.json").read_text())
        assert metrics["overall"]["n"] == 2, _job_log(tmp_path)
