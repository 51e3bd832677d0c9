"""Binary detection metrics as LongNovel reports them (seed 000, section 4.3).

Acc is the mean of the accuracies on hallucinated and on faithful samples; an
unparseable output counts as wrong, i.e. as the opposite of its gold label.
"""
from __future__ import annotations

from sklearn.metrics import matthews_corrcoef


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
