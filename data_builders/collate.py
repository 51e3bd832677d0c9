"""Tokenise a record into a training sample and collate samples into batches.

Labels are shifted on the global sequence here, once: `shift_labels[t]` is the
token to predict at position t (-100 where no loss is taken). Sequence-parallel
splitting happens later and never re-shifts.
"""
from __future__ import annotations

import torch

from data_builders.prompts import detection_messages, verdict_target

IGNORE_INDEX = -100


def prompt_ids(record: dict, tokenizer, template: str = "prompt_e") -> list[int]:
    text = tokenizer.apply_chat_template(detection_messages(record, template), tokenize=False,
                                         add_generation_prompt=True)
    return tokenizer(text, add_special_tokens=False)["input_ids"]


def encode_sample(record: dict, tokenizer, template: str = "prompt_e") -> dict:
    """input_ids = chat prompt + target + <eos>; loss only on target and <eos>."""
    prompt = prompt_ids(record, tokenizer, template)
    target = tokenizer(verdict_target(record), add_special_tokens=False)["input_ids"]
    target.append(tokenizer.eos_token_id)
    input_ids = prompt + target
    shift_labels = [IGNORE_INDEX] * (len(prompt) - 1) + target + [IGNORE_INDEX]
    return {"id": record["id"], "input_ids": input_ids, "shift_labels": shift_labels}


def collate(samples: list[dict], pad_id: int) -> dict:
    """Right-pad to the longest sample; no attention mask when nothing is padded."""
    width = max(len(s["input_ids"]) for s in samples)
    ids = torch.full((len(samples), width), pad_id, dtype=torch.long)
    labels = torch.full((len(samples), width), IGNORE_INDEX, dtype=torch.long)
    mask = torch.zeros((len(samples), width), dtype=torch.long)
    for row, s in enumerate(samples):
        n = len(s["input_ids"])
        ids[row, :n] = torch.tensor(s["input_ids"])
        labels[row, :n] = torch.tensor(s["shift_labels"])
        mask[row, :n] = 1
    batch = {"input_ids": ids, "shift_labels": labels,
             "position_ids": torch.arange(width).expand(len(samples), width)}
    if not bool(mask.all()):
        batch["attention_mask"] = mask
    return batch
