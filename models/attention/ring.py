"""Zigzag ring attention: exact causal attention over a sequence split across an SP group.

Each rank holds query/key/value for chunks r and 2W-1-r of every sequence.
Key/value blocks travel around the ring; at each step a rank attends its
queries to the block it holds with the single-device kernel and merges the
partial result through the log-sum-exp. Backward sends the key/value
gradients around the ring with the blocks, so they arrive at their owner.
"""
from __future__ import annotations

import torch
import torch.distributed as dist

from models.attention.kernels import BlockKernel


class RingComm:
    """Send to the next rank of the group and receive from the previous one."""

    def __init__(self, group):
        self.group = group
        self.rank, self.world = dist.get_rank(group), dist.get_world_size(group)
        ranks = dist.get_process_group_ranks(group)
        self.next, self.prev = ranks[(self.rank + 1) % self.world], ranks[(self.rank - 1) % self.world]

    def start(self, tensor: torch.Tensor):
        buf = torch.empty_like(tensor)
        ops = [dist.P2POp(dist.isend, tensor.contiguous(), self.next, self.group),
               dist.P2POp(dist.irecv, buf, self.prev, self.group)]
        return buf, dist.batch_isend_irecv(ops)

    @staticmethod
    def wait(reqs) -> None:
        for r in reqs:
            r.wait()


def _merge(out, lse, block_out, block_lse):
    """Combine two partial softmax-attention results (float32 accumulators)."""
    new_lse = torch.logaddexp(lse, block_lse)
    keep, take = torch.exp(lse - new_lse).unsqueeze(-1), torch.exp(block_lse - new_lse).unsqueeze(-1)
    return out * keep + block_out.float() * take, new_lse


def ring_forward(q, k, v, scale, comm: RingComm | None, kernel: BlockKernel):
    world = comm.world if comm else 1
    rank = comm.rank if comm else 0
    half = q.shape[2] // 2
    kv = torch.stack([k, v])
    out, lse = None, None
    for step in range(world):
        if step + 1 < world:
            incoming, reqs = comm.start(kv)
        if step == 0:
            block_out, lse = kernel.forward(q, k, v, True, scale)
            out = block_out.float()
        elif step <= rank:        # the block holds chunk rank-step < r: all local queries see its first half
            bo, bl = kernel.forward(q, kv[0, :, :, :half], kv[1, :, :, :half], False, scale)
            out, lse = _merge(out, lse, bo, bl)
        else:                     # only the late local chunk sees this block, and all of it
            bo, bl = kernel.forward(q[:, :, half:], kv[0], kv[1], False, scale)
            o2, l2 = _merge(out[:, :, half:], lse[:, :, half:], bo, bl)
            out, lse = torch.cat([out[:, :, :half], o2], 2), torch.cat([lse[:, :, :half], l2], 2)
        if step + 1 < world:
            comm.wait(reqs)
            kv = incoming
    return out.to(q.dtype), lse


def ring_backward(dout, q, k, v, out, lse, scale, comm: RingComm | None, kernel: BlockKernel):
    world = comm.world if comm else 1
    rank = comm.rank if comm else 0
    half = q.shape[2] // 2
    dq = torch.zeros_like(q, dtype=torch.float32)
    kv = torch.stack([k, v])
    dkv, dkv_reqs = None, None
    for step in range(world):
        if step + 1 < world:
            incoming, kv_reqs = comm.start(kv)
        block_dkv = torch.zeros_like(kv, dtype=torch.float32)
        if step == 0:
            bdq, bdk, bdv = kernel.backward(dout, q, k, v, out, lse, True, scale)
            dq += bdq
            block_dkv[0], block_dkv[1] = bdk, bdv
        elif step <= rank:
            bdq, bdk, bdv = kernel.backward(dout, q, kv[0, :, :, :half], kv[1, :, :, :half], out, lse, False, scale)
            dq += bdq
            block_dkv[0, :, :, :half], block_dkv[1, :, :, :half] = bdk, bdv
        else:
            bdq, bdk, bdv = kernel.backward(dout[:, :, half:], q[:, :, half:], kv[0], kv[1], out[:, :, half:],
                                            lse[:, :, half:], False, scale)
            dq[:, :, half:] += bdq
            block_dkv[0], block_dkv[1] = bdk, bdv
        if step > 0:              # gradients of this block from the ranks it visited before
            comm.wait(dkv_reqs)
            block_dkv += dkv
        if world > 1:             # pass them on; after the last step they reach the block's owner
            dkv, dkv_reqs = comm.start(block_dkv)
        else:
            dkv = block_dkv
        if step + 1 < world:
            comm.wait(kv_reqs)
            kv = incoming
    if world > 1:
        comm.wait(dkv_reqs)
    return dq.to(q.dtype), dkv[0].to(k.dtype), dkv[1].to(v.dtype)


class _RingAttention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, scale, comm, kernel):
        out, lse = ring_forward(q, k, v, scale, comm, kernel)
        ctx.save_for_backward(q, k, v, out, lse)
        ctx.scale, ctx.comm, ctx.kernel = scale, comm, kernel
        return out

    @staticmethod
    def backward(ctx, dout):
        q, k, v, out, lse = ctx.saved_tensors
        dq, dk, dv = ring_backward(dout, q, k, v, out, lse, ctx.scale, ctx.comm, ctx.kernel)
        return dq, dk, dv, None, None, None


def ring_attention(q, k, v, doc_lens: list[int], scale: float, group, kernel: BlockKernel) -> torch.Tensor:
    """Causal attention of local zigzag slices [batch, heads, seq, dim]; each document attends to itself."""
    comm = RingComm(group) if group is not None and dist.get_world_size(group) > 1 else None
    if sum(doc_lens) != q.shape[2]:
        raise ValueError(f"sp_doc_lens {doc_lens} sum to {sum(doc_lens)}, but the local sequence has {q.shape[2]}")
    outs, start = [], 0
    for n in doc_lens:
        sl = slice(start, start + n)
        outs.append(_RingAttention.apply(q[:, :, sl], k[:, :, sl], v[:, :, sl], scale, comm, kernel))
        start += n
    return torch.cat(outs, dim=2)
