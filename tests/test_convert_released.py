"""The convert command on excerpts written in the released files' exact formats, with their real
quirks: HaluEval general's literal "ID" ids, FaithBench summaries with a leading space before the
span offsets, RAGTruth's span flags. A converter never writes a file the project's reader rejects,
and a user error is one line, not a traceback."""
import json
import subprocess
import sys

import pytest

from data_builders.importers.faithbench import import_faithbench
from data_builders.importers.ragtruth import import_ragtruth
from data_builders.records import RecordError, read_records

GENERAL = [{"ID": "ID", "user_query": "What is 2+2?", "chatgpt_response": "4.", "hallucination": "no",
            "hallucination_spans": []},
           {"ID": "ID", "user_query": "Capital of Peru?", "chatgpt_response": "Quito.", "hallucination": "yes",
            "hallucination_spans": ["Quito"]},
           {"ID": "12", "user_query": "Who wrote Hamlet?", "chatgpt_response": "Shakespeare.", "hallucination": "no",
            "hallucination_spans": []}]
QA = {"knowledge": "Paris is the capital of France.", "question": "Capital of France?", "right_answer": "Paris",
      "hallucinated_answer": "Lyon"}


def _write(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return str(path)


def convert(*args):
    return subprocess.run([sys.executable, "-m", "data_builders.convert", *map(str, args)], capture_output=True,
                          text=True, timeout=120)


def test_repeated_ids_are_kept_apart_and_reported(tmp_path):
    done = convert("halueval", _write(tmp_path / "general_data.json", GENERAL), "--out", tmp_path / "g",
                   "--max-duplicate-fraction", "0.5")
    assert done.returncode == 0, done.stderr
    assert "--subset general (from the file name)" in done.stderr
    ids = [r["id"] for r in read_records(tmp_path / "g" / "test.jsonl")]      # the project's reader accepts it
    assert ids == ["halueval-general-general_data-ID", "halueval-general-general_data-ID~2",
                   "halueval-general-general_data-12"]
    quito = read_records(tmp_path / "g" / "test.jsonl")[1]
    span = quito["spans"][0]
    assert quito["response"][span["start"]:span["end"]] == "Quito" == quito["hallucinated_sentences"][0]
    assert "1 records repeated an id and were kept apart" in (tmp_path / "g" / "convert_report.txt").read_text()
    strict = convert("halueval", tmp_path / "general_data.json", "--out", tmp_path / "s")
    assert strict.returncode == 1 and "1 of 3 records repeat an id" in strict.stderr
    assert "Traceback" not in strict.stderr and not (tmp_path / "s" / "test.jsonl").exists()


def test_two_input_files_never_share_an_id_and_parquet_holds_the_same_records(tmp_path):
    from datasets import Dataset

    from data_builders.hf_datasets import dataset_records

    a, b = _write(tmp_path / "qa_data.json", [QA]), _write(tmp_path / "qa_more.json", [QA])
    done = convert("halueval", a, b, "--subset", "qa", "--out", tmp_path / "q", "--parquet")
    assert done.returncode == 0, done.stderr
    records = read_records(tmp_path / "q" / "test.jsonl")
    assert len({r["id"] for r in records}) == 4
    assert dataset_records(Dataset.from_parquet(str(tmp_path / "q" / "test.parquet"))) == records


@pytest.mark.parametrize("name,content,message", [
    ("general_data.json", "", "no records"),
    ("batch_1.json", json.dumps({"samples": []}), "no records"),
    ("general_data.json", '{"ID": "1", "user_query": "unterminated', "malformed JSON"),
    ("qa_data.json", None, "No such file"),
    ("data.json", json.dumps(QA), "pass --subset"),
])
def test_user_errors_are_one_line_and_a_non_zero_status(tmp_path, name, content, message):
    path = tmp_path / name
    if content is not None:
        path.write_text(content, encoding="utf-8")
    dataset = "faithbench" if name.startswith("batch") else "halueval"
    done = convert(dataset, path, "--out", tmp_path / "o")
    assert done.returncode == 1 and message in done.stderr, done.stderr
    lines = done.stderr.strip().splitlines()
    assert "Traceback" not in done.stderr and [x for x in lines if "error" in x] == lines[-1:]
    assert "Traceback" in convert(dataset, path, "--out", tmp_path / "o", "--debug").stderr


def test_faithbench_offsets_index_the_stored_summary(tmp_path):
    summary = " The film was a hit. Its production cost rose to 20 million."
    sample = {"sample_id": 0, "source": "A film.", "summary": summary, "annotations": [
        {"annot_id": 1, "label": ["Unwanted.Extrinsic"], "summary_span": "production ",
         "summary_start": summary.index("production "), "summary_end": summary.index("production ") + 11},
        {"annot_id": 2, "label": ["Questionable"], "summary_span": "20 million", "summary_start": 3,
         "summary_end": 13}]}
    path = tmp_path / "batch_1.json"
    path.write_text(json.dumps({"samples": [sample]}), encoding="utf-8")
    rec = import_faithbench(path)[0]
    assert rec["response"] == summary.strip()
    assert [x["type"] for x in rec["spans"]] == ["Unwanted.Extrinsic", "Questionable"]
    for span in rec["spans"]:     # shifted by the stripped space, or found where the offsets were wrong
        assert rec["response"][span["start"]:span["end"]] == span["text"]
    benign = {**sample, "annotations": [{**sample["annotations"][0], "label": ["Benign"]}]}
    path.write_text(json.dumps({"samples": [benign]}), encoding="utf-8")
    rec = import_faithbench(path)[0]        # a benign span is annotated, but not a hallucination
    assert (rec["label"], rec["spans"], rec["meta"]["other_spans"][0]["type"]) == (0, [], "Benign")


def test_ragtruth_keeps_its_span_flags_and_needs_a_split(tmp_path):
    sources = [{"source_id": "s1", "task_type": "Summary", "source_info": "Ann won.", "prompt": "..."}]
    label = {"start": 0, "end": 3, "text": "Bob", "meta": "wrong name", "label_type": "Evident Conflict",
             "implicit_true": False, "due_to_null": False}
    row = {"id": "1", "source_id": "s1", "model": "m", "split": "test", "quality": "good", "response": "Bob won.",
           "labels": [label]}
    src = _write(tmp_path / "source_info.jsonl", sources)
    rec = import_ragtruth(_write(tmp_path / "response.jsonl", [row]), src)["test"][0]
    assert rec["meta"]["quality"] == "good"
    assert rec["spans"][0]["implicit_true"] is False and rec["spans"][0]["due_to_null"] is False
    no_split = {k: v for k, v in row.items() if k != "split"}
    with pytest.raises(RecordError, match="response.jsonl:1 field 'split'"):
        import_ragtruth(_write(tmp_path / "response.jsonl", [no_split]), src)
