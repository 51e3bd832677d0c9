"""Scoring LongNovel detection outputs: metrics.json, parsed predictions and a report."""
from __future__ import annotations

import json
from pathlib import Path

from data_builders.schema import HALLUCINATION_TYPES, LENGTH_BUCKETS, POSITIONS, write_jsonl
from eval.metrics import binary_scores, recall
from eval.parsers import parse_longnovel_verdict


def score_longnovel(gold: list[dict], outputs: dict[str, str]) -> tuple[dict, list[dict]]:
    """Metrics and per-record rows; gold ids without an output count as parse failures."""
    rows = []
    for rec in gold:
        raw = outputs.get(rec["id"])
        verdict = parse_longnovel_verdict(raw) if raw is not None else None
        pred = verdict.label if verdict else None
        rows.append({"id": rec["id"], "gold": rec["label"], "pred": pred, "raw": raw,
                     "pred_types": verdict.types if verdict else [],
                     "correct": pred == rec["label"], "length_bucket": rec.get("length_bucket"),
                     "position": rec.get("position"), "types": rec.get("hallucination_types") or []})
    metrics = {"overall": binary_scores([r["gold"] for r in rows], [r["pred"] for r in rows]),
               "by_bucket": {}, "by_type": {}, "by_position": {}}
    for b in LENGTH_BUCKETS:
        sub = [r for r in rows if r["length_bucket"] == b]
        if sub:
            metrics["by_bucket"][b] = binary_scores([r["gold"] for r in sub], [r["pred"] for r in sub])
    for t in HALLUCINATION_TYPES:
        sub = [(r["gold"], r["pred"]) for r in rows if t in r["types"]]
        if sub:
            metrics["by_type"][t] = recall(sub)
    for p in POSITIONS:
        sub = [(r["gold"], r["pred"]) for r in rows if r["position"] == p and r["gold"] == 1]
        if sub:
            metrics["by_position"][p] = recall(sub)
    return metrics, rows


def _pct(x) -> str:
    return "-" if x is None else f"{100 * x:.2f}"


def report_markdown(metrics: dict, title: str = "LongNovel detection") -> str:
    lines = [f"# {title}", "", "| bucket | n | Hallu. | Non-H. | Acc. | MCC | parse failures |",
             "|---|---|---|---|---|---|---|"]
    for name, m in [*metrics["by_bucket"].items(), ("overall", metrics["overall"])]:
        mcc = "-" if m["mcc"] is None else f"{m['mcc']:.4f}"
        lines.append(f"| {name} | {m['n']} | {_pct(m['hallu_acc'])} | {_pct(m['nonhallu_acc'])} | "
                     f"{_pct(m['acc'])} | {mcc} | {m['parse_failures']} |")
    for key, label in (("by_type", "type"), ("by_position", "position")):
        if metrics[key]:
            lines += ["", f"| {label} | n | recall |", "|---|---|---|"]
            lines += [f"| {k} | {v['n']} | {_pct(v['recall'])} |" for k, v in metrics[key].items()]
    return "\n".join(lines) + "\n"


def write_eval(out_dir: Path, metrics: dict, rows: list[dict]) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "metrics.json").write_text(json.dumps(metrics, indent=2, ensure_ascii=False), encoding="utf-8")
    write_jsonl(out_dir / "predictions.parsed.jsonl", rows)
    (out_dir / "report.md").write_text(report_markdown(metrics), encoding="utf-8")
