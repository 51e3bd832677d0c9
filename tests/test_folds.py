"""Cross-validation folds grouped by source: no source in two parts of a fold, every record in exactly
one test part, on hand-made records and on FaithBench's released files."""
import subprocess
import sys
from collections import Counter

import pytest

from data_builders.folds import grouped_folds, source_key
from data_builders.importers.faithbench import import_faithbench
from data_builders.records import read_records, write_jsonl
from tests.conftest import shared_data


def _records(sizes):
    return [{"id": f"s{s}-{i}", "task": "summarization", "language": "en", "source": f"article {s}",
             "response": f"summary {i}", "label": i % 2} for s, n in enumerate(sizes) for i in range(n)]


def _check(records, folds):
    tested = Counter(r["id"] for fold in folds for r in fold["test"])
    assert tested == Counter(r["id"] for r in records)            # every record scored exactly once
    for fold in folds:
        keys = {name: {source_key(r) for r in rows} for name, rows in fold.items()}
        assert not keys["train"] & keys["test"] and not keys["val"] & keys["test"] and not keys["train"] & keys["val"]
        assert sorted(r["id"] for rows in fold.values() for r in rows) == sorted(r["id"] for r in records)


def test_folds_never_share_a_source():
    records = _records([10, 1, 4, 4, 7, 2, 3, 10])
    folds = grouped_folds(records, k=3, seed=1, val_fraction=0.25)
    _check(records, folds)
    assert max(len(f["test"]) for f in folds) - min(len(f["test"]) for f in folds) <= 2     # balanced by records
    assert all(f["val"] for f in folds)
    assert folds == grouped_folds(records, k=3, seed=1, val_fraction=0.25)
    with pytest.raises(ValueError, match="--k 9"):
        grouped_folds(records, k=9)


def test_folds_of_faithbench_keep_every_article_whole(tmp_path):
    records = [r for p in sorted(shared_data("faithbench").glob("batch_*.json")) for r in import_faithbench(p)]
    write_jsonl(tmp_path / "test.jsonl", records)
    done = subprocess.run([sys.executable, "-m", "data_builders.folds", str(tmp_path / "test.jsonl"), "--k", "5",
                           "--out", str(tmp_path / "folds")], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    folds = [{name: read_records(tmp_path / "folds" / f"fold_{i}" / f"{name}.jsonl")
              for name in ("train", "val", "test")} for i in range(5)]
    _check(records, folds)
    assert len({source_key(r) for r in records}) == 75 and "5 folds grouped by source" in done.stdout


def test_another_benchmark_joins_every_training_part_and_never_a_test_source(tmp_path):
    from configs.schema import DataConfig
    from data_builders.folds import check_fold_files, deal_folds

    root, other = tmp_path / "bench", tmp_path / "other_bench"
    records = _records([4, 4, 4, 4])
    write_jsonl(root / "test.jsonl", records)
    extra = [{**r, "id": f"x{r['id']}", "source": f"another {r['source']}"} for r in _records([3, 3])]
    write_jsonl(other / "test.jsonl", extra)
    config = DataConfig(source="records", root=str(root), folds=2, fold_val_fraction=0.5,
                        fold_extra_train=[str(other)])
    report = deal_folds(config, tmp_path / "folds")
    assert f"every fold's train + 6 records of {other}" in report
    for i in range(2):
        parts = {name: read_records(tmp_path / "folds" / f"fold_{i}" / f"{name}.jsonl") for name in ("train", "val",
                                                                                                    "test")}
        joined = [r for r in parts["train"] if r["id"].startswith("x")]
        assert sorted(r["id"] for r in joined) == sorted(r["id"] for r in extra)
        assert {r["meta"]["mix_source"] for r in joined} == {"other_bench"}
        assert not any(r["id"].startswith("x") for r in parts["val"] + parts["test"])
    write_jsonl(other / "test.jsonl", extra + records[:1])          # a benchmark's own source: refused
    with pytest.raises(ValueError, match="record 's0-0' of .* shares its source or id with a record of data.root"):
        deal_folds(config, tmp_path / "folds2")
    with pytest.raises(ValueError, match=r"data.fold_extra_train: expected directories of records files, found no dir"):
        check_fold_files(DataConfig(source="records", root=str(root), folds=2,
                                    fold_extra_train=[str(tmp_path / "missing")]))
