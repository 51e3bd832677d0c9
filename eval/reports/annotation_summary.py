"""What an annotated file says as a whole: how many rows are flagged, by any column the input rows
carry (the model that wrote the response, its task type), how the scores spread, and which spans
are flagged most often. `eval.annotate` writes it beside its output (`<output>.summary.md`, the
score histogram `<output>.scores.png`) and prints it."""
from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

from eval.reports.plots import score_histogram
from eval.thresholds import field_value

NOT_COLUMNS = {"id", "source", "documents", "response", "question", "label", "spans", "meta"}
MAX_GROUPS = 30           # a column with more distinct values (an id, a free text) is not a grouping
MAX_NUMBER_VALUES = 6     # a numeric column with more distinct values is binned, not listed value by value
BINS = 4
TOP_SPANS = 10
SPAN_CHARS = 60           # a flagged span is shown at most this long


def _column_values(rows: list[dict]) -> dict[str, set]:
    """Each scalar input column (top-level and `meta.<key>`) and the values it takes; a column holding
    anything else in some row (a list, a dict) is left out."""
    values: dict[str, set] = {}
    not_scalar: set[str] = set()
    for row in rows:
        fields = {k: v for k, v in row.items() if k not in NOT_COLUMNS}
        fields |= {f"meta.{k}": v for k, v in (row.get("meta") or {}).items()}
        for name, value in fields.items():
            if isinstance(value, (str, int, float, bool)):
                values.setdefault(name, set()).add(value)
            else:
                not_scalar.add(name)
    return {name: seen for name, seen in values.items() if name not in not_scalar}


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def group_columns(rows: list[dict]) -> list[str]:
    """The input columns to count by, as categories: strings, booleans and numbers taking at most
    MAX_NUMBER_VALUES values, with 2 to MAX_GROUPS distinct values over the rows, some value shared by
    two rows (a value per row is an id)."""
    return sorted(name for name, seen in _column_values(rows).items()
                  if 2 <= len(seen) <= MAX_GROUPS and len(seen) < len(rows)
                  and not (all(map(_is_number, seen)) and len(seen) > MAX_NUMBER_VALUES))


def binned_columns(rows: list[dict]) -> list[str]:
    """Numeric columns with more than MAX_NUMBER_VALUES values (a token count, a temperature): counted
    by BINS ranges of about equal rows, never value by value."""
    return sorted(name for name, seen in _column_values(rows).items()
                  if all(map(_is_number, seen)) and len(seen) > MAX_NUMBER_VALUES)


def _bins(values: list[float]) -> list[tuple[float, float]]:
    ordered = sorted(values)
    cuts = [ordered[min(len(ordered) - 1, (len(ordered) * k) // BINS)] for k in range(BINS)] + [ordered[-1]]
    edges = sorted(set(cuts))
    return [(lo, hi) for lo, hi in zip(edges, edges[1:])] or [(edges[0], edges[0])]


def _bin_label(value, bins: list[tuple[float, float]]) -> str:
    if not _is_number(value):
        return "(none)"
    for i, (lo, hi) in enumerate(bins):
        if value < hi or i == len(bins) - 1:
            return f"[{lo:g}, {hi:g}" + (")" if i < len(bins) - 1 else "]")
    raise AssertionError("unreachable")


def column_value(row: dict, name: str):
    value = field_value(row, name)
    return "(none)" if value is None else value


def _rates(outs: list[dict]) -> dict:
    flagged = sum(o.get("label") == "hallucinated" or bool(o.get("spans")) for o in outs)
    unparseable = sum(bool(o.get("unparseable")) for o in outs)
    scores = [o["score"] for o in outs if isinstance(o.get("score"), (int, float))]
    return {"n": len(outs), "flagged": flagged, "rate": flagged / len(outs) if outs else 0.0,
            "unparseable": unparseable, "mean_score": sum(scores) / len(scores) if scores else None}


def normalized_span(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip().lower()


def summarize(rows: list[dict], outs: list[dict]) -> dict:
    """Counts and rates over every row, by each grouping column, the labels, and the most
    frequent flagged spans; `rows` and `outs` are the input and output rows, in the same order."""
    if len(rows) != len(outs):
        raise ValueError(f"{len(outs)} output rows for {len(rows)} input rows")
    by = {}
    for name in group_columns(rows):
        groups: dict = {}
        for row, out in zip(rows, outs):
            groups.setdefault(column_value(row, name), []).append(out)
        by[name] = {value: _rates(group) for value, group in sorted(groups.items(), key=lambda kv: str(kv[0]))}
    for name in binned_columns(rows):
        bins = _bins([v for row in rows if _is_number(v := field_value(row, name))])
        binned: dict = {}
        for row, out in zip(rows, outs):
            binned.setdefault(_bin_label(field_value(row, name), bins), []).append(out)
        order = [_bin_label(lo, bins) for lo, _ in bins] + ["(none)"]
        by[name] = {label: _rates(binned[label]) for label in order if label in binned}
    spans = Counter(normalized_span(s["text"]) for o in outs for s in o.get("spans") or [] if s["text"].strip())
    return {"all": _rates(outs), "labels": dict(Counter(str(o.get("label")) for o in outs).most_common()),
            "by": by, "binned": binned_columns(rows), "top_spans": spans.most_common(TOP_SPANS),
            "n_spans": sum(spans.values())}


def _score(value: float | None) -> str:
    return "" if value is None else f"{value:.3f}"


def summary_markdown(summary: dict, title: str, histogram: str | None) -> str:
    a = summary["all"]
    lines = [f"# {title}", "",
             f"{a['n']:,} rows: {a['flagged']:,} flagged ({100 * a['rate']:.1f}%), {a['unparseable']:,} unparseable"
             + (f", mean score {a['mean_score']:.3f}" if a["mean_score"] is not None else ""), "",
             "| label | rows |", "|---|---|", *(f"| {k} | {v:,} |" for k, v in summary["labels"].items())]
    for name, groups in summary["by"].items():
        ranges = " (ranges of about equal rows)" if name in summary["binned"] else ""
        lines += ["", f"## By `{name}`{ranges}", "", "| value | rows | flagged | rate (%) | unparseable | mean score |",
                  "|---|---|---|---|---|---|"]
        lines += [f"| {value} | {g['n']:,} | {g['flagged']:,} | {100 * g['rate']:.1f} | {g['unparseable']:,} | "
                  f"{_score(g['mean_score'])} |" for value, g in groups.items()]
    if summary["top_spans"]:
        lines += ["", f"## Most frequent flagged spans ({summary['n_spans']:,} spans, case and spacing ignored)", "",
                  "| span | times |", "|---|---|"]
        lines += [f"| {_cell(text)} | {count:,} |" for text, count in summary["top_spans"]]
    if histogram:
        lines += ["", f"![scores]({histogram})"]
    return "\n".join(lines) + "\n"


def _cell(text: str) -> str:
    text = text if len(text) <= SPAN_CHARS else text[:SPAN_CHARS - 1] + "…"
    return text.replace("|", "\\|")


def write_summary(output: Path, rows: list[dict], outs: list[dict], threshold: float | None) -> str:
    """Writes `<output>.summary.md` (and `<output>.scores.png` where the rows carry scores); returns
    the markdown."""
    summary = summarize(rows, outs)
    scores = [(o["score"], o.get("label")) for o in outs if isinstance(o.get("score"), (int, float))]
    png = output.with_name(output.name + ".scores.png")
    if scores:
        score_histogram(scores, threshold, png)
    text = summary_markdown(summary, f"Annotations of {output.name}", png.name if scores else None)
    output.with_name(output.name + ".summary.md").write_text(text, encoding="utf-8")
    return text
