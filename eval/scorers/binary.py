"""Scoring binary hallucination detection (HalluMix-style, seed 001 section 4)."""
from __future__ import annotations

from eval.scorers.decisions import binary_decision, response_score
from eval.scorers.metrics import rows_classification
from eval.scorers.parsers import parse_longnovel_verdict, type_key
from eval.scorers.scorer_spec import Figure, Scorer, detection_summary, no_plots, no_tables, num, pct, span


def score_binary(gold: list[dict], preds: dict[str, dict], bertscore=None) -> tuple[dict, list[dict]]:
    """Metrics and per-record rows (`bertscore`: unused; every scorer takes it)."""
    rows = []
    for rec in gold:
        pred, _ = binary_decision(preds.get(rec["id"]))
        raw = preds.get(rec["id"], {})
        rows.append({"id": rec["id"], "gold": rec["label"], "pred": pred, "raw": raw.get("output", raw.get("probs")),
                     "score": response_score(preds.get(rec["id"])), "correct": pred == rec["label"],
                     "language": rec.get("language")})
    metrics = rows_classification(rows)
    metrics["missing_ids"] = [r["id"] for r in gold if r["id"] not in preds]
    return metrics, rows


def binary_markdown(m: dict) -> list[str]:
    keys = ("acc", "balanced_acc", "f1", "precision", "recall", "f1_macro")
    return ["| n | " + " | ".join(keys) + " | MCC | ROC AUC | parse failures |", "|---" * (len(keys) + 4) + "|",
            f"| {m['n']} | " + " | ".join(pct(m[k]) for k in keys) +
            f" | {num(m['mcc'])} | {num(m.get('roc_auc'))} | {m['parse_failures']} |"]


def annotation_row(rec: dict, pred: dict) -> dict:
    """`eval.annotate`'s fields for a hallucinated / faithful judgement: the label, the head's score,
    the flagged spans, and a generative annotator's correction and reason."""
    label, _ = binary_decision(pred)
    if label is None:
        return {"label": None, "spans": [], "unparseable": True, "raw": pred.get("output")}
    out = {"label": "hallucinated" if label else "faithful"}
    if "probs" in pred:
        out["score"] = pred["probs"][1]
    verdict = parse_longnovel_verdict(pred.get("output")) if "output" in pred else None
    detail = next((d for d in verdict.details if isinstance(d, dict)), {}) if verdict else {}
    out["spans"] = _flagged(rec, pred, detail) if label else []
    if label and verdict is not None:
        out |= {"correction": detail.get("corrected_content"), "reason": detail.get("reason")}
    return out


def _flagged(rec: dict, pred: dict, detail: dict) -> list[dict]:
    """The sentences the annotator flags: sentence by sentence, every sentence it judges
    hallucinated (the predictor's `spans`); from the whole source, the sentence its verdict
    names, where the response has it."""
    response, kind = rec["response"], type_key(detail.get("hallucination_type"))
    if "spans" in pred:
        chosen = pred.get("flagged_sentence")
        return [span(response, a, b, kind if response[a:b] == chosen else None) for a, b in pred["spans"]]
    named = detail.get("hallucinated_sentence")
    start = response.find(named) if isinstance(named, str) and named else -1
    return [span(response, start, start + len(named), kind)] if start >= 0 else []


SCORER = Scorer("binary", "Binary hallucination detection", ("label",), score_binary, binary_markdown, no_plots,
                no_tables, (0, 1), detection_summary, annotation_row, " (1 = hallucinated)",
                headline=(Figure("balanced accuracy", ("balanced_acc",)), Figure("F1", ("f1",)),
                          Figure("MCC", ("mcc",), percent=False)))
