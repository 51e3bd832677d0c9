"""Decision thresholds per value of a record field (`eval.threshold_by`, RAGTruth's task types)."""
import json
import shutil
import subprocess
import sys

import pytest

from data_builders.records import write_jsonl
from eval.thresholds import MIN_GROUP, choose_group_thresholds, choose_threshold, field_value
from models.builders import resolve_model_path
from tests.conftest import REPO


def _val(group: str, n: int, cut: float) -> tuple[list[dict], dict]:
    """n records of a group whose scores separate the classes at `cut`."""
    recs = [{"id": f"{group}{i}", "label": i % 2, "meta": {"task_type": group}} for i in range(n)]
    scores = {r["id"]: cut + (0.05 if r["label"] else -0.05) * (1 + i % 3) for i, r in enumerate(recs)}
    return recs, scores


def test_each_value_with_enough_records_gets_its_own_threshold():
    qa, s_qa = _val("QA", MIN_GROUP, 0.2)
    d2t, s_d2t = _val("Data2txt", MIN_GROUP, 0.8)
    few, s_few = _val("Summary", MIN_GROUP - 1, 0.5)
    one_class = [{"id": "x", "label": 1, "meta": {"task_type": "Other"}}] * MIN_GROUP
    got = choose_group_thresholds(qa + d2t + few + one_class, {**s_qa, **s_d2t, **s_few, "x": 0.9}, "meta.task_type")
    assert set(got) == {"QA", "Data2txt"}                  # too few, or one class only: the overall threshold
    assert 0.15 < got["QA"] <= 0.25 and 0.75 < got["Data2txt"] <= 0.85
    assert field_value({"meta": {"task_type": "QA"}}, "meta.task_type") == "QA"
    assert field_value({"meta": None}, "meta.task_type") is None and field_value({}, "task") is None


def _records(prefix: str, groups: dict[str, int]) -> list[dict]:
    out = []
    for group, n in groups.items():
        for i in range(n):
            source = f"The {group} report {i} says the museum in Lyon opened in {1990 + i} with {100 + i} rooms."
            response = f"The museum in Lyon opened in {1990 + i + (i % 2)} with {100 + i} rooms."
            out.append({"id": f"{prefix}-{group}-{i}", "task": "summarization", "language": "en", "source": source,
                        "response": response, "label": i % 2, "spans": [], "meta": {"task_type": group}})
    return out


def _splits() -> dict[str, list[dict]]:
    return {"val": _records("v", {"QA": MIN_GROUP, "Data2txt": MIN_GROUP, "Summary": 4}),
            "test": _records("t", {"QA": 3, "Data2txt": 3, "Summary": 3}),
            "train": _records("r", {"QA": 2})}


def _group(row: dict) -> str:
    return row["id"].split("-")[1]


def test_predictor_chooses_a_threshold_per_group_on_validation_and_stamps_rows_with_it():
    """Whatever the (untrained) head scores, QA and Data2txt get the threshold chosen on their own
    validation scores, and Summary (too few records) the overall one."""
    from hydra import compose, initialize_config_dir

    from configs.schema import typed
    from eval.predictors import AnnotatorPredictor, PredictorConfig

    with initialize_config_dir(config_dir=str(REPO / "configs"), version_base="1.3"):
        cfg = typed(compose("sft", overrides=["+exp=ragtruth_minilm_binary", "model.name_or_path=embedded:minilm",
                                              "eval.threshold_by=meta.task_type"]))
    splits = _splits()
    predictor = AnnotatorPredictor.from_config(PredictorConfig.of_run(cfg))
    predictor.progress = False
    predictor.prepare(splits)
    val_scores = {row["id"]: row["probs"][1] for row in predictor.rows(splits["val"])}
    expected = choose_group_thresholds(splits["val"], val_scores, "meta.task_type")
    assert set(expected) == {"QA", "Data2txt"}
    assert predictor.thresholds_by == {"field": "meta.task_type", "values": expected}
    for row in predictor.rows(splits["test"]):
        assert row["threshold"] == expected.get(_group(row), predictor.threshold), row


def test_eval_run_stamps_rows_with_the_group_thresholds_stored_in_the_model(tmp_path):
    """eval/run.py on a model whose config stores thresholds per task type (as the trainer's export
    does): each test row carries its group's, and a group without one the overall threshold."""
    data, model = tmp_path / "data", tmp_path / "model"
    for split, records in _splits().items():
        write_jsonl(data / f"{split}.jsonl", records)
    shutil.copytree(resolve_model_path("embedded:minilm"), model)
    config = json.loads((model / "config.json").read_text())
    config["decision_threshold"] = 0.6
    config["decision_thresholds_by"] = {"field": "meta.task_type", "values": {"QA": 0.2, "Data2txt": 0.8}}
    (model / "config.json").write_text(json.dumps(config))
    proc = subprocess.run([sys.executable, str(REPO / "eval" / "run.py"), "+exp=ragtruth_minilm_binary",
                           f"model.name_or_path={model}", f"data.root={data}", "trainer.progress=false",
                           "data.folds=0", f"output_dir={tmp_path / 'run'}"],
                          cwd=REPO, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = [json.loads(x) for x in (tmp_path / "run" / "predictions.jsonl").read_text().splitlines()]
    assert {(_group(r), r["threshold"]) for r in rows} == {("QA", 0.2), ("Data2txt", 0.8), ("Summary", 0.6)}


def test_a_threshold_for_f1_flags_more_than_one_for_balanced_accuracy_where_most_are_hallucinated():
    """Eight hallucinated and two faithful records: F1 of the hallucinated class is best when every
    record is flagged (0.889), balanced accuracy (0.5 there) when the two faithful ones are spared."""
    gold = [1] * 8 + [0] * 2
    scores = [0.1, 0.2, 0.3, 0.4, 0.7, 0.8, 0.9, 0.95, 0.5, 0.6]
    assert choose_threshold(gold, scores, "f1") <= 0.1
    assert 0.6 < choose_threshold(gold, scores) <= 0.7
    with pytest.raises(ValueError, match="eval.threshold_for='recall': expected one of"):
        choose_threshold(gold, scores, "recall")


@pytest.mark.parametrize("objective", ["balanced_accuracy", "f1"])
def test_a_sentence_level_annotator_gets_group_thresholds_on_its_records_worst_sentences(objective):
    """Sentence by sentence, a record scores its worst sentence; eval.threshold_by chooses a threshold
    per task type on those record scores (for eval.threshold_for), and a row's flagged sentences are
    the ones at or over its group's threshold."""
    from hydra import compose, initialize_config_dir

    from configs.schema import typed
    from eval.predictors import AnnotatorPredictor, PredictorConfig

    with initialize_config_dir(config_dir=str(REPO / "configs"), version_base="1.3"):
        cfg = typed(compose("sft", overrides=["+exp=ragtruth_sentence_demo", "eval.threshold_by=meta.task_type",
                                              f"eval.threshold_for={objective}"]))
    splits = _splits()
    predictor = AnnotatorPredictor.from_config(PredictorConfig.of_run(cfg))
    predictor.progress = False
    predictor.prepare(splits)
    val_rows = predictor.rows(splits["val"])
    val_scores = {row["id"]: row["probs"][1] for row in val_rows}
    expected = choose_group_thresholds(splits["val"], val_scores, "meta.task_type", objective)
    assert predictor.thresholds_by == {"field": "meta.task_type", "values": expected} and set(expected) == {
        "QA", "Data2txt"}
    if objective == "f1":
        assert predictor.threshold == choose_threshold([r["label"] for r in splits["val"]],
                                                       [val_scores[r["id"]] for r in splits["val"]], "f1")
        assert predictor.threshold_source.endswith("for F1")
    for row in predictor.rows(splits["test"]):
        threshold = expected.get(_group(row), predictor.threshold)
        assert row["threshold"] == threshold
        assert bool(row["spans"]) == (row["probs"][1] >= threshold)
