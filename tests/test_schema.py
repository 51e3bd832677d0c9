import json

import pytest

from data_builders.records import RecordError, read_records, validate_record

GOOD = {"id": "a", "task": "summarization", "language": "zh", "source": "原文", "response": "摘要",
        "label": 1, "hallucination_types": ["entity"], "position": "middle", "length_bucket": "S"}


def _write(tmp_path, lines):
    path = tmp_path / "r.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_good_records_read(tmp_path):
    spans = {"spans": [{"start": 0, "end": 2, "type": "Evident Conflict", "text": "摘要"}], "task": "continuation"}
    path = _write(tmp_path, [json.dumps(GOOD, ensure_ascii=False), json.dumps({**GOOD, "id": "b", **spans})])
    assert [r["id"] for r in read_records(path)] == ["a", "b"]


@pytest.mark.parametrize("change, field", [
    ({"label": 2}, "label"),
    ({"hallucination_types": ["entity", "made_up"]}, "hallucination_types"),
    ({"position": "centre"}, "position"),
    ({"task": "translation"}, "task"),
    ({"response": 3}, "response"),
    ({"length_bucket": "XS"}, "length_bucket"),
    ({"spans": [{"start": 0, "end": 3}]}, "spans"),            # past the 2-character response
    ({"spans": [{"start": 1, "end": 1}]}, "spans"),            # empty
    ({"spans": [{"start": "0", "end": 1}]}, "spans"),
    ({"spans": [[0, 1]]}, "spans"),
    ({"spans": [{"start": 0, "end": 1, "type": 7}]}, "spans"),
])
def test_bad_value_names_file_line_field(tmp_path, change, field):
    path = _write(tmp_path, [json.dumps(GOOD), json.dumps({**GOOD, "id": "b", **change})])
    with pytest.raises(RecordError) as e:
        read_records(path)
    assert (e.value.path, e.value.line, e.value.field) == (str(path), 2, field)
    assert f"{path}:2 field '{field}'" in str(e.value)


def test_missing_field(tmp_path):
    rec = dict(GOOD)
    del rec["response"]
    with pytest.raises(RecordError, match="field 'response': missing"):
        read_records(_write(tmp_path, [json.dumps(rec)]))


def test_malformed_json_line(tmp_path):
    path = _write(tmp_path, [json.dumps(GOOD), '{"id": "b", "task": '])
    with pytest.raises(RecordError, match=r"r.jsonl:2: malformed JSON"):
        read_records(path)


def test_duplicate_ids_and_empty_file(tmp_path):
    with pytest.raises(RecordError, match="duplicate id 'a'"):
        read_records(_write(tmp_path, [json.dumps(GOOD), json.dumps(GOOD)]))
    empty = tmp_path / "e.jsonl"
    empty.write_text("")
    with pytest.raises(RecordError, match="empty"):
        read_records(empty)


def test_source_or_documents_required():
    rec = {k: v for k, v in GOOD.items() if k != "source"}
    with pytest.raises(RecordError, match="source"):
        validate_record(rec)
    validate_record({**rec, "documents": ["d1", "d2"]})
