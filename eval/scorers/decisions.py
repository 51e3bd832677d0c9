"""Turning one prediction row (raw `output`, or classifier `label` / `probs`) into a decision."""
from __future__ import annotations

from data_builders.records import SENTENCE_TYPES
from eval.scorers.parsers import AnahAnnotation, parse_anah_annotation, parse_binary_answer, parse_longnovel_verdict

DEFAULT = 0.5


def is_hallucinated(score: float, threshold: float = DEFAULT) -> int:
    """The decision: 1 when the score (higher = more likely hallucinated) reaches the threshold."""
    return int(score >= threshold)


def _from_probs(probs, threshold: float | None = None) -> int | None:
    """A class from probabilities: a binary score (or a 2-class list) against `threshold`
    (default 0.5), otherwise the most probable class."""
    if isinstance(probs, (int, float)):
        return is_hallucinated(probs, DEFAULT if threshold is None else threshold)
    if not (isinstance(probs, list) and probs and all(isinstance(p, (int, float)) for p in probs)):
        return None
    if len(probs) == 2 and threshold is not None:
        return is_hallucinated(probs[1], threshold)
    return max(range(len(probs)), key=probs.__getitem__)


def response_score(row: dict | None) -> float | None:
    """The annotator's score that the response is hallucinated (a prepared method's `score`, a head's
    `probs`), before any threshold; None when the row has none (a judge's answer, a generated verdict)."""
    if row is None:
        return None
    value = row.get("score", row.get("probs"))
    if isinstance(value, list) and len(value) == 2:
        value = value[1]
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def binary_decision(row: dict | None) -> tuple[int | None, list[str]]:
    """(label, predicted types) for LongNovel / binary tasks; (None, []) when unusable."""
    if row is None:
        return None, []
    if "label" in row:        # decided when predicted (a `consistency` answer); None: unparseable
        return (int(row["label"]) if row["label"] in (0, 1) else None), []
    if "probs" in row:
        label = _from_probs(row["probs"], row.get("threshold"))
        return (label if label in (0, 1) else None), []
    verdict = parse_longnovel_verdict(row.get("output"))
    if verdict is not None:
        return verdict.label, verdict.types
    return parse_binary_answer(row.get("output")), []


def anah_decision(row: dict | None) -> AnahAnnotation | None:
    if row is None:
        return None
    label = row.get("label")
    if isinstance(label, str) and label in SENTENCE_TYPES:
        return AnahAnnotation(label)
    if isinstance(label, int) and 0 <= label < len(SENTENCE_TYPES):
        return AnahAnnotation(SENTENCE_TYPES[label])
    if "probs" in row:
        index = _from_probs(row["probs"])
        return AnahAnnotation(SENTENCE_TYPES[index]) if index is not None and index < len(SENTENCE_TYPES) else None
    return parse_anah_annotation(row.get("output"))
