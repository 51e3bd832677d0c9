"""Importer for SummEdits (salesforce/factualNLG, `data/summedits/summedits_<domain>.json`): a
document, a summary made by editing a seed summary, and whether the edit kept it consistent.

`label` 1 = consistent, 0 = inconsistent in the released files; a record's `label` is 1 for a
hallucinated (inconsistent) summary. The domain comes from the file name (`summedits_news.json`:
`news`), kept in `meta.domain` beside `edit_types`, `original_summary` and the released `split`
(`evaluation` | `test`); `meta.doc_id` names the document, which every summary of it shares.
`meta.edited_spans` are the summary's character spans whose words differ from the seed summary's (a
word-level diff; a deletion marks the word after it): where an inconsistent summary's error lies, give or
take the consistent edits made with it.
"""
from __future__ import annotations

import difflib
import hashlib
import json
import re
from pathlib import Path

from data_builders.importers.registry import Splits, importer, one_split
from data_builders.records import RecordError, validate_record

REQUIRED = ("id", "doc", "summary", "label")
PREFIX = "summedits_"
TOKEN = re.compile(r"\w+|[^\w\s]")


def edited_spans(summary: str, seed: str | None) -> list[list[int]]:
    """The character spans of `summary` whose tokens a word-level diff against `seed` finds changed or inserted;
    a deleted run marks the token that follows it (the one before, at the end)."""
    if not seed:
        return []
    said = list(TOKEN.finditer(summary))
    ops = difflib.SequenceMatcher(a=TOKEN.findall(seed), b=[m.group() for m in said], autojunk=False).get_opcodes()
    spans: list[list[int]] = []
    for op, _, _, j1, j2 in ops:
        if op == "equal" or not said:
            continue
        if op == "delete":
            j1 = min(j1, len(said) - 1)
            j2 = j1 + 1
        start, end = said[j1].start(), said[j2 - 1].end()
        if spans and start <= spans[-1][1] + 1:
            spans[-1][1] = max(spans[-1][1], end)
        else:
            spans.append([start, end])
    return spans


def domain_of(path: Path) -> str:
    if not path.stem.startswith(PREFIX):
        raise RecordError(f"expected a file named {PREFIX}<domain>.json, as SummEdits releases them", str(path),
                          None)
    return path.stem[len(PREFIX):]


def import_summedits(path: str | Path) -> list[dict]:
    path = Path(path)
    domain = domain_of(path)
    try:
        rows = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise RecordError(f"malformed JSON ({e.msg}, line {e.lineno})", str(path), None) from None
    if not isinstance(rows, list):
        raise RecordError(f"expected a JSON list of samples, found {type(rows).__name__}", str(path), None)
    records = []
    for i, row in enumerate(rows):
        for name in REQUIRED:
            if not isinstance(row, dict) or name not in row:
                raise RecordError(f"sample {i}: missing required field", str(path), None, name)
        if row["label"] not in (0, 1):
            raise RecordError(f"sample {i}: expected label 0 (inconsistent) or 1 (consistent), found "
                              f"{row['label']!r}", str(path), None, "label")
        rec = {"id": f"summedits-{domain}-{row['id']}", "task": "summarization", "language": "en",
               "source": row["doc"], "response": row["summary"], "label": 1 - row["label"],
               "meta": {"domain": domain, "split": row.get("split"), "edit_types": row.get("edit_types") or [],
                        "original_summary": row.get("original_summary"),
                        "edited_spans": edited_spans(row["summary"], row.get("original_summary")),
                        "doc_id": hashlib.sha1(row["doc"].encode("utf-8")).hexdigest()[:12]}}
        records.append(validate_record(rec, str(path), None))
    return records


def domain_counts(rows: list[dict]) -> str:
    counts: dict[str, list[int]] = {}
    for r in rows:
        c = counts.setdefault(r["meta"]["domain"], [0, 0, 0])
        c[0] += 1
        c[1] += r["label"]
    for domain in counts:
        counts[domain][2] = len({r["meta"]["doc_id"] for r in rows if r["meta"]["domain"] == domain})
    return "\n".join(f"  {d}: {n} summaries ({h} inconsistent) over {docs} documents"
                     for d, (n, h, docs) in counts.items())


@importer("summedits", "SummEdits' data/summedits/summedits_<domain>.json (one file per domain)")
def convert_summedits(args) -> tuple[Splits, str]:
    rows = [r for p in args.inputs for r in import_summedits(p)]
    splits, report = one_split(rows, args.split)
    return splits, report + "\n" + domain_counts(rows)
