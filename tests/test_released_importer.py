import json

import pytest

from data_builders.importers.longnovel_released import bucket_for_tokens, import_released, import_report
from data_builders.records import RecordError
from data_builders.released_sample import write_sample
from data_builders.sources import rendered_lengths
from models.builders import load_tokenizer, resolve_model_path
from models.save_embedded import save_embedded

HALLU = {"has_hallucination": "有幻觉", "details": [{
    "hallucination_type": "数字幻觉", "hallucinated_sentence": "他带着五百两银子。",
    "corrected_content": "他带着三百两银子。", "reason": "原文是三百两。"}]}
ROWS = [
    {"id": 1, "language": "zh", "article": "原文一", "summary": "摘要一", "instruction": "判断",
     "input": "", "output": json.dumps(HALLU, ensure_ascii=False)},
    {"id": 2, "language": "zh", "article": "原文二", "summary": "摘要二", "instruction": "判断",
     "input": "", "output": '{"has_hallucination": "无幻觉", "details": []}'},
]


def _write(tmp_path, rows, name="test.jsonl"):
    path = tmp_path / name
    if name.endswith(".jsonl"):
        path.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in rows), encoding="utf-8")
    else:
        path.write_text(json.dumps(rows, ensure_ascii=False), encoding="utf-8")
    return path


@pytest.mark.parametrize("name", ["test.jsonl", "test.json"])
def test_import_released_rows(tmp_path, name):
    records = import_released(_write(tmp_path, ROWS, name), count_tokens=lambda records: [3000] * len(records))
    h, f = records
    assert (h["id"], h["label"], h["hallucination_types"], h["corrections"]) == \
        ("1", 1, ["numerical"], ["他带着三百两银子。"])
    assert (f["label"], f["hallucination_types"], f["length_bucket"]) == (0, [], "S")
    assert h["source"] == "原文一" and h["response"] == "摘要一"


@pytest.mark.parametrize("change, field", [
    ({"output": "not json"}, "output"),
    ({"output": '{"has_hallucination": "也许"}'}, "output"),
    ({"output": json.dumps({"has_hallucination": "有幻觉", "details": [{"hallucination_type": "奇怪"}]})},
     "output"),
])
def test_bad_rows_name_line_and_field(tmp_path, change, field):
    path = _write(tmp_path, [ROWS[0], {**ROWS[1], **change}])
    with pytest.raises(RecordError) as e:
        import_released(path)
    assert (e.value.line, e.value.field) == (2, field)


def test_missing_field(tmp_path):
    row = {k: v for k, v in ROWS[0].items() if k != "article"}
    with pytest.raises(RecordError, match="field 'article': missing"):
        import_released(_write(tmp_path, [row]))


def test_buckets_follow_table_3_ranges():
    assert [bucket_for_tokens(n) for n in (3000, 17000, 36000, 65000, 100000)] == ["S", "M", "L", "XL", "XXL"]


def test_released_lengths_are_tokenised_once_then_read_from_the_cache(tokenizer, tmp_path, monkeypatch):
    """Tokenised in 2 processes, once. os.environ stays the object it was (datasets' map would leave a copy
    in its place, and the HALLU_CACHE set here would then outlive this test in every later one)."""
    import os

    from data_builders.model_inputs.collate import encode_sample
    from data_builders.sources import rendered_lengths

    monkeypatch.setenv("HALLU_CACHE", str(tmp_path / "cache"))
    environ = os.environ
    path = _write(tmp_path, [{**ROWS[0], "article": "原文很长。" * 2000}, ROWS[1]])
    count = lambda records: rendered_lengths(records, tokenizer, "prompt_e", num_proc=2)  # noqa: E731
    records = import_released(path, count)
    assert os.environ is environ
    assert [r["n_tokens"] for r in records] == \
        [len(encode_sample(r, tokenizer, "prompt_e")["input_ids"]) for r in records]
    assert [r["length_bucket"] for r in records] == [bucket_for_tokens(r["n_tokens"]) for r in records]
    [cached] = (tmp_path / "cache" / "samples").iterdir()
    written = {f.name: f.stat().st_mtime_ns for f in cached.iterdir()}
    assert import_released(path, count) == records
    assert list((tmp_path / "cache" / "samples").iterdir()) == [cached]
    assert {f.name: f.stat().st_mtime_ns for f in cached.iterdir()} == written


def test_the_embedded_sample_in_released_form_reads_back_as_built(tmp_path, tokenizer):
    """The converter's files: the released fields, Prompt-E in instruction / input, and records that
    import back to the builder's (labels, types, corrections, S / M / L lengths)."""
    paths = write_sample(tokenizer, tmp_path, n_train=6, n_test=4)
    rows = [json.loads(line) for line in paths["train"].read_text(encoding="utf-8").splitlines()]
    assert [list(r) for r in rows] == [["id", "language", "article", "summary", "instruction", "input", "output"]] * 6
    count = lambda records: rendered_lengths(records, tokenizer, "prompt_e")  # noqa: E731
    records = import_released(paths["train"], count)
    assert [r["length_bucket"] for r in records] == ["S", "S", "M", "M", "L", "L"]
    assert [r["label"] for r in records] == [1, 0] * 3 and all(r["hallucination_types"] for r in records[::2])
    assert all(r["id"].split("-")[1] == r["length_bucket"] for r in records)   # the builder's bucket, re-measured
    assert "0 differ from the Prompt-E rendering; input: 6 present, 0 differ" in import_report(paths["train"], records)
    rows[1]["input"] = rows[1]["input"].replace("摘要:", "Summary:")
    del rows[2]["instruction"]
    edited = _write(tmp_path, rows, "edited.jsonl")
    report = import_report(edited, import_released(edited))
    assert "instruction: 5 present, 0 differ" in report and "input: 6 present, 1 differ" in report
    assert "read id, language, article, summary, output" in report


def test_the_embedded_model_as_a_plain_directory(tmp_path):
    out = tmp_path / "qwen3-tiny"
    assert save_embedded("qwen3-tiny", out) is True
    assert resolve_model_path(str(out)) == str(out) and load_tokenizer(str(out)).chat_template
    assert save_embedded("qwen3-tiny", out) is False          # the same model again: left as it is
    (out / "notes.txt").write_text("mine")
    with pytest.raises(FileExistsError, match="holds something other than qwen3-tiny"):
        save_embedded("qwen3-tiny", out)
