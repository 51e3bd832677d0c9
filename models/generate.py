"""Inference: greedy decoding with Hugging Face `generate`, and discriminative-head probabilities.

Memory: neither path ever builds a padding mask. A padded batch with a mask makes SDPA take its
math path, which materialises a [batch, heads, length, length] attention matrix: 33 GB for a
batch of 32k-token prompts of the tiny model. So greedy decoding batches only prompts of equal
length (no padding, causal flash path), and head inference right-pads without a mask (a causal
model's last real token never sees the padding after it). Either way memory grows linearly with
the prompt length, as in training.
"""
from __future__ import annotations

from itertools import groupby

import torch


def length_batches(prompts: list[list[int]], batch_size: int, equal_length: bool = False,
                   max_tokens: int | None = None) -> list[list[int]]:
    """Indices of `prompts` in batches, longest first: at most `batch_size` prompts and, with
    `max_tokens`, at most that many padded tokens (rows x longest), but always at least one prompt.
    With `equal_length`, a batch holds prompts of one length only."""
    order = sorted(range(len(prompts)), key=lambda i: -len(prompts[i]))
    groups = [list(g) for _, g in groupby(order, key=lambda i: len(prompts[i]))] if equal_length else [order]
    batches: list[list[int]] = []
    for group in groups:
        batch: list[int] = []
        for i in group:           # longest first: a batch's first prompt sets its width
            if batch and (len(batch) == batch_size or
                          (max_tokens is not None and (len(batch) + 1) * len(prompts[batch[0]]) > max_tokens)):
                batches.append(batch)
                batch = []
            batch.append(i)
        batches.append(batch)
    return [b for b in batches if b]


@torch.no_grad()
def greedy_batch(model, tokenizer, prompts: list[list[int]], max_new_tokens: int) -> list[str]:
    """Greedy completions of prompts of one length, special tokens stripped."""
    if len({len(p) for p in prompts}) != 1:
        raise ValueError(f"greedy_batch decodes prompts of one length together (no padding mask), found "
                         f"lengths {sorted({len(p) for p in prompts})}; batch them with length_batches(..., "
                         "equal_length=True)")
    model.eval()
    ids = torch.tensor(prompts, device=next(model.parameters()).device)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    out = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=max_new_tokens,
                         do_sample=False, eos_token_id=tokenizer.eos_token_id, pad_token_id=pad)
    return [tokenizer.decode(row[ids.shape[1]:], skip_special_tokens=True) for row in out]


@torch.no_grad()
def head_probs_batch(model, prompts: list[list[int]]) -> list[list[float]]:
    """The head's class probabilities (softmax; sigmoid for a multi-label head) for a batch.

    Prompts are right-padded and no mask is passed (see the module's docstring).
    `model` is a `models.heads.PooledClassifier`.
    """
    model.eval()
    device = next(model.parameters()).device
    width = max(map(len, prompts))
    ids = torch.zeros((len(prompts), width), dtype=torch.long)
    for row, p in enumerate(prompts):
        ids[row, :len(p)] = torch.tensor(p)
    positions = torch.arange(width)[None].expand(len(prompts), width)
    last = torch.tensor([len(p) - 1 for p in prompts])
    logits = model(ids.to(device), positions.to(device), last.to(device)).float()
    multi = model.model.config.problem_type == "multi_label_classification"
    return (logits.sigmoid() if multi else logits.softmax(-1)).tolist()
