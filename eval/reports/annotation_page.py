"""An annotated file as a page a person reads: every row's response with its flagged spans
highlighted (stronger for a higher probability; hover for probability, type, correction and reason),
its verdict and score, its source folded away, and a switch that shows the flagged rows only.
`eval.annotate` writes it beside its output (`<output>.html`); one file, no asset from elsewhere."""
from __future__ import annotations

import html
from pathlib import Path

STYLE = """body { font: 15px/1.5 system-ui, sans-serif; max-width: 62rem; margin: 2rem auto; padding: 0 1rem; }
.row { border-top: 1px solid #ddd; padding: .6rem 0; }
.head { font-weight: 600; } .faithful { color: #276227; } .hallucinated { color: #a11; }
.response { white-space: pre-wrap; } details { color: #555; } .source { white-space: pre-wrap; font-size: 13px; }
mark { background: rgba(220, 40, 40, var(--p)); border-radius: 2px; cursor: help; }
body.flagged-only .row.clean { display: none; }"""
SCRIPT = """document.getElementById("only").addEventListener("change", (e) =>
  document.body.classList.toggle("flagged-only", e.target.checked));"""


def _span_title(span: dict, out: dict) -> str:
    parts = [f"probability {span['prob']:.3f}" if isinstance(span.get("prob"), (int, float)) else None,
             f"type: {span.get('type') or out.get('type')}" if span.get("type") or out.get("type") else None,
             f"correction: {out['correction']}" if out.get("correction") else None,
             f"reason: {out['reason']}" if out.get("reason") else None]
    return "\n".join(p for p in parts if p) or "flagged"


def _strength(span: dict, out: dict) -> float:
    p = span.get("prob", out.get("score"))
    return 0.25 + 0.6 * min(1.0, max(0.0, float(p))) if isinstance(p, (int, float)) else 0.6


def highlighted(response: str, out: dict) -> str:
    """The response as HTML with each flagged span in a <mark> (overlapping spans: the first wins)."""
    parts, at = [], 0
    for span in sorted(out.get("spans") or [], key=lambda s: s["start"]):
        if span["start"] < at:
            continue
        parts.append(html.escape(response[at:span["start"]]))
        parts.append(f'<mark style="--p: {_strength(span, out):.2f}" title="{html.escape(_span_title(span, out))}" '
                     f'data-start="{span["start"]}" data-end="{span["end"]}">'
                     f'{html.escape(response[span["start"]:span["end"]])}</mark>')
        at = span["end"]
    parts.append(html.escape(response[at:]))
    return "".join(parts)


def _row_html(row: dict, out: dict) -> str:
    flagged = out.get("label") == "hallucinated" or bool(out.get("spans"))
    label = out.get("label") or ("unparseable" if out.get("unparseable") else "none")
    score = f", score {out['score']:.3f}" if isinstance(out.get("score"), (int, float)) else ""
    source = row.get("source") or "\n---\n".join(row.get("documents") or [])
    question = f'<div><b>Question:</b> {html.escape(row["question"])}</div>' if row.get("question") else ""
    return (f'<div class="row {"flagged" if flagged else "clean"}">'
            f'<div class="head">{html.escape(str(out.get("id")))}: <span class="{html.escape(str(label))}">'
            f'{html.escape(str(label))}</span>{score}, {len(out.get("spans") or [])} span(s)</div>{question}'
            f'<div class="response">{highlighted(row["response"], out)}</div>'
            f'<details><summary>source</summary><div class="source">{html.escape(source)}</div></details></div>')


def write_annotated_page(output: Path, rows: list[dict], outs: list[dict]) -> Path:
    """Writes `<output>.html` for the input rows and their output rows (same order); returns its path."""
    if len(rows) != len(outs):
        raise ValueError(f"{len(outs)} output rows for {len(rows)} input rows")
    flagged = sum(o.get("label") == "hallucinated" or bool(o.get("spans")) for o in outs)
    page = output.with_name(output.name + ".html")
    body = "\n".join(_row_html(row, out) for row, out in zip(rows, outs))
    page.write_text(f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{html.escape(output.name)}</title><style>{STYLE}</style></head>
<body><h1>Annotations of {html.escape(output.name)}</h1>
<p>{len(outs):,} rows, {flagged:,} flagged. <label><input type="checkbox" id="only"> flagged rows only</label></p>
{body}
<script>{SCRIPT}</script></body></html>
""", encoding="utf-8")
    return page
