"""`model.dtype`: `auto` is float32 on every CPU; `bf16_if_native` follows the CPU's bfloat16
instructions, read from the hardware, and the run says which it chose."""
from pathlib import Path

import pytest
import torch

from models import builders
from models.builders import cpu_bf16_features, dtype_choice, torch_dtype


@pytest.mark.skipif(not Path("/proc/cpuinfo").exists(), reason="reads the CPU flags from /proc/cpuinfo (Linux)")
def test_native_bf16_is_what_the_cpu_flags_say():
    flags = set(Path("/proc/cpuinfo").read_text().split())
    assert bool(cpu_bf16_features()) == bool({"avx512_bf16", "amx_bf16"} & flags)
    expected = torch.bfloat16 if {"avx512_bf16", "amx_bf16"} & flags else torch.float32
    assert torch_dtype("bf16_if_native") == expected
    assert str(expected).removeprefix("torch.") in dtype_choice("bf16_if_native")


@pytest.mark.parametrize("features, expected", [([], torch.float32), (["avx512_bf16"], torch.bfloat16),
                                                 (["amx_bf16"], torch.bfloat16)])
def test_bf16_if_native_picks_bf16_only_where_the_cpu_computes_it(monkeypatch, features, expected):
    monkeypatch.setattr(builders, "cpu_bf16_features", lambda: features)
    assert torch_dtype("bf16_if_native") == expected
    assert torch_dtype("auto") == torch.float32                  # exact, and the same on every CPU
    line = dtype_choice("bf16_if_native")
    assert ("no native bfloat16" in line) == (not features)
    if not features:
        assert "emulated" in dtype_choice("bfloat16")


def test_an_unknown_dtype_names_the_allowed_ones():
    with pytest.raises(ValueError, match="expected auto\\|bf16_if_native\\|float32"):
        torch_dtype("half")
