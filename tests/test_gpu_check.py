"""`python -m train.tools.gpu_check`'s parts, on CPU at small sizes (the command itself needs CUDA and
runs under `pytest -m gpu` in tests/test_gpu_kernels.py), and the ring options' bad input."""
import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from train.tools import gpu_check

TINY = dict(hidden_size=64, intermediate_size=192, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, head_dim=16, vocab_size=512, max_position_embeddings=4096,
            rope_theta=1e6, tie_word_embeddings=True)


def test_kernel_and_ring_checks_hold_on_cpu():
    cpu = torch.device("cpu")
    kernels = gpu_check.check_kernels([192], cpu, heads=(4, 2), dim=16)
    assert [(r["causal"], r["ok"]) for r in kernels] == [(True, True), (False, True)]
    ring = gpu_check.check_ring(256, [2, 4], cpu, heads=(4, 2), dim=16, repeat=1)
    assert [r["sp"] for r in ring] == [2, 4] and all(r["ok"] for r in ring)
    assert all(max(r["rel_err_vs_single"].values()) < 1e-2 for r in ring)


def test_model_flops_match_pytorchs_flop_counter():
    """The MFU numerator: PyTorch counts every matmul of forward + backward (attention as
    non-causal); ours counts causal attention once per pair, so add the masked half back."""
    tokens = 256
    model = gpu_check.random_qwen3(TINY, "eager", torch.device("cpu"), torch.float32)   # attention as matmuls
    model.gradient_checkpointing_disable()
    ids = torch.randint(3, TINY["vocab_size"], (1, tokens))
    with FlopCounterMode(display=False) as counter:
        model(input_ids=ids, labels=ids).loss.backward()
    layer_params = sum(p.numel() for p in model.model.layers[0].parameters())
    ours = gpu_check.model_flops(TINY, tokens, layer_params)
    masked_half = 3 * TINY["num_hidden_layers"] * 2 * tokens * tokens * TINY["num_attention_heads"] * TINY["head_dim"]
    assert ours + masked_half == pytest.approx(counter.get_total_flops(), rel=0.01)


def test_the_training_step_check_runs_a_real_step_on_cpu():
    rows = gpu_check.check_training_step(128, torch.device("cpu"), TINY, chunk=32, repeat=1)
    assert [r["attn"] for r in rows] == ["ring", "sdpa"]
    assert all(r["tokens_per_s"] > 0 and r["planned_activation_gb"] > 0 for r in rows)


def test_ring_options_refuse_what_they_cannot_do():
    from models.attention.hf_ring import register, ring_flash_attn_forward
    from models.attention.kernels import kernel_for

    with pytest.raises(ValueError, match="parallel.ring_impl='zigzag'"):
        register("zigzag")
    with pytest.raises(ValueError, match="parallel.ring_kernel='flash'"):
        register("ring", "flash")
    with pytest.raises(ValueError, match="needs CUDA tensors"):
        kernel_for(torch.device("cpu"), "flash_attn")
    q = torch.randn(1, 4, 8, 16)
    with pytest.raises(ValueError, match="fp32 zigzag backward is wrong"):
        ring_flash_attn_forward(None, q, q, q, None, sp_group=object())
