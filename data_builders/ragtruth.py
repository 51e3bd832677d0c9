"""Importer for RAGTruth (`response.jsonl` + `source_info.jsonl`) with its span labels."""
from __future__ import annotations

import json
from pathlib import Path

from data_builders.schema import RecordError, iter_jsonl, validate_record

TASKS = {"QA": "qa", "Summary": "summarization", "Data2txt": "summarization"}
# kept per span so that users can filter as RAGTruth's own baseline does (with meta.quality == 'good')
SPAN_FLAGS = ("implicit_true", "due_to_null", "meta")


def _source(info: dict, path: str, line: int) -> tuple[str, str | None]:
    """(source text, question) of a source_info row."""
    body = info["source_info"]
    if info["task_type"] == "QA":
        if not isinstance(body, dict) or "question" not in body:
            raise RecordError("QA source_info needs 'question' and 'passages'", path, line, "source_info")
        return str(body.get("passages", "")), body["question"]
    return (body if isinstance(body, str) else json.dumps(body, ensure_ascii=False)), None


def import_ragtruth(response_path: str | Path, source_info_path: str | Path) -> dict[str, list[dict]]:
    """Records per RAGTruth split ('train', 'test'); label 1 when a response has any hallucinated span."""
    sources = {}
    for line, info in iter_jsonl(source_info_path):
        for name in ("source_id", "task_type", "source_info"):
            if name not in info:
                raise RecordError("missing required field", str(source_info_path), line, name)
        if info["task_type"] not in TASKS:
            raise RecordError(f"expected one of {sorted(TASKS)}, found {info['task_type']!r}",
                              str(source_info_path), line, "task_type")
        sources[str(info["source_id"])] = (info, line)
    out: dict[str, list[dict]] = {}
    for line, row in iter_jsonl(response_path):
        for name in ("id", "source_id", "response", "labels"):
            if name not in row:
                raise RecordError("missing required field", str(response_path), line, name)
        if str(row["source_id"]) not in sources:
            raise RecordError(f"source_id {row['source_id']!r} is not in {source_info_path}",
                              str(response_path), line, "source_id")
        info, info_line = sources[str(row["source_id"])]
        text, question = _source(info, str(source_info_path), info_line)
        spans = [{"start": s["start"], "end": s["end"], "text": s["text"], "label_type": s.get("label_type"),
                  **{k: s[k] for k in SPAN_FLAGS if k in s}} for s in row["labels"]]
        if "split" not in row:
            raise RecordError("missing required field (train or test)", str(response_path), line, "split")
        rec = {"id": f"ragtruth-{row['id']}", "task": TASKS[info["task_type"]], "language": "en",
               "source": text, "response": row["response"], "label": int(bool(spans)),
               "hallucinated_sentences": [s["text"] for s in spans],
               "meta": {"spans": spans, "model": row.get("model"), "task_type": info["task_type"],
                        "quality": row.get("quality")}}
        if question:
            rec["question"] = question
        out.setdefault(row["split"], []).append(validate_record(rec, str(response_path), line))
    return out
