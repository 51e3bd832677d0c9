"""`eval.export`: the grounding annotator a run fitted, shipped as an export that `eval.annotate` applies with the
scores the run gave (the same rows, the same model), fitted on every record after cross-validation."""
import json
import subprocess
import sys

import pytest

from eval.annotate import Annotator
from models.export_spec import AnnotatorSpec
from tests.conftest import REPO
from tests.test_grounding import synthetic


def _write(path, records):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records))


def _eval(*overrides) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, "eval/run.py", "+exp=ragtruth_grounding", *overrides], cwd=REPO,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "Loading weights" not in done.stderr          # transformers' redrawn bar, in a log, for each encoder read
    return done


def _annotate(export, rows, out) -> list[dict]:
    _write(out.with_suffix(".in.jsonl"), [{"id": r["id"], "source": r["source"], "response": r["response"]}
                                          for r in rows])
    done = subprocess.run([sys.executable, "-m", "eval.annotate", f"model={export}",
                           f"input={out.with_suffix('.in.jsonl')}", f"output={out}", "progress=false"],
                          cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "Loading weights" not in done.stderr
    return [json.loads(line) for line in out.read_text().splitlines()]


def _same_as_the_run(annotated: list[dict], predictions: list[dict], test: list[dict]) -> None:
    """Labels and spans equal, scores equal (one process computed both from the same JSON numbers)."""
    by_id = {p["id"]: p for p in predictions}
    assert [a["id"] for a in annotated] == [r["id"] for r in test]
    for a, r in zip(annotated, test):
        p = by_id[r["id"]]
        assert a["label"] == ("hallucinated" if p["label"] else "faithful") and a["score"] == p["score"], (a, p)
        assert [[s["start"], s["end"]] for s in a["spans"]] == p["spans"]
        assert all(r["response"][s["start"]:s["end"]] == s["text"] for s in a["spans"])


def test_the_export_of_a_run_annotates_its_test_rows_as_the_run_scored_them(tmp_path):
    data, export = tmp_path / "data", tmp_path / "export"
    test = synthetic(40, 2)
    for name, records in (("train", synthetic(120, 0)), ("val", synthetic(40, 1)), ("test", test)):
        _write(data / f"{name}.jsonl", records)
    _eval(f"data.root={data}", "data.folds=0", f"output_dir={tmp_path / 'run'}", f"eval.export={export}",
          "eval.grounding.stem=true", "eval.grounding.word_odds=true")
    spec = AnnotatorSpec.load(export)
    assert spec.method == "grounding" and spec.scorer == "spans" and spec.training["records"] == 120
    assert "## Cross-validated evaluation" in (export / "README.md").read_text()
    predictions = [json.loads(line) for line in (tmp_path / "run" / "predictions.jsonl").read_text().splitlines()]
    _same_as_the_run(_annotate(export, test, tmp_path / "out.jsonl"), predictions, test)
    assert any(p["label"] for p in predictions) and not all(p["label"] for p in predictions)
    row = test[1]                                      # from Python, as LettuceDetect's callers ask
    spans = Annotator.load(export).predict(context=[row["source"]], answer=row["response"])
    assert spans == _annotate(export, [row], tmp_path / "one.jsonl")[0]["spans"]


def test_annotate_says_how_many_rows_the_exports_group_thresholds_did_not_decide(tmp_path):
    data, export = tmp_path / "data", tmp_path / "export"
    val = [{**r, "meta": {**r["meta"], "task_type": "QA" if i % 4 < 2 else "Summary"}}
           for i, r in enumerate(synthetic(80, 1))]
    for name, records in (("train", synthetic(120, 0)), ("val", val), ("test", synthetic(10, 2))):
        _write(data / f"{name}.jsonl", records)
    _eval(f"data.root={data}", "data.folds=0", f"output_dir={tmp_path / 'run'}", f"eval.export={export}",
          "eval.threshold_by=meta.task_type")
    groups = AnnotatorSpec.load(export).thresholds_by["values"]
    assert set(groups) == {"QA", "Summary"}
    rows = [{"id": r["id"], "source": r["source"], "response": r["response"],
             **({"meta": {"task_type": t}} if t else {})}
            for r, t in zip(synthetic(5, 3), ["Summary", "QA", "Summary", "Data2txt", None])]
    _write(tmp_path / "in.jsonl", rows)
    done = subprocess.run([sys.executable, "-m", "eval.annotate", f"model={export}", f"input={tmp_path / 'in.jsonl'}",
                           f"output={tmp_path / 'out.jsonl'}", "progress=false"], cwd=REPO, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert ("thresholds by meta.task_type: 3 rows read their value's (QA 1, Summary 2); 2 rows have no value among "
            "['QA', 'Summary'] (Data2txt 1, no meta.task_type 1): the overall threshold") in done.stdout
    assert ("task types (meta.task_type, else task): 2 rows of a type it was fitted on (Summary 2); 3 rows of none "
            "of ['Summary'] (Data2txt 1, QA 1, summarization 1): scored with no task feature set") in done.stdout
    assert "as one of ['Summary']: a row of another type is scored with no task feature set" in (
        export / "README.md").read_text()


@pytest.mark.parametrize("head,token_spans,token_threshold", [("unit", "whole_units", "0.5"),
                                                               ("token", "anywhere", "null")])
def test_an_export_with_a_fine_tuned_unit_encoder_annotates_as_the_run_scored(tmp_path, tiny_unit_encoder, head,
                                                                              token_spans, token_threshold):
    data, export = tmp_path / "data", tmp_path / "export"
    test = synthetic(8, 2)
    for name, records in (("train", synthetic(24, 0)), ("val", synthetic(24, 1)), ("test", test)):
        _write(data / f"{name}.jsonl", records)
    _eval(f"data.root={data}", "data.folds=0", f"output_dir={tmp_path / 'run'}", f"eval.export={export}",
          f"eval.grounding.encoder={tiny_unit_encoder}", "eval.grounding.encoder_epochs=2",
          "eval.grounding.encoder_lr=1e-3", f"eval.grounding.encoder_head={head}",
          f"eval.grounding.encoder_token_spans={token_spans}",
          f"eval.grounding.encoder_token_threshold={token_threshold}")
    body = json.loads((export / "grounding.json").read_text())
    assert body["encoder"]["head"] == head and body["encoder"]["token_spans"] == token_spans
    chosen = json.loads((tmp_path / "run" / "grounding.json").read_text())["token_threshold_source"]
    assert ("character F1" in chosen) == (token_threshold == "null"), chosen
    dirs = [export / d for d in body["encoder"]["dirs"]]
    assert [d.name for d in dirs] == ["unit_encoder_0", "unit_encoder_1"]
    assert all((d / "head.safetensors").is_file() and list(d.glob("*.safetensors")) and not list(d.glob("*.bin"))
               for d in dirs)
    assert "encoder_logit" in body["sentence"]["features"]
    card = (export / "README.md").read_text()
    assert f"unit encoder fine-tuned from `{tiny_unit_encoder}` (2 halves, {head} head" in card
    assert not (tmp_path / "run" / "encoder_checkpoints").exists()     # the encoders' training ended with the run
    predictions = [json.loads(line) for line in (tmp_path / "run" / "predictions.jsonl").read_text().splitlines()]
    _same_as_the_run(_annotate(export, test, tmp_path / "out.jsonl"), predictions, test)


def test_an_export_reading_another_runs_encoders_annotates_as_the_run_scored(tmp_path, tiny_unit_encoder):
    elsewhere, data, first, export = tmp_path / "elsewhere", tmp_path / "data", tmp_path / "first", tmp_path / "export"
    test = synthetic(8, 2)
    for name, records in (("train", synthetic(24, 1)), ("val", synthetic(12, 0)), ("test", synthetic(4, 0))):
        _write(elsewhere / f"{name}.jsonl", records)
    _eval(f"data.root={elsewhere}", "data.folds=0", f"output_dir={tmp_path / 'run1'}", f"eval.export={first}",
          f"eval.grounding.encoder={tiny_unit_encoder}", "eval.grounding.encoder_epochs=2",
          "eval.grounding.encoder_lr=1e-3")
    for name, records in (("train", synthetic(24, 0)), ("val", synthetic(24, 1)), ("test", test)):
        _write(data / f"{name}.jsonl", records)
    done = _eval(f"data.root={data}", "data.folds=0", f"output_dir={tmp_path / 'run'}", f"eval.export={export}",
                 f"eval.grounding.encoder_fitted={first}")
    assert f"unit encoders of {first}: their units' logits: 24/24" in done.stderr
    assert "unit encoder 1 of 2" not in done.stderr                        # nothing fine-tuned here
    body = json.loads((export / "grounding.json").read_text())
    assert body["encoder"]["fitted"].startswith(f"read as fitted in {first}") and "encoder_logit" in body["sentence"][
        "features"]
    assert f"- unit encoders: read as fitted in {first}" in (export / "README.md").read_text()
    predictions = [json.loads(line) for line in (tmp_path / "run" / "predictions.jsonl").read_text().splitlines()]
    _same_as_the_run(_annotate(export, test, tmp_path / "out.jsonl"), predictions, test)


@pytest.fixture(scope="module")
def cross_validated(tmp_path_factory):
    """A 3-fold launch with `eval.export`: its data, run directory, export and stdout."""
    tmp = tmp_path_factory.mktemp("cross_validated")
    data, run, export = tmp / "data", tmp / "run", tmp / "export"
    _write(data / "test.jsonl", synthetic(150, 0))
    done = _eval(f"data.root={data}", f"output_dir={run}", f"eval.export={export}")
    return data, run, export, done.stdout


def test_after_cross_validation_the_export_is_fitted_on_every_record_as_a_fold_is(tmp_path, cross_validated):
    data, run, export, stdout = cross_validated
    fresh = synthetic(30, 7)
    assert "folds pooled" in stdout and stdout.count(f"export written to {export}") == 1   # no fold's
    whole = run / "folds" / "all"
    train = [json.loads(line) for line in (whole / "train.jsonl").read_text().splitlines()]
    val = [json.loads(line) for line in (whole / "val.jsonl").read_text().splitlines()]
    assert len(train) + len(val) == 150 and val and AnnotatorSpec.load(export).training["records"] == len(train)
    card = (export / "README.md").read_text()
    assert "folds pooled" in card or "Per fold" in card
    # the same recipe run on those train and val parts scores fresh rows as the export annotates them
    _write(tmp_path / "whole" / "test.jsonl", fresh)
    for name in ("train", "val"):
        (tmp_path / "whole" / f"{name}.jsonl").write_text((whole / f"{name}.jsonl").read_text())
    _eval(f"data.root={tmp_path / 'whole'}", "data.folds=0", f"output_dir={tmp_path / 'again'}")
    predictions = [json.loads(line) for line in (tmp_path / "again" / "predictions.jsonl").read_text().splitlines()]
    _same_as_the_run(_annotate(export, fresh, tmp_path / "fresh.jsonl"), predictions, fresh)


def test_export_only_fits_on_every_record_without_the_folds_and_ships_what_a_full_launch_ships(tmp_path,
                                                                                             cross_validated):
    data, run, export, _ = cross_validated
    rows = synthetic(20, 5)
    alone = _eval(f"data.root={data}", f"output_dir={tmp_path / 'alone'}", f"eval.export={tmp_path / 'alone_export'}",
                  "eval.export_only=true")
    assert "folds pooled" not in alone.stdout and not (tmp_path / "alone" / "fold_0").exists()
    assert "Not measured by the launch that fitted it" in (tmp_path / "alone_export" / "README.md").read_text()
    expected = _annotate(export, rows, tmp_path / "full.jsonl")
    assert _annotate(tmp_path / "alone_export", rows, tmp_path / "alone.jsonl") == expected
    # in the directory that measured the recipe, the card carries its pooled report
    _eval(f"data.root={data}", f"output_dir={run}", f"eval.export={tmp_path / 'again'}", "eval.export_only=true")
    assert "Per fold" in (tmp_path / "again" / "README.md").read_text()


def test_a_cross_fitted_export_says_it_was_fitted_on_every_record(tmp_path, cross_validated):
    data = cross_validated[0]
    _eval(f"data.root={data}", f"output_dir={tmp_path / 'run'}", f"eval.export={tmp_path / 'export'}",
          "eval.export_only=true", "eval.grounding.cross_fit_by=meta.source_id")
    training = AnnotatorSpec.load(tmp_path / "export").training
    assert training["records"] == 150 and "thresholds chosen on their scores cross-fitted by meta.source_id" in \
        training["fitted"]


def test_eval_export_is_refused_for_a_method_that_fits_nothing(tmp_path):
    done = subprocess.run([sys.executable, "eval/run.py", "+exp=ragtruth_grounding", "eval.method=nli",
                           f"eval.export={tmp_path}", f"data.root={tmp_path}"], cwd=REPO, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 1 and "eval.export=" in done.stderr and "eval.method=grounding" in done.stderr
    assert "Traceback" not in done.stderr
