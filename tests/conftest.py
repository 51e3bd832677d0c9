import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from train.distributed import free_port  # noqa: F401  (the tests' helpers import it from here)

REPO = Path(__file__).resolve().parents[1]
QWEN3_8B = {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_size": 4096,
            "intermediate_size": 12288, "num_hidden_layers": 36, "num_attention_heads": 32,
            "num_key_value_heads": 8, "head_dim": 128, "vocab_size": 151936, "tie_word_embeddings": False,
            "max_position_embeddings": 40960, "torch_dtype": "bfloat16"}


@pytest.fixture(scope="session")
def qwen3_8b(tmp_path_factory):
    """A model directory of Qwen3-8B's config.json alone: what the memory plan reads."""
    path = tmp_path_factory.mktemp("qwen3-8b")
    (path / "config.json").write_text(json.dumps(QWEN3_8B))
    return path


def shared_data(name: str) -> Path:
    """A folder of released benchmark files under HALLU_SHARED_DATA (default: data/released in the project; CI
    sets the variable to its copies of the files); the
    test skips, saying so, where it is absent. The project commits none of these files."""
    root = Path(os.environ.get("HALLU_SHARED_DATA") or REPO / "data" / "released")
    if not (root / name).is_dir():
        pytest.skip(f"needs the released files in {root / name} (see the README's 'Benchmarks' section)")
    return root / name


@pytest.fixture(scope="session")
def tokenizer():
    from models.builders import load_tokenizer, resolve_model_path

    return load_tokenizer(resolve_model_path("embedded:qwen3-tiny"))


def torchrun(nproc: int, overrides: list[str], timeout: int = 600, env: dict | None = None):
    """Run train/sft.py under torchrun on a free port; returns the CompletedProcess."""
    cmd = [sys.executable, "-m", "torch.distributed.run", f"--nproc_per_node={nproc}",
           "--master_addr=127.0.0.1", f"--master_port={free_port()}", str(REPO / "train" / "sft.py"),
           *overrides]
    full_env = {**os.environ, "OMP_NUM_THREADS": "1", "WANDB_SILENT": "true", **(env or {})}
    return subprocess.run(cmd, cwd=REPO, env=full_env, capture_output=True, text=True, timeout=timeout)


def pytest_configure(config):
    """One thread for each of pytest-xdist's workers (and the processes its tests start, which inherit it) on the
    cores there are: two workers of two threads each on two cores wait on each other's OpenMP barriers, which
    made a 60-token SmolLM2 forward take 2.6 s instead of 0.4. HALLU_TEST_THREADS sets another count."""
    import torch

    workers = getattr(config, "workerinput", {}).get("workercount") or config.getoption("numprocesses", None)
    workers = workers if isinstance(workers, int) and workers > 0 else 1
    threads = int(os.environ.get("HALLU_TEST_THREADS") or max(1, (os.cpu_count() or 1) // workers))
    os.environ["OMP_NUM_THREADS"] = str(threads)
    torch.set_num_threads(threads)


# Each test file's seconds in a measured run (HALLU_RECORD_FILE_SECONDS=1 rewrites it at the end of a run). Under
# --dist loadfile a file is one worker's unit and pytest-xdist hands them out in collection order: heaviest first,
# the last files handed out are short ones, so neither worker idles long at the end.
FILE_SECONDS = Path(__file__).with_name("file_seconds.json")


def _heaviest_files_first(items: list) -> None:
    seconds = json.loads(FILE_SECONDS.read_text()) if FILE_SECONDS.exists() else {}
    unknown = statistics.median(seconds.values()) if seconds else 0.0      # a new file: a typical one
    order = {item: i for i, item in enumerate(items)}
    items.sort(key=lambda item: (-seconds.get(item.nodeid.split("::")[0], unknown), item.nodeid.split("::")[0],
                                 order[item]))


def pytest_collection_modifyitems(config, items):
    import torch

    _heaviest_files_first(items)
    for item in items:     # the reason travels with the test's reports, to the controller of pytest-xdist too
        for mark in item.iter_markers("over_budget"):
            item.user_properties.append(("over_budget", mark.args[0] if mark.args else ""))
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs CUDA (flash-attn kernels)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


# A test's budget: its setup, call and teardown together (a module fixture's cost falls on the first test that
# asks for it). Longer is allowed only with @pytest.mark.over_budget("why, in one line").
BUDGET_S = float(os.environ.get("HALLU_TEST_BUDGET_S", "90"))


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    """The tests over BUDGET_S, longest first: the marked ones with their reason, the others named as over."""
    spent: dict[str, dict[str, float]] = {}
    reasons: dict[str, str] = {}
    for reports in terminalreporter.stats.values():
        for report in reports:
            if isinstance(report, pytest.TestReport):
                spent.setdefault(report.nodeid, {})[report.when] = report.duration
                reasons.update((nodeid, why) for name, why in report.user_properties if name == "over_budget"
                               for nodeid in [report.nodeid])
    over = sorted(((sum(p.values()), node) for node, p in spent.items() if sum(p.values()) > BUDGET_S), reverse=True)
    terminalreporter.section(f"tests over the {BUDGET_S:.0f} s budget: {len(over)} "
                             f"({sum(node not in reasons for _, node in over)} unmarked)")
    for total, node in over:
        setup = spent[node].get("setup", 0.0)
        why = f"marked: {reasons[node]}" if node in reasons else \
            "UNMARKED: cut it, or mark it @pytest.mark.over_budget('why')"
        terminalreporter.write_line(f"{total:6.0f} s ({setup:.0f} s setup)  {node}  {why}")
    _report_files(terminalreporter, spent)


def _report_files(terminalreporter, spent: dict[str, dict[str, float]], shown: int = 12) -> None:
    """Each file's total, heaviest first: under --dist loadfile a file is one worker's unit, so a heavy file
    scheduled last keeps one worker busy while the other idles."""
    files: dict[str, float] = {}
    for node, phases in spent.items():
        name = node.split("::")[0]
        files[name] = files.get(name, 0.0) + sum(phases.values())
    if os.environ.get("HALLU_RECORD_FILE_SECONDS"):
        known = json.loads(FILE_SECONDS.read_text()) if FILE_SECONDS.exists() else {}
        merged = {k: v for k, v in {**known, **files}.items() if (REPO / k).exists()}   # a partial run: its files
        FILE_SECONDS.write_text(json.dumps({k: round(v) for k, v in sorted(merged.items())}, indent=1) + "\n")
    heaviest = sorted(files.items(), key=lambda kv: -kv[1])[:shown]
    terminalreporter.section(f"the {len(heaviest)} heaviest test files of {len(files)} "
                             f"({sum(files.values()) / 60:.0f} worker-minutes in all)")
    for name, total in heaviest:
        terminalreporter.write_line(f"{total:6.0f} s  {name}")


@pytest.fixture(scope="session")
def tiny_unit_encoder(tmp_path_factory):
    """A randomly initialised 2-layer BERT whose vocabulary covers the characters of the grounding tests'
    synthetic records (tests/test_grounding.py::synthetic), for `eval.grounding.encoder`."""
    from tests.test_grounding import synthetic
    from tests.tiny_encoders import write_tiny_encoder

    records = [r for seed in range(3) for r in synthetic(40, seed)]
    text = " ".join(r["source"] + " " + r["response"] for r in records)
    return write_tiny_encoder(tmp_path_factory.mktemp("unit_encoder"), "bert", text + " ...")
