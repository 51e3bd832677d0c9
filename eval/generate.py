"""Inference: greedy decoding with Hugging Face `generate`, and discriminative-head probabilities."""
from __future__ import annotations

import torch
from tqdm import tqdm


@torch.no_grad()
def greedy_generate(model, tokenizer, prompts: list[list[int]], max_new_tokens: int,
                    progress: bool = False, desc: str = "generate") -> list[str]:
    """One greedy completion per prompt (token ids), special tokens stripped."""
    model.eval()
    device = next(model.parameters()).device
    outputs = []
    for ids in tqdm(prompts, desc=desc, disable=not progress, dynamic_ncols=True):
        input_ids = torch.tensor([ids], device=device)
        out = model.generate(input_ids=input_ids, attention_mask=torch.ones_like(input_ids),
                             max_new_tokens=max_new_tokens, do_sample=False,
                             eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id)
        outputs.append(tokenizer.decode(out[0, len(ids):], skip_special_tokens=True))
    return outputs


@torch.no_grad()
def classifier_probs(model, prompts: list[list[int]], progress: bool = False) -> list[list[float]]:
    """Per prompt, the head's class probabilities (softmax; sigmoid for a multi-label head).

    `model` is a `models.heads.PooledClassifier`.
    """
    model.eval()
    device = next(model.parameters()).device
    multi = model.model.config.problem_type == "multi_label_classification"
    out = []
    for ids in tqdm(prompts, desc="classify", disable=not progress, dynamic_ncols=True):
        x = torch.tensor([ids], device=device)
        logits = model(x, torch.arange(len(ids), device=device)[None], torch.tensor([len(ids) - 1], device=device))
        out.append((logits.float().sigmoid() if multi else logits.float().softmax(-1))[0].tolist())
    return out
