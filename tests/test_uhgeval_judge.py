"""UHGEval's keyword-level judge (`+exp=uhgeval_judge`): its question as UHGEval asks it, its answers read as
UHGEval reads them, the keywords its metric reads asked about one by one, and the scorer counting a
judge's answers, an unreadable one as wrong and its item left out where UHGEval leaves it out."""
import json
import subprocess
import sys

import pytest

from data_builders.importers.uhgeval import import_uhgeval
from data_builders.model_inputs.prompts import UHGEVAL_KEYWORD, render_messages
from data_builders.records import write_jsonl
from eval.aggregation.by_keyword import keyword_row, keyword_units
from eval.scorers.parsers import parse_uhgeval_keyword_answer
from eval.scorers.scoring import score_records
from tests.conftest import REPO
from tests.test_span_benchmarks import ALL_REASONABLE, CONTINUATION, UHG


def _records(tmp_path):
    path = tmp_path / "dataset_uhgeval_concise.jsonl"
    write_jsonl(path, [UHG, ALL_REASONABLE])
    return import_uhgeval(path)


def test_the_question_is_uhgevals_with_the_items_beginning_continuation_and_keyword(tmp_path):
    item, _ = _records(tmp_path)
    units = keyword_units(item)
    assert [u["meta"]["keyword"] for u in units] == ["张三", "三月", "表示", "北京"]   # N = 2 each side, in order
    [message] = render_messages(units[1], UHGEVAL_KEYWORD)
    text = message["content"]
    assert message["role"] == "user" and text.startswith("你是一名新华社新闻工作者。")
    # UHGEval's template joins headline, date and beginning with a written backslash-n
    assert text.endswith('新闻的开头："""《（社会）会议消息》\\n2015-01-22 12:16:02\\n新华社北京电"""\n\n'
                         f'续写："""{CONTINUATION}"""\n\n是否符合现实：续写中的"""三月"""')
    assert text.count("是否符合现实：续写中的") == 4          # three worked examples, then the question
    with pytest.raises(ValueError, match="needs meta.keyword"):
        render_messages({**units[0], "meta": {}}, UHGEVAL_KEYWORD)


def test_in_process_the_question_is_plain_text_as_uhgevals_local_models_read_it(tmp_path):
    from data_builders.model_inputs.collate import prompt_ids, prompt_text
    from models.builders import load_tokenizer, resolve_model_path

    tokenizer = load_tokenizer(resolve_model_path("embedded:qwen3-tiny"))
    unit = keyword_units(_records(tmp_path)[0])[0]
    [message] = render_messages(unit, UHGEVAL_KEYWORD)
    assert prompt_text(unit, tokenizer, UHGEVAL_KEYWORD) == message["content"]     # no chat template around it
    assert prompt_ids(unit, tokenizer, UHGEVAL_KEYWORD) == tokenizer.encode(message["content"])
    assert prompt_text(unit, tokenizer, "consistency") != render_messages(unit, "consistency")[0]["content"]


@pytest.mark.parametrize("answer, label", [
    ("不符合现实，因为不存在此人。", 1), ("符合现实。", 0), ("  符合现实", 0), ('续写中的"""三月"""不符合现实', 1),
    ('"""三月"""符合现实', 0), ('"""五月"""符合现实', None), ("它符合现实", None), ("Yes", None), ("", None),
    (None, None),
])
def test_an_answer_is_read_by_how_it_starts(answer, label):
    assert parse_uhgeval_keyword_answer(answer, "三月") == label


def test_the_judges_answers_are_scored_and_an_unreadable_one_counts_wrong(tmp_path):
    item, no_pair = _records(tmp_path)
    units = keyword_units(item)          # gold: 张三, 三月 unreasonable; 表示, 北京 reasonable
    row = keyword_row(item["id"], units, [{"output": a} for a in ("不符合现实", "不知道", "符合现实", "不符合现实")])
    assert row["keyword_labels"] == [1, None, 0, 1] and row["keyword_outputs"][1] == "不知道"
    assert [item["response"][a:b] for a, b in row["spans"]] == ["张三", "北京"] and row["label"] == 1
    empty = keyword_row(no_pair["id"], keyword_units(no_pair), [])
    metrics, rows = score_records("uhgeval", [item, no_pair], {item["id"]: row, no_pair["id"]: empty})
    assert [r["acc"] for r in rows] == [0.5, 0.0] and metrics["acc"] == 0.25
    assert (metrics["unreadable_keywords"], metrics["n_paired"], metrics["acc_paired"]) == (1, 0, None)
    readable = {**row, "keyword_labels": [1, 1, 0, 1]}
    metrics, _ = score_records("uhgeval", [item, no_pair], {item["id"]: readable, no_pair["id"]: empty})
    assert (metrics["acc"], metrics["n_paired"], metrics["acc_paired"]) == (0.375, 1, 0.75)
    with pytest.raises(ValueError, match="not the ones UHGEval's metric reads"):
        score_records("uhgeval", [item], {item["id"]: {**row, "keywords": ["张三", "三月", "北京", "表示"]}})


def test_eval_run_asks_a_model_about_each_keyword_and_keeps_every_answer(tmp_path):
    data, out = tmp_path / "data", tmp_path / "run"
    write_jsonl(data / "test.jsonl", _records(tmp_path))
    run = subprocess.run([sys.executable, str(REPO / "eval/run.py"), "+exp=uhgeval_judge", f"data.root={data}",
                          "model.name_or_path=embedded:qwen3-tiny", "eval.max_new_tokens=4", "trainer.progress=false",
                          f"output_dir={out}"], cwd=REPO, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    rows = {r["id"]: r for r in map(json.loads, (out / "predictions.jsonl").read_text().splitlines())}
    assert rows["uhgeval-doc_1"]["keywords"] == ["张三", "三月", "表示", "北京"]
    assert rows["uhgeval-doc_2"]["keywords"] == [] and rows["uhgeval-doc_2"]["spans"] == []
    item = rows["uhgeval-doc_1"]
    assert len(item["keyword_outputs"]) == 4 and all(isinstance(o, str) for o in item["keyword_outputs"])
    assert item["keyword_labels"] == [parse_uhgeval_keyword_answer(o, k)
                                      for o, k in zip(item["keyword_outputs"], item["keywords"])]
    metrics = json.loads((out / "scores" / "metrics.json").read_text())
    assert metrics["n"] == 2 and metrics["unreadable_keywords"] == item["keyword_labels"].count(None)
    assert 0 < item["prompt_tokens"] and 4 <= item["completion_tokens"] <= 16
