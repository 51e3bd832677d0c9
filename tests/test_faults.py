"""Faults on CPU: a rank killed mid-run, an interrupted checkpoint write, a non-finite loss, and
config / data errors; none of them may hang a job or lose the last good checkpoint."""
import json
import os
import re
import signal
import subprocess
import sys
import time

import psutil
import pytest

from data_builders.importers.longnovel_released import released_row
from data_builders.records import write_jsonl
from tests.conftest import REPO, free_port, torchrun
from tests.test_trainer_e2e import TINY
from train.checkpoint import find_resume_point, save_state, stage_dir
from train.run_dir import read_train_log

BASE = [o for o in TINY if not o.startswith(("curriculum.stages=", "eval."))] + ["eval.enabled=false"]
LONG_STAGE = ["curriculum.stages=[{name: s2k, bucket: S, max_seq_len: 2048, max_steps: 14}]", "trainer.save_every=2"]


def _launch(overrides, tee: bool = False):
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2", "--master_addr=127.0.0.1",
           f"--master_port={free_port()}", *(["--tee=3"] if tee else []), str(REPO / "train" / "sft.py"), *overrides]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _worker(launcher: subprocess.Popen, rank: int) -> psutil.Process:
    for child in psutil.Process(launcher.pid).children(recursive=True):
        try:
            if "sft.py" in " ".join(child.cmdline()) and child.environ().get("RANK") == str(rank):
                return child
        except psutil.NoSuchProcess:
            continue
    raise LookupError(f"no rank {rank} worker under torchrun {launcher.pid}")


@pytest.mark.slow
@pytest.mark.over_budget("a 2-rank job with a rank killed mid-stage, then its resume to the end")
def test_killed_rank_ends_the_job_and_resume_continues(tmp_path):
    out = tmp_path / "run"
    job = _launch(BASE + LONG_STAGE + [f"output_dir={out}"])
    log = out / "train_log.jsonl"
    deadline = time.time() + 300
    while not (log.exists() and len(log.read_text().splitlines()) >= 5):
        assert job.poll() is None and time.time() < deadline, job.communicate()[1][-3000:]
        time.sleep(0.2)
    _worker(job, 1).send_signal(signal.SIGKILL)
    killed_at = time.time()
    _, err = job.communicate(timeout=180)
    assert job.returncode != 0
    assert time.time() - killed_at < 90, "the surviving rank hung after its peer died"
    before = {r["step"]: r["loss"] for r in read_train_log(out)}
    point = find_resume_point(out, ["s2k"])
    assert point.step >= 4 and point.step % 2 == 0
    again = torchrun(2, BASE + LONG_STAGE + [f"output_dir={out}", "resume=auto"])
    assert again.returncode == 0, again.stderr[-3000:]
    assert f"resuming at stage 0 's2k' step {point.step}" in again.stdout
    after = read_train_log(out)
    assert [r["step"] for r in after] == list(range(1, 15))
    for r in after:
        if r["step"] in before:
            assert r["loss"] == pytest.approx(before[r["step"]], rel=1e-5), r
    assert (stage_dir(out, 0, "s2k") / "done.json").exists()


class _CrashingEngine:
    """Stands in for DeepSpeed only as the writer of shard files, to crash part-way through a write."""

    def save_checkpoint(self, path, tag):
        os.makedirs(os.path.join(path, tag), exist_ok=True)
        with open(os.path.join(path, tag, "mp_rank_00_model_states.pt"), "wb") as f:
            f.write(b"partial")
        raise KeyboardInterrupt("killed while writing")


def test_interrupted_checkpoint_write_keeps_the_previous_one(tmp_path):
    good = stage_dir(tmp_path, 0, "s2k") / "step-000004"
    (good / "state").mkdir(parents=True)
    (good / "trainer_state.json").write_text(json.dumps({"stage_index": 0, "stage": "s2k", "step": 4,
                                                          "global_step": 4}))
    with pytest.raises(KeyboardInterrupt):
        save_state(_CrashingEngine(), tmp_path, 0, "s2k", 6, 6, is_main=True)
    assert (stage_dir(tmp_path, 0, "s2k") / "step-000006.tmp").exists()
    assert not (stage_dir(tmp_path, 0, "s2k") / "step-000006").exists()
    point = find_resume_point(tmp_path, ["s2k", "s4k"])
    assert (point.stage_index, point.step, point.state_dir) == (0, 4, good)


@pytest.mark.slow
def test_non_finite_loss_stops_with_stage_and_step_and_keeps_the_checkpoint(tmp_path):
    out = tmp_path / "run"
    proc = torchrun(2, BASE + [f"output_dir={out}", "optim.lr=1e30", "trainer.save_every=1",
                               "curriculum.stages=[{name: s2k, bucket: S, max_seq_len: 2048, max_steps: 6}]"],
                    timeout=300)
    assert proc.returncode != 0
    found = [line for line in proc.stderr.splitlines() if line.strip().startswith("train.loop.NonFiniteError")]
    assert found and "stage 's2k' step" in found[0], proc.stderr[-3000:]
    bad_step = int(found[0].split("step ")[1].split(":")[0])
    kept = sorted(p.name for p in stage_dir(out, 0, "s2k").glob("step-[0-9]*[0-9]"))
    assert kept and kept[-1] == f"step-{bad_step - 1:06d}"
    assert [r["step"] for r in read_train_log(out)] == list(range(1, bad_step))


@pytest.mark.parametrize("override,key", [
    ("parallel.sp_size=4", "parallel.sp_size=4"),
    ("curriculum.stages=[{name: a, bucket: S, max_seq_len: 2048, max_steps: 1, sp_size: 3}]",
     "curriculum stage 'a' sp_size=3"),
    ("curriculum.stages=[{name: a, bucket: S, max_seq_len: 2048, max_steps: 1, grad_accum: 0}]",
     "curriculum stage 'a' grad_accum=0"),
    ("parallel.ring_kernel=cudnn", "Invalid value 'cudnn', expected one of [torch, flash_attn]"),
    ("parallel.ring_impl=ring_flash_attn", "parallel.ring_impl=ring_flash_attn runs on CUDA only")])
def test_config_error_before_any_process_group(tmp_path, override, key):
    """WORLD_SIZE=2 with no second rank: joining a process group would wait for it; the error comes first."""
    env = {**os.environ, "WORLD_SIZE": "2", "RANK": "0", "LOCAL_RANK": "0", "MASTER_ADDR": "127.0.0.1",
           "MASTER_PORT": str(free_port())}
    start = time.time()
    proc = subprocess.run([sys.executable, str(REPO / "train" / "sft.py"), *BASE, override,
                           f"output_dir={tmp_path}"], cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1 and key in proc.stderr and time.time() - start < 60
    assert "Traceback" not in proc.stderr


def _one_error_line(proc_out: str, expected: str) -> None:
    """The error once, from one rank, and no traceback through the toolkit's code or a collective."""
    said = [line for line in proc_out.splitlines() if "train/sft.py: error:" in line
            and not line.lstrip().startswith("traceback :")]        # torchrun's summary quotes the root cause
    assert len(said) == 1 and expected in said[0], proc_out[-4000:]
    ours = [line for line in proc_out.splitlines()
            if line.strip().startswith(f'File "{REPO}/') and f'File "{REPO}/.venv/' not in line]
    assert not ours and "Connection closed" not in proc_out, proc_out[-4000:]


@pytest.mark.slow
def test_data_errors_end_the_job_without_a_waiting_rank(tmp_path):
    """A build error on rank 0 (the others wait for its records) and a stage error on every rank:
    each printed once, by one rank."""
    start = time.time()
    empty = torchrun(2, BASE + [f"output_dir={tmp_path / 'a'}",
                                "curriculum.stages=[{name: s32k, bucket: L, max_seq_len: 32768, max_steps: 2}]"],
                     timeout=300)
    assert empty.returncode != 0 and time.time() - start < 240
    _one_error_line(empty.stdout + empty.stderr, "the corpus is too small for these buckets")
    start = time.time()
    short = _launch(BASE + [f"output_dir={tmp_path / 'b'}",
                            "curriculum.stages=[{name: m, bucket: M, max_seq_len: 1024, max_steps: 2}]"], tee=True)
    out, err = short.communicate(timeout=300)
    assert short.returncode != 0 and time.time() - start < 240
    _one_error_line(out + err, "are longer than max_seq_len=1024")
    assert any(re.match(r"\[default[01]\]:train/sft.py: error:", line) for line in (out + err).splitlines())


def _released(root, bad_type_on_line: int | None = None, splits=("train", "test")) -> None:
    """Released-format rows of short sources (all in bucket S), hallucinated and faithful in turn."""
    root.mkdir(parents=True)
    for split in splits:
        rows = []
        for i in range(6):
            wrong = "程玉堂去了洛阳城。"
            rec = {"id": f"{split}{i}", "task": "summarization", "language": "zh", "source": "程玉堂去了临安城。" * 30,
                   "response": wrong if i % 2 else "程玉堂去了临安城。", "label": i % 2,
                   "hallucination_types": ["entity"] * (i % 2), "hallucinated_sentences": [wrong] * (i % 2)}
            rows.append(released_row(rec))
        if bad_type_on_line is not None and split == "train":
            row = rows[bad_type_on_line - 1]
            assert "实体幻觉" in row["output"]
            row["output"] = row["output"].replace("实体幻觉", "人物幻觉")
        write_jsonl(root / f"{split}.jsonl", rows)


RECIPE = ["+exp=longnovel_curriculum", "model.name_or_path=embedded:qwen3-tiny", "trainer.max_steps=1",
          "eval.enabled=false", "logger.wandb=false", "trainer.progress=false"]


@pytest.mark.slow
@pytest.mark.parametrize("case", ["missing_test_file", "bad_type_on_line_4", "no_bucket_M_records"])
def test_the_recipe_with_bad_data_says_one_line_and_no_traceback(tmp_path, case):
    """The README's recipe command under 2 ranks: a missing file and a bad row are found by every rank
    before any process group (no run directory is made); a stage without records after training the
    first one, on the main rank, and raised on both."""
    data, out = tmp_path / "data", tmp_path / "run"
    _released(data, bad_type_on_line=4 if case == "bad_type_on_line_4" else None,
              splits=("train",) if case == "missing_test_file" else ("train", "test"))
    proc = torchrun(2, RECIPE + [f"data.root={data}", f"output_dir={out}"], timeout=300)
    assert proc.returncode != 0
    expected = {"missing_test_file": f"data.root={data}: expected test.jsonl or test.json, found neither",
                "bad_type_on_line_4": f"{data / 'train.jsonl'}:4 field 'output': hallucination_type: expected one of",
                "no_bucket_M_records": "curriculum stage 'sft_16k': no training records in bucket 'M'"}[case]
    _one_error_line(proc.stdout + proc.stderr, expected)
    assert out.exists() == (case == "no_bucket_M_records")


def test_eval_run_without_data_root_names_the_key(tmp_path):
    """eval/run.py checks the data config as train/sft.py does (it used to end in a TypeError)."""
    proc = subprocess.run([sys.executable, str(REPO / "eval" / "run.py"), "+exp=longnovel_curriculum",
                           "checkpoint=embedded:qwen3-tiny", f"output_dir={tmp_path}"],
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert "data.source=longnovel_released needs data.root=<a directory>, found None" in proc.stderr
