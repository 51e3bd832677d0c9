"""Records as a 🤗 `datasets.Dataset`, and back.

The schema's core fields become typed columns; `meta` (whose content differs from one dataset
to the next) is kept as a JSON string column, so that any record directory converts without a
schema clash and comes back unchanged."""
from __future__ import annotations

import json
from pathlib import Path

from datasets import Dataset

from data_builders.records import read_records, validate_record


def records_dataset(records: list[dict] | str | Path) -> Dataset:
    """A Dataset of records (a list, or a JSONL file of the schema, validated as it is read)."""
    rows = read_records(records) if isinstance(records, (str, Path)) else records
    return Dataset.from_list([{**r, "meta": json.dumps(r["meta"], ensure_ascii=False) if "meta" in r else None}
                              for r in rows])


def dataset_records(dataset: Dataset) -> list[dict]:
    """The records of a Dataset made by `records_dataset` (columns a record lacked are dropped)."""
    out = []
    for i, row in enumerate(dataset):
        rec = {k: v for k, v in row.items() if v is not None}
        if "meta" in rec:
            rec["meta"] = json.loads(rec["meta"])
        out.append(validate_record(rec, "<dataset>", i + 1))
    return out
