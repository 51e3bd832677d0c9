"""Tokenise a record into a training sample and collate samples into batches.

Labels are shifted on the global sequence here, once: `shift_labels[t]` is the
token to predict at position t (-100 where no loss is taken). Sequence-parallel
splitting happens later and never re-shifts.
"""
from __future__ import annotations

import torch

from data_builders.model_inputs.head_targets import head_of
from data_builders.model_inputs.prompts import render_messages, render_target, template_for, traits

IGNORE_INDEX = -100


def prompt_text(record: dict, tokenizer, template: str) -> str:
    messages = render_messages(record, template)
    if traits(template_for(record, template)).completion:
        return messages[0]["content"]
    return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)


def prompt_ids(record: dict, tokenizer, template: str = "prompt_e") -> list[int]:
    """The prompt's token ids: the chat template's text as it is, or a plain-text prompt with the special tokens
    the tokenizer adds by itself (a BOS where it has one), as `tokenizer.encode` gives them."""
    plain = traits(template_for(record, template)).completion
    return tokenizer(prompt_text(record, tokenizer, template), add_special_tokens=plain)["input_ids"]


def faithful_response_spans(record: dict) -> list[tuple[int, int]]:
    """Character spans of `response` that the record's gold says are faithful: the whole response
    of a faithful record; a hallucinated one's minus its `hallucinated_sentences`. Empty when a
    hallucinated sentence cannot be found in the response (then nothing is known to be faithful)."""
    response = record["response"]
    if record.get("label") != 1:
        return [(0, len(response))]
    sentences = record.get("hallucinated_sentences") or []
    starts = [response.find(s) if s else -1 for s in sentences]
    if not sentences or min(starts) < 0:
        return []
    spans, at = [], 0
    for start, end in sorted((a, a + len(s)) for a, s in zip(starts, sentences)):
        if start > at:
            spans.append((at, start))
        at = max(at, end)
    return spans + ([(at, len(response))] if at < len(response) else [])


def _response_lm_labels(record: dict, text: str, ids: list[int], offsets: list[tuple[int, int]]) -> list[int]:
    """Shifted labels that ask the model to predict the faithful sentences of the response shown
    in the prompt (the summary under judgement), and nothing else of the prompt."""
    labels = [IGNORE_INDEX] * len(ids)
    offset = text.rfind(record["response"])
    spans = [(offset + a, offset + b) for a, b in faithful_response_spans(record)] if offset >= 0 else []
    for t in range(1, len(ids)) if spans else ():
        a, b = offsets[t]
        if any(lo <= a and b <= hi for lo, hi in spans):
            labels[t - 1] = ids[t]
    return labels


def encode_sample(record: dict, tokenizer, template: str = "prompt_e", response_lm: bool = False) -> dict:
    """input_ids = chat prompt + target + <eos>; loss on target and <eos>, and with `response_lm`
    also on the faithful sentences of the response inside the prompt (task.response_lm)."""
    text = prompt_text(record, tokenizer, template)
    encoded = tokenizer(text, add_special_tokens=False, return_offsets_mapping=response_lm)
    prompt = encoded["input_ids"]
    target = tokenizer(render_target(record, template), add_special_tokens=False)["input_ids"]
    target.append(tokenizer.eos_token_id)
    input_ids = prompt + target
    head = _response_lm_labels(record, text, prompt, encoded["offset_mapping"])[:-1] if response_lm else \
        [IGNORE_INDEX] * (len(prompt) - 1)
    shift_labels = head + target + [IGNORE_INDEX]
    return {"id": record["id"], "input_ids": input_ids, "shift_labels": shift_labels}


def pack_samples(samples: list[dict], capacity: int) -> list[dict]:
    """Samples packed into rows of at most `capacity` tokens (first-fit decreasing). Each sample
    keeps its own labels (already shifted, so no label crosses a boundary) and restarts its
    positions at 0, which is how the ring backend finds the documents of a row."""
    rows: list[list[dict]] = []
    room: list[int] = []
    for s in sorted(samples, key=lambda s: -len(s["input_ids"])):
        n = len(s["input_ids"])
        if n > capacity:
            raise ValueError(f"sample {s['id']!r} has {n} tokens, more than the row capacity {capacity}")
        fit = next((i for i, r in enumerate(room) if r >= n), None)
        if fit is None:
            rows.append([s])
            room.append(capacity - n)
        else:
            rows[fit].append(s)
            room[fit] -= n
    return [{"id": "+".join(s["id"] for s in row),
             "input_ids": [t for s in row for t in s["input_ids"]],
             "shift_labels": [t for s in row for t in s["shift_labels"]],
             "position_ids": [p for s in row for p in range(len(s["input_ids"]))]} for row in rows]


def padded_fraction(batches: list[list[dict]]) -> float:
    """Share of padded positions in right-padded batches (each padded to its longest row)."""
    total = sum(len(b) * max(len(s["input_ids"]) for s in b) for b in batches)
    real = sum(len(s["input_ids"]) for b in batches for s in b)
    return 1 - real / total if total else 0.0


# Per-token fields a sample may carry, and what pads them: the LM's shifted labels, a span
# annotator's token labels, an encoder's segment ids.
TOKEN_FIELDS = {"shift_labels": IGNORE_INDEX, "token_labels": IGNORE_INDEX, "token_type_ids": 0}


def collate(samples: list[dict], pad_id: int) -> dict:
    """Right-pad to the longest sample; no attention mask when nothing is padded. Packed rows
    bring their own `position_ids`."""
    width = max(len(s["input_ids"]) for s in samples)
    fields = {k: fill for k, fill in TOKEN_FIELDS.items() if samples[0].get(k) is not None}
    ids = torch.full((len(samples), width), pad_id, dtype=torch.long)
    padded = {k: torch.full((len(samples), width), fill, dtype=torch.long) for k, fill in fields.items()}
    mask = torch.zeros((len(samples), width), dtype=torch.long)
    positions = torch.arange(width).repeat(len(samples), 1)
    for row, s in enumerate(samples):
        n = len(s["input_ids"])
        ids[row, :n] = torch.tensor(s["input_ids"])
        for key, tensor in padded.items():
            tensor[row, :n] = torch.tensor(s[key])
        mask[row, :n] = 1
        if "position_ids" in s:
            positions[row, :n] = torch.tensor(s["position_ids"])
    batch = {"input_ids": ids, **padded, "position_ids": positions}
    if not bool(mask.all()):
        batch["attention_mask"] = mask
    return batch


def head_target(record: dict, head: str):
    """The class index (or multi-hot list) a discriminative head is trained to predict."""
    return head_of(head).target(record)


def encode_classification(record: dict, tokenizer, template: str, head: str) -> dict:
    """The prompt alone (the head reads its last token) and the head's target."""
    ids = prompt_ids(record, tokenizer, template)
    return {"id": record["id"], "input_ids": ids, "label": head_target(record, head)}


def collate_classification(samples: list[dict], pad_id: int) -> dict:
    """Right-padded prompts, the index of each row's last prompt token, and the labels."""
    batch = collate(samples, pad_id)
    batch["last_index"] = torch.tensor([len(s["input_ids"]) - 1 for s in samples])
    batch["labels"] = torch.tensor([s["label"] for s in samples])
    return batch
