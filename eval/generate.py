"""Inference: batched greedy decoding with Hugging Face `generate`, and discriminative-head
probabilities. Batches group prompts of similar length (longest first) to limit padding."""
from __future__ import annotations

import torch


def length_batches(prompts: list[list[int]], batch_size: int) -> list[list[int]]:
    """Indices of `prompts` in batches of similar length, longest first."""
    order = sorted(range(len(prompts)), key=lambda i: -len(prompts[i]))
    return [order[i:i + batch_size] for i in range(0, len(order), batch_size)]


def _left_padded(prompts: list[list[int]], pad_id: int, device) -> tuple[torch.Tensor, torch.Tensor]:
    width = max(map(len, prompts))
    ids = torch.full((len(prompts), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(prompts), width), dtype=torch.long)
    for row, p in enumerate(prompts):
        ids[row, width - len(p):] = torch.tensor(p)
        mask[row, width - len(p):] = 1
    return ids.to(device), mask.to(device)


@torch.no_grad()
def greedy_batch(model, tokenizer, prompts: list[list[int]], max_new_tokens: int) -> list[str]:
    """Greedy completions of one batch of prompts (left-padded), special tokens stripped."""
    model.eval()
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    ids, mask = _left_padded(prompts, pad, next(model.parameters()).device)
    out = model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=max_new_tokens, do_sample=False,
                         eos_token_id=tokenizer.eos_token_id, pad_token_id=pad)
    return [tokenizer.decode(row[ids.shape[1]:], skip_special_tokens=True) for row in out]


@torch.no_grad()
def head_probs_batch(model, prompts: list[list[int]]) -> list[list[float]]:
    """The head's class probabilities (softmax; sigmoid for a multi-label head) for a batch.

    Prompts are right-padded: a causal model's last real token never sees the padding.
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
