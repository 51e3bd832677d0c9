"""Host-memory helpers: freed activation-sized tensors leave RSS, and the peak RSS can be reset.

Each case runs in a fresh interpreter, because glibc's mmap threshold is per process and only
moves one way."""
from __future__ import annotations

import json
import platform
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
glibc = pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt is glibc's")

# One 8 MiB tensor freed lifts glibc's dynamic mmap threshold; then forty 4 MiB tensors, the last
# kept alive, so that freed heap pages below it cannot be trimmed from the top.
CHURN = """
import json, sys, torch
from train.host_memory import current_rss, return_freed_memory
if sys.argv[1] == "fixed":
    assert return_freed_memory()
if sys.argv[1] == "trainer":
    from train.distributed import init_distributed, teardown
    init_distributed(1)
base = current_rss()
first = torch.ones(2 << 20); del first
tensors = [torch.ones(1 << 20) for _ in range(40)]
last = tensors[-1]; del tensors
print(json.dumps({"retained_mb": (current_rss() - base) / 2**20}))
if sys.argv[1] == "trainer":
    teardown()
"""

PEAK = """
import json, torch
from train.host_memory import current_rss, peak_rss, reset_peak_rss
big = torch.ones(64 << 20); del big                     # 256 MiB, then freed
assert reset_peak_rss()
after_reset = peak_rss() - current_rss()
spike = torch.ones(32 << 20); del spike                 # 128 MiB
print(json.dumps({"after_reset_mb": after_reset / 2**20, "spike_mb": (peak_rss() - current_rss()) / 2**20}))
"""


def _run(script: str, *args: str) -> dict:
    done = subprocess.run([sys.executable, "-c", script, *args], cwd=REPO, capture_output=True, text=True,
                          check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


@glibc
def test_freed_tensors_leave_rss_once_threshold_is_fixed():
    default = _run(CHURN, "default")["retained_mb"]
    fixed = _run(CHURN, "fixed")["retained_mb"]
    assert default > 100, f"glibc kept only {default:.0f} MiB; the churn no longer shows the problem"
    assert fixed < 20, f"{fixed:.0f} MiB of freed tensors stayed resident with the fixed threshold"


@glibc
def test_cpu_training_processes_fix_the_threshold():
    import torch

    if torch.cuda.is_available():
        pytest.skip("activations live on the GPU there")
    assert _run(CHURN, "trainer")["retained_mb"] < 20


@pytest.mark.skipif(not Path("/proc/self/clear_refs").exists(), reason="Linux only")
def test_peak_rss_resets_to_current():
    out = _run(PEAK)
    assert abs(out["after_reset_mb"]) < 16
    assert 110 < out["spike_mb"] < 160
