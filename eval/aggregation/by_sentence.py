"""A record's prediction from the predictions of its sentences (`task.evidence_sentences`,
data_builders/model_inputs/evidence.py): a summary is as hallucinated as its most suspicious sentence, and
that sentence is where the annotator says the hallucination is."""
from __future__ import annotations

from eval.scorers.decisions import binary_decision
from eval.thresholds import DEFAULT, is_hallucinated


def aggregate(record_id: str, rows: list[dict], sentences: list[str]) -> dict:
    """One row for the record from its sentences' rows, in sentence order.

    Head probabilities: the probabilities of the sentence most likely hallucinated, that sentence
    (`flagged_sentence`) and every sentence's probability. Generations: the answer about the first
    sentence judged hallucinated, and that sentence; else, if some sentence's answer cannot be read,
    that answer (the record counts as a parse failure); else the first sentence's answer. Every
    sentence's reading is kept in `sentence_labels` (1, 0, or None when unreadable)."""
    if not rows:
        raise ValueError(f"record {record_id!r}: its response has no sentence to judge")
    if all("probs" in row for row in rows):
        worst = max(range(len(rows)), key=lambda i: rows[i]["probs"][1])
        return {"id": record_id, "probs": rows[worst]["probs"], "flagged_sentence": sentences[worst],
                "sentence_probs": [round(r["probs"][1], 4) for r in rows]}
    labels = [binary_decision(row)[0] for row in rows]
    chosen = labels.index(1) if 1 in labels else labels.index(None) if None in labels else 0
    row = {"id": record_id, "output": rows[chosen].get("output"), "sentence_labels": labels, **token_usage(rows)}
    if labels[chosen] == 1:
        row["flagged_sentence"] = sentences[chosen]
    return row


def token_usage(rows: list[dict]) -> dict:
    """The prompt and completion tokens of a record's units, summed: an in-process decoder's counts, for its
    usage line ({} where the rows carry none)."""
    if not rows or not all("completion_tokens" in r for r in rows):
        return {}
    return {"prompt_tokens": sum(r["prompt_tokens"] for r in rows),
            "completion_tokens": sum(r["completion_tokens"] for r in rows)}


def flagged_sentences(row: dict, threshold: float | None) -> list[int]:
    """The indices of the sentences judged hallucinated: a head's probability at or over the
    threshold (the record's worst sentence whenever the record is judged hallucinated), or an
    answer read as hallucinated."""
    if "sentence_probs" in row:
        t, probs = DEFAULT if threshold is None else threshold, row["sentence_probs"]
        worst = max(range(len(probs)), key=probs.__getitem__)
        decided = is_hallucinated(row["probs"][1], t)
        return [i for i, p in enumerate(probs) if is_hallucinated(p, t) or (decided and i == worst)]
    return [i for i, label in enumerate(row.get("sentence_labels") or []) if label == 1]
