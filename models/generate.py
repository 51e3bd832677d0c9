"""Inference: greedy decoding with Hugging Face `generate`, and discriminative-head probabilities.

Memory: neither path ever builds a padding mask. A padded batch with a mask makes SDPA take its
math path, which materialises a [batch, heads, length, length] attention matrix: 33 GB for a
batch of 32k-token prompts of the tiny model. So greedy decoding batches only prompts of equal
length (no padding, causal flash path), and head inference right-pads without a mask (a causal
model's last real token never sees the padding after it). Either way memory grows linearly with
the prompt length, as in training. `eval.padded_batches=true` opts greedy decoding into left-padded
batches with a mask, for many short prompts of different lengths (a judge over a benchmark), where
decoding one length at a time leaves a GPU idle; its answers may differ from unpadded decoding where
two tokens nearly tie (the masked kernel sums in another order).
"""
from __future__ import annotations

from itertools import groupby

import torch

from models.builders import is_encoder_model


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


def unbatched_note(prompts: list[list[int]], batches: list[list[int]], batch_size: int,
                   batch_tokens: int | None = None) -> str | None:
    """One line for a user who asked for batches that greedy decoding cannot make: the prompts differ
    in length, so they decode in more than twice the batches that prompts of any length would fill (a
    judge over RAGTruth: 1,129 batches of 2.3 rows where 23 of 128 would do, 1.3 rows/s on an H200).
    None when the batches are about as full as asked."""
    full = len(length_batches(prompts, batch_size, False, batch_tokens))
    if len(batches) <= 2 * full:
        return None
    return (f"greedy decoding batches prompts of one length only: {len(prompts)} prompts of "
            f"{len({len(p) for p in prompts})} lengths decode in {len(batches)} batches where prompts of any "
            f"length would fill {full}; eval.padded_batches=true pads them into full batches (short prompts), "
            "a served model batches them (eval.backend=openai, or vllm on a GPU)")


def greedy_batch(model, tokenizer, prompts: list[list[int]], max_new_tokens: int) -> list[str]:
    """Greedy completions of prompts of one length, special tokens stripped."""
    return [c["output"] for c in greedy_completions(model, tokenizer, prompts, max_new_tokens)]


@torch.no_grad()
def greedy_completions(model, tokenizer, prompts: list[list[int]], max_new_tokens: int,
                       padded: bool = False) -> list[dict]:
    """Greedy completions, each with its token counts: `output` (special tokens stripped),
    `prompt_tokens`, and `completion_tokens` (up to and with the end-of-sequence token; the padding a
    finished row gets while the others decode is not counted). Prompts of one length, unless `padded`:
    then prompts of any length, left-padded with an attention mask (see the module's docstring for
    what the mask costs; `generate` numbers each row's positions from its first real token)."""
    if not padded and len({len(p) for p in prompts}) != 1:
        raise ValueError(f"greedy_batch decodes prompts of one length together (no padding mask), found "
                         f"lengths {sorted({len(p) for p in prompts})}; batch them with length_batches(..., "
                         "equal_length=True), or pad them (eval.padded_batches=true)")
    model.eval()
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    ids, mask = _left_padded(prompts, pad, next(model.parameters()).device)
    out = model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=max_new_tokens,
                         do_sample=False, eos_token_id=tokenizer.eos_token_id, pad_token_id=pad)
    new = out[:, ids.shape[1]:].tolist()
    return [{"output": tokenizer.decode(row, skip_special_tokens=True), "prompt_tokens": len(prompt),
             "completion_tokens": _through_eos(row, tokenizer.eos_token_id)} for prompt, row in zip(prompts, new)]


def _left_padded(prompts: list[list[int]], pad: int, device) -> tuple[torch.Tensor, torch.Tensor]:
    width = max(len(p) for p in prompts)
    ids = torch.tensor([[pad] * (width - len(p)) + p for p in prompts], device=device)
    mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts], device=device)
    return ids, mask


def _through_eos(generated: list[int], eos: int | None) -> int:
    return generated.index(eos) + 1 if eos in generated else len(generated)


def _batch(model, inputs: list[dict]) -> dict:
    """Right-padded tensors of `inputs` on the model's device. A decoder gets no padding mask (see the
    module's docstring); an encoder reads both ways, so it gets one, and its segment ids."""
    device = next(model.parameters()).device
    width = max(len(x["input_ids"]) for x in inputs)
    ids = torch.zeros((len(inputs), width), dtype=torch.long)
    mask = torch.zeros((len(inputs), width), dtype=torch.long)
    segments = torch.zeros((len(inputs), width), dtype=torch.long)
    for row, x in enumerate(inputs):
        n = len(x["input_ids"])
        ids[row, :n], mask[row, :n] = torch.tensor(x["input_ids"]), 1
        if x.get("token_type_ids") is not None:
            segments[row, :n] = torch.tensor(x["token_type_ids"])
    batch = {"input_ids": ids, "position_ids": torch.arange(width)[None].expand(len(inputs), width)}
    if is_encoder_model(model.model):
        batch.update(attention_mask=mask, token_type_ids=segments)
    return {k: v.to(device) for k, v in batch.items()}


@torch.no_grad()
def head_probs_batch(model, inputs: list[dict]) -> list[list[float]]:
    """The head's class probabilities (softmax; sigmoid for a multi-label head) for a batch.

    `model` is a `models.heads.PooledClassifier` (a decoder: the last prompt token) or an
    `EncoderClassifier`.
    """
    model.eval()
    batch = _batch(model, inputs)
    last = torch.tensor([len(x["input_ids"]) - 1 for x in inputs], device=batch["input_ids"].device)
    logits = model(last_index=last, **batch).float()
    multi = model.model.config.problem_type == "multi_label_classification"
    return (logits.sigmoid() if multi else logits.softmax(-1)).tolist()


@torch.no_grad()
def token_probs_batch(model, inputs: list[dict]) -> list[list[float]]:
    """For each input, the hallucination probability of each of its response tokens (`tokens`).
    `model` is a `models.heads.TokenClassifier`."""
    model.eval()
    probs = model(**_batch(model, inputs)).float().softmax(-1)[..., 1].cpu()
    return [probs[row, [t for t, _, _ in x["tokens"]]].tolist() for row, x in enumerate(inputs)]
