"""Cluster-ready runs on the tiny model: bounded checkpoint disk (retention, the plan's sizes, the
free-space check), and restarts that lose nothing."""
import json
import subprocess

import pytest

from tests.conftest import torchrun
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
    assert dir_bytes(last) == 1002
    check_free_space(tmp_path, 1e18, "s2k", 4)      # the measured 1 KB counts, not the estimate


@pytest.fixture(scope="module")
def kept_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("kept") / "run"
    _ok(torchrun(2, [*TWO_STAGES, "trainer.keep_checkpoints=2", f"output_dir={out}"]))
    return out


def test_a_run_keeps_its_newest_checkpoints_and_every_stage_export(kept_run):
    assert _step_dirs(kept_run) == ["1-s4k/step-000001", "1-s4k/step-000002"]
    assert all((kept_run / "checkpoints" / s / "hf" / "model.safetensors").exists() for s in ("0-s2k", "1-s4k"))


def test_the_plan_predicts_the_size_of_a_zero3_checkpoint(kept_run):
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(kept_run / "checkpoints" / "1-s4k" / "hf")
    params = sum(p.numel() for p in model.parameters())
    planned = checkpoint_bytes(params, params, 3, model.dtype.itemsize)
    measured = dir_bytes(kept_run / "checkpoints" / "1-s4k" / "step-000002" / "state")
    assert abs(measured / planned - 1) < 0.05, (measured, planned)


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
