"""Decision thresholds per value of a record field (`eval.threshold_by`, RAGTruth's task types)."""
import json
import subprocess
import sys

from data_builders.schema import write_jsonl
from eval.thresholds import MIN_GROUP, choose_group_thresholds, field_value
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


def test_eval_run_stamps_each_row_with_its_groups_threshold(tmp_path):
    data = tmp_path / "data"
    write_jsonl(data / "val.jsonl", _records("v", {"QA": MIN_GROUP, "Data2txt": MIN_GROUP, "Summary": 4}))
    write_jsonl(data / "test.jsonl", _records("t", {"QA": 3, "Data2txt": 3, "Summary": 3}))
    write_jsonl(data / "train.jsonl", _records("r", {"QA": 2}))
    proc = subprocess.run([sys.executable, str(REPO / "eval" / "run.py"), "+exp=ragtruth_minilm_binary",
                           "model.name_or_path=embedded:minilm", f"data.root={data}", "trainer.progress=false",
                           "data.folds=0", "eval.threshold_by=meta.task_type", f"output_dir={tmp_path / 'run'}"],
                          cwd=REPO, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = [json.loads(x) for x in (tmp_path / "run" / "predictions.jsonl").read_text().splitlines()]
    by_group: dict[str, set] = {}
    for row in rows:
        by_group.setdefault(row["id"].split("-")[1], set()).add(row["threshold"])
    assert all(len(v) == 1 for v in by_group.values())      # one threshold per task type
    assert by_group["QA"] != by_group["Summary"] or by_group["Data2txt"] != by_group["Summary"]
