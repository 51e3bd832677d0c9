"""Invariant 1: ring attention equals full causal attention (outputs and dq/dk/dv),
fp32 and bf16, grouped-query attention, packed variable lengths, sp_size 2 and 4,
odd lengths that need padding. Ranks are gloo processes on a free port."""
import itertools
import os

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn.functional as F

from models.attention.kernels import CPUFlashKernel
from models.attention.ring import ring_attention
from tests.conftest import free_port
from train.distributed import join_gloo_group, teardown
from train.sequence_parallel import zigzag_gather, zigzag_index

TOL = {torch.float32: dict(atol=1e-5, rtol=1e-5), torch.bfloat16: dict(atol=2e-2, rtol=2e-2)}
REPORT = os.environ.get("RING_REPORT") == "1"   # print the bf16 error table
CASES = list(itertools.product(
    [torch.float32, torch.bfloat16],
    [(4, 4), (4, 2), (6, 2)],                       # (query heads, key/value heads)
    [[64], [37], [23, 40, 17], [5, 1, 30]],         # documents of one packed row
))


def _reference(q, k, v, docs, scale):
    outs, start = [], 0
    for n in docs:
        s = slice(start, start + n)
        outs.append(F.scaled_dot_product_attention(q[:, :, s], k[:, :, s], v[:, :, s], is_causal=True,
                                                   scale=scale, enable_gqa=True))
        start += n
    return torch.cat(outs, 2)


def _pad_docs(x, docs, multiple):
    parts, start = [], 0
    for n in docs:
        parts += [x[:, :, start:start + n], x.new_zeros(*x.shape[:2], -n % multiple, x.shape[3])]
        start += n
    return torch.cat(parts, 2)


def _unpad_docs(x, docs, multiple):
    parts, start = [], 0
    for n in docs:
        parts.append(x[:, :, start:start + n])
        start += n + (-n % multiple)
    return torch.cat(parts, 2)


def _gather(local, padded_docs, world):
    parts = [torch.empty_like(local) for _ in range(world)]
    dist.all_gather(parts, local.contiguous())
    return zigzag_gather(parts, padded_docs, dim=2)


def _check_case(rank, world, seed, dtype, heads, docs):
    hq, hkv = heads
    gen = torch.Generator().manual_seed(seed)       # identical on every rank
    total, dim, scale = sum(docs), 16, 0.3
    q, dout = (torch.randn(2, hq, total, dim, generator=gen).to(dtype) for _ in range(2))
    k, v = (torch.randn(2, hkv, total, dim, generator=gen).to(dtype) for _ in range(2))
    ref_in = [t.clone().requires_grad_() for t in (q, k, v)]
    ref = _reference(*ref_in, docs, scale)
    ref_grads = torch.autograd.grad(ref, ref_in, dout)

    m = 2 * world
    padded_docs = [n + (-n % m) for n in docs]
    idx = zigzag_index(padded_docs, world, rank)
    local_in = [_pad_docs(t, docs, m)[:, :, idx].clone().requires_grad_() for t in (q, k, v)]
    out = ring_attention(*local_in, [n // world for n in padded_docs], scale, dist.group.WORLD, CPUFlashKernel())
    grads = torch.autograd.grad(out, local_in, _pad_docs(dout, docs, m)[:, :, idx])

    got = [_unpad_docs(_gather(t, padded_docs, world), docs, m) for t in (out, *grads)]
    if dtype == torch.float32:
        for name, a, b in zip(("out", "dq", "dk", "dv"), got, (ref, *ref_grads)):
            torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5,
                                       msg=lambda m, n=name: f"{n} fp32 heads={heads} docs={docs}: {m}")
        return
    # bf16: every ring step returns a bf16-rounded block before the float32 merge, so the ring
    # sits a few bf16 roundings from the float32 truth; the bound is relative to the tensor's scale.
    exact_in = [t.float().requires_grad_() for t in (q, k, v)]
    exact = _reference(*exact_in, docs, scale)
    truth = (exact, *torch.autograd.grad(exact, exact_in, dout.float()))
    for name, a, b, t in zip(("out", "dq", "dk", "dv"), got, (ref, *ref_grads), truth):
        assert a.dtype == torch.bfloat16
        size = max(1.0, t.abs().max().item())
        ring_err, single_err = ((x.float() - t).abs().max().item() / size for x in (a, b))
        if rank == 0 and REPORT:
            print(f"bf16 sp={world} {name} heads={heads} docs={docs}: ring {ring_err:.4f} single {single_err:.4f}")
        assert ring_err <= 2e-2, (name, heads, docs, ring_err, single_err)


def _worker(rank, world, port):
    join_gloo_group(rank, world, port)
    try:
        for seed, case in enumerate(CASES):
            _check_case(rank, world, seed, *case)
        dist.barrier()
    finally:
        teardown()


@pytest.mark.parametrize("world", [2, 4])
def test_ring_equals_full_causal_attention(world):
    mp.spawn(_worker, args=(world, free_port()), nprocs=world, join=True)


def test_one_rank_needs_no_process_group():
    for dtype, heads, docs in CASES[:8]:
        q = torch.randn(1, heads[0], sum(docs), 8, dtype=dtype)
        k = torch.randn(1, heads[1], sum(docs), 8, dtype=dtype)
        torch.testing.assert_close(ring_attention(q, k, k, docs, 0.5, None, CPUFlashKernel()),
                                   _reference(q, k, k, docs, 0.5), **TOL[dtype])


@pytest.mark.parametrize("world", [2, 4])
def test_the_loopback_ring_in_one_process_equals_one_kernel_call(world):
    from train.tools.ring_loopback import simulated_ring

    q = torch.randn(1, 4, 96, 8, requires_grad=True)
    k, v = (torch.randn(1, 2, 96, 8, requires_grad=True) for _ in range(2))
    dout = torch.randn(1, 4, 96, 8)
    out, dq, dk, dv = simulated_ring(q.detach(), k.detach(), v.detach(), dout, world, 0.3, CPUFlashKernel())
    ref = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=0.3, enable_gqa=True)
    torch.testing.assert_close(out, ref, **TOL[torch.float32])
    for got, want in zip((dq, dk, dv), torch.autograd.grad(ref, (q, k, v), dout)):
        torch.testing.assert_close(got, want, **TOL[torch.float32])
