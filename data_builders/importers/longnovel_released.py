"""Importer for the released LongNovel files (`id`, `language`, `article`, `summary`,
`instruction`, `input`, `output`), where `output` is the gold verdict JSON of the
detection prompt. Produces records of the shared schema."""
from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

from data_builders.model_inputs.prompts import FAITHFUL, HALLUCINATED, ZH_TYPE, detection_messages, verdict_target
from data_builders.records import RecordError, iter_jsonl, validate_record

RELEASED_FIELDS = ("id", "language", "article", "summary", "output")   # what the importer reads
PROMPT_FIELDS = ("instruction", "input")     # the rendered prompt: kept in meta, compared, never trained on
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


def prompt_fields(record: dict) -> dict[str, str]:
    """`instruction` / `input` of a released row: Prompt-E's system text and user message (Fig. 19)."""
    system, user = detection_messages(record, "prompt_e")
    return {"instruction": system["content"], "input": user["content"]}


def released_row(record: dict) -> dict:
    """A record of the schema as a row of the released files (what `import_released` reads back)."""
    return {"id": record["id"], "language": record.get("language", "zh"), "article": record["source"],
            "summary": record["response"], **prompt_fields(record), "output": verdict_target(record)}


def prompt_differences(records: list[dict]) -> dict[str, int]:
    """Per prompt field, how many imported records carry one that differs from the prompt the toolkit
    renders (records without the field are not counted)."""
    out = dict.fromkeys(PROMPT_FIELDS, 0)
    for rec in records:
        rendered = prompt_fields(rec)
        for name in PROMPT_FIELDS:
            given = rec["meta"].get(name)
            out[name] += given is not None and given != rendered[name]
    return out


def import_report(path: Path, records: list[dict]) -> str:
    """Which fields were read, and how the released prompts compare with the toolkit's."""
    lines = [f"{path.name}: {len(records)} records; read {', '.join(RELEASED_FIELDS)}"]
    present = {n: sum(n in rec["meta"] for rec in records) for n in PROMPT_FIELDS}
    if any(present.values()):
        diff = prompt_differences(records)
        lines.append("  " + "; ".join(f"{n}: {present[n]} present, {diff[n]} differ from the Prompt-E rendering"
                                      for n in PROMPT_FIELDS)
                     + " (the toolkit renders its own prompt from article and summary)")
    return "\n".join(lines)


def iter_released(path: str | Path) -> Iterator[tuple[int, dict]]:
    """(line, record) of every row of one released file (.json array or .jsonl), each validated;
    the first bad row raises, naming file, line and field."""
    path = Path(path)
    for line, row in _rows(path):
        if not isinstance(row, dict):
            raise RecordError(f"expected an object, found {type(row).__name__}", str(path), line)
        for name in RELEASED_FIELDS:
            if name not in row:
                raise RecordError("missing required field", str(path), line, name)
        rec = {"id": str(row["id"]), "task": "summarization", "language": row["language"],
               "source": row["article"], "response": row["summary"],
               **verdict_fields(row["output"], str(path), line),
               "meta": {"released_file": path.name, **{n: row[n] for n in PROMPT_FIELDS if n in row}}}
        yield line, validate_record(rec, str(path), line)


def check_released(path: str | Path) -> int:
    """Read every row of a released file as the import does, keeping none: how many there are."""
    n = sum(1 for _ in iter_released(path))
    if not n:
        raise RecordError("no samples: the file is empty", str(path), None)
    return n


def import_released(path: str | Path, count_tokens: Callable[[list[dict]], list[int]] | None = None) -> list[dict]:
    """Records from one released file. `count_tokens` gives the rendered length of every record at
    once (so it can be served from the sample cache); the length sets `n_tokens` and `length_bucket`."""
    records = [rec for _, rec in iter_released(path)]
    if not records:
        raise RecordError("no samples: the file is empty", str(path), None)
    if count_tokens is not None:
        for rec, n in zip(records, count_tokens(records)):
            rec["n_tokens"] = n
            rec["length_bucket"] = bucket_for_tokens(n)
    return records
