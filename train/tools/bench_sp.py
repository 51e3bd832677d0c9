"""Sequence-parallel benchmark for the embedded tiny model on CPU.

    python -m train.tools.bench_sp --lengths 16384 32768 --out bench_sp.json

For each length: training step time (forward + backward, response-only loss)
and per-rank peak activation memory at sp 1 and sp 2, and ring-attention
forward + backward time against the single-process CPU flash kernel on the
same total length. sp=1 runs one process with every core's threads; sp=2 runs
two gloo processes with one thread each, so both use the same cores.
Memory is reported twice: how far one warm step lifts the process's peak RSS
above its RSS before the step (what a user's machine sees; workers fix glibc's
mmap threshold as the trainer does on CPU, so freed activations leave RSS), and
the bytes autograd saves for backward (the activations that sequence
parallelism divides). Below about 8k tokens per rank the tiny model's tensors
fall under that 1 MiB threshold and reuse heap the warm-up step already grew, so
there the RSS figure undercounts; the saved bytes do not.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn.functional as F

from models.attention.hf_ring import register
from models.attention.kernels import CPUFlashKernel
from models.attention.ring import ring_attention
from models.builders import load_causal_lm, resolve_model_path
from models.loss import token_loss_sum
from train.distributed import free_port, join_gloo_group, teardown
from train.host_memory import current_rss, peak_rss, reset_peak_rss, return_freed_memory
from train.sequence_parallel import shard_batch

MB = 2**20


def _rank(rank, measure, world, port, threads, length, repeat, queue):
    """A spawned rank: join the gloo group (sp > 1), put what `measure` returns on the queue, and
    free the group before the process exits (see train.distributed.teardown)."""
    torch.set_num_threads(threads)
    if world > 1:
        join_gloo_group(rank, world, port)
    try:
        queue.put(measure(rank, world, dist.group.WORLD if world > 1 else None, length, repeat))
    finally:
        teardown()


def _saved_for_backward(step) -> int:
    """Bytes of the distinct storages autograd saves for backward during one step: the activation
    memory that sequence parallelism divides, free of the allocator noise in RSS."""
    seen: dict[int, int] = {}

    def pack(t):
        storage = t.untyped_storage()
        seen[storage.data_ptr()] = storage.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        step()
    return sum(seen.values())


def _timed(fn, warmup: int, repeat: int) -> float:
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) if times else float("nan")


def _measure_step(rank, world, group, length, repeat) -> dict:
    return_freed_memory()                     # as the trainer does on CPU
    if world > 1:
        attn = register()
    else:
        attn = "sdpa"
    model = load_causal_lm(resolve_model_path("embedded:qwen3-tiny"), "float32", attn)
    gen = torch.Generator().manual_seed(0)
    ids = torch.randint(3, model.config.vocab_size, (1, length), generator=gen)
    labels = torch.full((1, length), -100)
    labels[0, -257:-1] = ids[0, -256:]
    row = {"input_ids": ids, "shift_labels": labels, "position_ids": torch.arange(length)[None]}
    kwargs = {}
    if world > 1:
        row = shard_batch(row, world, rank, pad_id=0, mode="zigzag")
        kwargs = {"sp_group": group, "sp_doc_lens": row.pop("sp_doc_lens")}
        row.pop("n_real_tokens")

    def step():
        loss, _ = token_loss_sum(model, row, **kwargs)
        loss.backward()
        model.zero_grad(set_to_none=True)
        if group is not None:
            dist.barrier(group)

    seconds = _timed(step, warmup=1, repeat=repeat)     # repeat=0: the warm-up step alone
    base = current_rss()
    if not reset_peak_rss():
        raise RuntimeError("the memory figures need Linux's /proc/self/clear_refs to reset the peak RSS "
                           "before the measured step; it could not be written here")
    saved = _saved_for_backward(step)          # the measured step: its peak RSS and its saved bytes
    peak = (peak_rss() - base) / MB
    return {"rank": rank, "step_s": seconds, "activation_mb": peak, "saved_mb": saved / MB}


def _measure_attention(rank, world, group, length, repeat) -> dict:
    gen = torch.Generator().manual_seed(1)
    local = length // world
    q = torch.randn(1, 4, local, 16, generator=gen, requires_grad=True)
    k, v = (torch.randn(1, 2, local, 16, generator=gen, requires_grad=True) for _ in range(2))

    def run():
        if world > 1:
            out = ring_attention(q, k, v, [local], 0.25, group, CPUFlashKernel())
        else:
            out = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=0.25, enable_gqa=True)
        out.sum().backward()
        if group is not None:
            dist.barrier(group)

    return {"rank": rank, "attn_s": _timed(run, warmup=1, repeat=repeat)}


def launch(measure, world: int, threads: int, length: int, repeat: int) -> list[dict]:
    """`measure(rank, world, group, length, repeat)` on `world` spawned ranks, their rows by rank."""
    port = free_port()
    ctx = mp.get_context("spawn")
    queue = ctx.SimpleQueue()
    mp.start_processes(_rank, args=(measure, world, port, threads, length, repeat, queue), nprocs=world,
                       join=True, start_method="spawn")
    return sorted((queue.get() for _ in range(world)), key=lambda r: r["rank"])


def bench(lengths: list[int], repeat: int) -> dict:
    cores = os.cpu_count() or 1
    rows = []
    for length in lengths:
        sp1 = launch(_measure_step, 1, cores, length, repeat)
        sp2 = launch(_measure_step, 2, 1, length, repeat)
        flash = launch(_measure_attention, 1, cores, length, repeat)
        ring = launch(_measure_attention, 2, 1, length, repeat)
        row = {
            "length": length,
            "sp1_step_s": sp1[0]["step_s"], "sp2_step_s": max(r["step_s"] for r in sp2),
            "sp1_activation_mb": sp1[0]["activation_mb"],
            "sp2_activation_mb_per_rank": max(r["activation_mb"] for r in sp2),
            "sp1_saved_mb": sp1[0]["saved_mb"], "sp2_saved_mb_per_rank": max(r["saved_mb"] for r in sp2),
            "flash_fwd_bwd_s": flash[0]["attn_s"], "ring_sp2_fwd_bwd_s": max(r["attn_s"] for r in ring),
        }
        row["step_ratio_sp2_vs_sp1"] = row["sp2_step_s"] / row["sp1_step_s"]
        row["memory_ratio_sp2_vs_sp1"] = row["sp2_activation_mb_per_rank"] / row["sp1_activation_mb"]
        row["saved_ratio_sp2_vs_sp1"] = row["sp2_saved_mb_per_rank"] / row["sp1_saved_mb"]
        row["ring_vs_flash"] = row["ring_sp2_fwd_bwd_s"] / row["flash_fwd_bwd_s"]
        rows.append(row)
        print(format_row(row), flush=True)
    return {"machine": {"cpus": cores, "torch": torch.__version__}, "model": "embedded:qwen3-tiny",
            "targets": {"memory_ratio_sp2_vs_sp1": "<= 0.6", "step_ratio_sp2_vs_sp1": "<= 1.2"},
            "rows": rows}


def format_row(r: dict) -> str:
    return (f"{r['length']:>6d} | step sp1 {r['sp1_step_s']:7.2f}s sp2 {r['sp2_step_s']:7.2f}s "
            f"(x{r['step_ratio_sp2_vs_sp1']:.2f}) | activations sp1 {r['sp1_activation_mb']:7.1f}MB "
            f"sp2/rank {r['sp2_activation_mb_per_rank']:7.1f}MB (x{r['memory_ratio_sp2_vs_sp1']:.2f}) | "
            f"saved for backward sp1 {r['sp1_saved_mb']:6.1f}MB sp2/rank {r['sp2_saved_mb_per_rank']:6.1f}MB "
            f"(x{r['saved_ratio_sp2_vs_sp1']:.2f}) | "
            f"attention fwd+bwd flash {r['flash_fwd_bwd_s']:6.2f}s ring@sp2 {r['ring_sp2_fwd_bwd_s']:6.2f}s "
            f"(x{r['ring_vs_flash']:.2f})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lengths", type=int, nargs="+", default=[16384, 32768])
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--out", default="bench_sp.json")
    args = parser.parse_args()
    result = bench(args.lengths, args.repeat)
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(result, f, indent=2)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
