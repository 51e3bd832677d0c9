"""Learning curves and early stopping (train/curve.py): validation points every N steps, a stage that
stops once its patience runs out, its export holding its best point's weights, the report's plot."""
import json

import pytest

from data_builders.records import read_jsonl
from tests.test_cross_validation import _cross_validate
from train.curve import CURVE_FILE, Curve, curve_rows


def _fake_export(weights: dict):
    def export(directory):
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "model.safetensors").write_text(weights["now"])
        (directory / "config.json").write_text("{}")
    return export


def test_patience_stops_after_points_without_a_better_mcc_and_the_best_weights_are_kept(tmp_path):
    weights = {"now": ""}
    curve = Curve(tmp_path, 0, "pairs", every=5, patience=2, is_main=True)
    mccs = iter([0.1, 0.3, 0.2, 0.25, 0.9])
    stops = []
    for step in (5, 10, 15, 20):
        weights["now"] = f"weights at step {step}"
        stops.append(curve.point(_fake_export(weights), lambda d: {"mcc": next(mccs), "acc": 0.5, "n": 4},
                                 step, 100 + step))
    assert stops == [False, False, False, True]          # best at step 10, then two points without better
    export = tmp_path / "stage_export"
    export.mkdir()
    (export / "model.safetensors").write_text("weights at the stage's end")
    curve.keep_best(export)
    assert (export / "model.safetensors").read_text() == "weights at step 10"
    assert [r["step"] for r in curve_rows(tmp_path)] == [105, 110, 115, 120]
    assert (tmp_path / "curve.png").stat().st_size > 0
    again = Curve.resumed(tmp_path, 0, "pairs", every=5, patience=2, is_main=True)   # a resumed launch
    assert (again.best, again.since_best) == (0.3, 2)
    assert Curve.resumed(tmp_path, 1, "next", 5, 2, True).best is None              # another stage starts afresh


def test_due_every_n_steps_and_at_the_stage_end():
    curve = Curve(None, 0, "s", every=4, patience=0, is_main=True)
    assert [s for s in range(1, 11) if curve.due(s, 10)] == [4, 8, 10]


@pytest.mark.slow
def test_a_cross_validated_run_draws_its_curve_and_stops_a_stage_that_no_longer_improves(tmp_path):
    """lr 0: the weights never change, so the second point cannot beat the first and patience 1 ends
    the stage there, at step 4 of 8."""
    run, proc = _cross_validate("ragtruth_minilm_binary", tmp_path, "model.name_or_path=embedded:minilm",
                                "curriculum.stages=[{name: pairs, bucket: all, max_seq_len: 256, max_steps: 8}]",
                                "optim.lr=0", "trainer.eval_every=2", "trainer.early_stopping_patience=1")
    for fold in ("fold_0", "fold_1"):
        points = read_jsonl(run / fold / CURVE_FILE)
        val = read_jsonl(run / "folds" / fold / "val.jsonl")
        assert [p["stage_step"] for p in points] == [2, 4] and all(p["n"] == len(val) for p in points)
        assert read_jsonl(run / fold / "train_log.jsonl")[-1]["stage_step"] == 4
        report = (run / fold / "eval" / "report.md").read_text()
        assert "## Learning curve (validation split)" in report and (run / fold / "eval" / "curve.png").is_file()
    assert "no better validation MCC in 1 points: stopping at its step 4 of 8" in proc.stdout
    assert json.loads((run / "eval" / "metrics.json").read_text())       # the pooled scores are still there


def test_patience_without_validation_points_is_refused(tmp_path):
    from tests.conftest import torchrun
    from tests.test_cross_validation import SMALL

    proc = torchrun(1, ["+exp=ragtruth_minilm_binary", *SMALL, f"data.root={tmp_path}", f"output_dir={tmp_path / 'r'}",
                        "trainer.early_stopping_patience=2"])
    assert proc.returncode == 1 and "needs trainer.eval_every > 0" in proc.stderr
