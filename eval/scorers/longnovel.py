"""Scoring LongNovel detection (seed 000, section 4.3): Acc and MCC overall and per bucket,
recall per hallucination type and per position."""
from __future__ import annotations

from pathlib import Path

from data_builders.records import HALLUCINATION_TYPES, LENGTH_BUCKETS, POSITIONS
from eval.reports import plots
from eval.scorers.binary import annotation_row
from eval.scorers.decisions import binary_decision
from eval.scorers.metrics import binary_scores, recall
from eval.scorers.scorer_spec import Figure, Scorer, Table, detection_summary, num, pct, table_rows


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


def longnovel_markdown(m: dict) -> list[str]:
    lines = ["| bucket | n | Hallu. | Non-H. | Acc. | MCC | parse failures |", "|---|---|---|---|---|---|---|"]
    for name, s in [*m["by_bucket"].items(), ("overall", m["overall"])]:
        lines.append(f"| {name} | {s['n']} | {pct(s['hallu_acc'])} | {pct(s['nonhallu_acc'])} | "
                     f"{pct(s['acc'])} | {num(s['mcc'])} | {s['parse_failures']} |")
    for key, label in (("by_type", "hallucination type"), ("by_position", "position")):
        if m[key]:
            lines += ["", f"| {label} | n | recall |", "|---|---|---|"]
            lines += [f"| {k} | {v['n']} | {pct(v['recall'])} |" for k, v in m[key].items()]
    if m.get("localisation"):
        loc = m["localisation"]
        lines += ["", f"Of the {loc['n']} hallucinated summaries found, {pct(loc['flagged_right'])}% were found "
                      "at the hallucinated sentence (the sentence the annotator flagged)."]
    return lines


def _type_recall(rows: list[dict], htype: str, bucket: str) -> float | None:
    hits = [r["pred"] == 1 for r in rows if htype in r["types"] and r["length_bucket"] == bucket]
    return sum(hits) / len(hits) if hits else None


def longnovel_plots(m: dict, rows: list[dict], out: Path) -> list[str]:
    """Accuracy per bucket, and recall per hallucination type and bucket."""
    made = []
    if m["by_bucket"]:
        plots.bucket_bars(m["by_bucket"], out / "buckets.png")
        made.append("buckets.png")
    if m["by_type"]:
        buckets = [b for b in LENGTH_BUCKETS if any(r["length_bucket"] == b for r in rows)]
        table = {t: {**{b: _type_recall(rows, t, b) for b in buckets}, "all": v["recall"]}
                 for t, v in m["by_type"].items()}
        plots.recall_heatmap(table, out / "type_recall.png", "Recall per hallucination type")
        made.append("type_recall.png")
    return made


def longnovel_tables(metrics: dict) -> dict[str, Table]:
    """Per-bucket Acc / MCC, and per-type and per-position recall."""
    keys = ("n", "hallu_acc", "nonhallu_acc", "acc", "mcc", "parse_failures")
    return {"buckets": (["bucket", *keys], table_rows({**metrics["by_bucket"], "overall": metrics["overall"]}, keys)),
            "type_recall": (["type", "n", "recall"], table_rows(metrics.get("by_type") or {}, ("n", "recall"))),
            "position_recall": (["position", "n", "recall"],
                                table_rows(metrics.get("by_position") or {}, ("n", "recall")))}


SCORER = Scorer("longnovel", "LongNovel detection", ("label",), score_longnovel, longnovel_markdown, longnovel_plots,
                longnovel_tables, (0, 1), detection_summary, annotation_row, " (1 = hallucinated)",
                headline=(Figure("accuracy", ("overall", "acc")), Figure("MCC", ("overall", "mcc"), percent=False)))
