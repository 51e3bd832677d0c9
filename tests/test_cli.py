"""`hallu`, the console script `pip install` puts beside python: each subcommand becomes the command
the README spells out (`hallu eval ...` = `python eval/run.py ...`, `hallu train -n 2 ...` = `torchrun
--nproc_per_node=2 train/sft.py ...`), with the arguments passed on unchanged."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

from data_builders.records import write_jsonl
from slurm.cli import COMMANDS
from tests.test_grounding import synthetic

HALLU = Path(sys.executable).parent / "hallu"
pytestmark = pytest.mark.skipif(not HALLU.exists(), reason="the console script is installed by `pip install -e .`")


def _hallu(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(HALLU), *args], cwd=cwd, capture_output=True, text=True, timeout=600)


def test_help_lists_every_subcommand_with_its_line(tmp_path):
    done = _hallu("--help", cwd=tmp_path)
    assert done.returncode == 0
    for name, (_, what) in COMMANDS.items():
        assert f"    {name}" in done.stdout and what.split()[0] in done.stdout
    unknown = _hallu("fly", cwd=tmp_path)
    assert unknown.returncode == 2 and "invalid choice: 'fly'" in unknown.stderr


def test_eval_runs_eval_run_py_with_the_overrides_as_given(tmp_path):
    data = tmp_path / "data"
    write_jsonl(data / "test.jsonl", synthetic(90, 2))
    done = _hallu("eval", "+exp=ragtruth_grounding", f"data.root={data}", f"output_dir={tmp_path / 'run'}",
                  cwd=tmp_path)          # from another directory: the script is found where it is installed
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads((tmp_path / "run" / "eval" / "metrics.json").read_text())["n"] == 90


def test_train_launches_torchrun_over_n_ranks(tmp_path):
    data = tmp_path / "data"
    write_jsonl(data / "test.jsonl", synthetic(6, 3))
    done = _hallu("train", "-n", "2", "+exp=faithbench_sentence_demo", f"data.root={data}", "data.folds=0",
                  f"output_dir={tmp_path / 'run'}", cwd=tmp_path)
    assert done.returncode != 0                   # a test file alone: the ranks stop on the data check
    assert f"data.root={data}: training needs train.jsonl" in done.stdout + done.stderr
    assert "torch.distributed.elastic" in done.stderr or "ChildFailedError" in done.stderr   # torchrun's report
