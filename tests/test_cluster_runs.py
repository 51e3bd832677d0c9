"""Cluster-ready runs on the tiny model: bounded checkpoint disk (retention, the plan's sizes, the
free-space check), restarts that lose nothing, and two nodes on one machine."""
import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest
from hydra import compose, initialize_config_dir

import configs.schema  # noqa: F401
from configs.schema import typed
from slurm.render import train_script
from tests.conftest import REPO, free_port, torchrun
from tests.test_trainer_e2e import TINY, _ok
from train.disk import DiskSpaceError, check_free_space, checkpoint_bytes, dir_bytes, prune_checkpoints
from train.run_dir import read_train_log

TWO_STAGES = [*TINY, "eval.enabled=false", "trainer.save_every=1"]


def _step_dirs(run) -> list[str]:
    return sorted(f"{p.parent.name}/{p.name}" for p in (run / "checkpoints").glob("*/step-*"))


def _checkpoint(run, stage: str, step: int):
    path = run / "checkpoints" / stage / f"step-{step:06d}"
    (path / "state").mkdir(parents=True)
    (path / "state" / "shard.pt").write_bytes(b"x" * 1000)
    (path / "trainer_state.json").write_text("{}")
    return path


def test_retention_keeps_the_newest_complete_checkpoints_and_cleans_a_crashed_deletion(tmp_path):
    for stage, step in [("0-a", 2), ("0-a", 4), ("1-b", 2), ("1-b", 4)]:
        _checkpoint(tmp_path, stage, step)
    (tmp_path / "checkpoints" / "1-b" / "step-000006.tmp").mkdir()          # a save still being written
    (tmp_path / "checkpoints" / "0-a" / "step-000001.deleting").mkdir()     # a deletion a crash cut short
    deleted = prune_checkpoints(tmp_path, 2)
    assert [f"{p.parent.name}/{p.name}" for p in deleted] == ["0-a/step-000002", "0-a/step-000004"]
    assert _step_dirs(tmp_path) == ["1-b/step-000002", "1-b/step-000004", "1-b/step-000006.tmp"]
    assert prune_checkpoints(tmp_path, None) == [] and len(_step_dirs(tmp_path)) == 3


def test_the_free_space_check_measures_the_newest_checkpoint_else_trusts_the_plan(tmp_path):
    with pytest.raises(DiskSpaceError, match="stage 's2k' step 4 needs about .* none yet"):
        check_free_space(tmp_path, 1e18, "s2k", 4)
    last = _checkpoint(tmp_path, "0-s2k", 2)
    assert dir_bytes(last / "state") == 1000
    check_free_space(tmp_path, 1e18, "s2k", 4)      # the measured 1 KB counts, not the estimate


@pytest.fixture(scope="module")
def kept_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("kept") / "run"
    _ok(torchrun(2, [*TWO_STAGES, "trainer.keep_checkpoints=2", f"output_dir={out}"]))
    return out


@pytest.mark.slow
def test_a_run_keeps_its_newest_checkpoints_and_every_stage_export(kept_run):
    assert _step_dirs(kept_run) == ["1-s4k/step-000001", "1-s4k/step-000002"]
    assert all((kept_run / "checkpoints" / s / "hf" / "model.safetensors").exists() for s in ("0-s2k", "1-s4k"))


@pytest.mark.slow
def test_the_plan_predicts_the_size_of_a_zero3_checkpoint(kept_run):
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(kept_run / "checkpoints" / "1-s4k" / "hf")
    params = sum(p.numel() for p in model.parameters())
    planned = checkpoint_bytes(params, params, 3, model.dtype.itemsize)
    measured = dir_bytes(kept_run / "checkpoints" / "1-s4k" / "step-000002" / "state")
    assert abs(measured / planned - 1) < 0.05, (measured, planned)


@pytest.mark.slow
def test_a_full_disk_stops_the_run_before_a_save_and_keeps_the_last_checkpoint(tmp_path):
    mount = tmp_path / "small"
    mount.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=5m", "tmpfs", str(mount)]).returncode != 0:
        pytest.skip("needs to mount a 5 MB tmpfs (root) to fill a disk for real")
    try:
        proc = torchrun(2, [*TWO_STAGES, f"output_dir={mount / 'run'}"])
        assert proc.returncode != 0 and "GB free, and the checkpoint of stage 's2k' step 2 needs" in proc.stderr
        assert "train/loop.py" not in proc.stderr, proc.stderr[-3000:]        # one line, no traceback of ours
        kept = mount / "run" / "checkpoints" / "0-s2k" / "step-000001"
        assert json.loads((kept / "trainer_state.json").read_text())["step"] == 1
        assert f"The last good checkpoint is {kept}" in proc.stderr
        assert not list((mount / "run" / "checkpoints" / "0-s2k").glob("step-000002*"))
        assert [r["step"] for r in read_train_log(mount / "run")] == [1, 2]
    finally:
        subprocess.run(["umount", str(mount)])


def _kill_one_rank_when(log_path, rows: int, launcher: subprocess.Popen) -> int:
    """SIGKILL the worker of local rank 1 once the run's log holds `rows` steps; its pid."""
    import psutil

    while launcher.poll() is None:
        if log_path.exists() and len(log_path.read_text().splitlines()) >= rows:
            for child in psutil.Process(launcher.pid).children(recursive=True):
                if child.environ().get("LOCAL_RANK") == "1" and "train/sft.py" in " ".join(child.cmdline()):
                    os.kill(child.pid, signal.SIGKILL)
                    return child.pid
        time.sleep(0.05)
    raise AssertionError("the run ended before a rank could be killed")


@pytest.mark.slow
def test_a_rank_killed_mid_stage_restarts_the_job_with_the_uninterrupted_losses(kept_run, tmp_path):
    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2", "--max-restarts=1",
           "--rdzv_backend=c10d", f"--rdzv_endpoint=127.0.0.1:{free_port()}", str(REPO / "train" / "sft.py"),
           *TWO_STAGES, f"output_dir={out}", "resume=auto", "trainer.collective_timeout_s=120"]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "WANDB_SILENT": "true"}
    with open(tmp_path / "stdout", "w") as stdout, open(tmp_path / "stderr", "w") as stderr:
        launcher = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=stdout, stderr=stderr)
        _kill_one_rank_when(out / "train_log.jsonl", 2, launcher)
        assert launcher.wait(timeout=600) == 0, (tmp_path / "stderr").read_text()[-3000:]
    said = (tmp_path / "stdout").read_text()
    assert "resuming at stage" in said, said[-2000:]                  # the restarted ranks resumed
    assert "Sending process" in (tmp_path / "stderr").read_text()    # torchrun stopped the survivor
    resumed, reference = read_train_log(out), read_train_log(kept_run)
    assert [r["step"] for r in resumed] == [1, 2, 3, 4, 5, 6]
    for a, b in zip(resumed, reference):
        assert a["loss"] == pytest.approx(b["loss"], rel=1e-6), (a, b)


def _rendered_launch(tmp_path, overrides: list[str], port: int) -> str:
    """The torchrun command line of the SLURM training script rendered for these overrides (its srun
    task, one per node), with the script's variables left for the shell."""
    with initialize_config_dir(config_dir=str(REPO / "configs"), version_base="1.3"):
        cfg = typed(compose("sft", overrides=[*overrides, f"slurm.rdzv_port={port}"]))
    script = train_script(cfg, overrides, REPO, tmp_path / "logs")
    srun = re.search(r"^srun (.*?) &$", script, re.S | re.M).group(1).replace("\\\n", " ")
    return re.sub(r"^(--\S+\s+)+", "", srun)                 # what srun runs, without srun's own flags


@pytest.mark.slow
def test_two_nodes_on_one_machine_train_across_the_node_boundary_as_one_node_does(tmp_path):
    """Two torchrun "nodes" of one process each, launched by the command line the SLURM script renders
    (c10d rendezvous on the first), train with sp 2 across the node boundary: the losses of one node
    of two processes."""
    stage = ["curriculum.stages=[{name: s2k, bucket: S, max_seq_len: 2048, max_steps: 3}]"]
    run = [*TINY, *stage, "eval.enabled=false", "parallel=sp2"]
    single = _ok(torchrun(2, [*run, f"output_dir={tmp_path / 'one'}"]))
    overrides = [*run, "slurm.nodes=2", "slurm.gpus_per_node=0", f"output_dir={tmp_path / 'two'}"]
    line = _rendered_launch(tmp_path, overrides, free_port())
    env = {**os.environ, "OMP_NUM_THREADS": "1", "WANDB_SILENT": "true", "SLURM_NNODES": "2",
           "HEAD_NODE": "127.0.0.1", "SLURM_JOB_ID": "4242"}
    nodes = [subprocess.Popen(["bash", "-c", line], cwd=REPO, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outputs = [node.communicate(timeout=600) for node in nodes]
    assert all(node.returncode == 0 for node in nodes), outputs[0][1][-3000:] + outputs[1][1][-3000:]
    said = "".join(out for out, _ in outputs)
    assert "sequence-parallel 2 x data-parallel 1" in said and "sequence-parallel 2" in single.stdout
    two, one = read_train_log(tmp_path / "two"), read_train_log(tmp_path / "one")
    assert len(two) == len(one) == 3
    for a, b in zip(two, one):
        assert a["loss"] == pytest.approx(b["loss"], rel=1e-6) and a["tokens"] == b["tokens"], (a, b)


@pytest.mark.slow
@pytest.mark.over_budget("a 1-rank reference; ZeRO-3 resumes 2 -> 1 and 1 -> 2 ranks via the universal checkpoint")
def test_a_checkpoint_resumes_on_another_number_of_ranks_with_the_losses_of_a_run_there(kept_run, tmp_path):
    """2 -> 1 and 1 -> 2 ranks, the global batch kept by optim.grad_accum: the ZeRO-3 shards are converted
    once to DeepSpeed's universal checkpoint. Bound: any resume (on the same number of ranks too) differs
    from an uninterrupted run by float rounding at the steps after it (1.3e-7 relative here), so 1e-6."""
    one_rank = ["optim.grad_accum=2"]
    _ok(torchrun(1, [*TWO_STAGES, *one_rank, f"output_dir={tmp_path / 'ref1'}"]))
    reference = {2: read_train_log(kept_run), 1: read_train_log(tmp_path / "ref1")}
    for saved, resumed in ((2, 1), (1, 2)):
        out, per_rank = tmp_path / f"{saved}to{resumed}", {1: [*one_rank, "trainer.keep_checkpoints=null"],
                                                           2: ["trainer.keep_checkpoints=null"]}
        _ok(torchrun(saved, [*TWO_STAGES, *per_rank[saved], f"output_dir={out}", "trainer.stop_at_step=2"]))
        second = _ok(torchrun(resumed, [*TWO_STAGES, *per_rank[resumed], f"output_dir={out}", "resume=auto"]))
        assert f"was saved on {saved} ranks and this run has {resumed}: converting it once" in second.stdout
        assert (out / "checkpoints" / "0-s2k" / "step-000002" / "universal" / "zero").is_dir()
        log = read_train_log(out)
        assert [r["step"] for r in log] == [1, 2, 3, 4, 5, 6]
        for a, b in zip(log[2:], reference[resumed][2:]):
            assert a["loss"] == pytest.approx(b["loss"], rel=1e-6) and a["lr"] == pytest.approx(b["lr"]), (a, b)
