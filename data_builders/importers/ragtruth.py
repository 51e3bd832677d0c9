"""Importer for RAGTruth (`response.jsonl` + `source_info.jsonl`) with its span labels."""
from __future__ import annotations

import json
from pathlib import Path

from data_builders.importers.registry import Splits, importer, one_split
from data_builders.records import RecordError, iter_jsonl, validate_record
from data_builders.span_offsets import find_span, span

TASKS = {"QA": "qa", "Summary": "summarization", "Data2txt": "summarization"}
# kept per span so that users can filter as RAGTruth's own baseline does (with meta.quality == 'good')
SPAN_FLAGS = ("implicit_true", "due_to_null", "meta")


def _source(task_type: str, body, path: str, line: int, field: str = "source_info") -> tuple[str, str | None]:
    """(source text, question) of a RAGTruth source: QA's passages and question, a summary's text,
    data-to-text's structured data as JSON."""
    if task_type == "QA":
        if not isinstance(body, dict) or "question" not in body:
            raise RecordError("a QA source needs 'question' and 'passages'", path, line, field)
        return str(body.get("passages", "")), body["question"]
    return (body if isinstance(body, str) else json.dumps(body, ensure_ascii=False)), None


def ragtruth_spans(response: str, labels: list, path: str, line: int) -> list[dict]:
    """RAGTruth's labels as record spans: offsets checked against the response (the released ones
    index it exactly), the label type as `type`, the span flags riding along."""
    spans = []
    for i, label in enumerate(labels):
        bounds = find_span(response, label.get("text"), label.get("start"))
        if bounds is None:
            raise RecordError(f"labels[{i}]: text {label.get('text')!r:.60} is not in the response", path, line,
                              "labels")
        spans.append(span(bounds, type=label.get("label_type"), text=label["text"],
                          **{k: label[k] for k in SPAN_FLAGS if k in label}))
    return spans


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
        text, question = _source(info["task_type"], info["source_info"], str(source_info_path), info_line)
        spans = ragtruth_spans(row["response"], row["labels"], str(response_path), line)
        if "split" not in row:
            raise RecordError("missing required field (train or test)", str(response_path), line, "split")
        rec = {"id": f"ragtruth-{row['id']}", "task": TASKS[info["task_type"]], "language": "en",
               "source": text, "response": row["response"], "label": int(bool(spans)),
               "spans": spans, "hallucinated_sentences": [s["text"] for s in spans],
               "meta": {"model": row.get("model"), "task_type": info["task_type"],
                        "quality": row.get("quality")}}
        if question:
            rec["question"] = question
        out.setdefault(row["split"], []).append(validate_record(rec, str(response_path), line))
    return out


# FaithJudge's files (vectara/FaithJudge, eval_data/ragtruth_<task>.jsonl): one row per source
FAITHJUDGE_TASKS = {"summary": "Summary", "qa": "QA", "data2txt": "Data2txt"}


def import_ragtruth_faithjudge(path: str | Path) -> list[dict]:
    """Records of one of FaithJudge's RAGTruth files (`source_id`, `source`, `responses`: `response`,
    `model`, `labels`); the task type comes from the file name (ragtruth_summary.jsonl -> Summary)."""
    path = Path(path)
    task_type = FAITHJUDGE_TASKS.get(path.stem.removeprefix("ragtruth_"))
    if task_type is None:
        raise RecordError(f"expected a file named ragtruth_<{'|'.join(FAITHJUDGE_TASKS)}>.jsonl", str(path), None)
    records = []
    for line, row in iter_jsonl(path):
        for name in ("source_id", "source", "responses"):
            if not isinstance(row, dict) or name not in row:
                raise RecordError("missing required field", str(path), line, name)
        text, question = _source(task_type, row["source"], str(path), line, "source")
        for i, resp in enumerate(row["responses"]):
            if not isinstance(resp, dict) or "response" not in resp or "labels" not in resp:
                raise RecordError(f"responses[{i}]: expected an object with 'response' and 'labels'", str(path), line,
                                  "responses")
            spans = ragtruth_spans(resp["response"], resp["labels"], str(path), line)
            rec = {"id": f"ragtruth-{path.stem.removeprefix('ragtruth_')}-{row['source_id']}-{i}",
                   "task": TASKS[task_type], "language": "en", "source": text, "response": resp["response"],
                   "label": int(bool(spans)), "spans": spans, "hallucinated_sentences": [s["text"] for s in spans],
                   "meta": {"model": resp.get("model"), "task_type": task_type, "source_id": str(row["source_id"])}}
            if question:
                rec["question"] = question
            records.append(validate_record(rec, str(path), line))
    if not records:
        raise RecordError("no sources: the file is empty", str(path), None)
    return records


@importer("ragtruth", "RAGTruth's response.jsonl and source_info.jsonl (its own train / test splits)")
def convert_ragtruth(args) -> tuple[Splits, str]:
    if len(args.inputs) != 2:
        raise ValueError("ragtruth: expected two inputs, response.jsonl and source_info.jsonl")
    return import_ragtruth(*args.inputs), "RAGTruth splits from the 'split' field"


@importer("ragtruth_faithjudge", "FaithJudge's eval_data/ragtruth_{summary,qa,data2txt}.jsonl")
def convert_ragtruth_faithjudge(args) -> tuple[Splits, str]:
    return one_split([r for p in args.inputs for r in import_ragtruth_faithjudge(p)], args.split)
