"""Reading gold records and predictions for scoring, with errors that name file, line and field."""
from __future__ import annotations

from pathlib import Path

from data_builders.records import RecordError, iter_jsonl, validate_record
from eval.scorers.spans import SpanError, prediction_spans

PREDICTION_FIELDS = ("output", "label", "probs", "spans")


def _existing(path: str | Path, key: str) -> Path:
    p = Path(path) if path else None
    if p is None or not p.is_file():
        raise FileNotFoundError(f"{key}={path!r}: expected a JSONL file, found none")
    return p


def read_gold(path: str | Path, task: str, fields: tuple[str, ...]) -> list[dict]:
    """Validated gold records with the `fields` that scorer `task` needs; duplicate ids are an error."""
    path = _existing(path, "gold")
    records, seen = [], {}
    for line, rec in iter_jsonl(path):
        validate_record(rec, str(path), line)
        for name in fields:
            if rec.get(name) is None:
                raise RecordError(f"task={task} needs this field in every gold record", str(path), line, name)
        if rec["id"] in seen:
            raise RecordError(f"duplicate id {rec['id']!r} (first on line {seen[rec['id']]})", str(path), line, "id")
        seen[rec["id"]] = line
        records.append(rec)
    if not records:
        raise RecordError("no gold records: the file is empty", str(path), None)
    return records


def read_predictions(path: str | Path, gold_ids: set[str]) -> dict[str, dict]:
    """id -> prediction ({'output'} raw text, {'label'} / {'probs'} from a classifier, {'spans'} offsets)."""
    path = _existing(path, "predictions")
    preds, lines, unknown = {}, {}, []
    for line, row in iter_jsonl(path):
        if not isinstance(row, dict):
            raise RecordError(f"expected a JSON object, found {type(row).__name__}", str(path), line)
        if "id" not in row:
            raise RecordError("missing required field", str(path), line, "id")
        pid = str(row["id"])
        if pid in lines:
            raise RecordError(f"duplicate id {pid!r} (first on line {lines[pid]})", str(path), line, "id")
        if not any(k in row for k in PREDICTION_FIELDS):
            raise RecordError(f"a prediction needs one of {list(PREDICTION_FIELDS)}", str(path), line, "output")
        if "output" in row and row["output"] is not None and not isinstance(row["output"], str):
            raise RecordError(f"expected str, found {type(row['output']).__name__}", str(path), line, "output")
        try:
            prediction_spans(row)
        except SpanError as e:
            raise RecordError(str(e), str(path), line, "spans") from None
        if pid not in gold_ids:
            unknown.append((pid, line))
        lines[pid] = line
        preds[pid] = row
    if not preds:
        raise RecordError("no predictions: the file is empty", str(path), None)
    if unknown:
        pid, line = unknown[0]
        raise RecordError(f"{len(unknown)} prediction(s) have ids that are not in the gold file "
                          f"(first: {pid!r})", str(path), line, "id")
    return preds
