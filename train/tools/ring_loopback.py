"""The ring on one device: every SP rank in its own thread, blocks handed over in memory.

`LoopbackComm` has `RingComm`'s interface (start a send to the next rank and a receive
into a buffer; wait fills the buffer), so `ring_forward` / `ring_backward` run unchanged
and only the transport differs. One GPU (or the CPU) can thus check the ring at
sp 2 / 4 / 8 against a single kernel call on the whole sequence, and time it.
"""
from __future__ import annotations

import queue
import threading

import torch

from models.attention.kernels import BlockKernel
from models.attention.ring import ring_backward, ring_forward
from train.sequence_parallel import zigzag_gather, zigzag_index


class LoopbackComm:
    def __init__(self, rank: int, world: int, inboxes: list[queue.Queue]):
        self.rank, self.world, self.inboxes = rank, world, inboxes

    def start(self, tensor: torch.Tensor):
        self.inboxes[(self.rank + 1) % self.world].put(tensor.clone())
        buf = torch.empty_like(tensor)
        return buf, [(self.inboxes[self.rank], buf)]

    @staticmethod
    def wait(reqs) -> None:
        for inbox, buf in reqs:
            buf.copy_(inbox.get(timeout=600))


def _run_ranks(world: int, fn) -> list:
    """fn(rank, comm) on `world` threads; the first exception is raised here."""
    inboxes = [queue.Queue() for _ in range(world)]
    results, errors = [None] * world, []

    def body(rank):
        try:
            results[rank] = fn(rank, LoopbackComm(rank, world, inboxes))
        except BaseException as e:          # noqa: BLE001  (re-raised in the caller's thread)
            errors.append(e)

    threads = [threading.Thread(target=body, args=(r,)) for r in range(world)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return results


def simulated_ring(q, k, v, dout, world: int, scale: float, kernel: BlockKernel):
    """Causal attention of whole sequences [batch, heads, seq, dim] through a ring of `world`
    simulated ranks: (out, dq, dk, dv), each reassembled in sequence order."""
    n = [q.shape[2]]
    qs, ks, vs, ds = ([t.index_select(2, zigzag_index(n, world, r).to(t.device)) for r in range(world)]
                      for t in (q, k, v, dout))

    def rank_work(r, comm):
        out, lse = ring_forward(qs[r], ks[r], vs[r], scale, comm, kernel)
        return (out, *ring_backward(ds[r], qs[r], ks[r], vs[r], out, lse, scale, comm, kernel))

    per_rank = _run_ranks(world, rank_work)
    return tuple(zigzag_gather([p[i] for p in per_rank], n, dim=2) for i in range(4))
