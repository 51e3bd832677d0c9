"""Inputs of encoder annotators (BERT, RoBERTa, DeBERTa-v3, ModernBERT, XLM-R): the (evidence,
response) pair in the encoder's own pair format (`[CLS] evidence [SEP] response [SEP]` for BERT).

An encoder reads a fixed window (its tokenizer's `model_max_length`, 512 for MiniLM). The response
is always whole; an evidence longer than the room left beside it is split into consecutive chunks
(cut at word starts) that together cover every character of it, and the model judges the response
against each chunk. A prediction is pooled over the chunks as cross-encoder detectors pool theirs
(MiniCheck, HHEM on long documents): the response, or a response token, is supported when some chunk
supports it, so the support probability is the max over chunks and the hallucination probability
the min (`pool_chunks`). Nothing is cut silently.

Decoders read a chat prompt instead; an encoder's tokenizer is the one without a chat template
(`models.builders.load_tokenizer` refuses a decoder's without one).
"""
from __future__ import annotations

from data_builders.model_inputs.prompts import article_of

MIN_EVIDENCE_TOKENS = 32       # less room than this beside a response: the pair does not fit the window
MAX_UNKNOWN_SHARE = 0.1        # more unknown tokens than this in a response: the vocabulary does not cover it


def uses_pairs(tokenizer) -> bool:
    return tokenizer.chat_template is None


def evidence_text(record: dict) -> str:
    """What the response is checked against: the question (if any), then the source or documents."""
    question = record.get("question")
    return f"{question}\n\n{article_of(record)}" if question else article_of(record)


def chunk_bounds(offsets: list[tuple[int, int]], length: int, budget: int) -> list[tuple[int, int]]:
    """Consecutive character ranges [a, b) of a text of `length` characters, together covering all of
    it, each holding at most `budget` of its tokens (`offsets`); a range ends before a token that
    starts a word (whitespace before it) where one lies in the second half of the window. Tokens
    with empty offsets (a byte-level BPE's space, trimmed) count: they take room in the window."""
    tokens = list(offsets)
    if len(tokens) <= budget:
        return [(0, length)]
    bounds, i = [0], 0
    while len(tokens) - i > budget:
        j = i + budget
        word = next((k for k in range(j, i + budget // 2, -1) if tokens[k][0] > tokens[k - 1][1]), j)
        bounds.append(tokens[word][0])
        i = word
    return list(zip(bounds, bounds[1:] + [length]))


def unknown_share(ids: list[int], tokenizer) -> float:
    unk = tokenizer.unk_token_id
    return sum(i == unk for i in ids) / len(ids) if ids and unk is not None else 0.0


class PairTooLong(ValueError):
    pass


def pair_inputs(record: dict, tokenizer, window: int | None = None) -> list[dict]:
    """One input per evidence chunk: token ids, segment ids, and the response tokens (token index and
    character offsets into the response, identical in every chunk)."""
    window = window or tokenizer.model_max_length
    n_response = len(check_vocabulary(record, tokenizer))
    budget = window - tokenizer.num_special_tokens_to_add(pair=True) - n_response
    if budget < MIN_EVIDENCE_TOKENS:
        raise PairTooLong(f"record {record.get('id')!r}: its response has {n_response} tokens, which leaves "
                          f"{budget} of the encoder's {window}-token window for the evidence (at least "
                          f"{MIN_EVIDENCE_TOKENS} needed): use an encoder with a longer window (ModernBERT)")
    for margin in (0, 8, 32):      # a chunk re-tokenised on its own may gain a token or two at its edges
        inputs = _chunked(record, tokenizer, budget - margin)
        if all(len(x["input_ids"]) <= window for x in inputs):
            return inputs
    raise PairTooLong(f"record {record.get('id')!r}: its evidence chunks do not fit the {window}-token window")


def _chunked(record: dict, tokenizer, budget: int) -> list[dict]:
    evidence = evidence_text(record)
    offsets = tokenizer(evidence, add_special_tokens=False, return_offsets_mapping=True,
                        verbose=False)["offset_mapping"]      # longer than the window on purpose: it is chunked
    inputs = []
    for a, b in chunk_bounds(offsets, len(evidence), budget):
        encoded = tokenizer(evidence[a:b], record["response"], return_offsets_mapping=True)
        segments = encoded.sequence_ids()
        tokens = [(t, s, e) for t, ((s, e), seg) in enumerate(zip(encoded["offset_mapping"], segments))
                  if seg == 1 and e > s]
        inputs.append({"input_ids": encoded["input_ids"], "token_type_ids": encoded.get("token_type_ids"),
                       "tokens": tokens, "chunk": [a, b]})
    return inputs


def whole_pair(record: dict, tokenizer) -> dict:
    """The pair uncut (longer than the window: a training sample that is skipped and counted)."""
    encoded = tokenizer(evidence_text(record), record["response"], verbose=False)
    return {"input_ids": encoded["input_ids"], "token_type_ids": encoded.get("token_type_ids"), "tokens": []}


def check_vocabulary(record: dict, tokenizer) -> list[int]:
    """The response's token ids; a response the tokenizer mostly cannot read is refused."""
    ids = tokenizer(record["response"], add_special_tokens=False)["input_ids"]
    share = unknown_share(ids, tokenizer)
    if share > MAX_UNKNOWN_SHARE:
        raise ValueError(
            f"record {record.get('id')!r} (language {record.get('language')!r}): {share:.0%} of its response tokens "
            f"are unknown to the encoder's vocabulary ({tokenizer.unk_token}); this encoder does not read that "
            "language (all-MiniLM-L6-v2, embedded:minilm, is English only): use a multilingual encoder "
            "(a local XLM-R directory) or a decoder")
    return ids


def _units(text: str, spaced: bool) -> set[str]:
    """Words of a spaced language; character pairs of one written without spaces (Chinese)."""
    text = text.lower()
    return set(text.split()) if spaced else {text[i:i + 2] for i in range(len(text) - 1)}


def best_chunk(inputs: list[dict], record: dict) -> dict:
    """The chunk that shares the most words (character pairs, in Chinese) with the response (a
    training sample takes one chunk: the one most likely to hold the evidence)."""
    if len(inputs) == 1:
        return inputs[0]
    evidence, spaced = evidence_text(record), " " in record["response"].strip()
    words = _units(record["response"], spaced)
    return max(inputs, key=lambda x: len(words & _units(evidence[x["chunk"][0]:x["chunk"][1]], spaced)))


def pool_chunks(probs: list[list[float]]) -> list[float]:
    """Hallucination probabilities of the same things (a response, or each response token) judged
    against each chunk, pooled: the min over chunks (the support's max)."""
    return [min(column) for column in zip(*probs)]
