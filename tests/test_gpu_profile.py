"""`python -m train.tools.gpu_profile`'s parts that need no GPU: kernel families from the names the CUDA
libraries give their kernels, the summary, the attention FLOPs (the command itself runs under
`pytest -m gpu` in tests/test_gpu_kernels.py)."""
import pytest

from train.tools import gpu_check
from train.tools.gpu_profile import FAMILIES, attention_flops, family, summarize


@pytest.mark.parametrize("name, expected", [
    ("void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4>, true>(Flash_fwd_params)",
     "attention forward"),
    ("void pytorch_flash::flash_bwd_dq_dk_dv_loop_seqk_parallel_kernel<Flash_bwd_kernel_traits<128>>(Params)",
     "attention backward"),
    ("void pytorch_flash::flash_bwd_dot_do_o_kernel<true, Flash_bwd_kernel_traits<128>>(Flash_bwd_params)",
     "attention backward"),
    ("cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_7_64x64x128_4x1x1_kernel0_0",
     "attention forward"),
    ("cudnn_generated_fort_native_sdpa_sm90_flash_bprop_wgmma_f16_knob_3_64x128x128_4x2x1_kernel0_0",
     "attention backward"),
    ("fmha_cutlassB_bf16_aligned_64x64_k128_sm80(PyTorchMemEffAttention::AttentionBackwardKernel)",
     "attention backward"),
    ("nvjet_tst_192x192_64x4_2x1_v_bz_coopB_TNN", "matrix products"),
    ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x256x64_warpgroupsize2x1x1", "matrix products"),
    ("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>(int, float)", "other"),
    ("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float>>(at::native::ReduceOp<float>)", "other"),
])
def test_kernel_families_from_real_kernel_names(name, expected):
    assert family(name) == expected


def test_summary_totals_families_and_ranks_kernels():
    kernels = [("flash_fwd_kernel", 0.002), ("flash_bwd_kernel", 0.003), ("nvjet_a", 0.0012), ("nvjet_a", 0.0012),
               ("vectorized_elementwise_kernel", 0.0005)]
    s = summarize(kernels, wall_s=0.01, top=2)
    assert s["families_s"] == pytest.approx(dict(zip(FAMILIES, (0.002, 0.003, 0.0024, 0.0005))))
    assert s["busy_s"] == pytest.approx(0.0079) and s["busy_share"] == pytest.approx(0.79) and s["launches"] == 5
    assert [(k["name"], k["calls"]) for k in s["top_kernels"]] == [("flash_bwd_kernel", 1), ("nvjet_a", 2)]
    assert s["top_kernels"][1]["mean_ms"] == pytest.approx(1.2)


def test_attention_flops_are_the_model_flops_attention_term_plus_the_recomputed_forward():
    shape, tokens = gpu_check.QWEN3_0_6B, 4096
    no_attention = {**shape, "num_attention_heads": 0}
    model_attention = (gpu_check.model_flops(shape, tokens, 1000) - gpu_check.model_flops(no_attention, tokens, 1000))
    flops = attention_flops(shape, tokens)
    assert sum(flops.values()) == pytest.approx(model_attention * 4 / 3)
    assert flops["attention backward"] == pytest.approx(2 * model_attention / 3)
    assert sum(attention_flops(shape, tokens, checkpointing=False).values()) == pytest.approx(model_attention)
