"""Writing a scored run: metrics.json, predictions.parsed.jsonl, report.md and PNG plots."""
from __future__ import annotations

import json
from pathlib import Path

from data_builders.schema import LENGTH_BUCKETS, read_jsonl, write_jsonl
from eval import plots


def _pct(x) -> str:
    return "-" if x is None else f"{100 * x:.2f}"


def _num(x, digits=4) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


def _missing(metrics: dict) -> list[str]:
    ids = metrics.get("missing_ids") or []
    if not ids:
        return []
    shown = ", ".join(ids[:20]) + (" ..." if len(ids) > 20 else "")
    return ["", f"**{len(ids)} gold ids had no prediction** (counted as parse failures): {shown}"]


def longnovel_markdown(m: dict) -> list[str]:
    lines = ["| bucket | n | Hallu. | Non-H. | Acc. | MCC | parse failures |", "|---|---|---|---|---|---|---|"]
    for name, s in [*m["by_bucket"].items(), ("overall", m["overall"])]:
        lines.append(f"| {name} | {s['n']} | {_pct(s['hallu_acc'])} | {_pct(s['nonhallu_acc'])} | "
                     f"{_pct(s['acc'])} | {_num(s['mcc'])} | {s['parse_failures']} |")
    for key, label in (("by_type", "hallucination type"), ("by_position", "position")):
        if m[key]:
            lines += ["", f"| {label} | n | recall |", "|---|---|---|"]
            lines += [f"| {k} | {v['n']} | {_pct(v['recall'])} |" for k, v in m[key].items()]
    if m.get("localisation"):
        loc = m["localisation"]
        lines += ["", f"Of the {loc['n']} hallucinated summaries found, {_pct(loc['flagged_right'])}% were found "
                      "at the hallucinated sentence (the sentence the annotator flagged)."]
    return lines


def binary_markdown(m: dict) -> list[str]:
    keys = ("acc", "balanced_acc", "f1", "precision", "recall", "f1_macro")
    return ["| n | " + " | ".join(keys) + " | MCC | parse failures |", "|---" * (len(keys) + 3) + "|",
            f"| {m['n']} | " + " | ".join(_pct(m[k]) for k in keys) + f" | {_num(m['mcc'])} | {m['parse_failures']} |"]


def anah_markdown(m: dict) -> list[str]:
    lines = ["| split | n | Acc. | F1 (weighted) | RougeL | BERTScore | Pre4 | parse failures |",
             "|---|---|---|---|---|---|---|---|"]
    groups = [(f"unseen {g.split('_')[1]}", v) for g, v in m.get("by_test_group", {}).items()]
    for name, s in [*m["by_language"].items(), *groups, ("all", m)]:
        lines.append(f"| {name} | {s['n']} | {_pct(s['acc'])} | {_pct(s['f1_weighted'])} | {_pct(s['rougeL'])} | "
                     f"{_pct(s.get('bertscore_f1'))} | {_pct(s['pre4'])} | {s['parse_failures']} |")
    support = m.get("support") or {}
    if support:
        majority = max(support, key=support.get)
        lines += ["", "| gold type | n | recall |", "|---|---|---|"]
        lines += [f"| {t} | {support[t]} | {_pct(m['recall_by_type'][t])} |" for t in support]
        lines += ["", f"Majority class: {majority} ({_pct(support[majority] / m['n'])}% of the records); "
                  f"accuracy {_pct(m['acc'])}%."]
    return lines + ["", "RougeL and BERTScore compare the generated annotation with the gold annotation text (jieba "
                    "words for Chinese); Pre4 is ANAH's 4-gram precision of the predicted reference fragments against "
                    "the document shown (characters for Chinese, words for English)."]


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


def no_plots(m: dict, rows: list[dict], out: Path) -> list[str]:
    return []


def write_eval(out_dir: Path, scorer, metrics: dict, rows: list[dict], plot: bool = True) -> None:
    """metrics.json, predictions.parsed.jsonl and report.md (with PNG plots) of a scored run;
    `scorer` is its `eval.scoring.Scorer`."""
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
