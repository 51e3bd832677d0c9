"""The CUDA block kernels (PyTorch's flash attention, flash-attn's) against PyTorch's attention,
the ring on them, and `python -m train.tools.gpu_check` end to end. Marked `gpu`: skipped on machines
without CUDA."""
import importlib.util
import json
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F

pytestmark = pytest.mark.gpu
KERNELS = ["torch", pytest.param("flash_attn", marks=pytest.mark.skipif(
    importlib.util.find_spec("flash_attn") is None, reason="flash-attn is not installed"))]


@pytest.mark.parametrize("name", KERNELS)
@pytest.mark.parametrize("heads", [(4, 4), (8, 2)])
def test_cuda_block_kernels_match_sdpa(name, heads):
    from models.attention.kernels import kernel_for

    kernel = kernel_for(torch.device("cuda"), name)
    q = torch.randn(2, heads[0], 256, 64, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    k, v = (torch.randn(2, heads[1], 256, 64, device="cuda", dtype=torch.bfloat16, requires_grad=True)
            for _ in range(2))
    out, lse = kernel.forward(q, k, v, True, 0.125)
    ref = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=0.125, enable_gqa=True)
    torch.testing.assert_close(out, ref, atol=2e-2, rtol=2e-2)
    assert lse.dtype == torch.float32 and lse.shape == (2, heads[0], 256)
    dout = torch.randn_like(out)
    dq, dk, dv = kernel.backward(dout, q, k, v, out, lse, True, 0.125)
    rq, rk, rv = torch.autograd.grad(ref, (q, k, v), dout)
    for a, b in ((dq, rq), (dk, rk), (dv, rv)):
        torch.testing.assert_close(a, b, atol=3e-2, rtol=3e-2)


def test_ring_on_cuda_single_rank_matches_sdpa():
    from models.attention.kernels import kernel_for
    from models.attention.ring import ring_attention

    q = torch.randn(1, 8, 512, 64, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(1, 2, 512, 64, device="cuda", dtype=torch.bfloat16)
    out = ring_attention(q, k, k, [200, 312], 0.125, None, kernel_for(q.device))
    ref = torch.cat([F.scaled_dot_product_attention(q[:, :, s], k[:, :, s], k[:, :, s], is_causal=True,
                                                    scale=0.125, enable_gqa=True)
                     for s in (slice(0, 200), slice(200, 512))], 2)
    torch.testing.assert_close(out, ref, atol=2e-2, rtol=2e-2)


def test_the_gpu_check_command_holds_at_2k_tokens(tmp_path):
    out = tmp_path / "gpu_check.json"
    proc = subprocess.run([sys.executable, "-m", "train.tools.gpu_check", "--quick", "--out", str(out)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "all checks hold" in proc.stdout and out.exists()


def test_the_gpu_profile_command_finds_the_attention_kernels(tmp_path):
    """Every kernel family is named from the kernels the GPU really ran: each backend's step spends
    device time in attention forward, attention backward and matrix products."""
    out = tmp_path / "gpu_profile.json"
    proc = subprocess.run([sys.executable, "-m", "train.tools.gpu_profile", "--step-tokens", "2048",
                           "--ring-tokens", "2048", "--sp", "2", "--out", str(out)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    report = json.loads(out.read_text())
    for row in report["step"] + report["ring"]:
        assert 0 < row["busy_share"] <= 1.05, row
        assert row["families_s"]["attention forward"] > 0 and row["families_s"]["attention backward"] > 0, row
    assert all(row["families_s"]["matrix products"] > 0 for row in report["step"])


@pytest.mark.skipif(importlib.util.find_spec("ring_flash_attn") is None, reason="ring-flash-attn is not installed")
def test_ring_flash_attn_backend_matches_our_ring(tmp_path):
    """One NCCL rank (a single GPU cannot host more): the two backends on packed documents."""
    import torch.distributed as dist

    from models.attention.hf_ring import ring_attention_forward, ring_flash_attn_forward

    dist.init_process_group("nccl", init_method=f"file://{tmp_path}/rendezvous", rank=0, world_size=1)
    try:
        group = dist.new_group([0])
        q = torch.randn(1, 8, 512, 64, device="cuda", dtype=torch.bfloat16)
        k, v = (torch.randn(1, 2, 512, 64, device="cuda", dtype=torch.bfloat16) for _ in range(2))
        ours = ring_attention_forward(None, q, k, v, None, 0.125, sp_group=group, sp_doc_lens=[200, 312])[0]
        theirs = ring_flash_attn_forward(None, q, k, v, None, 0.125, sp_group=group, sp_doc_lens=[200, 312])[0]
        torch.testing.assert_close(theirs, ours, atol=2e-2, rtol=2e-2)
    finally:
        dist.destroy_process_group()
