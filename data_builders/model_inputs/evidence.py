"""Sentence-level evidence records: each response sentence judged against the few source
sentences that best match it, instead of the whole response against the whole source.

`task.evidence_sentences=k` (k > 0) turns a record into one record per response sentence,
whose `source` is the k source sentences that best match it (BM25 over character bigrams, in
source order) and whose label says whether the sentence is one of the record's hallucinated sentences.
A record's score is then that of its most suspicious sentence (`eval/aggregation/by_sentence.py`), as in SummaC's
sentence-level
NLI and ANAH's reference-then-judge annotation. Retrieval does the long-context part; the
annotator compares a sentence with a few dozen characters of evidence, which a small model
learns in minutes where it does not learn the comparison over 2k-32k tokens.

The `sentence_check` template shows the sentence with the characters that the evidence lacks
between 【 and 】 (`data_builders/model_inputs/marks.py`). Names never seen in training (held-out books have
their own casts) are then flagged by what the evidence lacks, not by what the model has memorised.
"""
from __future__ import annotations

from data_builders.model_inputs.anah_prompts import SourceIndex
from data_builders.model_inputs.marks import mark_unsupported
from data_builders.sentences import unit_spans

EVIDENCE_VERSION = 1     # bump when what `evidence_records` returns changes (cached pools: train/data.py)


def sentence_check_messages(record: dict) -> list[dict]:
    """The `sentence_check` prompt: evidence, then the marked sentence."""
    marked = mark_unsupported(record["response"], record["source"], record.get("language") or "zh")
    return [{"role": "user", "content": f"原文：{record['source']}\n句子：{marked}"}]


def _gold_of(record: dict, index: int | None) -> dict:
    """The record's type, sentence, correction and reason of its `index`-th hallucinated sentence
    (what a generative annotator says about that sentence); empty lists for a faithful one."""
    fields = ("hallucination_types", "hallucinated_sentences", "corrections", "reasons")
    if index is None:
        return {f: [] for f in fields}
    return {f: (record.get(f) or [])[index:index + 1] for f in fields}


SPAN_ONLY = -1     # a unit that a gold span overlaps but that no hallucinated_sentences entry names


def hallucinated_sentence_flags(record: dict, offsets: list[tuple[int, int]]) -> list[int | None]:
    """For each response sentence, the index into `hallucinated_sentences` that names it, else
    SPAN_ONLY where one of the record's character `spans` overlaps it, else None. The embedded corpus
    names its hallucinated sentence (with its type, correction and reason) and marks the edit in it
    as a span; the human-annotated benchmarks have spans only (their `hallucinated_sentences` are
    the spans' texts), whose gold fields are not per sentence."""
    named = {sentence: i for i, sentence in enumerate(record.get("hallucinated_sentences") or [])}
    spans = record.get("spans") or []
    flags = []
    for a, b in offsets:
        index = named.get(record["response"][a:b])
        if index is None and any(s["start"] < b and a < s["end"] for s in spans):
            index = SPAN_ONLY
        flags.append(index)
    return flags


def evidence_records(record: dict, k: int, labelled: bool = True, unit: str = "sentence") -> list[dict]:
    """One record per response sentence (or clause: `unit`), with its k best-matching source
    sentences as `source`.

    With `labelled` (training), a hallucinated record must have a sentence that carries its label
    (named in `hallucinated_sentences`, or overlapped by one of its `spans`)."""
    language = record.get("language") or "zh"
    index = SourceIndex(record["source"], language)
    offsets = unit_spans(record["response"], language, unit)
    flags = hallucinated_sentence_flags(record, offsets)
    joiner = "" if language == "zh" else " "
    out = []
    for i, ((a, b), flag) in enumerate(zip(offsets, flags)):
        sentence = record["response"][a:b]
        gold = _gold_of(record, None if flag == SPAN_ONLY else flag)
        out.append({
            "id": f"{record['id']}#s{i}", "task": record["task"], "language": language,
            "source": joiner.join(index.sents[j] for j in index.top(sentence, k)), "response": sentence,
            "label": int(flag is not None), **gold,
            "length_bucket": record.get("length_bucket"), "position": record.get("position"),
            "meta": {"record": record["id"], "sentence": i, "start": a, "end": b},
        })
    if labelled and record.get("label") == 1 and not any(r["label"] for r in out):
        raise ValueError(f"record {record['id']!r}: label 1, but no sentence of its response is named in its "
                         f"hallucinated_sentences or overlapped by its spans, so no sentence can carry the label")
    return out
