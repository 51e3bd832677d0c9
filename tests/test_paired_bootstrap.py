"""eval/compare.py --paired: two evaluation runs over the same records, their headline figures compared by a
paired bootstrap, read from a cross-validated run's folds or a plain run's eval/."""
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from eval.paired_bootstrap import paired_bootstrap, read_scored_run
from eval.scorers.scoring import score_records, scorer

REPO = Path(__file__).resolve().parents[1]
BINARY = scorer("binary")


def _records(n: int, seed: int) -> list[dict]:
    rng = np.random.default_rng(seed)
    return [{"id": f"r{i}", "task": "summarization", "language": "en", "source": f"source {i}",
             "response": f"response {i}", "label": int(rng.random() < 0.4)} for i in range(n)]


def _write(directory: Path, gold: list[dict], predictions: list[dict]) -> None:
    directory.mkdir(parents=True)
    for name, rows in (("gold.jsonl", gold), ("predictions.jsonl", predictions)):
        (directory / name).write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


def _predictions(gold: list[dict], wrong: float, seed: int) -> list[dict]:
    """Each record's label, flipped on a `wrong` share of them, with a score that agrees with the label."""
    rng = np.random.default_rng(seed)
    rows = []
    for r in gold:
        label = 1 - r["label"] if rng.random() < wrong else r["label"]
        rows.append({"id": r["id"], "label": label, "score": 0.25 + 0.5 * label + 0.1 * rng.random()})
    return rows


def _cross_validated(run: Path, gold: list[dict], predictions: list[dict], folds: int, predicted: int | None = None):
    """A run that dealt `folds` folds (folds/fold_<i>) and predicted the first `predicted` of them."""
    for i in range(folds):
        (run / "folds" / f"fold_{i}").mkdir(parents=True)
        if i < (folds if predicted is None else predicted):
            _write(run / f"fold_{i}" / "eval", gold[i::folds], predictions[i::folds])


def test_a_cross_validated_run_is_read_from_its_folds_and_scored_as_one(tmp_path):
    gold = _records(90, seed=0)
    predictions = _predictions(gold, wrong=0.3, seed=1)
    _cross_validated(tmp_path / "cv", gold, predictions, folds=3)
    run = read_scored_run(tmp_path / "cv", BINARY)
    assert sorted(r["id"] for r in run.gold) == sorted(r["id"] for r in gold)
    pooled, _ = score_records("binary", run.gold, run.predictions)
    direct, _ = score_records("binary", gold, {p["id"]: p for p in predictions})
    assert pooled["balanced_acc"] == pytest.approx(direct["balanced_acc"], abs=1e-12)


def test_a_run_against_itself_differs_by_nothing_and_a_better_one_is_above_it_in_every_resample(tmp_path):
    gold = _records(120, seed=2)
    _write(tmp_path / "weak" / "eval", gold, _predictions(gold, wrong=0.4, seed=3))
    _cross_validated(tmp_path / "strong", gold, _predictions(gold, wrong=0.05, seed=4), folds=2)
    weak, strong = read_scored_run(tmp_path / "weak", BINARY), read_scored_run(tmp_path / "strong", BINARY)

    same = paired_bootstrap(BINARY, weak, weak, resamples=50)
    assert [(p.b - p.a, p.low, p.high, p.b_above) for p in same] == [(0, 0, 0, 0)] * 3

    better = {p.figure.name: p for p in paired_bootstrap(BINARY, weak, strong, resamples=50)}
    acc = better["balanced accuracy"]
    assert acc.b - acc.a > 0.3 and 0 < acc.low < acc.b - acc.a < acc.high and acc.b_above == 1.0
    reversed_ = {p.figure.name: p for p in paired_bootstrap(BINARY, strong, weak, resamples=50)}
    assert reversed_["balanced accuracy"].high == pytest.approx(-acc.low, abs=1e-12)


def test_runs_over_different_records_are_refused_saying_how_many_differ(tmp_path):
    gold = _records(30, seed=5)
    _write(tmp_path / "a" / "eval", gold, _predictions(gold, 0.2, seed=6))
    _write(tmp_path / "b" / "eval", gold[:27], _predictions(gold[:27], 0.2, seed=7))
    a, b = read_scored_run(tmp_path / "a", BINARY), read_scored_run(tmp_path / "b", BINARY)
    with pytest.raises(ValueError, match=r"3 only in .*a \(first \['r27', 'r28', 'r29'\]\), 0 only in"):
        paired_bootstrap(BINARY, a, b, resamples=5)
    with pytest.raises(FileNotFoundError, match="gold.jsonl and predictions.jsonl"):
        read_scored_run(tmp_path / "nothing", BINARY)


def test_an_unfinished_run_is_refused_saying_what_it_lacks(tmp_path):
    gold = _records(30, seed=11)
    predictions = _predictions(gold, 0.2, seed=12)
    _cross_validated(tmp_path / "cv", gold, predictions, folds=3, predicted=2)
    with pytest.raises(ValueError, match=r"3 folds dealt, 1 not predicted yet \(.*fold_2/eval\)"):
        read_scored_run(tmp_path / "cv", BINARY)
    _write(tmp_path / "going" / "eval", gold, predictions[:25])
    with pytest.raises(ValueError, match=r"5 of its 30 gold records have no prediction \(first \['r25'"):
        read_scored_run(tmp_path / "going", BINARY)


def test_the_command_writes_the_table(tmp_path):
    gold = _records(60, seed=8)
    _write(tmp_path / "a" / "eval", gold, _predictions(gold, 0.4, seed=9))
    _write(tmp_path / "b" / "eval", gold, _predictions(gold, 0.1, seed=10))
    proc = subprocess.run([sys.executable, str(REPO / "eval" / "compare.py"), str(tmp_path / "a"), str(tmp_path / "b"),
                           "--paired", "binary", "--resamples", "20", "--out", str(tmp_path / "out")],
                          capture_output=True, text=True, cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    table = (tmp_path / "out" / "paired.md").read_text(encoding="utf-8")
    assert "| balanced accuracy |" in table and "| MCC |" in table and "20 resamples" in table
    assert table == proc.stdout

    proc = subprocess.run([sys.executable, str(REPO / "eval" / "compare.py"), str(tmp_path / "a"), str(tmp_path / "c"),
                           "--paired", "binary", "--out", str(tmp_path / "out")],
                          capture_output=True, text=True, cwd=REPO)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert proc.stderr.startswith(f"eval/compare.py: error: {tmp_path / 'c'}: expected gold.jsonl and predictions")
