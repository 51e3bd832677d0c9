"""The tolerance contract for annotations made under different batches or kernels (docs/design.md,
"Resume and batch contract"): the same row gives the same label, spans and text, and a probability
within SCORE_ATOL. Float results may move in their last digits with the batch a row shares or the
CPU's kernels; nothing a user reads may."""
from __future__ import annotations

import math

SCORE_ATOL = 1e-5


def within_tolerance(x, y) -> bool:
    """Equal, but for floats (at any depth of lists and dicts) that may differ by SCORE_ATOL."""
    if isinstance(x, float) or isinstance(y, float):
        return isinstance(x, (int, float)) and isinstance(y, (int, float)) and math.isclose(
            x, y, rel_tol=0, abs_tol=SCORE_ATOL)
    if isinstance(x, list) and isinstance(y, list):
        return len(x) == len(y) and all(map(within_tolerance, x, y))
    if isinstance(x, dict) and isinstance(y, dict):
        return x.keys() == y.keys() and all(within_tolerance(x[k], y[k]) for k in x)
    return x == y


def near_threshold(a: dict, b: dict, threshold: float | None) -> bool:
    """Whether either row's score lies within SCORE_ATOL of the decision threshold (then its label and
    spans may be the other side's)."""
    return threshold is not None and any(
        isinstance(r.get("score"), float) and abs(r["score"] - threshold) <= SCORE_ATOL for r in (a, b))
