"""ANAH-style sentence annotation (seed 004): prompts (Figs. A5-A9, zh and en), the tagged
target, and reference windows retrieved with BM25 (optionally fused with an embedding ranker).

A record is one answer sentence: `question`, `response` (the sentence), `type`, `reference`
(gold fragments), `correction`, `source` or `documents`, and `meta.name` (the topic).
"""
from __future__ import annotations

import hashlib
from functools import cache
from importlib import resources

import numpy as np

from data_builders.model_inputs.marks import mark_unsupported
from data_builders.model_inputs.retrieval import fuse
from data_builders.sentences import split_sentences

TEMPLATES = ("anah_a5", "anah_a6", "anah_a7", "anah_a8", "anah_a9")
MARKED = "+marks"   # "anah_a5+marks": the sentence shows what the reference lacks in 【】 (model_inputs/marks.py)
TRAIN_TEMPLATES = TEMPLATES[:4]     # prompt augmentation draws from these
UNSEEN_TEMPLATES = TEMPLATES[4:]    # kept out of training: the "+D" robustness test of Table 7
REFERENCE_FIRST = {"anah_a7", "anah_a8", "anah_a9"}   # these ask for <Reference> before <Hallucination>
WINDOW_TOKENS = {"zh": 540, "en": 400}
TAGS = {
    "zh": {"hallu": "<幻觉>", "ref": "<参考>", "corr": "<改正>", "no_fact": "<无事实>",
           "none": "无", "contradictory": "矛盾", "unverifiable": "无法验证"},
    "en": {"hallu": "<Hallucination> ", "ref": "<Reference> ", "corr": "<Correction> ", "no_fact": "<No Fact>",
           "none": "None", "contradictory": "Contradictory", "unverifiable": "Unverifiable"},
}


def _lang(record: dict) -> str:
    return "zh" if record.get("language", "zh").startswith("zh") else "en"


@cache
def template_text(template: str, language: str) -> str:
    if template not in TEMPLATES:
        raise ValueError(f"unknown ANAH template {template!r}; expected one of {list(TEMPLATES)} or anah_random")
    name = f"{template}.{language}.txt"
    return resources.files("data_builders.prompt_texts").joinpath(name).read_text(encoding="utf-8").strip()


def split_marks(template: str) -> tuple[str, bool]:
    """("anah_a5", True) for "anah_a5+marks"; the template itself and False otherwise."""
    return (template[:-len(MARKED)], True) if template.endswith(MARKED) else (template, False)


def pick_template(record: dict, template: str) -> str:
    """`anah_random` (prompt augmentation) draws a training template by the record id; a `+marks`
    suffix is dropped (it changes how the sentence is shown, not which prompt shows it)."""
    template = split_marks(template)[0]
    if template != "anah_random":
        return template
    digest = int(hashlib.sha1(record["id"].encode()).hexdigest(), 16)
    return TRAIN_TEMPLATES[digest % len(TRAIN_TEMPLATES)]


def annotation_messages(record: dict, template: str) -> list[dict]:
    reference, sentence = reference_of(record), record["response"]
    if split_marks(template)[1]:
        sentence = mark_unsupported(sentence, reference, _lang(record))
    text = template_text(pick_template(record, template), _lang(record)).format(
        name=(record.get("meta") or {}).get("name", ""), question=record.get("question") or "",
        reference=reference, sentence=sentence)
    return [{"role": "user", "content": text}]


def annotation_target(record: dict, template: str) -> str:
    """The tagged annotation: <幻觉>类型<参考>片段<SEP>片段<改正>"X" 改为 "Y" (or English tags)."""
    tags, kind = TAGS[_lang(record)], record.get("type")
    if kind == "no_fact":
        return tags["no_fact"]
    if kind not in ("none", "contradictory", "unverifiable"):
        raise ValueError(f"record {record.get('id')!r}: type must be none|contradictory|unverifiable|no_fact")
    verdict = tags["hallu"] + tags[kind]
    reference = tags["ref"] + "<SEP>".join(record.get("reference") or [])
    parts = [reference, verdict] if pick_template(record, template) in REFERENCE_FIRST else [verdict, reference]
    if kind != "none":
        parts.append(tags["corr"] + (record.get("correction") or ""))
    return "".join(parts) if _lang(record) == "zh" else " ".join(parts)


def reference_of(record: dict) -> str:
    """The reference shown in the prompt: the retrieved window if the builder stored one."""
    meta = record.get("meta") or {}
    if meta.get("window"):
        return meta["window"]
    return record["source"] if "source" in record else "\n".join(record["documents"])


def text_units(text: str, language: str) -> list[str]:
    """Characters for Chinese, lower-cased words for English: the units of BM25 and window lengths."""
    if language == "zh":
        return [c for c in text if not c.isspace()]
    return [w.lower().strip(".,;:!?\"'()") for w in text.split()]


def _terms(text: str, language: str) -> list[str]:
    """BM25 terms: character bigrams for Chinese (single characters match too much), words for English."""
    units = text_units(text, language)
    return ["".join(p) for p in zip(units, units[1:])] if language == "zh" else units


class Bm25:
    """rank_bm25's Okapi BM25 (its idf, floor and length normalisation), scored through an inverted
    index: `BM25Okapi.get_scores` visits every sentence for every query term, which made BM25 the
    largest cost of building evidence samples over a novel. The scores are bit-identical to
    `get_scores`: the same float64 operations, on the sentences that hold the term (the others add 0)."""

    def __init__(self, corpus: list[list[str]]):
        from rank_bm25 import BM25Okapi

        self.okapi = BM25Okapi(corpus)
        k1, b = self.okapi.k1, self.okapi.b
        self._norm = k1 * (1 - b + b * np.array(self.okapi.doc_len) / self.okapi.avgdl)
        postings: dict[str, tuple[list[int], list[int]]] = {}
        for i, freqs in enumerate(self.okapi.doc_freqs):
            for term, tf in freqs.items():
                docs, tfs = postings.setdefault(term, ([], []))
                docs.append(i)
                tfs.append(tf)
        self._postings = {t: (np.array(d), np.array(f)) for t, (d, f) in postings.items()}

    def get_scores(self, query: list[str]) -> np.ndarray:
        k1 = self.okapi.k1
        score = np.zeros(self.okapi.corpus_size)
        for q in query:
            if q in self._postings:
                docs, tf = self._postings[q]
                score[docs] += (self.okapi.idf.get(q) or 0) * (tf * (k1 + 1) / (tf + self._norm[docs]))
        return score


class SourceIndex:
    """The sentences of one source, indexed once for many reference-window queries."""

    def __init__(self, source: str, language: str, ranker=None):
        self.language, self.ranker = language, ranker
        self.sents = split_sentences(source, language)
        self.sizes = [len(text_units(s, language)) for s in self.sents]
        self.bm25 = Bm25([_terms(s, language) or ["_"] for s in self.sents]) if self.sents else None
        self._emb = None

    def scores(self, sentence: str) -> list[float]:
        """How well each source sentence matches: BM25, fused with the embedding ranker if any."""
        scores = list(self.bm25.get_scores(_terms(sentence, self.language)))
        if self.ranker is not None:
            if self._emb is None:
                self._emb = self.ranker.encode(self.sents)
            scores = fuse(scores, self.ranker.scores(sentence, self._emb))
        return scores

    def best(self, sentence: str) -> int:
        """Index of the source sentence that best matches."""
        scores = self.scores(sentence)
        return max(range(len(self.sents)), key=lambda i: scores[i])

    def top(self, sentence: str, k: int) -> list[int]:
        """Indices of the k best-matching source sentences, in source order (ties: earlier first)."""
        if not self.sents:
            return []
        scores = self.scores(sentence)
        return sorted(sorted(range(len(self.sents)), key=lambda i: -scores[i])[:k])

    def window(self, sentence: str, budget: int | None = None) -> str:
        """The sentences around the best match, grown right then left while `budget` units allow
        (540 characters for Chinese, 400 words for English by default)."""
        if not self.sents:
            return ""
        budget = budget or WINDOW_TOKENS[self.language]
        best = self.best(sentence)
        lo, hi, used = best, best + 1, self.sizes[best]
        grown = True
        while grown:
            grown = False
            for side in (hi, lo - 1):
                if 0 <= side < len(self.sents) and not (lo <= side < hi) and used + self.sizes[side] <= budget:
                    lo, hi, used, grown = min(lo, side), max(hi, side + 1), used + self.sizes[side], True
        return ("" if self.language == "zh" else " ").join(self.sents[lo:hi])
