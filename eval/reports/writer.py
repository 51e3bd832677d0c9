"""Writing a scored run: metrics.json, predictions.parsed.jsonl, report.md and PNG plots."""
from __future__ import annotations

import json
from pathlib import Path

from data_builders.records import read_jsonl, write_jsonl
from eval.reports import plots


def _missing(metrics: dict) -> list[str]:
    ids = metrics.get("missing_ids") or []
    if not ids:
        return []
    shown = ", ".join(ids[:20]) + (" ..." if len(ids) > 20 else "")
    return ["", f"**{len(ids)} gold ids had no prediction** (counted as parse failures): {shown}"]


def write_eval(out_dir: Path, scorer, metrics: dict, rows: list[dict], plot: bool = True) -> None:
    """metrics.json, predictions.parsed.jsonl and report.md (with PNG plots) of a scored run;
    `scorer` is its `eval.scorers.scoring.Scorer`."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "metrics.json").write_text(json.dumps(metrics, indent=2, ensure_ascii=False), encoding="utf-8")
    write_jsonl(out_dir / "predictions.parsed.jsonl", rows)
    lines = [f"# {scorer.title}", "", *scorer.markdown(metrics), *_missing(metrics)]
    if plot:
        made = scorer.plots(metrics, rows, out_dir)
        plots.confusion([r["gold"] for r in rows], [r["pred"] for r in rows], list(scorer.labels),
                        out_dir / "confusion.png", "Confusion matrix" + scorer.labels_note)
        lines += ["", *[f"![{p}]({p})" for p in [*made, "confusion.png"]]]
    (out_dir / "report.md").write_text("\n".join(lines) + "\n", encoding="utf-8")


def read_rows(path: Path) -> list[dict]:
    """The rows of a predictions.parsed.jsonl written by `write_eval`."""
    return read_jsonl(path)


def report_text(out_dir: Path) -> str:
    return (Path(out_dir) / "report.md").read_text(encoding="utf-8")
