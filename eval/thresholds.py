"""Decision thresholds for binary heads, chosen on a validation split (never the test split)."""
from __future__ import annotations

from collections.abc import Callable

from eval.metrics import binary_scores


def choose_threshold(gold: list[int], p_hallucinated: list[float]) -> float:
    """The threshold t (predict hallucinated when p >= t) with the best balanced accuracy;
    ties go to the one closest to 0.5. Candidates lie midway between sorted distinct scores."""
    if not gold or len(set(gold)) < 2:
        raise ValueError(f"choosing a threshold needs both classes in the validation split, found {set(gold)}")
    scores = sorted(set(p_hallucinated))
    candidates = [0.5] + [(a + b) / 2 for a, b in zip(scores, scores[1:])] + [scores[0], scores[-1] + 1e-9]

    def quality(t: float) -> tuple[float, float]:
        acc = binary_scores(gold, [int(p >= t) for p in p_hallucinated])["acc"]
        return acc, -abs(t - 0.5)

    return max(candidates, key=quality)


def threshold_on_validation(val_records: list[dict], scores_of: Callable[[list[dict]], list[float]]) -> float:
    """The one way every predictor chooses its threshold: score the validation records (higher =
    more likely hallucinated) and take `choose_threshold` of their gold labels."""
    if not val_records:
        raise ValueError("choosing a decision threshold needs a validation split, and there is none "
                         "(add val.jsonl to data.root, or set data.corpus.val_books)")
    return choose_threshold([r["label"] for r in val_records], scores_of(val_records))
