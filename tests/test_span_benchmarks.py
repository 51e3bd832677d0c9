"""Spans as one field of the record schema: the UHGEval and FaithJudge-RAGTruth importers on rows in
their released layouts, the span scorer and UHGEval's keyword protocol on hand-worked examples, and
every importer's offsets on the released files (HALLU_SHARED_DATA; skipped where absent)."""
import json

import pytest

from data_builders.importers.faithbench import import_faithbench
from data_builders.importers.halueval import import_halueval
from data_builders.importers.ragtruth import import_ragtruth_faithjudge
from data_builders.importers.uhgeval import import_uhgeval
from data_builders.records import RecordError, write_jsonl
from eval.scorers.inputs import read_predictions
from eval.scorers.scoring import score_records
from tests.conftest import shared_data

CONTINUATION = "张三表示，三月将在北京召开会议。"
UHG = {"id": "doc_1", "headLine": "（社会）会议消息", "broadcastDate": "2015-01-22 12:16:02", "type": "doc",
       "newsBeginning": "新华社北京电", "hallucinatedContinuation": CONTINUATION, "generatedBy": "m",
       "annotations": ["张三<sep>不合理，无此人", "表示<sep>合理", "三月<sep>不合理，应为五月", "北京<sep>合理",
                       "会议<sep>合理"]}
ALL_REASONABLE = {**UHG, "id": "doc_2", "annotations": ["表示<sep>合理", "会议<sep>合理"]}


def _uhgeval(tmp_path, rows):
    path = tmp_path / "dataset_uhgeval_concise.jsonl"
    write_jsonl(path, rows)
    return import_uhgeval(path)


def test_uhgeval_records_locate_every_keyword(tmp_path):
    rec, faithful = _uhgeval(tmp_path, [UHG, ALL_REASONABLE])
    assert rec["source"] == "《（社会）会议消息》\n2015-01-22 12:16:02\n新华社北京电" and rec["task"] == "continuation"
    assert (rec["label"], faithful["label"], faithful["spans"]) == (1, 0, [])
    assert [CONTINUATION[s["start"]:s["end"]] for s in rec["spans"]] == ["张三", "三月"]
    kws = rec["meta"]["keywords"]
    assert [CONTINUATION[k["start"]:k["end"]] for k in kws] == ["张三", "表示", "三月", "北京", "会议"]
    assert [k["hallucinated"] for k in kws] == [True, False, True, False, False]
    broken = {**UHG, "annotations": ["张三 不合理"]}
    with pytest.raises(RecordError, match="dataset_uhgeval_concise.jsonl:2 field 'annotations'"):
        _uhgeval(tmp_path, [UHG, broken])


def test_uhgeval_keyword_protocol_by_hand(tmp_path):
    gold = _uhgeval(tmp_path, [UHG, ALL_REASONABLE])
    # item 1: N = 2 (2 unreasonable, 3 reasonable): 张三, 三月 | 表示, 北京. The spans cover 张三 (right)
    # and 北京 (wrong); 三月 is missed (wrong), 表示 left alone (right): 2 of 4. Item 2 has no pair: 0.
    preds = {"uhgeval-doc_1": {"id": "uhgeval-doc_1", "spans": [[0, 2], [9, 11]]},
             "uhgeval-doc_2": {"id": "uhgeval-doc_2", "spans": []}}
    metrics, rows = score_records("uhgeval", gold, preds)
    assert [r["acc"] for r in rows] == [0.5, 0.0]
    assert (metrics["acc"], metrics["acc_paired"], metrics["n_paired"], metrics["keywords_per_item"]) == \
        (0.25, 0.5, 1, 2.0)


def test_span_scores_by_hand():
    gold = [{"id": "a", "task": "qa", "language": "en", "source": "Ann won.", "response": "Bob won the race.",
             "label": 1, "spans": [{"start": 0, "end": 3}], "meta": {"task_type": "QA"}},
            {"id": "b", "task": "summarization", "language": "en", "source": "x", "response": "Ann lost.",
             "label": 0, "spans": [], "meta": {"task_type": "Summary"}},
            {"id": "c", "task": "summarization", "language": "en", "source": "x", "response": "Cat sat on mat.",
             "label": 1, "spans": [{"start": 4, "end": 7}, {"start": 11, "end": 14}], "meta": {"task_type": "Summary"}}]
    preds = {"a": {"id": "a", "spans": [[0, 8]]}, "b": {"id": "b", "spans": []},
             "c": {"id": "c", "spans": [{"start": 0, "end": 7}]}}
    m, _ = score_records("spans", gold, preds)
    # characters: a predicts 8 of which 3 gold; c predicts 7 of which 3 gold (of its 6); 6 of 15 predicted, 6 of 9 gold
    assert m["char"]["precision"] == pytest.approx(6 / 15) and m["char"]["recall"] == pytest.approx(6 / 9)
    assert m["example"]["f1"] == 1.0 and m["by_task"]["QA"]["char"]["recall"] == 1.0
    assert m["by_task"]["Summary"]["char"]["precision"] == pytest.approx(3 / 7)


def test_bad_prediction_spans_name_the_line(tmp_path):
    path = tmp_path / "p.jsonl"
    write_jsonl(path, [{"id": "a", "spans": [[0, 3]]}, {"id": "b", "spans": [[5, 2]]}])
    with pytest.raises(RecordError, match="p.jsonl:2 field 'spans'"):
        read_predictions(path, {"a", "b"})


def test_faithjudge_ragtruth_rows(tmp_path):
    row = {"source_id": 7, "source": {"question": "Who won?", "passages": "passage 1: Ann won."},
           "responses": [{"response": "Bob won.", "model": "m", "labels": [
               {"start": 0, "end": 3, "text": "Bob", "meta": "", "label_type": "Evident Conflict",
                "implicit_true": False, "due_to_null": False}]},
               {"response": "Ann won.", "model": "n", "labels": []}]}
    path = tmp_path / "ragtruth_qa.jsonl"
    path.write_text(json.dumps(row) + "\n", encoding="utf-8")
    bob, ann = import_ragtruth_faithjudge(path)
    assert (bob["id"], bob["task"], bob["question"], bob["label"], ann["label"]) == \
        ("ragtruth-qa-7-0", "qa", "Who won?", 1, 0)
    assert bob["spans"][0]["type"] == "Evident Conflict" and bob["meta"]["task_type"] == "QA"
    row["responses"][0]["labels"][0]["text"] = "Carl"
    path.write_text(json.dumps(row) + "\n", encoding="utf-8")
    with pytest.raises(RecordError, match="ragtruth_qa.jsonl:1 field 'labels'"):
        import_ragtruth_faithjudge(path)
    with pytest.raises(RecordError, match="ragtruth_<summary|qa|data2txt>"):
        import_ragtruth_faithjudge(tmp_path / "other.jsonl")


def _offsets_index(records):
    for rec in records:
        for s in rec["spans"]:
            assert rec["response"][s["start"]:s["end"]] == s["text"], (rec["id"], s)


def test_released_files_spans_index_their_responses():
    rag = shared_data("ragtruth_faithjudge")
    records = [r for t in ("summary", "qa", "data2txt")
               for r in import_ragtruth_faithjudge(rag / f"ragtruth_{t}.jsonl")]
    assert len(records) == 2617 and sum(len(r["spans"]) for r in records) == 1731
    _offsets_index(records)
    uhg = import_uhgeval(shared_data("uhgeval") / "dataset_uhgeval_concise.jsonl")
    keywords = [k for r in uhg for k in r["meta"]["keywords"]]
    assert (len(uhg), len(keywords), sum(k["hallucinated"] for k in keywords)) == (1000, 8233, 2288)
    assert all(k["start"] is not None for k in keywords)
    _offsets_index(uhg)
    fb = [r for p in sorted(shared_data("faithbench").glob("batch_*.json")) for r in import_faithbench(p)]
    _offsets_index(fb)
    _offsets_index(import_halueval(shared_data("halueval") / "general_data.json", "general"))
