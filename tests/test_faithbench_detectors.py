"""FaithBench's detector table recomputed from the released per-item outputs: on hand-made
samples, and on the released files against a computation straight from their JSON."""
import json
import subprocess
import sys

import pytest
from sklearn.metrics import balanced_accuracy_score

from data_builders.importers.faithbench import DETECTORS
from eval.baselines.faithbench_detectors import detector_rows, detector_says_hallucinated, read_batches, report
from tests.conftest import shared_data


def _sample(i, labels, **meta):
    return {"sample_id": i, "source": "The cat sat.", "summary": " The cat sat down.",
            "annotations": [{"label": labels, "summary_span": "down", "summary_start": 13, "summary_end": 17}]
            if labels else [], "metadata": {"summarizer": "m", **meta}}


def test_scores_and_verdicts_are_binarised_as_released():
    assert [detector_says_hallucinated(v) for v in (0.49, 0.5, 0.97, 0, 1)] == [1, 0, 0, 1, 0]


def test_a_detector_row_on_hand_made_samples(tmp_path):
    samples = [_sample(0, ["Unwanted", "Unwanted.Intrinsic"], **{"hhem-2.1": 0.2, "gpt_4o": 0}),
               _sample(1, ["Questionable"], **{"hhem-2.1": 0.9, "gpt_4o": 0}),
               _sample(2, ["Benign"], **{"hhem-2.1": 0.8, "gpt_4o": 1}),
               _sample(3, [], **{"hhem-2.1": 0.3, "gpt_4o": None})]
    (tmp_path / "batch_1.json").write_text(json.dumps({"samples": samples}))
    records = read_batches(tmp_path)
    assert [r["label"] for r in records] == [1, 1, 0, 0]          # worst label; Benign and none are consistent
    rows = {r["detector"]: r for r in detector_rows(records)}
    # hhem-2.1 finds 1 of 2 hallucinated and calls 1 of 2 consistent ones hallucinated: (50 + 50) / 2
    assert rows["hhem-2.1"]["balanced_acc"] == pytest.approx(50.0) and rows["hhem-2.1"]["n"] == 4
    # gpt_4o has no output for the last sample: 2 of 2 hallucinated, 1 of 1 consistent
    assert (rows["gpt_4o"]["n"], rows["gpt_4o"]["missing"], rows["gpt_4o"]["balanced_acc"]) == (3, 1, 100.0)
    assert "| gpt_4o | 3 (1 without output) | 100.00 |" in report(records, list(rows.values()))


def test_the_detector_table_on_the_released_files():
    folder = shared_data("faithbench")
    records = read_batches(folder)
    rows = {r["detector"]: r for r in detector_rows(records)}
    assert len(records) == 750 and set(rows) == set(DETECTORS)
    raw = [s for path in sorted(folder.glob("batch_*.json")) for s in json.loads(path.read_text())["samples"]]
    severity = {"Benign": 1, "Questionable": 2, "Unwanted": 3}
    gold = [int(max((severity[x.split(".")[0]] for a in s["annotations"] for x in a["label"]), default=0) >= 2)
            for s in raw]
    assert sorted(gold) == sorted(r["label"] for r in records)
    by_id = {str(s["sample_id"]) + s["summary"].strip(): (g, s["metadata"]) for s, g in zip(raw, gold)}
    for name, row in rows.items():
        pairs = [(g, m[name]) for g, m in by_id.values() if m[name] is not None]
        pred = [int(v < 0.5) if isinstance(v, float) else 1 - v for _, v in pairs]
        expected = 100 * balanced_accuracy_score([g for g, _ in pairs], pred)
        assert row["balanced_acc"] == pytest.approx(expected) and row["n"] == len(pairs), name
        assert 40 < row["balanced_acc"] < 60, row         # the paper: "near 50% accuracies"
    assert rows["true_nli"]["missing"] == 2
    done = subprocess.run([sys.executable, "-m", "eval.baselines.faithbench_detectors", str(folder)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    for name, row in rows.items():      # the command prints the same table
        assert f"| {name} | " in done.stdout and f" | {row['balanced_acc']:.2f} | " in done.stdout
