"""Binary detection metrics as LongNovel reports them (seed 000, section 4.3).

Acc is the mean of the accuracies on hallucinated and on faithful samples; an
unparseable output counts as wrong, i.e. as the opposite of its gold label.
"""
from __future__ import annotations

import re

from sklearn.metrics import f1_score, matthews_corrcoef, precision_score, recall_score


def binary_scores(gold: list[int], pred: list[int | None]) -> dict:
    if len(gold) != len(pred):
        raise ValueError(f"gold has {len(gold)} labels, predictions {len(pred)}")
    effective = [p if p is not None else 1 - g for g, p in zip(gold, pred)]
    per_class = {}
    for cls, name in ((1, "hallu_acc"), (0, "nonhallu_acc")):
        hits = [e == g for g, e in zip(gold, effective) if g == cls]
        per_class[name] = sum(hits) / len(hits) if hits else None
    present = [v for v in per_class.values() if v is not None]
    return {
        "acc": sum(present) / len(present) if present else None,
        "mcc": float(matthews_corrcoef(gold, effective)) if gold else None,
        **per_class,
        "n": len(gold),
        "parse_failures": sum(p is None for p in pred),
    }


def recall(rows: list[tuple[int, int | None]]) -> dict:
    """Share of hallucinated samples flagged as hallucinated; rows are (gold, pred)."""
    hits = [p == 1 for g, p in rows if g == 1]
    return {"recall": sum(hits) / len(hits) if hits else None, "n": len(hits)}


def binary_classification(gold: list[int], pred: list[int | None]) -> dict:
    """Accuracy, balanced accuracy, F1 / precision / recall of the hallucinated class, MCC.

    A failed parse counts as the opposite of its gold label.
    """
    base = binary_scores(gold, pred)
    effective = [p if p is not None else 1 - g for g, p in zip(gold, pred)]
    return {
        "acc": sum(e == g for g, e in zip(gold, effective)) / len(gold),
        "balanced_acc": base["acc"],
        "f1": float(f1_score(gold, effective, zero_division=0)),
        "precision": float(precision_score(gold, effective, zero_division=0)),
        "recall": float(recall_score(gold, effective, zero_division=0)),
        "mcc": base["mcc"], "n": base["n"], "parse_failures": base["parse_failures"],
    }


_WORD = re.compile(r"\w+", re.U)
_CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")


def text_units(text: str) -> list[str]:
    """Characters for Chinese (and other CJK) text, lower-cased words otherwise."""
    if _CJK.search(text):
        return [c for c in text if not c.isspace() and c not in "，。！？；：、“”‘’（）《》,.!?;:\"'()"]
    return [w.lower() for w in _WORD.findall(text)]


def ngram_precision(candidate: str, source: str, n: int = 4) -> float | None:
    """Share of the candidate's n-grams that occur in the source (None when it has none)."""
    cand, src = text_units(candidate), text_units(source)
    grams = [tuple(cand[i:i + n]) for i in range(len(cand) - n + 1)]
    if not grams:
        return None
    have = {tuple(src[i:i + n]) for i in range(len(src) - n + 1)}
    return sum(g in have for g in grams) / len(grams)


def rouge_l(candidate: str, reference: str) -> float:
    """ROUGE-L F1 on `text_units` (characters for Chinese), via the rouge-score package."""
    from rouge_score import rouge_scorer

    class _Units:
        def tokenize(self, text):
            return text_units(text)

    scorer = rouge_scorer.RougeScorer(["rougeL"], tokenizer=_Units())
    return scorer.score(reference, candidate)["rougeL"].fmeasure


def multiclass_scores(gold: list[str], pred: list[str | None], labels: tuple[str, ...]) -> dict:
    effective = [p if p is not None else "<parse failure>" for p in pred]
    return {
        "acc": sum(p == g for g, p in zip(gold, effective)) / len(gold),
        "f1_weighted": float(f1_score(gold, effective, labels=sorted(set(gold)), average="weighted",
                                      zero_division=0)),
        "n": len(gold), "parse_failures": sum(p is None for p in pred),
    }
