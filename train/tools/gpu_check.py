"""One command that proves a GPU: kernels, the ring, a full training step, vLLM.

    python -m train.tools.gpu_check --out gpu_check.json          # about 3 minutes on one H100
    python -m train.tools.gpu_check --lengths 2048 --quick         # the same checks, small (pytest -m gpu)

1. Block kernels (PyTorch's CUDA flash attention; flash-attn's when installed) against an
   fp32 reference (SDPA's math path, a block of queries at a time), bf16, causal and not,
   grouped-query heads, forward and backward: relative errors ||x - ref|| / ||ref||.
2. The ring at sp 2 / 4 / 8 simulated in one process (`train.tools.ring_loopback`: every rank a
   thread, the same ring code) against one kernel call on the whole sequence: errors and
   time relative to the single call.
3. One training step (forward, backward, AdamW) of a randomly initialised Qwen3-0.6B-shaped
   model in bf16 with gradient checkpointing, through our ring backend at sp 1 and through
   HF's `sdpa`: tokens/s, model FLOPs utilisation against the GPU's bf16 peak, peak memory,
   and the memory plan's (`train.tools.plan`) activation terms next to the measured growth.
4. vLLM greedy against HF greedy on the tiny model, when vLLM is installed.

Prints a table per check and writes all figures as JSON.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import re
import subprocess
import time

import torch
import torch.nn.functional as F

from models.attention.kernels import kernel_for

BF16_PEAK_TFLOPS = {"H100": 989, "H200": 989, "H800": 989, "H20": 148, "A100": 312, "A800": 312}
BF16_REL_TOL = 2e-2          # ||bf16 - fp32 reference|| / ||reference||
QWEN3_0_6B = dict(hidden_size=1024, intermediate_size=3072, num_hidden_layers=28, num_attention_heads=16,
                  num_key_value_heads=8, head_dim=128, vocab_size=151936, max_position_embeddings=40960,
                  rope_theta=1e6, tie_word_embeddings=True)


def rel_err(x: torch.Tensor, ref: torch.Tensor) -> float:
    return float((x.float() - ref.float()).norm() / ref.float().norm().clamp_min(1e-30))


def timed(fn, repeat: int = 3) -> float:
    """Median seconds of fn() after one warm-up call."""
    fn()
    times = []
    for _ in range(repeat):
        _sync()
        t0 = time.perf_counter()
        fn()
        _sync()
        times.append(time.perf_counter() - t0)
    return sorted(times)[len(times) // 2]


def _sync():
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def kernels_under_test(device: torch.device) -> dict:
    """PyTorch's kernel for the device, and flash-attn's where it is installed (CUDA only)."""
    names = ["torch"] + (["flash_attn"] if device.type == "cuda" and importlib.util.find_spec("flash_attn") else [])
    return {name: kernel_for(device, name) for name in names}


def attention_inputs(length: int, heads: tuple[int, int], dim: int, device, dtype, seed: int = 0):
    gen = torch.Generator(device=device).manual_seed(seed)
    q = torch.randn(1, heads[0], length, dim, device=device, dtype=dtype, generator=gen)
    k, v, dout = (torch.randn(1, h, length, dim, device=device, dtype=dtype, generator=gen)
                  for h in (heads[1], heads[1], heads[0]))
    return q, k, v, dout


def fp32_reference(q, k, v, dout, causal: bool, scale: float, block: int = 2048):
    """out, dq, dk, dv in fp32 through SDPA's math path, `block` queries at a time (a 32k x 32k
    score matrix of 16 heads would take 68 GB)."""
    q, k, v, dout = (t.float() for t in (q, k, v, dout))
    k, v = k.requires_grad_(), v.requires_grad_()
    n, outs, dqs = q.shape[2], [], []
    for a in range(0, n, block):
        qb = q[:, :, a:a + block].clone().requires_grad_()
        mask = None
        if causal:
            mask = torch.arange(a, a + qb.shape[2], device=q.device)[:, None] >= torch.arange(n, device=q.device)
        with torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.MATH):
            ob = F.scaled_dot_product_attention(qb, k, v, attn_mask=mask, scale=scale, enable_gqa=True)
        ob.backward(dout[:, :, a:a + block])
        outs.append(ob.detach())
        dqs.append(qb.grad)
    return torch.cat(outs, 2), torch.cat(dqs, 2), k.grad, v.grad


def check_kernels(lengths, device, heads=(16, 8), dim=128) -> list[dict]:
    rows = []
    scale = dim ** -0.5
    dtype = torch.bfloat16
    for name, kernel in kernels_under_test(device).items():
        for length in lengths:
            for causal in (True, False):
                q, k, v, dout = attention_inputs(length, heads, dim, device, dtype)
                ref = fp32_reference(q, k, v, dout, causal, scale)
                out, lse = kernel.forward(q, k, v, causal, scale)
                grads = kernel.backward(dout, q, k, v, out, lse, causal, scale)
                errs = [rel_err(x, r) for x, r in zip((out, *grads), ref)]
                rows.append({"kernel": name, "tokens": length, "causal": causal, "heads": list(heads),
                             "rel_err": dict(zip(("out", "dq", "dk", "dv"), errs)),
                             "ok": max(errs) <= BF16_REL_TOL})
                del q, k, v, dout, ref, out, lse, grads
    return rows


def check_ring(length: int, worlds, device, heads=(16, 8), dim=128, repeat: int = 3) -> list[dict]:
    from train.tools.ring_loopback import simulated_ring

    kernel = kernel_for(device)
    scale = dim ** -0.5
    q, k, v, dout = attention_inputs(length, heads, dim, device, torch.bfloat16, seed=1)

    def single():
        out, lse = kernel.forward(q, k, v, True, scale)
        return (out, *kernel.backward(dout, q, k, v, out, lse, True, scale))

    reference = single()
    single_s = timed(single, repeat)
    rows = []
    for world in worlds:
        ring = simulated_ring(q, k, v, dout, world, scale, kernel)
        errs = [rel_err(x, r) for x, r in zip(ring, reference)]
        ring_s = timed(lambda w=world: simulated_ring(q, k, v, dout, w, scale, kernel), repeat)
        rows.append({"sp": world, "tokens": length, "rel_err_vs_single": dict(zip(("out", "dq", "dk", "dv"), errs)),
                     "single_call_s": single_s, "ring_s": ring_s, "ring_over_single": ring_s / single_s,
                     "ok": max(errs) <= BF16_REL_TOL})
    return rows


def random_qwen3(shape: dict, attn: str, device, dtype=torch.bfloat16, checkpointing: bool = True):
    from transformers import AutoModelForCausalLM, Qwen3Config

    import models.attention.hf_ring  # noqa: F401  (registers the ring backend)
    from train.engine import enable_checkpointing

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(Qwen3Config(**shape), attn_implementation=attn, dtype=dtype)
    if checkpointing:
        enable_checkpointing(model)
    return model.to(device)


def model_flops(cfg: dict, tokens: int, layer_params: int) -> float:
    """Forward + backward (3x forward) matmul FLOPs, causal attention counted once per pair,
    no recomputation (model FLOPs, not hardware FLOPs)."""
    attn = 2 * tokens * tokens * cfg["num_attention_heads"] * cfg["head_dim"]
    forward = 2 * tokens * (cfg["num_hidden_layers"] * layer_params + cfg["vocab_size"] * cfg["hidden_size"])
    return 3 * (forward + cfg["num_hidden_layers"] * attn)


def peak_tflops(device) -> float | None:
    """Dense bf16 peak of the GPU model named in the device name (SXM figures), else None."""
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else ""
    words = set(re.split(r"[\s-]+", name))
    hits = [v for k, v in BF16_PEAK_TFLOPS.items() if k in words]
    return float(hits[0]) if hits else None


def planned_step_bytes(shape: dict, tokens: int, chunk: int) -> dict:
    """train.tools.plan's terms for this step: one GPU, no ZeRO, gradient checkpointing, bf16."""
    import tempfile

    from transformers import Qwen3Config

    from train.memory_plan import Layout, model_shape, stage_terms

    with tempfile.TemporaryDirectory() as d:
        Qwen3Config(**shape).save_pretrained(d)
        shape = model_shape(d, "generative", dtype="bf16")
    lay = Layout(world=1, ranks_per_node=1, zero_stage=0, offload_param=False, offload_optimizer=False,
                 gradient_checkpointing=True, generative=True, chunk_tokens=chunk)
    terms = stage_terms(shape, lay, tokens, 1, labelled=tokens)
    return {"activations": terms["activations"], "passing": terms["passing"], "layer_params": shape.layer_params}


def check_training_step(tokens: int, device, shape: dict = QWEN3_0_6B, attns=("ring", "sdpa"), chunk: int = 1024,
                        repeat: int = 2, peak: float | None = None) -> list[dict]:
    plan = planned_step_bytes(shape, tokens, chunk)
    flops = model_flops(shape, tokens, plan["layer_params"])
    batch = random_batch(shape, tokens, device)
    rows = []
    for attn in attns:
        seconds, growth = _time_training_step(shape, attn, batch, chunk, device, repeat)
        rows.append({"attn": attn, "tokens": tokens, "step_s": seconds, "tokens_per_s": tokens / seconds,
                     "model_tflops": flops / 1e12, "mfu": flops / seconds / (peak * 1e12) if peak else None,
                     "peak_gb": growth["peak"] / 1e9, "measured_activation_gb": growth["activations"] / 1e9,
                     "planned_activation_gb": (plan["activations"] + plan["passing"]) / 1e9})
        _empty_cache(device)
    return rows


def random_batch(shape: dict, tokens: int, device) -> dict:
    gen = torch.Generator().manual_seed(0)
    ids = torch.randint(3, shape["vocab_size"], (1, tokens), generator=gen).to(device)
    return {"input_ids": ids, "position_ids": torch.arange(tokens, device=device)[None],
            "shift_labels": torch.cat([ids[:, 1:], torch.full((1, 1), -100, device=device)], 1)}


def training_step(shape: dict, attn: str, batch: dict, chunk: int, device, checkpointing: bool = True):
    """(step, forward_backward, model): one AdamW step of a random model of `shape` on `batch`, and
    its forward + backward alone. The optimizer state is allocated by a first step, here."""
    from models.response_lm import ResponseLM

    model = ResponseLM(random_qwen3(shape, attn, device, checkpointing=checkpointing), chunk)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-5)

    def forward_backward():
        loss, n = model(**batch)
        (loss / n).backward()

    def step():
        forward_backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    step()
    return step, forward_backward, model


def _time_training_step(shape: dict, attn: str, batch: dict, chunk: int, device, repeat: int):
    step, forward_backward, model = training_step(shape, attn, batch, chunk, device)
    seconds = timed(step, repeat)
    growth = measured_growth(forward_backward, device)
    grads = sum(p.numel() * p.element_size() for p in model.parameters())
    return seconds, {**growth, "activations": growth["growth"] - grads}


def measured_growth(forward_backward, device) -> dict:
    """Peak memory of forward + backward, and its growth over what was allocated before (the
    growth less the gradients is what the plan's activation and logits terms predict)."""
    if device.type != "cuda":
        return {"peak": float("nan"), "growth": float("nan")}
    _empty_cache(device)
    torch.cuda.reset_peak_memory_stats(device)
    before = torch.cuda.memory_allocated(device)
    forward_backward()
    peak = torch.cuda.max_memory_allocated(device)
    return {"peak": peak, "growth": peak - before}


def _empty_cache(device):
    if device.type == "cuda":
        torch.cuda.empty_cache()


def check_vllm() -> dict:
    if importlib.util.find_spec("vllm") is None:
        return {"skipped": "vLLM is not installed (pip install -e '.[gpu]')"}
    from eval.backends.vllm import vllm_generate
    from models.builders import load_causal_lm, load_tokenizer, resolve_model_path
    from models.generate import greedy_batch

    path = resolve_model_path("embedded:qwen3-tiny")
    tok = load_tokenizer(path)
    texts = ["<|im_start|>user\n你好<|im_end|>\n<|im_start|>assistant\n",
             "<|im_start|>user\n摘要是否忠实于原文？<|im_end|>\n<|im_start|>assistant\n"]
    model = load_causal_lm(path).cuda()
    prompts = [tok(t)["input_ids"] for t in texts]
    ours = [greedy_batch(model, tok, [p], 16)[0] for p in prompts]   # prompts of unequal length
    theirs = vllm_generate(path, prompts, 16, yarn="none")
    return {"prompts": len(texts), "ok": ours == theirs}


def _fmt(value) -> str:
    if isinstance(value, float):
        return f"{value:.3g}"
    if isinstance(value, dict):
        return " ".join(f"{k} {_fmt(v)}" for k, v in value.items())
    return str(value)


def print_table(title: str, rows: list[dict]) -> None:
    print(f"\n## {title}")
    if not rows:
        return
    cols = list(rows[0])
    cells = [[_fmt(r.get(c)) for c in cols] for r in rows]
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(cols)]
    print("  ".join(c.ljust(w) for c, w in zip(cols, widths)))
    for row in cells:
        print("  ".join(v.ljust(w) for v, w in zip(row, widths)))


def nvidia_driver() -> str | None:
    """The driver version nvidia-smi reports, or None where it cannot be run."""
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return out.strip().splitlines()[0] if out.strip() else None


def machine_facts(device) -> dict:
    import transformers

    return {"device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
            "driver": nvidia_driver() if device.type == "cuda" else None, "cuda": torch.version.cuda,
            "torch": torch.__version__, "transformers": transformers.__version__}


def run_checks(lengths, ring_tokens: int, worlds, step_tokens: int, device, peak: float | None) -> dict:
    report = {**machine_facts(device), "peak_bf16_tflops": peak or peak_tflops(device)}
    report["kernels"] = check_kernels(lengths, device)
    print_table("block kernels vs fp32 reference (relative error)", report["kernels"])
    report["ring"] = check_ring(ring_tokens, worlds, device)
    print_table("simulated ring vs one kernel call (bf16)", report["ring"])
    report["training_step"] = check_training_step(step_tokens, device, peak=report["peak_bf16_tflops"])
    print_table("training step, Qwen3-0.6B shape, bf16, gradient checkpointing", report["training_step"])
    report["vllm"] = check_vllm() if device.type == "cuda" else {"skipped": "needs CUDA"}
    print_table("vLLM greedy vs HF greedy", [report["vllm"]])
    report["ok"] = all(r["ok"] for r in report["kernels"] + report["ring"]) and report["vllm"].get("ok", True)
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lengths", type=int, nargs="+", default=[2048, 16384, 32768], help="kernel check lengths")
    parser.add_argument("--ring-tokens", type=int, default=32768)
    parser.add_argument("--sp", type=int, nargs="+", default=[2, 4, 8], help="simulated ring degrees")
    parser.add_argument("--step-tokens", type=int, default=32768)
    parser.add_argument("--peak-tflops", type=float, help="the GPU's dense bf16 peak, for MFU (default: by name)")
    parser.add_argument("--quick", action="store_true", help="2k tokens everywhere (what `pytest -m gpu` runs)")
    parser.add_argument("--out", default="gpu_check.json")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("train.tools.gpu_check needs a CUDA GPU; torch.cuda.is_available() is False here")
    if args.quick:
        args.lengths, args.ring_tokens, args.step_tokens = [2048], 2048, 2048
    report = run_checks(args.lengths, args.ring_tokens, args.sp, args.step_tokens, torch.device("cuda"),
                        args.peak_tflops)
    with open(args.out, "w") as f:
        json.dump(report, f, indent=1)
    print(f"\n{'all checks hold' if report['ok'] else 'SOME CHECKS FAIL'}; figures in {args.out}")
    raise SystemExit(0 if report["ok"] else 1)


if __name__ == "__main__":
    main()
