"""The one threshold rule: configured, else stored, else chosen on validation, else the default
(or an error where scores are not probabilities); and the one decision, p >= t."""
import pytest

from eval.scorers.decisions import binary_decision
from eval.thresholds import Threshold, is_hallucinated, resolve_threshold

VAL = [{"label": 0}, {"label": 0}, {"label": 1}, {"label": 1}]


def _scores(records):
    return [0.1, 0.2, 0.3, 0.4][:len(records)]


def test_precedence_configured_stored_validation_default():
    stored = Threshold(0.7, "stored in the model's config")
    assert resolve_threshold(0.2, stored, VAL, _scores) == Threshold(0.2, "configured")
    assert resolve_threshold(None, stored, VAL, _scores) == stored
    chosen = resolve_threshold(None, None, VAL, _scores)
    assert 0.2 < chosen.value <= 0.3 and chosen.source == "validation split, 4 records"
    assert resolve_threshold(None, None, [], _scores).value == 0.5


def test_scores_that_are_not_probabilities_need_a_validation_split():
    with pytest.raises(ValueError, match="validation split"):
        resolve_threshold(None, None, [], _scores, default=None)


def test_the_decision_is_p_at_or_above_t_everywhere():
    assert is_hallucinated(0.3, 0.3) == 1 and is_hallucinated(0.29, 0.3) == 0
    assert binary_decision({"probs": [0.7, 0.3], "threshold": 0.3})[0] == 1
    assert binary_decision({"probs": 0.5})[0] == 1 and binary_decision({"probs": 0.49})[0] == 0


def test_a_span_threshold_is_chosen_for_character_f1_not_for_balanced_accuracy():
    """Two validation responses: the first has a gold span over characters 0-10, which its tokens
    cover at 0.9 and 0.3; the second has none and peaks at 0.15. Balanced accuracy is perfect
    anywhere in (0.15, 0.9] and keeps 0.5; character F1 is perfect only below 0.3."""
    from eval.thresholds import choose_span_threshold, choose_threshold, flagged_spans

    tokens = [[[0, 5, 0.9], [5, 10, 0.3], [10, 20, 0.2]], [[0, 10, 0.15], [10, 20, 0.1]]]
    gold_spans = [[(0, 10)], []]
    by_accuracy = choose_threshold([1, 0], [max(p for *_, p in t) for t in tokens])
    by_f1 = choose_span_threshold(tokens, gold_spans)
    assert by_accuracy == 0.5 and by_f1 == pytest.approx(0.25)
    assert flagged_spans(tokens[0], by_accuracy) == [[0, 5]] and flagged_spans(tokens[0], by_f1) == [[0, 10]]
    assert flagged_spans(tokens[1], by_f1) == []
    with pytest.raises(ValueError, match="needs gold spans"):
        choose_span_threshold(tokens, [[], []])
