"""Multi-source training mixtures (seed 004, Table 7 'M.T.'): record directories mixed with weights.

A source's `weight` multiplies its training records: 2.0 takes every record twice, 0.5 a
deterministic half. Each record remembers its source (`meta.mix_source`) and, when the
source names one, its prompt template (`meta.template`), so annotation, detection and
binary records can be trained side by side. Only sources with `evaluate: true` contribute
their val / test records, which must all suit the task's scorer.
"""
from __future__ import annotations

import math
import random
from pathlib import Path

from data_builders.records import read_records

COPY_MARK = "~"   # id suffix of the 2nd, 3rd, ... copy of an up-weighted training record


class MixtureError(ValueError):
    pass


def _tag(rec: dict, source) -> dict:
    meta = {**(rec.get("meta") or {}), "mix_source": source.name}
    if source.template:
        meta["template"] = source.template
    return {**rec, "meta": meta}


def weighted(records: list[dict], weight: float, rng: random.Random) -> list[dict]:
    """floor(weight) copies of every record plus a random (weight - floor) share of them."""
    if weight < 0:
        raise MixtureError(f"mixture weight must be >= 0, found {weight}")
    whole, part = int(math.floor(weight)), weight - math.floor(weight)
    out = [r if k == 0 else {**r, "id": f"{r['id']}{COPY_MARK}{k + 1}"} for k in range(whole) for r in records]
    extra = rng.sample(records, round(part * len(records)))
    return out + [r if whole == 0 else {**r, "id": f"{r['id']}{COPY_MARK}{whole + 1}"} for r in extra]


def _read_split(root: Path, split: str) -> list[dict]:
    path = root / f"{split}.jsonl"
    return read_records(path) if path.exists() else []


def mix_records(sources, seed: int) -> tuple[dict[str, list[dict]], str]:
    """Records per split of the mixture, and a one-line-per-source report."""
    out: dict[str, list[dict]] = {"train": [], "val": [], "test": []}
    owner: dict[str, str] = {}
    lines = []
    for source in sources:
        root = Path(source.root)
        train = [_tag(r, source) for r in _read_split(root, "train")]
        if not train:
            raise MixtureError(f"data.mixture '{source.name}': no {root}/train.jsonl")
        picked = weighted(train, source.weight, random.Random(f"{seed}:{source.name}"))
        splits = {"train": picked}
        if source.evaluate:
            splits.update(val=[_tag(r, source) for r in _read_split(root, "val")],
                          test=[_tag(r, source) for r in _read_split(root, "test")])
        for split, rows in splits.items():
            for r in rows:
                key = f"{split}/{r['id']}"
                if key in owner:
                    raise MixtureError(f"data.mixture: id {r['id']!r} is in both '{owner[key]}' and "
                                       f"'{source.name}' ({split} split); ids must be unique across sources")
                owner[key] = source.name
            out[split] += rows
        lines.append(f"{source.name}: {len(train)} train records x weight {source.weight} -> {len(picked)}"
                     + (f", {len(splits.get('test', []))} test" if source.evaluate else ", not evaluated"))
    if not out["test"]:
        raise MixtureError("data.mixture: no source with evaluate=true has a test.jsonl")
    return {k: v for k, v in out.items() if v}, "\n".join(lines)
