"""The ring backend for Hugging Face decoders (transformers 5 `AttentionInterface`).

Load a model with `attn_implementation="ring"` and call it with the extra
keyword arguments `sp_group` (the SP process group, or None for one rank) and
`sp_doc_lens` (local document lengths from `train.sequence_parallel.shard_batch`);
the decoder passes them down to every attention layer. No attention mask is
built for this backend: causality and document boundaries are the ring's.
"""
from __future__ import annotations

from transformers import AttentionInterface

from models.attention.kernels import kernel_for
from models.attention.ring import ring_attention

NAME = "ring"


def ring_attention_forward(module, query, key, value, attention_mask, scaling=None, dropout=0.0,
                           sp_group=None, sp_doc_lens=None, **kwargs):
    if attention_mask is not None:
        raise ValueError("the ring attention backend takes no attention mask; pass sp_doc_lens instead")
    if dropout:
        raise ValueError("the ring attention backend does not implement attention dropout")
    doc_lens = sp_doc_lens if sp_doc_lens is not None else [query.shape[2]]
    scale = scaling if scaling is not None else query.shape[-1] ** -0.5
    out = ring_attention(query, key, value, list(doc_lens), scale, sp_group, kernel_for(query.device))
    return out.transpose(1, 2).contiguous(), None


def register() -> str:
    AttentionInterface.register(NAME, ring_attention_forward)
    return NAME


register()
