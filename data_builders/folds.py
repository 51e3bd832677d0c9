"""Cross-validation folds grouped by source, so that every record is scored once by an annotator that
never saw its source: a FaithBench article, a RAGTruth source, a UHGEval news item never straddles a
fold's training and test parts.

    python -m data_builders.folds data/faithbench/test.jsonl --k 5 --out data/faithbench/folds

writes `fold_<i>/{train,val,test}.jsonl` (records directories: `data=records data.root=.../fold_<i>`)
and `folds_report.txt`. Each fold's test part is one k-th of the sources; `val` (for decision
thresholds) is `--val-fraction` of the other sources; `train` is the rest.
"""
from __future__ import annotations

import argparse
import hashlib
import random
import sys
from pathlib import Path

from configs.schema import DataConfig
from data_builders.schema import read_records, write_jsonl
from data_builders.user_errors import reports_user_errors


def source_key(rec: dict) -> str:
    """What two records share when they annotate the same source: its text (or its documents)."""
    text = rec["source"] if "source" in rec else "\n\n".join(rec["documents"])
    return hashlib.sha1(text.encode("utf-8")).hexdigest()


def grouped_folds(records: list[dict], k: int, seed: int = 0, val_fraction: float = 0.1) -> list[dict[str, list]]:
    """k folds of {train, val, test}; the sources are dealt to test parts largest first, each to the
    fold with the fewest records so far, in a seeded order."""
    groups: dict[str, list[dict]] = {}
    for rec in records:
        groups.setdefault(source_key(rec), []).append(rec)
    if not 2 <= k <= len(groups):
        raise ValueError(f"--k {k}: expected 2 <= k <= the number of sources ({len(groups)})")
    keys = sorted(groups)
    random.Random(seed).shuffle(keys)
    keys.sort(key=lambda g: -len(groups[g]))            # stable: the shuffle breaks ties
    test_keys: list[list[str]] = [[] for _ in range(k)]
    sizes = [0] * k
    for g in keys:
        f = sizes.index(min(sizes))
        test_keys[f].append(g)
        sizes[f] += len(groups[g])
    folds = []
    for f in range(k):
        rest = [g for i in range(k) if i != f for g in test_keys[i]]
        random.Random(f"{seed}:{f}").shuffle(rest)
        n_val = round(val_fraction * len(rest))
        parts = {"train": rest[n_val:], "val": rest[:n_val], "test": test_keys[f]}
        folds.append({name: [rec for g in gs for rec in groups[g]] for name, gs in parts.items()})
    return folds


def write_folds(folds: list[dict[str, list]], out: Path) -> str:
    lines = []
    for i, fold in enumerate(folds):
        d = out / f"fold_{i}"
        d.mkdir(parents=True, exist_ok=True)
        counts = {name: write_jsonl(d / f"{name}.jsonl", rows) for name, rows in fold.items() if rows}
        lines.append(f"fold_{i}: " + ", ".join(f"{n} {name}" for name, n in counts.items()))
    text = f"{len(folds)} folds grouped by source\n" + "\n".join(lines) + "\n"
    (out / "folds_report.txt").write_text(text, encoding="utf-8")
    return text


POOLED_SPLITS = ("train", "val", "test")
SEED = 0          # fold assignment does not follow the training seed: every run of a benchmark deals the same folds


def pooled_files(root: Path) -> list[Path]:
    """Every records file of a `data.folds` directory (a converted benchmark has test.jsonl only)."""
    files = [root / f"{split}.jsonl" for split in POOLED_SPLITS if (root / f"{split}.jsonl").is_file()]
    if not files:
        raise ValueError(f"data.root={root}: data.folds deals the records of train.jsonl, val.jsonl and "
                         "test.jsonl into folds, and it has none of them")
    return files


def check_folds_config(d: DataConfig) -> None:
    """`data.folds=k`: records of the shared schema under data.root, from at least k sources."""
    if d.source != "records":
        raise ValueError(f"data.folds={d.folds} deals a records directory into folds: it needs data.source=records, "
                         f"found {d.source}")
    if not d.root or not Path(d.root).is_dir():
        raise ValueError(f"data.folds={d.folds} needs data.root=<a directory of records files>, found {d.root!r}")
    if not 0 <= d.fold_val_fraction < 1:
        raise ValueError(f"data.fold_val_fraction: expected 0 <= x < 1, found {d.fold_val_fraction}")
    sources = {source_key(rec) for path in pooled_files(Path(d.root)) for rec in read_records(path)}
    if not 2 <= d.folds <= len(sources):
        raise ValueError(f"data.folds={d.folds}: expected 2 <= k <= the number of sources in {d.root} ({len(sources)})")


def deal_folds(d: DataConfig, out: Path) -> str:
    """The folds of a `data.folds` run, written as records directories under `out`; their report."""
    records = [rec for path in pooled_files(Path(d.root)) for rec in read_records(path)]
    return write_folds(grouped_folds(records, d.folds, SEED, d.fold_val_fraction), out)


@reports_user_errors("data_builders.folds")
def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("records", nargs="+", type=Path, help="record files (JSONL of the shared schema)")
    p.add_argument("--k", type=int, default=5)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--seed", type=int, default=SEED)
    p.add_argument("--val-fraction", type=float, default=0.1, help="share of a fold's training sources held out")
    args = p.parse_args(argv)
    records = [rec for path in args.records for rec in read_records(path)]
    print(write_folds(grouped_folds(records, args.k, args.seed, args.val_fraction), args.out), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
