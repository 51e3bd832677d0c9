"""The one record schema shared by builders, collators and the harness.

A record is a plain dict; `validate_record` checks the core fields of
DESIGN.md and raises `RecordError` naming file, line and field.
"""
from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

TASKS = ("summarization", "qa", "nli", "dialogue", "continuation")
SENTENCE_TYPES = ("none", "contradictory", "unverifiable", "no_fact")
HALLUCINATION_TYPES = (
    "entity", "numerical", "relation", "logical_inversion",
    "event", "temporal", "causal", "event_fabrication",
)
FAITHFULNESS_LABELS = ("intrinsic", "extrinsic", "paraphrase_error", "faithful")
POSITIONS = ("beginning", "middle", "end")
LENGTH_BUCKETS = ("S", "M", "L", "XL", "XXL")

_LIST_VOCAB = {
    "hallucination_types": HALLUCINATION_TYPES,
    "faithfulness_labels": FAITHFULNESS_LABELS,
}
_SCALAR_VOCAB = {
    "task": TASKS,
    "type": SENTENCE_TYPES,
    "position": POSITIONS,
    "length_bucket": LENGTH_BUCKETS,
}
_STR_LISTS = ("documents", "reference", "hallucinated_sentences", "corrections", "reasons")


class RecordError(ValueError):
    """A record broke the schema; the message names file, line and field."""

    def __init__(self, message: str, path: str | None = None, line: int | None = None,
                 field: str | None = None):
        where = f"{path or '<memory>'}:{line if line is not None else '?'}"
        if field:
            where += f" field '{field}'"
        super().__init__(f"{where}: {message}")
        self.path, self.line, self.field = path, line, field


@dataclass
class _Where:
    path: str | None = None
    line: int | None = None

    def error(self, field: str, message: str) -> RecordError:
        return RecordError(message, self.path, self.line, field)


def validate_record(rec: Any, path: str | None = None, line: int | None = None) -> dict:
    """Return `rec` unchanged if it satisfies the schema, else raise RecordError."""
    where = _Where(path, line)
    if not isinstance(rec, dict):
        raise where.error("<record>", f"expected a JSON object, found {type(rec).__name__}")
    for name in ("id", "task", "language", "response"):
        if name not in rec:
            raise where.error(name, "missing required field")
    for name in ("id", "language", "response"):
        _expect_type(rec, name, str, where)
    if "source" not in rec and "documents" not in rec:
        raise where.error("source", "missing: a record needs 'source' (str) or 'documents' (list of str)")
    if "source" in rec:
        _expect_type(rec, "source", str, where)
    if "question" in rec and rec["question"] is not None:
        _expect_type(rec, "question", str, where)
    if "label" in rec and rec["label"] is not None and rec["label"] not in (0, 1):
        raise where.error("label", f"expected 0 (faithful) or 1 (hallucinated), found {rec['label']!r}")
    for name, vocab in _SCALAR_VOCAB.items():
        if rec.get(name) is not None and rec[name] not in vocab:
            raise where.error(name, f"expected one of {list(vocab)}, found {rec[name]!r}")
    for name in _STR_LISTS:
        if rec.get(name) is not None:
            _expect_str_list(rec, name, where)
    for name, vocab in _LIST_VOCAB.items():
        if rec.get(name) is not None:
            _expect_str_list(rec, name, where)
            bad = [v for v in rec[name] if v not in vocab]
            if bad:
                raise where.error(name, f"expected values in {list(vocab)}, found {bad}")
    if rec.get("spans") is not None:
        _expect_spans(rec, where)
    if rec.get("n_tokens") is not None and (not isinstance(rec["n_tokens"], int) or rec["n_tokens"] < 0):
        raise where.error("n_tokens", f"expected a non-negative int, found {rec['n_tokens']!r}")
    if rec.get("meta") is not None and not isinstance(rec["meta"], dict):
        raise where.error("meta", f"expected an object, found {type(rec['meta']).__name__}")
    return rec


def _expect_type(rec: dict, name: str, typ: type, where: _Where) -> None:
    if not isinstance(rec[name], typ):
        raise where.error(name, f"expected {typ.__name__}, found {type(rec[name]).__name__}")


def _expect_spans(rec: dict, where: _Where) -> None:
    """`spans`: the annotated parts of the response, [start, end) character offsets into it (Python
    string indices), each with an optional `type`; other keys (the span's text, a benchmark's flags)
    ride along."""
    spans, n = rec["spans"], len(rec["response"])
    if not isinstance(spans, list):
        raise where.error("spans", f"expected a list of {{start, end, type?}}, found {type(spans).__name__}")
    for i, span in enumerate(spans):
        ok = isinstance(span, dict) and all(type(span.get(k)) is int for k in ("start", "end"))
        if not ok or not 0 <= span["start"] < span["end"] <= n:
            raise where.error("spans", f"spans[{i}]: expected {{start, end}} with 0 <= start < end <= {n} "
                                       f"(the response's length), found {span!r:.80}")
        if span.get("type") is not None and not isinstance(span["type"], str):
            raise where.error("spans", f"spans[{i}].type: expected str, found {span['type']!r:.40}")


def _expect_str_list(rec: dict, name: str, where: _Where) -> None:
    value = rec[name]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise where.error(name, f"expected a list of str, found {value!r:.80}")


def iter_jsonl(path: str | Path, torn_tail_ok: bool = False) -> Iterator[tuple[int, Any]]:
    """Yield (line number, parsed object) for each non-blank line; bad JSON raises RecordError
    naming the file and line. With `torn_tail_ok`, a last line with no newline that does not
    parse (a writer stopped mid-row) is skipped, with a message: resumable outputs read so."""
    path = str(path)
    with open(path, "rb") as f:
        raw = list(enumerate(f, start=1))
    lines = []
    for lineno, data in raw:
        try:       # a byte-order mark at the start of the file is not part of the first row
            lines.append((lineno, data.decode("utf-8-sig" if lineno == 1 else "utf-8")))
        except UnicodeDecodeError as e:
            raise RecordError(f"not UTF-8: byte {data[e.start]:#04x} at column {e.start + 1}", path, lineno) from None
    for lineno, text in lines:
        if not text.strip():
            continue
        try:
            yield lineno, json.loads(text)
        except json.JSONDecodeError as e:
            if torn_tail_ok and lineno == len(lines) and not text.endswith("\n"):
                logger.warning(f"{path}:{lineno}: skipping a partly written last line ({len(text)} characters)")
                return
            raise RecordError(f"malformed JSON: {e.msg} (column {e.colno})", path, lineno) from None


def read_jsonl(path: str | Path, torn_tail_ok: bool = False) -> list[Any]:
    """Every object of a JSONL file (blank lines skipped); see `iter_jsonl`."""
    return [obj for _, obj in iter_jsonl(path, torn_tail_ok)]


def read_jsonl_to_append(path: str | Path) -> list[Any]:
    """The rows of a JSONL file a writer will append to (a resumed run): a torn last line is
    skipped and cut off the file, so that the next row starts on a line of its own."""
    path = Path(path)
    if not path.exists():
        return []
    rows = read_jsonl(path, torn_tail_ok=True)
    data = path.read_bytes()
    if data and not data.endswith(b"\n"):
        with open(path, "r+b") as f:
            f.truncate(data.rfind(b"\n") + 1)
    return rows


def read_records(path: str | Path) -> list[dict]:
    """Read and validate a JSONL file of records; duplicate ids are an error."""
    records, seen = [], {}
    for lineno, obj in iter_jsonl(path):
        validate_record(obj, str(path), lineno)
        if obj["id"] in seen:
            raise RecordError(f"duplicate id {obj['id']!r} (first on line {seen[obj['id']]})",
                              str(path), lineno, "id")
        seen[obj["id"]] = lineno
        records.append(obj)
    if not records:
        raise RecordError("no records: the file is empty", str(path), None)
    return records


def gold_spans(rec: dict) -> list[tuple[int, int]]:
    """A record's gold `spans` as (start, end) character pairs; [] where it has none."""
    return [(s["start"], s["end"]) for s in rec.get("spans") or []]


def write_jsonl(path: str | Path, rows: Iterable[dict]) -> int:
    """Write rows as JSONL (UTF-8, no ASCII escaping); returns the count."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    n = 0
    with open(path, "w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
            n += 1
    return n
