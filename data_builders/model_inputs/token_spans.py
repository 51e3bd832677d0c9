"""Character spans of a response <-> labels of its tokens (the span annotator, `task.kind=spans`).

A tokenizer's offsets say which characters each token covers. The response's tokens are those
whose characters lie inside the response's place in the model's input; a response token is
hallucinated (label 1) when it shares a character with a gold span, else faithful (0); every other
token (prompt, evidence, special tokens) carries IGNORE_INDEX. The way back, from token
probabilities to character spans at a decision threshold, is `eval/thresholds.py::flagged_spans`.
"""
from __future__ import annotations

from data_builders.model_inputs.collate import IGNORE_INDEX, prompt_text


def response_tokens(offsets: list[tuple[int, int]], start: int, end: int) -> list[tuple[int, int, int]]:
    """(token index, start, end) of the tokens that cover characters [start, end) of the input text,
    with offsets clipped to them and relative to `start` (so into the response): a token that also
    holds the space or label before the response is one of its tokens. Empty tokens (special ones)
    are left out."""
    return [(t, max(a, start) - start, min(b, end) - start) for t, (a, b) in enumerate(offsets)
            if b > a and a < end and b > start]


def token_labels(n_tokens: int, tokens: list[tuple[int, int, int]], spans: list[dict]) -> list[int]:
    """IGNORE_INDEX everywhere but at the response tokens: 1 where a gold span overlaps, else 0."""
    labels = [IGNORE_INDEX] * n_tokens
    for t, a, b in tokens:
        labels[t] = int(any(s["start"] < b and a < s["end"] for s in spans))
    return labels


def gold_spans(record: dict) -> list[dict]:
    """The record's spans; a hallucinated record must say where (a span annotator learns from them)."""
    spans = record.get("spans") or []
    if record.get("label") == 1 and not spans:
        raise ValueError(f"record {record.get('id')!r}: a span annotator (task.kind=spans) learns where a response "
                         "is hallucinated: a record with label 1 needs `spans`, found none")
    return spans


def prompt_input(record: dict, tokenizer, template: str) -> dict:
    """A decoder's input: the chat prompt's token ids, and its response tokens (offsets into the response)."""
    text = prompt_text(record, tokenizer, template)
    encoded = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    start = text.rfind(record["response"])
    if start < 0:
        raise ValueError(f"record {record.get('id')!r}: template {template!r} does not show the response as it is; "
                         "a span annotator needs a template that does (prompt_e, prompt_b)")
    tokens = response_tokens(encoded["offset_mapping"], start, start + len(record["response"]))
    return {"input_ids": encoded["input_ids"], "tokens": tokens}


def labelled_sample(record: dict, model_input: dict) -> dict:
    """A training sample of a span annotator: the input's token ids and its token labels."""
    ids = model_input["input_ids"]
    sample = {"id": record["id"], "input_ids": ids,
              "token_labels": token_labels(len(ids), model_input["tokens"], gold_spans(record))}
    if model_input.get("token_type_ids") is not None:
        sample["token_type_ids"] = model_input["token_type_ids"]
    return sample
