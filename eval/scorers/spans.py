"""Span-level scoring (RAGTruth's and LettuceDetect's protocol): character-level precision / recall /
F1 of the predicted spans against the gold `spans`, pooled over all responses, and the response-level
(example) judgement, where a response is hallucinated when it has a span; both overall and per task
type (RAGTruth's Summary / QA / Data2txt from `meta.task_type`, else the record's `task`).

A prediction row carries `"spans": [[start, end], ...]` (or `{"start", "end"}` objects, as
`eval.annotate` writes them), character offsets into the response; a `label` / `probs` beside them
decides the response-level judgement instead.
"""
from __future__ import annotations

from data_builders.records import gold_spans
from eval.scorers.binary import annotation_row
from eval.scorers.decisions import binary_decision, response_score
from eval.scorers.metrics import rows_classification
from eval.scorers.scorer_spec import Figure, Scorer, Summary, no_plots, no_tables, num, pct


class SpanError(ValueError):
    pass


def prediction_spans(row: dict | None) -> list[tuple[int, int]] | None:
    """[(start, end)] of a prediction row; None when it has no `spans`."""
    if row is None or row.get("spans") is None:
        return None
    spans = row["spans"]
    if not isinstance(spans, list):
        raise SpanError(f"spans: expected a list of [start, end], found {type(spans).__name__}")
    out = []
    for i, s in enumerate(spans):
        bounds = (s.get("start"), s.get("end")) if isinstance(s, dict) else tuple(s) if isinstance(s, list) else ()
        if len(bounds) != 2 or not all(type(b) is int for b in bounds) or not 0 <= bounds[0] <= bounds[1]:
            raise SpanError(f"spans[{i}]: expected [start, end] with 0 <= start <= end, found {s!r:.60}")
        out.append(bounds)
    return out


def chars(spans) -> set[int]:
    return {i for start, end in spans for i in range(start, end)}


def prf(tp: int, predicted: int, gold: int) -> dict:
    p = tp / predicted if predicted else 0.0
    r = tp / gold if gold else 0.0
    return {"precision": p, "recall": r, "f1": 2 * p * r / (p + r) if p + r else 0.0,
            "pred_chars": predicted, "gold_chars": gold}


def _group(rows: list[dict]) -> dict:
    example = rows_classification(rows)
    return {"n": len(rows), "example": example,
            "char": prf(sum(r["overlap"] for r in rows), sum(r["pred_chars"] for r in rows),
                        sum(r["gold_chars"] for r in rows))}


def score_spans(gold: list[dict], preds: dict[str, dict], bertscore=None) -> tuple[dict, list[dict]]:
    rows = []
    for rec in gold:
        row = preds.get(rec["id"])
        predicted = prediction_spans(row)
        g, p = chars(gold_spans(rec)), chars(predicted or [])
        label = binary_decision(row)[0] if row and ("label" in row or "probs" in row) else \
            (int(bool(predicted)) if predicted is not None else None)
        gold_label = int(bool(rec["spans"])) if rec.get("label") is None else rec["label"]
        rows.append({"id": rec["id"], "task": (rec.get("meta") or {}).get("task_type") or rec["task"],
                     "gold": gold_label, "pred": label, "score": response_score(row), "correct": label == gold_label,
                     "gold_chars": len(g), "pred_chars": len(p), "overlap": len(g & p)})
    metrics = _group(rows)
    tasks = sorted({r["task"] for r in rows})
    if len(tasks) > 1:
        metrics["by_task"] = {t: _group([r for r in rows if r["task"] == t]) for t in tasks}
    metrics["parse_failures"] = metrics["example"]["parse_failures"]
    metrics["missing_ids"] = [r["id"] for r in gold if r["id"] not in preds]
    return metrics, rows


def spans_markdown(m: dict) -> list[str]:
    lines = ["| task | n | example P | example R | example F1 | ROC AUC | char P | char R | char F1 | parse failures |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for name, g in [*(m.get("by_task") or {}).items(), ("all", m)]:
        e, c = g["example"], g["char"]
        lines.append(f"| {name} | {g['n']} | {pct(e['precision'])} | {pct(e['recall'])} | {pct(e['f1'])} | "
                     f"{num(e.get('roc_auc'))} | {pct(c['precision'])} | {pct(c['recall'])} | {pct(c['f1'])} | "
                     f"{e['parse_failures']} |")
    return lines + ["", "Example level: a response is hallucinated when it has a span (or as its label says). "
                    "Character level: the overlap of predicted and gold span characters, pooled over all "
                    "responses. ROC AUC: how the response scores rank the responses, whatever the threshold "
                    "(pooled over folds, it ranks each fold's scores against the others')."]


def spans_summary(m: dict) -> Summary:
    e = m["example"]
    return Summary(m["n"], m["parse_failures"], e["acc"], e["mcc"], {}, None)


SCORER = Scorer("spans", "Hallucinated spans", ("spans",), score_spans, spans_markdown, no_plots, no_tables, (0, 1),
                spans_summary, annotation_row, " (1 = the response has a span)", span_f1=True,
                headline=(Figure("response F1", ("example", "f1")), Figure("character F1", ("char", "f1"))))
