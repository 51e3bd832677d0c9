"""SummEdits: the importer on the released files (their published counts per domain), leave one
domain out, and the benchmark's protocol (balanced accuracy per domain, overall as their mean)."""
import json
import subprocess
import sys

import pytest

from data_builders.folds import grouped_folds, source_key
from data_builders.importers.summedits import edited_spans
from data_builders.records import read_jsonl
from eval.scorers.scoring import scorer
from tests.conftest import REPO, shared_data

# factualNLG's README: summaries (documents) per domain of the six released here
PUBLISHED_COUNTS = {"news": (819, 25), "qmsumm": (431, 16), "sales_call": (520, 18), "samsum": (664, 22),
                    "scitldr": (466, 17), "ectsum": (668, 22)}


def _convert(*args):
    return subprocess.run([sys.executable, "-m", "data_builders.convert", "summedits", *map(str, args)],
                          capture_output=True, text=True, cwd=REPO, timeout=300)


def test_the_released_domains_import_with_their_published_counts(tmp_path):
    root = shared_data("summedits")
    done = _convert(*sorted(root.glob("summedits_*.json")), "--out", tmp_path)
    assert done.returncode == 0, done.stderr
    records = read_jsonl(tmp_path / "test.jsonl")
    for domain, (n, docs) in PUBLISHED_COUNTS.items():
        mine = [r for r in records if r["meta"]["domain"] == domain]
        assert (len(mine), len({r["meta"]["doc_id"] for r in mine})) == (n, docs), domain
    released = {r["id"]: r for r in json.loads((root / "summedits_news.json").read_text())}
    for rec in records:
        if rec["meta"]["domain"] == "news":
            raw = released[rec["id"].removeprefix("summedits-news-")]
            assert rec["label"] == 1 - raw["label"] and rec["response"] == raw["summary"]   # 0 = inconsistent
    assert f"{len(records)} records ({sum(r['label'] for r in records)} hallucinated" in done.stdout


@pytest.mark.parametrize("summary, expected", [
    ("U.K. activists dumped paint on the road.", []),
    ("British activists dumped paint on the pavement.", ["British", "pavement"]),
    ("U.K. activists splashed blue paint on the road.", ["splashed blue"]),
    ("U.K. activists dumped on the road.", ["on"]),                  # a deletion marks the word after it
    ("U.K. activists dumped paint on the", ["the"]),                 # ... or, at the end, the one before
])
def test_the_edited_spans_are_the_summarys_words_that_differ_from_the_seed(summary, expected):
    spans = edited_spans(summary, "U.K. activists dumped paint on the road.")
    assert [summary[a:b] for a, b in spans] == expected
    assert edited_spans(summary, None) == []


def _sample(domain: str, i: int, label: int) -> dict:
    return {"id": f"{domain}{i}", "doc": f"Document {i % 3} of {domain}.", "summary": f"Summary {i}.", "label": label,
            "split": "test", "edit_types": [], "original_summary": "Summary."}


@pytest.mark.parametrize("name, content, expected", [
    ("summedits_news.json", [{"id": "a", "doc": "d", "summary": "s", "label": 2}], "expected label 0"),
    ("summedits_news.json", [{"id": "a", "doc": "d", "label": 1}], "field 'summary'"),
    ("news.json", [_sample("news", 0, 1)], "expected a file named summedits_<domain>.json"),
])
def test_a_bad_file_is_refused_naming_what_is_wrong(tmp_path, name, content, expected):
    (tmp_path / name).write_text(json.dumps(content))
    done = _convert(tmp_path / name, "--out", tmp_path / "out")
    assert done.returncode == 1 and expected in done.stderr and "Traceback" not in done.stderr


def test_leave_one_domain_out_holds_each_domain_whole_in_one_test_part(tmp_path):
    files = []
    for domain in ("news", "samsum", "scitldr"):
        files.append(tmp_path / f"summedits_{domain}.json")
        files[-1].write_text(json.dumps([_sample(domain, i, i % 2) for i in range(12)]))
    assert _convert(*files, "--out", tmp_path / "out").returncode == 0
    records = read_jsonl(tmp_path / "out" / "test.jsonl")
    folds = grouped_folds(records, 3, val_fraction=0.2, by="domain")
    assert sorted(next(iter({r["meta"]["domain"] for r in f["test"]})) for f in folds) == ["news", "samsum", "scitldr"]
    for fold in folds:
        test_domains = {r["meta"]["domain"] for r in fold["test"]}
        assert len(test_domains) == 1 and len(fold["test"]) == 12
        assert not test_domains & {r["meta"]["domain"] for part in ("train", "val") for r in fold[part]}
        assert fold["val"] and not {source_key(r) for r in fold["val"]} & {source_key(r) for r in fold["train"]}
    with pytest.raises(ValueError, match="expected 2 <= k <= the number of values of meta.domain"):
        grouped_folds(records, 4, by="domain")


def test_balanced_accuracy_per_domain_and_overall_as_their_mean():
    gold = [{"id": f"{d}{i}", "label": lab, "meta": {"domain": d}}
            for d, labels in (("news", [1, 1, 0, 0]), ("samsum", [1, 0, 0, 0])) for i, lab in enumerate(labels)]
    preds = {"news0": {"label": 1}, "news1": {"label": 0}, "news2": {"label": 0}, "news3": {"label": 0},
             "samsum0": {"label": 1}, "samsum1": {"label": 1}, "samsum2": {"label": 0}}      # samsum3: missing
    s = scorer("summedits")
    metrics, rows = s.score(gold, preds)
    # news: recall 1/2, specificity 2/2 -> 0.75; samsum: 1/1 and 1/3 (the missing one counts as wrong) -> 2/3
    assert metrics["by_domain"]["news"]["balanced_acc"] == pytest.approx(0.75)
    assert metrics["by_domain"]["samsum"]["balanced_acc"] == pytest.approx(2 / 3)
    assert metrics["balanced_acc"] == pytest.approx((0.75 + 2 / 3) / 2)
    assert metrics["missing_ids"] == ["samsum3"] and metrics["parse_failures"] == 1
    text = "\n".join(s.markdown(metrics))
    assert "| SummaCConv | 53.1 | 61.9 | 57.50 | 57.1 |" in text        # samsum, news, their mean, all 10
    assert "| **this run** | 66.67 | 75.00 | 70.83 |" in text
    assert s.summary(metrics).acc == pytest.approx(metrics["balanced_acc"])


@pytest.mark.slow
def test_leave_one_domain_out_trains_and_scores_every_domain_once(tmp_path):
    """+exp=summedits_minilm_binary at a small size: 3 domains, 3 folds, each scored by the fold that
    trained on the other two; the pooled report has every domain and the published rows."""
    from tests.conftest import torchrun
    from tests.test_trainer_e2e import _ok

    files = []
    for domain in ("news", "samsum", "scitldr"):
        files.append(tmp_path / f"summedits_{domain}.json")
        files[-1].write_text(json.dumps([_sample(domain, i, i % 2) for i in range(8)]))
    assert _convert(*files, "--out", tmp_path / "data").returncode == 0
    _ok(torchrun(2, ["+exp=summedits_minilm_binary", f"data.root={tmp_path / 'data'}", "data.folds=3",
                     "data.fold_val_fraction=0.5", "trainer.progress=false", f"output_dir={tmp_path / 'run'}",
                     "curriculum.stages=[{name: pairs, bucket: all, max_seq_len: 128, max_steps: 2}]",
                     "optim.micro_batch_size=2"]))
    pooled = json.loads((tmp_path / "run" / "eval" / "metrics.json").read_text())
    assert pooled["n"] == 24 and pooled["missing_ids"] == [] and set(pooled["by_domain"]) == {"news", "samsum",
                                                                                             "scitldr"}
    assert all(m["n"] == 8 for m in pooled["by_domain"].values())
    for i in range(3):
        tested = {r["meta"]["domain"] for r in read_jsonl(tmp_path / "run" / "folds" / f"fold_{i}" / "test.jsonl")}
        trained = {r["meta"]["domain"] for r in read_jsonl(tmp_path / "run" / "folds" / f"fold_{i}" / "train.jsonl")}
        assert len(tested) == 1 and not tested & trained
    assert "| SummaCConv |" in (tmp_path / "run" / "eval" / "report.md").read_text()
    decoder = torchrun(1, ["+exp=summedits_smollm2", "model.name_or_path=embedded:qwen3-tiny", "deepspeed=none",
                           f"data.root={tmp_path / 'data'}", "data.folds=3", "data.fold_val_fraction=0.5",
                           "trainer.progress=false", f"output_dir={tmp_path / 'decoder'}", "optim.micro_batch_size=2",
                           "curriculum.stages=[{name: pairs, bucket: all, max_seq_len: 1024, max_steps: 1}]"])
    _ok(decoder)       # the GPU experiment's recipe (SummEdits' question, a binary head, one domain out) on CPU
    by_domain = json.loads((tmp_path / "decoder" / "eval" / "metrics.json").read_text())["by_domain"]
    assert {d: m["n"] for d, m in by_domain.items()} == {"news": 8, "samsum": 8, "scitldr": 8}


def test_a_domain_outside_the_six_released_here_gets_its_published_rows(tmp_path):
    """The benchmark has ten domains; a file of one of the four not copied here (Shakespeare) in the released
    layout is imported and scored beside the published systems' figures on it."""
    (tmp_path / "summedits_shakespeare.json").write_text(json.dumps([_sample("shakespeare", i, i % 2)
                                                                     for i in range(6)]))
    (tmp_path / "summedits_news.json").write_text(json.dumps([_sample("news", i, i % 2) for i in range(6)]))
    done = _convert(tmp_path / "summedits_shakespeare.json", tmp_path / "summedits_news.json", "--out",
                    tmp_path / "out")
    assert done.returncode == 0, done.stderr
    gold = read_jsonl(tmp_path / "out" / "test.jsonl")
    predictions = {r["id"]: {"id": r["id"], "label": r["label"] if r["meta"]["domain"] == "news" else 1} for r in gold}
    s = scorer("summedits")
    metrics, _ = s.score(gold, predictions)
    assert metrics["by_domain"]["shakespeare"]["balanced_acc"] == 0.5 and metrics["by_domain"]["news"]["acc"] == 1.0
    table = s.markdown(metrics)
    assert "| system | news | shakespeare | mean of these | overall (10 domains) |" in table
    assert "| QAFactEval | 74.4 | 61.6 | 68.00 | 65.5 |" in table and "| GPT4 | 83.3 | 84.0 | 83.65 | 82.1 |" in table
