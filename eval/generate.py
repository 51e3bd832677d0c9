"""Greedy decoding with Hugging Face `generate`."""
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
