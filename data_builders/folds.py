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

from configs.schema import DataConfig, SyntheticConfig
from data_builders.common.user_errors import reports_user_errors
from data_builders.records import read_records, write_jsonl
from data_builders.synthetic.twins import SyntheticSettings, count_line, synthesize


def source_key(rec: dict) -> str:
    """What two records share when they annotate the same source: its text (or its documents)."""
    text = rec["source"] if "source" in rec else "\n\n".join(rec["documents"])
    return hashlib.sha1(text.encode("utf-8")).hexdigest()


def group_key(by: str):
    """The key that keeps records together in a test part: their source, or a field of their `meta`."""
    if by == "source":
        return source_key

    def meta_field(rec: dict) -> str:
        value = (rec.get("meta") or {}).get(by)
        if value is None:
            raise ValueError(f"data.fold_by={by}: record {rec.get('id')!r} has no meta.{by}")
        return str(value)
    return meta_field


def grouped_folds(records: list[dict], k: int, seed: int = 0, val_fraction: float = 0.1,
                  by: str = "source") -> list[dict[str, list]]:
    """k folds of {train, val, test}; the groups (sources, or the values of `meta.<by>`) are dealt to
    test parts largest first, each to the fold with the fewest records so far, in a seeded order. A
    fold's val part is `val_fraction` of its other sources (whatever `by`)."""
    groups: dict[str, list[dict]] = {}
    for rec in records:
        groups.setdefault(group_key(by)(rec), []).append(rec)
    if not 2 <= k <= len(groups):
        noun = "sources" if by == "source" else f"values of meta.{by}"
        raise ValueError(f"--k {k}: expected 2 <= k <= the number of {noun} ({len(groups)})")
    keys = sorted(groups)
    random.Random(seed).shuffle(keys)
    keys.sort(key=lambda g: -len(groups[g]))            # stable: the shuffle breaks ties
    test_keys: list[list[str]] = [[] for _ in range(k)]
    sizes = [0] * k
    for g in keys:
        f = sizes.index(min(sizes))
        test_keys[f].append(g)
        sizes[f] += len(groups[g])
    return [_fold([rec for g in test_keys[f] for rec in groups[g]],
                  [rec for i in range(k) if i != f for g in test_keys[i] for rec in groups[g]],
                  val_fraction, f"{seed}:{f}") for f in range(k)]


def _fold(test: list[dict], rest: list[dict], val_fraction: float, seed: str) -> dict[str, list]:
    """A fold: its test part, and the other records' sources split into train and val."""
    sources: dict[str, list[dict]] = {}
    for rec in rest:
        sources.setdefault(source_key(rec), []).append(rec)
    keys = list(sources)
    random.Random(seed).shuffle(keys)
    n_val = round(val_fraction * len(keys))
    return {"train": [r for g in keys[n_val:] for r in sources[g]],
            "val": [r for g in keys[:n_val] for r in sources[g]], "test": test}


def write_folds(folds: list[dict[str, list]], out: Path, by: str = "source", notes: list[str] = ()) -> str:
    lines = []
    for i, fold in enumerate(folds):
        d = out / f"fold_{i}"
        d.mkdir(parents=True, exist_ok=True)
        counts = {name: write_jsonl(d / f"{name}.jsonl", rows) for name, rows in fold.items() if rows}
        lines.append(f"fold_{i}: " + ", ".join(f"{n} {name}" for name, n in counts.items()))
    lines += notes
    text = f"{len(folds)} folds grouped by {'source' if by == 'source' else 'meta.' + by}\n" + "\n".join(lines) + "\n"
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


def check_fold_files(d: DataConfig) -> None:
    """`data.folds=k`: records of the shared schema under data.root, from at least k sources."""
    if not d.root or not Path(d.root).is_dir():
        raise ValueError(f"data.folds={d.folds} needs data.root=<a directory of records files>, found {d.root!r}")
    missing = [root for root in d.fold_extra_train if not Path(root).is_dir()]
    if missing:
        raise ValueError(f"data.fold_extra_train: expected directories of records files, found no directory {missing}")
    key = group_key(d.fold_by)
    groups = {key(rec) for path in pooled_files(Path(d.root)) for rec in read_records(path)}
    noun = "sources" if d.fold_by == "source" else f"values of meta.{d.fold_by}"
    if not 2 <= d.folds <= len(groups):
        raise ValueError(f"data.folds={d.folds}: expected 2 <= k <= the number of {noun} in {d.root} ({len(groups)})")


def with_synthetic(folds: list[dict[str, list]], s: SyntheticConfig) -> list[str]:
    """Each fold's training part gains the synthetic records built from it alone (`data.synthetic`):
    its validation and test parts, and every other fold's test sources, lend nothing."""
    settings = SyntheticSettings(s.twins, s.swapped, s.distractor, tuple(s.edits), s.seed)
    lines = []
    for i, fold in enumerate(folds):
        made, counts = synthesize(fold["train"], settings)
        fold["train"] = fold["train"] + made
        lines.append(f"fold_{i} {count_line(counts)}")
    return lines


def extra_training(roots: list[str], dealt: list[dict]) -> tuple[list[dict], list[str]]:
    """The records of `data.fold_extra_train`, each tagged with its directory (`meta.mix_source`), and a
    report line per directory; refused where one shares a source or an id with the dealt records, which
    would put a test source into training."""
    sources, ids = {source_key(r) for r in dealt}, {r["id"] for r in dealt}
    extra, lines = [], []
    for root in roots:
        name = Path(root).name
        records = [{**rec, "meta": {**(rec.get("meta") or {}), "mix_source": name}}
                   for path in pooled_files(Path(root)) for rec in read_records(path)]
        shared = next((r for r in records if source_key(r) in sources or r["id"] in ids), None)
        if shared is not None:
            raise ValueError(f"data.fold_extra_train: record {shared['id']!r} of {root} shares its source or id with "
                             f"a record of data.root: a fold's test source would join its training")
        extra += records
        lines.append(f"every fold's train + {len(records)} records of {root}")
    return extra, lines


def deal_folds(d: DataConfig, out: Path) -> str:
    """The folds of a `data.folds` run, written as records directories under `out`; their report."""
    records = [rec for path in pooled_files(Path(d.root)) for rec in read_records(path)]
    folds = grouped_folds(records, d.folds, SEED, d.fold_val_fraction, d.fold_by)
    return write_folds(folds, out, d.fold_by, _with_training_extras(folds, d, records))


def deal_all(d: DataConfig, out: Path) -> dict[str, list]:
    """Every record of a `data.folds` run as one more fold without a test part (train and val as a fold's are
    dealt, with its synthetic and extra training records), written to `out`: what an annotator measured by the
    folds is fitted on to be shipped."""
    records = [rec for path in pooled_files(Path(d.root)) for rec in read_records(path)]
    whole = _fold([], records, d.fold_val_fraction, f"{SEED}:all")
    notes = _with_training_extras([whole], d, records)
    for name in ("train", "val"):
        write_jsonl(out / f"{name}.jsonl", whole[name])
    (out / "folds_report.txt").write_text(f"every record: {len(whole['train'])} train, {len(whole['val'])} val\n"
                                          + "".join(f"{n}\n" for n in notes), encoding="utf-8")
    return whole


def _with_training_extras(folds: list[dict[str, list]], d: DataConfig, records: list[dict]) -> list[str]:
    """Each fold's training part with the synthetic records built from it and `data.fold_extra_train`'s; the
    report lines."""
    s = d.synthetic
    notes = with_synthetic(folds, s) if (s.twins or s.swapped or s.distractor) else []
    if d.fold_extra_train:
        extra, lines = extra_training(list(d.fold_extra_train), records)
        for fold in folds:
            fold["train"] = fold["train"] + extra
        notes += lines
    return notes


@reports_user_errors("data_builders.folds")
def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("records", nargs="+", type=Path, help="record files (JSONL of the shared schema)")
    p.add_argument("--k", type=int, default=5)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--seed", type=int, default=SEED)
    p.add_argument("--val-fraction", type=float, default=0.1, help="share of a fold's training sources held out")
    p.add_argument("--by", default="source", help="what a test part holds whole: source, or a meta field (domain)")
    args = p.parse_args(argv)
    records = [rec for path in args.records for rec in read_records(path)]
    print(write_folds(grouped_folds(records, args.k, args.seed, args.val_fraction, args.by), args.out, args.by), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
