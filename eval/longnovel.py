"""Scoring LongNovel detection (seed 000, section 4.3): Acc and MCC overall and per bucket,
recall per hallucination type and per position."""
from __future__ import annotations

from data_builders.schema import HALLUCINATION_TYPES, LENGTH_BUCKETS, POSITIONS
from eval.metrics import binary_scores, recall
from eval.predictions import binary_decision


def score_longnovel(gold: list[dict], preds: dict[str, dict], bertscore=None) -> tuple[dict, list[dict]]:
    """Metrics and per-record rows; gold ids without a prediction count as parse failures.
    (`bertscore`: every scorer takes it; only ANAH's uses it.)"""
    rows = []
    for rec in gold:
        pred, types = binary_decision(preds.get(rec["id"]))
        raw = preds.get(rec["id"], {})
        rows.append({"id": rec["id"], "gold": rec["label"], "pred": pred, "raw": raw.get("output", raw.get("probs")),
                     "pred_types": types, "correct": pred == rec["label"],
                     "length_bucket": rec.get("length_bucket"), "position": rec.get("position"),
                     "types": rec.get("hallucination_types") or []})
        if "flagged_sentence" in raw:
            rows[-1]["flagged_sentence"] = raw["flagged_sentence"]
            rows[-1]["flagged_right"] = raw["flagged_sentence"] in (rec.get("hallucinated_sentences") or [])
    metrics = {"overall": binary_scores([r["gold"] for r in rows], [r["pred"] for r in rows]),
               "by_bucket": {}, "by_type": {}, "by_position": {},
               "missing_ids": [r["id"] for r in gold if r["id"] not in preds]}
    for b in LENGTH_BUCKETS:
        sub = [r for r in rows if r["length_bucket"] == b]
        if sub:
            metrics["by_bucket"][b] = binary_scores([r["gold"] for r in sub], [r["pred"] for r in sub])
    for t in HALLUCINATION_TYPES:
        sub = [(r["gold"], r["pred"]) for r in rows if t in r["types"]]
        if sub:
            metrics["by_type"][t] = recall(sub)
    found = [r for r in rows if r["gold"] == 1 and r["pred"] == 1 and "flagged_right" in r]
    if found:        # sentence-level annotators say where: is the flagged sentence the hallucinated one?
        metrics["localisation"] = {"flagged_right": sum(r["flagged_right"] for r in found) / len(found),
                                   "n": len(found)}
    for p in POSITIONS:
        sub = [(r["gold"], r["pred"]) for r in rows if r["position"] == p and r["gold"] == 1]
        if sub:
            metrics["by_position"][p] = recall(sub)
    return metrics, rows
