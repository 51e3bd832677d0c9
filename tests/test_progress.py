"""Progress where stderr is a file: plain lines (a first one, then one every HALLU_PROGRESS_EVERY_S
seconds, a last one), never tqdm's carriage-return redraws; a terminal still gets the bar."""
import io
import json
import os
import subprocess
import sys

from tqdm import tqdm

from data_builders.common.progress import progress
from tests.conftest import REPO
from tests.test_grounding import synthetic


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_file_gets_one_line_per_interval_with_counts_rate_and_postfix(monkeypatch):
    monkeypatch.setenv("HALLU_PROGRESS_EVERY_S", "0")
    out = io.StringIO()
    with progress(total=5, desc="stage 0 pairs", unit="step", stream=out) as bar:
        for _ in range(5):
            bar.update(1)
            bar.set_postfix(loss="0.5000")
    lines = out.getvalue().splitlines()
    assert "\r" not in out.getvalue() and len(lines) == 5
    assert lines[2].startswith("stage 0 pairs: 3/5 (60%), 0:00:00 elapsed,") and "step/s" in lines[2]
    assert lines[-1].startswith("stage 0 pairs: 5/5 (100%)") and lines[-1].endswith(", loss 0.5000")


def test_between_intervals_only_the_first_and_the_last_line(monkeypatch):
    monkeypatch.setenv("HALLU_PROGRESS_EVERY_S", "3600")
    out = io.StringIO()
    seen = list(progress(range(40), desc="predict", stream=out))
    lines = out.getvalue().splitlines()
    assert seen == list(range(40))
    assert [line.split(",")[0] for line in lines] == ["predict: 1/40 (2%)", "predict: 40/40 (100%)"]
    resumed = io.StringIO()
    with progress(total=10, initial=7, desc="annotate", stream=resumed) as bar:
        bar.update(3)
    assert resumed.getvalue().startswith("annotate: 10/10 (100%)")


def test_a_terminal_gets_the_bar_and_disabled_prints_nothing():
    assert isinstance(progress(total=3, stream=Terminal()), tqdm)
    quiet = io.StringIO()
    with progress(total=3, disable=True, stream=quiet) as bar:
        bar.update(3)
    assert quiet.getvalue() == ""


def test_a_cross_validated_run_logs_lines_to_a_file(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    (data / "test.jsonl").write_text("".join(json.dumps(r) + "\n" for r in synthetic(120, 1)))
    run = subprocess.run([sys.executable, str(REPO / "eval" / "run.py"), "+exp=ragtruth_grounding",
                          f"data.root={data}", f"output_dir={tmp_path / 'run'}"], cwd=REPO, capture_output=True,
                         text=True, timeout=600, env={**os.environ, "HALLU_PROGRESS_EVERY_S": "3600"})
    assert run.returncode == 0, run.stderr[-2000:]
    progress_lines = [line for line in run.stderr.splitlines() if line.startswith("grounding: ")]
    assert "\r" not in run.stderr + run.stdout
    assert len(progress_lines) == 6 and sum("(100%)" in line for line in progress_lines) == 3   # 3 folds
