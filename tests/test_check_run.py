"""train.check_run's score checks (the run-directory contract is tested on a real run in test_trainer_e2e)."""
from train.check_run import score_problems


def _metrics(**recalls):
    return {"overall": {"n": 120, "mcc": 0.55, "parse_failures": 0},
            "by_type": {t: {"recall": r, "n": 9} for t, r in recalls.items()}}


def test_every_type_must_be_found_at_least_once():
    assert score_problems(_metrics(causal=1.0, entity=0.1), 0.5, 0.05, None, 100, type_recall_above=0) == []
    problems = score_problems(_metrics(causal=1.0, entity=0.0, temporal=None), 0.5, None, None, type_recall_above=0)
    assert problems == ["recall of entity 0.0 <= 0 (n=9)", "recall of temporal None <= 0 (n=9)"]
    assert score_problems(_metrics(), None, None, None, type_recall_above=0) == [
        "no recall per hallucination type (by_type) in the metrics"]


def test_mcc_and_held_out_count_are_checked():
    assert score_problems(_metrics(causal=1.0), 0.6, None, None, 121) == [
        "120 held-out records scored, fewer than 121", "overall MCC 0.55 < 0.6"]
