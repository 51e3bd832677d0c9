import math

import pytest

from eval.scorers.longnovel import score_longnovel
from eval.scorers.metrics import binary_scores
from eval.scorers.parsers import parse_longnovel_verdict

FAITHFUL = '{"has_hallucination": "无幻觉", "details": []}'
HALLU = ('{"has_hallucination": "有幻觉", "details": [{"hallucination_type": "时间线乱序", '
         '"hallucinated_sentence": "甲", "corrected_content": "乙", "reason": "丙"}]}')


@pytest.mark.parametrize("text, label, types", [
    (FAITHFUL, 0, []),
    (HALLU, 1, ["temporal"]),
    ("```json\n" + HALLU + "\n```", 1, ["temporal"]),
    ("分析：摘要第二句与原文一致。{不是json}\n最终结论：\n" + FAITHFUL + "\n以上。", 0, []),
    ('{"has_hallucination": "有幻觉", "details": [{"hallucination_type": "causal"}]}', 1, ["causal"]),
    (HALLU.replace('"', '\\"'), 1, ["temporal"]),
])
def test_verdicts_that_parse(text, label, types):
    v = parse_longnovel_verdict(text)
    assert v is not None and (v.label, v.types) == (label, types)


@pytest.mark.parametrize("text", [
    "", "无幻觉", '{"has_hallucination": "可能"}', '{"details": []}',
    '{"has_hallucination": "details": "details": "details"', None,
    '{"has_hallucination": ["有幻觉"], "details": []}', '{"has_hallucination": {"a": 1}}',
])
def test_verdicts_rejected(text):
    assert parse_longnovel_verdict(text) is None


def _counts(hallu_hits, n_h, nonh_hits, n_f, failures_as_wrong=0):
    gold = [1] * n_h + [0] * n_f
    pred = [1] * hallu_hits + [0] * (n_h - hallu_hits) + [0] * nonh_hits + [1] * (n_f - nonh_hits)
    for i in range(failures_as_wrong):       # turn wrong answers into parse failures
        j = n_h - 1 - i
        pred[j] = None
    return gold, pred


@pytest.mark.parametrize("row, n, expected", [
    # Table 4/5 of seed 000: (Hallu. %, Non-H. %) -> (Acc. %, MCC)
    ((70.67, 84.00), 75, (77.33, 0.5516)),       # Qwen3-8B SFT, S
    ((57.78, 89.33), 225, (73.56, 0.4965)),      # Llama3.1-8B SFT, S (n = 3 runs x 75)
    ((1.33, 5.33), 225, (3.33, -0.9341)),        # Llama3.1-8B, L: formatting failures
])
def test_acc_and_mcc_reproduce_the_paper(row, n, expected):
    hits_h, hits_f = round(row[0] / 100 * n), round(row[1] / 100 * n)
    gold, pred = _counts(hits_h, n, hits_f, n)
    m = binary_scores(gold, pred)
    assert round(100 * m["acc"], 2) == pytest.approx(expected[0], abs=0.01)
    assert m["mcc"] == pytest.approx(expected[1], abs=1e-4)


def test_parse_failure_counts_as_wrong():
    gold, pred = _counts(60, 75, 70, 75)
    base = binary_scores(gold, pred)
    gold2, pred2 = _counts(60, 75, 70, 75, failures_as_wrong=10)
    failed = binary_scores(gold2, pred2)
    assert failed["parse_failures"] == 10 and base["parse_failures"] == 0
    assert (failed["acc"], failed["mcc"]) == (base["acc"], base["mcc"])
    assert binary_scores([1, 0], [None, None])["mcc"] == -1.0


def test_score_longnovel_groups_and_missing_outputs():
    gold = [
        {"id": "a", "label": 1, "length_bucket": "S", "position": "end", "hallucination_types": ["event"]},
        {"id": "b", "label": 0, "length_bucket": "S", "position": "end"},
        {"id": "c", "label": 1, "length_bucket": "M", "position": "beginning", "hallucination_types": ["causal"]},
    ]
    metrics, rows = score_longnovel(gold, {"a": {"output": HALLU}, "b": {"output": FAITHFUL}})
    assert metrics["overall"]["parse_failures"] == 1 and metrics["overall"]["n"] == 3
    assert metrics["by_bucket"]["S"]["acc"] == 1.0 and metrics["by_bucket"]["M"]["hallu_acc"] == 0.0
    assert metrics["by_type"]["event"]["recall"] == 1.0 and metrics["by_type"]["causal"]["recall"] == 0.0
    assert metrics["by_position"]["end"] == {"recall": 1.0, "n": 1}
    assert [r["correct"] for r in rows] == [True, True, False]
    assert not math.isnan(metrics["overall"]["mcc"])
    assert metrics["missing_ids"] == ["c"]
