"""Scoring ANAH sentence annotations (seed 004, section 4.2): type accuracy and weighted F1,
RougeL of the predicted reference fragments against the gold ones, and 4-gram precision of
the predicted fragments against the source (fidelity to the document)."""
from __future__ import annotations

from statistics import mean

from data_builders.prompts import article_of
from data_builders.schema import SENTENCE_TYPES
from eval.metrics import multiclass_scores, ngram_precision, rouge_l
from eval.predictions import anah_decision


def _scores(rows: list[dict]) -> dict:
    out = multiclass_scores([r["gold"] for r in rows], [r["pred"] for r in rows], SENTENCE_TYPES)
    rouge = [r["rougeL"] for r in rows if r["rougeL"] is not None]
    pre4 = [r["pre4"] for r in rows if r["pre4"] is not None]
    out["rougeL"] = mean(rouge) if rouge else None
    out["pre4"] = mean(pre4) if pre4 else None
    return out


def score_anah(gold: list[dict], preds: dict[str, dict]) -> tuple[dict, list[dict]]:
    rows = []
    for rec in gold:
        ann = anah_decision(preds.get(rec["id"]))
        gold_ref = " ".join(rec.get("reference") or [])
        pred_ref = " ".join(ann.reference) if ann else ""
        scored_ref = rec["type"] != "no_fact" and bool(gold_ref)
        rows.append({
            "id": rec["id"], "gold": rec["type"], "pred": ann.type if ann else None,
            "raw": (preds.get(rec["id"]) or {}).get("output"), "correct": bool(ann) and ann.type == rec["type"],
            "language": rec.get("language"), "test_group": (rec.get("meta") or {}).get("test_group"),
            "pred_reference": ann.reference if ann else [],
            "rougeL": rouge_l(pred_ref, gold_ref) if scored_ref else None,
            "pre4": ngram_precision(pred_ref, article_of(rec)) if pred_ref else None,
        })
    metrics = _scores(rows)
    metrics["by_language"] = {lang: _scores([r for r in rows if r["language"] == lang])
                              for lang in sorted({r["language"] for r in rows if r["language"]})}
    groups = sorted({r["test_group"] for r in rows if r["test_group"]})
    if groups:     # Table 6: unseen-topic ('T') and unseen-question ('Q') test sets
        metrics["by_test_group"] = {g: _scores([r for r in rows if r["test_group"] == g]) for g in groups}
    metrics["missing_ids"] = [r["id"] for r in gold if r["id"] not in preds]
    return metrics, rows
