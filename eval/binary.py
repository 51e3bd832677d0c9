"""Scoring binary hallucination detection (HalluMix-style, seed 001 section 4)."""
from __future__ import annotations

from eval.metrics import binary_classification
from eval.predictions import binary_decision


def score_binary(gold: list[dict], preds: dict[str, dict], bertscore=None) -> tuple[dict, list[dict]]:
    """Metrics and per-record rows (`bertscore`: unused; every scorer takes it)."""
    rows = []
    for rec in gold:
        pred, _ = binary_decision(preds.get(rec["id"]))
        raw = preds.get(rec["id"], {})
        rows.append({"id": rec["id"], "gold": rec["label"], "pred": pred, "raw": raw.get("output", raw.get("probs")),
                     "correct": pred == rec["label"], "language": rec.get("language")})
    metrics = binary_classification([r["gold"] for r in rows], [r["pred"] for r in rows])
    metrics["missing_ids"] = [r["id"] for r in gold if r["id"] not in preds]
    return metrics, rows
