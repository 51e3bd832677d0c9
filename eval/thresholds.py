"""Decision thresholds of binary scores: the decision (`is_hallucinated`) and the one rule every
predictor uses to pick its threshold (`resolve_threshold`), chosen on a validation split, never on
the test split."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from eval.scorers.decisions import DEFAULT, is_hallucinated  # noqa: F401  (the decision lives beside the scorers)
from eval.scorers.metrics import binary_scores
from eval.scorers.spans import chars


@dataclass(frozen=True)
class Threshold:
    value: float
    source: str            # where it came from, for reports and the export


def flagged_spans(token_probs: list[list], threshold: float) -> list[list[int]]:
    """[[start, end], ...] of the response from its tokens' [start, end, probability]: each run of
    consecutive tokens with probability >= threshold becomes one span."""
    spans: list[list[int]] = []
    previous = None
    for i, (a, b, p) in enumerate(token_probs):
        if is_hallucinated(p, threshold):
            if previous == i - 1:
                spans[-1][1] = b
            else:
                spans.append([a, b])
            previous = i
    return spans


OBJECTIVES = ("balanced_accuracy", "f1")     # eval.threshold_for: what a chosen threshold maximises


def _f1(gold: list[int], pred: list[int]) -> float:
    tp = sum(g == 1 and p == 1 for g, p in zip(gold, pred))
    flagged, positives = sum(pred), sum(gold)
    return 2 * tp / (flagged + positives) if flagged + positives else 0.0


def choose_threshold(gold: list[int], p_hallucinated: list[float], objective: str = "balanced_accuracy") -> float:
    """The threshold t with the best balanced accuracy (or F1 of the hallucinated class); ties go to
    the one closest to 0.5. Candidates lie midway between sorted distinct scores."""
    if not gold or len(set(gold)) < 2:
        raise ValueError(f"choosing a threshold needs both classes in the validation split, found {set(gold)}")
    if objective not in OBJECTIVES:
        raise ValueError(f"eval.threshold_for={objective!r}: expected one of {list(OBJECTIVES)}")
    scores = sorted(set(p_hallucinated))
    candidates = [DEFAULT] + [(a + b) / 2 for a, b in zip(scores, scores[1:])] + [scores[0], scores[-1] + 1e-9]

    def quality(t: float) -> tuple[float, float]:
        pred = [is_hallucinated(p, t) for p in p_hallucinated]
        value = binary_scores(gold, pred)["acc"] if objective == "balanced_accuracy" else _f1(gold, pred)
        return value, -abs(t - DEFAULT)

    return max(candidates, key=quality)


def choose_span_threshold(token_probs: list[list[list]], gold_spans: list[list[tuple[int, int]]],
                          candidates: int = 200) -> float:
    """The threshold t whose flagged spans (`flagged_spans`) have the best character-level F1 over all
    the responses pooled, RAGTruth's span metric; ties go to the one closest to 0.5. Candidates lie
    midway between sorted distinct token probabilities (at most `candidates` of them, by quantile)."""
    return choose_run_threshold([[tokens] for tokens in token_probs], gold_spans, candidates)


def choose_run_threshold(runs: list[list[list[list]]], gold_spans: list[list[tuple[int, int]]],
                         candidates: int = 200) -> float:
    """`choose_span_threshold` where each response's tokens come in runs flagged apart (a span never joins
    two runs: the grounding model's units, each read by its own pass of the token head)."""
    if not any(gold_spans):
        raise ValueError("choosing a span threshold needs gold spans in the validation split, found none")
    probs = sorted({p for record in runs for tokens in record for _, _, p in tokens})
    step = max(1, len(probs) // candidates)
    points = probs[::step] + [probs[-1]]
    values = [DEFAULT] + [(a + b) / 2 for a, b in zip(points, points[1:])] + [points[0], points[-1] + 1e-9]
    gold = [chars(g) for g in gold_spans]

    def quality(t: float) -> tuple[float, float]:
        predicted = [chars(s for tokens in record for s in flagged_spans(tokens, t)) for record in runs]
        tp, n_pred, n_gold = (sum(len(p & g) for p, g in zip(predicted, gold)), sum(map(len, predicted)),
                              sum(map(len, gold)))
        f1 = 2 * tp / (n_pred + n_gold) if n_pred + n_gold else 0.0
        return f1, -abs(t - DEFAULT)

    return max(values, key=quality)


def resolve_threshold(configured: float | None, stored: Threshold | None, val_records: list[dict],
                      scores_of: Callable[[list[dict]], list[float]], default: float | None = DEFAULT,
                      what: str = "records", choose: Callable[[list[dict]], float] | None = None,
                      objective: str = "balanced accuracy", chosen_on: str = "validation split") -> Threshold:
    """The one precedence: a configured value, else a stored one (the export's, or a cache that
    matches the method), else one chosen on the validation records (best balanced accuracy of
    `scores_of`, or `choose(records)` for another `objective`; `chosen_on` says what they are), else
    `default` (scores that are probabilities), else an error (scores on another scale need a validation
    split)."""
    if configured is not None:
        return Threshold(float(configured), "configured")
    if stored is not None:
        return stored
    if val_records:
        value = choose(val_records) if choose else choose_threshold([r["label"] for r in val_records],
                                                                    scores_of(val_records))
        chosen_for = f", for {objective}" if choose else ""          # balanced accuracy goes unsaid
        return Threshold(value, f"{chosen_on}, {len(val_records)} {what}{chosen_for}")
    if default is not None:
        return Threshold(default, "default (no validation split, none stored)")
    raise ValueError("choosing a decision threshold needs a validation split, and there is none "
                     "(add val.jsonl to data.root, or set data.corpus.val_books)")


MIN_GROUP = 20        # validation records a value of eval.threshold_by needs for a threshold of its own


def field_value(rec: dict, path: str):
    """The value at a dotted record path (`meta.task_type`), or None where the record lacks it."""
    value = rec
    for key in path.split("."):
        value = value.get(key) if isinstance(value, dict) else None
    return value


def choose_group_thresholds(records: list[dict], scores: dict[str, float], path: str,
                            objective: str = "balanced_accuracy") -> dict[str, float]:
    """A threshold per value of `path` among the validation records (best `objective`), for each value
    with at least MIN_GROUP records of both classes; the others keep the overall threshold."""
    groups: dict[str, list[dict]] = {}
    for rec in records:
        value = field_value(rec, path)
        if value is not None:
            groups.setdefault(str(value), []).append(rec)
    return {g: choose_threshold([r["label"] for r in recs], [scores[r["id"]] for r in recs], objective)
            for g, recs in sorted(groups.items())
            if len(recs) >= MIN_GROUP and len({r["label"] for r in recs}) == 2}
