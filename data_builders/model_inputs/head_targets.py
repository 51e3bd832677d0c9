"""The heads of a discriminative annotator (`task.head`), one entry each: the labels of its logits
in their order, the target it learns from a record, and whether the labels are exclusive. The
model side (`models/heads.py`) builds the layer from the same entry."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from data_builders.records import FAITHFULNESS_LABELS, SENTENCE_TYPES


@dataclass(frozen=True)
class Head:
    labels: tuple[str, ...]
    target: Callable[[dict], int | list[int]]    # record -> class index, or a multi-hot list
    multi_label: bool = False


def _binary(record: dict) -> int:
    value = record.get("label")
    if value not in (0, 1):
        raise ValueError(f"record {record.get('id')!r}: the binary head needs label 0 or 1, found {value!r}")
    return value


def _anah(record: dict) -> int:
    if record.get("type") not in SENTENCE_TYPES:
        raise ValueError(f"record {record.get('id')!r}: the anah head needs type in {list(SENTENCE_TYPES)}")
    return SENTENCE_TYPES.index(record["type"])


def _faithfulness(record: dict) -> list[int]:
    labels = record.get("faithfulness_labels") or []
    return [int(name in labels) for name in FAITHFULNESS_LABELS]


HEADS: dict[str, Head] = {
    "binary": Head(("faithful", "hallucinated"), _binary),              # record label 0 / 1
    "anah": Head(tuple(SENTENCE_TYPES), _anah),                         # record type
    "faithfulness": Head(tuple(FAITHFULNESS_LABELS), _faithfulness, multi_label=True),
}


def head_of(name: str) -> Head:
    if name not in HEADS:
        raise ValueError(f"task.head: expected one of {sorted(HEADS)}, found {name!r}")
    return HEADS[name]
