"""Cross-validation in one launch (`data.folds=k`, train/cross_validation.py): folds grouped by source,
every record scored once by the annotator of the fold that never saw its source, pooled and per-fold
reports, resume that keeps finished folds; and the benchmark experiments on hand-made span records."""
import json
import subprocess
import sys

import pytest

from data_builders.folds import source_key
from data_builders.records import read_jsonl, write_jsonl
from eval.scorers.scoring import scorer
from tests.conftest import REPO, torchrun

CITIES = ["Lyon", "Porto", "Graz", "Turku", "Ghent", "Split", "Bergen", "Cork", "Brno", "Malmo"]


def _records() -> list[dict]:
    """Two summaries of each of ten articles: one faithful, one naming a day the article lacks,
    with that word as its span (and, for UHGEval's protocol, the day and the city as keywords)."""
    out = []
    for i, city in enumerate(CITIES):
        source = (f"The mayor of {city} opened a library on Monday. It holds {1000 + i} books. "
                  f"Children may borrow them for free. The building cost {i + 2} million euros.")
        good = f"The mayor of {city} opened a library on Monday, which holds {1000 + i} books."
        for label, response in enumerate([good, good.replace("Monday", "Friday")]):
            day = response.index("day") - 3
            keywords = [{"text": response[day:day + 6], "start": day, "end": day + 6, "hallucinated": bool(label)},
                        {"text": city, "start": 13, "end": 13 + len(city), "hallucinated": False}]
            out.append({"id": f"a{i}-{label}", "task": "summarization", "language": "en", "source": source,
                        "response": response, "label": label, "meta": {"keywords": keywords},
                        "spans": [{"start": day, "end": day + 6, "type": "Extrinsic"}] if label else []})
    return out


SMALL = ["model.name_or_path=embedded:qwen3-tiny", "trainer.progress=false", "data.folds=2",
         "curriculum.stages=[{name: sentences, bucket: all, max_seq_len: 1024, max_steps: 2}]",
         "optim.micro_batch_size=4", "data.fold_val_fraction=0.25"]
DEMOS = ["faithbench_sentence_demo", "ragtruth_sentence_demo", "uhgeval_clause_demo"]


def _cross_validate(exp: str, root, *extra: str, nproc: int = 2):
    if not (root / "data" / "test.jsonl").exists():
        write_jsonl(root / "data" / "test.jsonl", _records())
    proc = torchrun(nproc, [f"+exp={exp}", *SMALL, f"data.root={root / 'data'}", f"output_dir={root / 'run'}",
                            *extra])
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "still referenced after teardown" not in proc.stderr, proc.stderr[-3000:]
    return root / "run", proc


@pytest.fixture(scope="module")
def cv_run(tmp_path_factory):
    """RAGTruth's experiment (span scorer) with clause units, on the hand-made records."""
    return _cross_validate("ragtruth_sentence_demo", tmp_path_factory.mktemp("cv"), "task.evidence_unit=clause")


@pytest.mark.slow
@pytest.mark.parametrize("exp", DEMOS)
def test_the_benchmark_demos_score_every_record_once_by_a_fold_that_never_saw_its_source(exp, tmp_path):
    out, proc = _cross_validate(exp, tmp_path)
    tests = []
    for i in range(2):
        parts = {s: read_jsonl(out / "folds" / f"fold_{i}" / f"{s}.jsonl") for s in ("train", "val", "test")}
        seen = {source_key(r) for s in ("train", "val") for r in parts[s]}
        assert seen.isdisjoint(source_key(r) for r in parts["test"]), f"fold {i} tests a source it trained on"
        tests += [r["id"] for r in parts["test"]]
        assert json.loads((out / f"fold_{i}" / "eval" / "metrics.json").read_text())["n"] == len(parts["test"])
    assert sorted(tests) == sorted(r["id"] for r in _records()), "each record in exactly one test part"
    pooled = json.loads((out / "eval" / "metrics.json").read_text())
    assert pooled["n"] == 20 and len(pooled["folds"]) == 2 and pooled["missing_ids"] == []
    assert pooled["parse_failures"] == 0
    protocol = {"faithbench_sentence_demo": "balanced_acc", "ragtruth_sentence_demo": "char",
                "uhgeval_clause_demo": "keywords_per_item"}[exp]      # each benchmark under its own metric
    assert protocol in pooled and all(protocol in fold for fold in pooled["folds"])
    report = (out / "eval" / "report.md").read_text()
    assert "| fold | threshold |" in report and "\n| 1 | " in report
    assert "== cross-validation, 2 folds pooled" in proc.stdout


@pytest.mark.slow
def test_the_pooled_scores_are_the_folds_rows_scored_together(cv_run):
    out, _ = cv_run
    pooled = json.loads((out / "eval" / "metrics.json").read_text())
    rows = [row for i in range(2) for row in read_jsonl(out / f"fold_{i}" / "eval" / "predictions.jsonl")]
    again, _ = scorer("spans").score(_records(), {r["id"]: r for r in rows})
    assert (again["example"], again["char"]) == (pooled["example"], pooled["char"])


@pytest.mark.slow
def test_predicted_spans_are_the_flagged_clauses_and_the_export_knows_its_unit(cv_run):
    out, _ = cv_run
    records = {r["id"]: r for r in _records()}
    for row in read_jsonl(out / "fold_0" / "eval" / "predictions.jsonl"):
        response = records[row["id"]]["response"]
        assert all(response[a:b].strip() and (a == 0 or response[a - 1] in ", ") for a, b in row["spans"])
        assert bool(row["spans"]) == (row["probs"][1] >= row["threshold"])
    spec = json.loads((out / "fold_0" / "checkpoints" / "0-sentences" / "hf" / "annotator.json").read_text())
    assert spec["evidence_unit"] == "clause" and spec["evidence_sentences"] == 3


@pytest.mark.slow
def test_resuming_a_finished_run_keeps_its_folds_and_pools_again(cv_run):
    out, _ = cv_run
    before = (out / "fold_1" / "train_log.jsonl").read_text()
    _, proc = _cross_validate("ragtruth_sentence_demo", out.parent, "task.evidence_unit=clause", "resume=auto", nproc=1)
    assert "fold 0: finished earlier, kept" in proc.stdout and "fold 1: finished earlier, kept" in proc.stdout
    assert (out / "fold_1" / "train_log.jsonl").read_text() == before
    assert json.loads((out / "eval" / "metrics.json").read_text())["n"] == 20


@pytest.mark.slow
def test_launches_side_by_side_train_their_own_folds_and_the_last_one_pools(tmp_path):
    """data.only_folds: [] deals the folds, [1] trains fold 1 alone and leaves the pooling, [0] trains
    fold 0, finds both finished and pools every record once."""
    run = tmp_path / "run"
    _cross_validate("ragtruth_sentence_demo", tmp_path, "data.only_folds=[]", nproc=1)
    assert (run / "folds" / "fold_1" / "test.jsonl").is_file() and not (run / "fold_0").exists()
    _, second = _cross_validate("ragtruth_sentence_demo", tmp_path, "data.only_folds=[1]", "resume=auto", nproc=1)
    assert (run / "fold_1" / "eval" / "metrics.json").is_file() and not (run / "fold_0").exists()
    assert "folds [0] are not finished" in second.stdout and not (run / "eval" / "metrics.json").exists()
    _, last = _cross_validate("ragtruth_sentence_demo", tmp_path, "data.only_folds=[0]", "resume=auto", nproc=1)
    assert "== fold 1" not in last.stdout and "cross-validation, 2 folds pooled" in last.stdout
    assert json.loads((run / "eval" / "metrics.json").read_text())["n"] == len(_records())


def test_only_folds_outside_the_folds_is_refused():
    from configs.rules import ConfigError, check_only_folds

    check_only_folds(3, [0, 2])
    with pytest.raises(ConfigError, match=r"fold numbers 0 to 2 of data.folds=3, found \[3\]"):
        check_only_folds(3, [3])
    with pytest.raises(ConfigError, match="data.folds is 0"):
        check_only_folds(0, [0])


@pytest.mark.slow
def test_eval_run_rescores_a_folds_export_to_the_folds_own_figures(cv_run, tmp_path):
    """A fold's export, scored again by eval/run.py on the fold's test part, with its stored threshold."""
    out, _ = cv_run
    cmd = [sys.executable, str(REPO / "eval" / "run.py"), "+exp=ragtruth_sentence_demo", "task.evidence_unit=clause",
           f"checkpoint={out / 'fold_1' / 'checkpoints' / '0-sentences' / 'hf'}", "data.folds=0",
           f"data.root={out / 'folds' / 'fold_1'}", f"output_dir={tmp_path}"]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    again = json.loads((tmp_path / "scores" / "metrics.json").read_text())
    fold = json.loads((out / "fold_1" / "eval" / "metrics.json").read_text())
    assert (again["n"], again["example"], again["char"]) == (fold["n"], fold["example"], fold["char"])
    refused = subprocess.run([*cmd[:-3], f"data.root={out.parent / 'data'}", f"output_dir={tmp_path / 'x'}"],
                             cwd=REPO, capture_output=True, text=True, timeout=120)
    assert refused.returncode == 1 and "eval/run.py scores one model on one test split" in refused.stderr


@pytest.mark.parametrize("overrides, message", [
    (["data.folds=11"], "data.folds=11: expected 2 <= k <= the number of sources in"),
    (["data.source=embedded"], "data.folds=2 deals a records directory into folds: it needs data.source=records"),
    (["eval.enabled=false"], "data.folds=2 scores every record in its fold's test part: it needs eval.enabled=true"),
])
def test_a_bad_cross_validation_config_fails_in_one_line(tmp_path, overrides, message):
    write_jsonl(tmp_path / "test.jsonl", _records())
    cmd = [sys.executable, str(REPO / "train" / "sft.py"), "+exp=faithbench_sentence_demo", f"data.root={tmp_path}",
           "data.folds=2", *overrides, f"output_dir={tmp_path / 'run'}"]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1 and message in proc.stderr, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr and not (tmp_path / "run").exists()
