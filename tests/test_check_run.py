"""train.tools.check_run's score checks (the run-directory contract is tested on a real run in test_trainer_e2e)."""
from eval.scorers.scoring import SCORERS
from train.tools.check_run import score_problems

LONGNOVEL, ANAH = SCORERS["longnovel"].summary, SCORERS["anah"].summary


def _metrics(**recalls):
    return LONGNOVEL({"overall": {"n": 120, "mcc": 0.55, "parse_failures": 0},
                      "by_type": {t: {"recall": r, "n": 9} for t, r in recalls.items()}})


def test_every_type_must_be_found_at_least_once():
    assert score_problems(_metrics(causal=1.0, entity=0.1), 0.5, 0.05, None, 100, type_recall_above=0) == []
    problems = score_problems(_metrics(causal=1.0, entity=0.0, temporal=None), 0.5, None, None, type_recall_above=0)
    assert problems == ["recall of entity 0.0 <= 0 (n=9)", "recall of temporal None <= 0 (n=9)"]
    assert score_problems(_metrics(), None, None, None, type_recall_above=0) == [
        "no recall per type in the metrics"]


def test_mcc_and_held_out_count_are_checked():
    assert score_problems(_metrics(causal=1.0), 0.6, None, None, 121) == [
        "120 held-out records scored, fewer than 121", "overall MCC 0.55 < 0.6"]


def test_anah_runs_are_checked_against_the_majority_class_and_every_gold_type():
    support = {"none": 99, "contradictory": 21, "unverifiable": 3, "no_fact": 24}
    anah = {"acc": 0.90, "n": 147, "parse_failures": 0, "support": support,
            "recall_by_type": {"none": 0.9, "contradictory": 0.76, "unverifiable": 1.0, "no_fact": 1.0}}
    assert score_problems(ANAH(anah), None, 0.05, 0.15, 100, type_recall_above=0) == []
    constant = {**anah, "acc": 99 / 147, "recall_by_type": {"none": 1.0, "contradictory": 0.0, "unverifiable": 0.0,
                                                            "no_fact": 0.0}}
    assert score_problems(ANAH(constant), None, None, 0.15, type_recall_above=0) == [
        "recall of contradictory 0.0 <= 0 (n=21)", "recall of no_fact 0.0 <= 0 (n=24)",
        "recall of unverifiable 0.0 <= 0 (n=3)", "accuracy 0.673469387755102 < majority class 0.6735 + 0.15"]


def test_an_annotator_that_answers_nothing_or_one_thing_fails():
    from train.tools.check_run import degenerate_problems

    assert degenerate_problems([{"pred": None}] * 10) == ["every answer is unparseable (10 of 10)"]
    assert degenerate_problems([{"pred": 0}, {"pred": 0}, {"pred": None}]) == [
        "the annotator gave the same answer (0) to every record it answered (2 of 3; 1 unparseable)"]
    assert degenerate_problems([{"pred": "none"}] * 4) == [
        "the annotator gave the same answer ('none') to every record it answered (4 of 4)"]
    assert degenerate_problems([{"pred": 1}, {"pred": 0}, {"pred": None}]) == []
