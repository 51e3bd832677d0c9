"""Where the device time goes in the cases where `train.tools.gpu_check` misses its targets.

    python -m train.tools.gpu_profile --out gpu_profile.json       # about a minute on one H100 / H200

1. The training step (Qwen3-0.6B shape, bf16, gradient checkpointing, 32k tokens) through HF's `sdpa`
   and through the ring backend at sp 1: device time by kernel family (attention forward, attention
   backward, matrix products, the rest), how much of the wall time the GPU was busy, the attention
   kernels' achieved TFLOP/s, and the slowest kernels by name (which attention kernel each backend ran).
   The same step of a SmolLM2-135M-shaped model at 4k tokens (`--small-step-tokens`), with and without
   checkpointing: a small model's step is many small kernels, and the busy share says whether the
   host keeps the GPU fed.
2. The simulated ring at sp 2 / 4 / 8 against one kernel call on the whole sequence: launches, busy
   share, mean attention kernel time, families.

Kernels are timed by torch.profiler (CUPTI); no hardware counters are read.
"""
from __future__ import annotations

import argparse
import json
import time
from collections import Counter

import torch
from torch.profiler import ProfilerActivity, profile

from train.tools.gpu_check import (
    QWEN3_0_6B,
    _empty_cache,
    _sync,
    attention_inputs,
    print_table,
    random_batch,
    training_step,
)

# SmolLM2-135M's dimensions in the Qwen3 architecture random_qwen3 builds (which adds q/k norms).
SMOLLM2_135M = dict(hidden_size=576, intermediate_size=1536, num_hidden_layers=30, num_attention_heads=9,
                    num_key_value_heads=3, head_dim=64, vocab_size=49152, max_position_embeddings=8192,
                    rope_theta=1e5, tie_word_embeddings=True)
FAMILIES = ("attention forward", "attention backward", "matrix products", "other")
_ATTENTION = ("flash", "fmha", "sdpa", "attention", "attn")
_BACKWARD = ("bwd", "bprop", "backward", "cutlassb", "dgrad")
_MATMUL = ("gemm", "xmma", "nvjet", "cutlass", "wgmma", "matmul")


def family(kernel_name: str) -> str:
    """The kernel family of a CUDA kernel's name, as cuDNN, cuBLAS, CUTLASS and PyTorch's flash kernels
    name them (e.g. `pytorch_flash::flash_bwd_dq_dk_dv_loop_seqk_parallel_kernel` is attention backward)."""
    name = kernel_name.lower()
    if any(word in name for word in _ATTENTION):
        return "attention backward" if any(word in name for word in _BACKWARD) else "attention forward"
    return "matrix products" if any(word in name for word in _MATMUL) else "other"


def summarize(kernels: list[tuple[str, float]], wall_s: float, top: int = 8) -> dict:
    """kernels: (name, device seconds) per launch. Totals per family, busy share of the wall time,
    and the `top` kernels by total time."""
    by_family, by_name, calls = Counter(), Counter(), Counter()
    for name, seconds in kernels:
        by_family[family(name)] += seconds
        by_name[name] += seconds
        calls[name] += 1
    busy = sum(by_family.values())
    return {"wall_s": wall_s, "busy_s": busy, "busy_share": busy / wall_s if wall_s else None,
            "launches": len(kernels), "families_s": {f: by_family[f] for f in FAMILIES},
            "top_kernels": [{"name": n[:120], "calls": calls[n], "total_s": s, "mean_ms": 1e3 * s / calls[n],
                             "family": family(n)} for n, s in by_name.most_common(top)]}


def profiled(fn, device) -> dict:
    """Run fn once (after one untimed run) under torch.profiler: its kernels and wall time, summarized."""
    fn()
    _sync()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        start = time.perf_counter()
        fn()
        _sync()
        wall = time.perf_counter() - start
    kernels = [(e.name, e.time_range.elapsed_us() / 1e6) for e in prof.events()   # kernels and copies, not the
               if e.device_type == torch.autograd.DeviceType.CUDA and not e.is_user_annotation]  # ranges over them
    return summarize(kernels, wall)


def attention_flops(shape: dict, tokens: int, checkpointing: bool = True) -> dict:
    """Causal attention FLOPs of the whole step: the backward costs twice the forward, and with
    checkpointing the forward runs twice (once more when backward recomputes the layer)."""
    once = 2 * tokens * tokens * shape["num_attention_heads"] * shape["head_dim"] * shape["num_hidden_layers"]
    return {"attention forward": (2 if checkpointing else 1) * once, "attention backward": 2 * once}


def profile_step(tokens: int, device, shape: dict = QWEN3_0_6B, attns=("sdpa", "ring"), checkpointing=(True,),
                 chunk: int = 1024, name: str = "Qwen3-0.6B") -> list[dict]:
    batch, rows = random_batch(shape, tokens, device), []
    for attn in attns:
        for ckpt in checkpointing:
            flops = attention_flops(shape, tokens, ckpt)
            step, _, model = training_step(shape, attn, batch, chunk, device, checkpointing=ckpt)
            row = {"case": f"{name} step {attn}{'' if ckpt else ' no ckpt'}", "tokens": tokens,
                   **profiled(step, device)}
            row["attention_tflops"] = {f: flops[f] / row["families_s"][f] / 1e12 if row["families_s"][f] else None
                                       for f in flops}
            rows.append(row)
            del step, model
            _empty_cache(device)
    return rows


def profile_ring(tokens: int, worlds, device, heads=(16, 8), dim=128) -> list[dict]:
    from models.attention.kernels import kernel_for
    from train.tools.ring_loopback import simulated_ring

    kernel, scale = kernel_for(device), dim ** -0.5
    q, k, v, dout = attention_inputs(tokens, heads, dim, device, torch.bfloat16, seed=1)

    def single():
        out, lse = kernel.forward(q, k, v, True, scale)
        return kernel.backward(dout, q, k, v, out, lse, True, scale)

    rows = [{"case": "one kernel call", "tokens": tokens, **profiled(single, device)}]
    for world in worlds:
        rows.append({"case": f"ring sp {world}", "tokens": tokens,
                     **profiled(lambda w=world: simulated_ring(q, k, v, dout, w, scale, kernel), device)})
    return rows


def table_rows(rows: list[dict]) -> list[dict]:
    return [{"case": r["case"], "wall_ms": 1e3 * r["wall_s"], "busy": r["busy_share"], "launches": r["launches"],
             **{f"{f} ms": 1e3 * s for f, s in r["families_s"].items()}} for r in rows]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--step-tokens", type=int, default=32768)
    parser.add_argument("--small-step-tokens", type=int, default=4096)
    parser.add_argument("--ring-tokens", type=int, default=32768)
    parser.add_argument("--sp", type=int, nargs="+", default=[2, 4, 8])
    parser.add_argument("--out", default="gpu_profile.json")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("train.tools.gpu_profile needs a CUDA GPU; torch.cuda.is_available() is False here")
    device = torch.device("cuda")
    steps = profile_step(args.step_tokens, device) + profile_step(
        args.small_step_tokens, device, SMOLLM2_135M, ("sdpa",), (True, False), name="SmolLM2-135M")
    report = {"device": torch.cuda.get_device_name(device), "torch": torch.__version__, "step": steps,
              "ring": profile_ring(args.ring_tokens, args.sp, device)}
    with open(args.out, "w") as f:
        json.dump(report, f, indent=1)
    print_table("device time by kernel family", table_rows(steps + report["ring"]))
    for row in steps + report["ring"][:1] + report["ring"][-1:]:
        print_table(f"slowest kernels: {row['case']}", row["top_kernels"])
    print(f"figures in {args.out}")


if __name__ == "__main__":
    main()
