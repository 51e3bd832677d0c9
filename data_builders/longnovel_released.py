"""Importer for the released LongNovel files (`id`, `language`, `article`, `summary`,
`instruction`, `input`, `output`), where `output` is the gold verdict JSON of the
detection prompt. Produces records of the shared schema."""
from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from data_builders.prompts import FAITHFUL, HALLUCINATED, ZH_TYPE
from data_builders.schema import RecordError, iter_jsonl, validate_record

RELEASED_FIELDS = ("id", "language", "article", "summary", "output")
# Boundaries between the paper's buckets, in tokens (Table 3 spans S 2-4.8k ... XXL 89-111k).
BUCKET_EDGES = ((8_000, "S"), (24_000, "M"), (48_000, "L"), (80_000, "XL"))


def bucket_for_tokens(n: int) -> str:
    return next((name for edge, name in BUCKET_EDGES if n < edge), "XXL")


def _rows(path: Path):
    if path.suffix == ".jsonl":
        yield from iter_jsonl(path)
        return
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise RecordError(f"malformed JSON ({e.msg})", str(path), e.lineno) from None
    if not isinstance(data, list):
        raise RecordError("expected a JSON array of samples", str(path), 1)
    yield from enumerate(data, start=1)   # 'line' is the 1-based index in the array


def verdict_fields(output: str, path: str, line: int) -> dict:
    """Label and details of a gold verdict JSON string."""
    try:
        verdict = json.loads(output)
        flag = verdict["has_hallucination"]
        details = verdict.get("details") or []
    except (json.JSONDecodeError, TypeError, KeyError) as e:
        raise RecordError(f"expected the verdict JSON of the detection prompt ({e})", path, line, "output") from None
    if flag not in (HALLUCINATED, FAITHFUL):
        raise RecordError(f"has_hallucination: expected {HALLUCINATED!r} or {FAITHFUL!r}, found {flag!r}",
                          path, line, "output")
    types = []
    for d in details:
        zh = d.get("hallucination_type", "")
        if zh not in ZH_TYPE:
            raise RecordError(f"hallucination_type: expected one of {list(ZH_TYPE)}, found {zh!r}",
                              path, line, "output")
        types.append(ZH_TYPE[zh])
    return {
        "label": int(flag == HALLUCINATED), "hallucination_types": types,
        "hallucinated_sentences": [d.get("hallucinated_sentence", "") for d in details],
        "corrections": [d.get("corrected_content", "") for d in details],
        "reasons": [d.get("reason", "") for d in details],
    }


def import_released(path: str | Path, count_tokens: Callable[[list[dict]], list[int]] | None = None) -> list[dict]:
    """Records from one released file (.json array or .jsonl). `count_tokens` gives the rendered
    length of every record at once (so it can be served from the sample cache); the length sets
    `n_tokens` and `length_bucket`."""
    path = Path(path)
    rows = []
    for line, row in _rows(path):
        if not isinstance(row, dict):
            raise RecordError(f"expected an object, found {type(row).__name__}", str(path), line)
        for name in RELEASED_FIELDS:
            if name not in row:
                raise RecordError("missing required field", str(path), line, name)
        rows.append((line, {"id": str(row["id"]), "task": "summarization", "language": row["language"],
                            "source": row["article"], "response": row["summary"],
                            **verdict_fields(row["output"], str(path), line),
                            "meta": {"instruction": row.get("instruction", ""), "input": row.get("input", ""),
                                     "released_file": path.name}}))
    if not rows:
        raise RecordError("no samples: the file is empty", str(path), None)
    if count_tokens is not None:
        for (_, rec), n in zip(rows, count_tokens([rec for _, rec in rows])):
            rec["n_tokens"] = n
            rec["length_bucket"] = bucket_for_tokens(n)
    return [validate_record(rec, str(path), line) for line, rec in rows]
