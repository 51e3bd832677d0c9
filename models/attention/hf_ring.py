"""The ring backends for Hugging Face decoders (transformers 5 `AttentionInterface`).

Load a model with the name `register` returns as `attn_implementation` and call it with
the extra keyword arguments `sp_group` (the SP process group, or None for one rank) and
`sp_doc_lens` (local document lengths from `train.sequence_parallel.shard_batch`); the
decoder passes them down to every attention layer. No attention mask is built for these
backends: causality and document boundaries are the ring's.

Two implementations of the same zigzag ring (`parallel.ring_impl`):
- `ring`: ours (`models/attention/ring.py`) on the block kernel `parallel.ring_kernel`
  names; every device and dtype; the reference.
- `ring_flash_attn`: zhuzilin's ring-flash-attn (`zigzag_ring_flash_attn_func`), CUDA and
  fp16 / bf16 only: its zigzag backward accumulates fp32 `dq` in a buffer that aliases
  its output for fp32 inputs, which gives wrong gradients, so fp32 is refused.
"""
from __future__ import annotations

from functools import partial

import torch
from transformers import AttentionInterface

from models.attention.kernels import check_kernel_name, kernel_for
from models.attention.ring import ring_attention

IMPLEMENTATIONS = ("ring", "ring_flash_attn")


def _check_call(attention_mask, dropout):
    if attention_mask is not None:
        raise ValueError("the ring attention backend takes no attention mask; pass sp_doc_lens instead")
    if dropout:
        raise ValueError("the ring attention backend does not implement attention dropout")


def ring_attention_forward(module, query, key, value, attention_mask, scaling=None, dropout=0.0,
                           sp_group=None, sp_doc_lens=None, ring_kernel="torch", **kwargs):
    _check_call(attention_mask, dropout)
    doc_lens = sp_doc_lens if sp_doc_lens is not None else [query.shape[2]]
    scale = scaling if scaling is not None else query.shape[-1] ** -0.5
    out = ring_attention(query, key, value, list(doc_lens), scale, sp_group, kernel_for(query.device, ring_kernel))
    return out.transpose(1, 2).contiguous(), None


def ring_flash_attn_forward(module, query, key, value, attention_mask, scaling=None, dropout=0.0,
                            sp_group=None, sp_doc_lens=None, **kwargs):
    _check_call(attention_mask, dropout)
    if query.device.type != "cuda" or query.dtype not in (torch.float16, torch.bfloat16):
        raise ValueError(f"parallel.ring_impl=ring_flash_attn needs CUDA fp16 / bf16 tensors, found "
                         f"{query.device.type} {query.dtype} (its fp32 zigzag backward is wrong); "
                         "use parallel.ring_impl=ring")
    if sp_group is None:        # one rank: the ring is one flash call, which ours makes
        return ring_attention_forward(module, query, key, value, None, scaling, sp_doc_lens=sp_doc_lens)
    from ring_flash_attn import zigzag_ring_flash_attn_func

    doc_lens = sp_doc_lens if sp_doc_lens is not None else [query.shape[2]]
    scale = scaling if scaling is not None else query.shape[-1] ** -0.5
    q, k, v = (t.transpose(1, 2) for t in (query, key, value))          # [batch, seq, heads, dim]
    outs, start = [], 0
    for n in doc_lens:
        s = slice(start, start + n)
        outs.append(zigzag_ring_flash_attn_func(q[:, s], k[:, s], v[:, s], softmax_scale=scale, causal=True,
                                                group=sp_group))
        start += n
    return torch.cat(outs, dim=1).contiguous(), None


def register(impl: str = "ring", kernel: str = "torch") -> str:
    """Register `parallel.ring_impl` (with `parallel.ring_kernel` for ours); returns its name."""
    if impl == "ring":
        AttentionInterface.register(impl, partial(ring_attention_forward, ring_kernel=check_kernel_name(kernel)))
    elif impl == "ring_flash_attn":
        AttentionInterface.register(impl, ring_flash_attn_forward)
    else:
        raise ValueError(f"parallel.ring_impl={impl!r}: expected one of {', '.join(IMPLEMENTATIONS)}")
    return impl


register()
