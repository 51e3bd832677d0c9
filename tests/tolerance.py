"""The tolerance contract for predictions made under different batches or kernels (docs/design.md,
"Resume and batch contract"): the same row gives the same label, spans and text, and a probability
within SCORE_ATOL. Float results may move in their last digits with the batch a row shares or the
CPU's kernels; nothing a user reads may."""
from __future__ import annotations

import math

SCORE_ATOL = 1e-5


def _near_threshold(a: dict, b: dict, threshold: float | None) -> bool:
    return threshold is not None and any(
        isinstance(r.get("score"), float) and abs(r["score"] - threshold) <= SCORE_ATOL for r in (a, b))


def assert_same_annotations(a_rows: list[dict], b_rows: list[dict], threshold: float | None = None) -> None:
    """Output rows of `eval.annotate` (or prediction rows) equal but for floats within SCORE_ATOL; a
    row whose score lies within SCORE_ATOL of `threshold` may carry the other label and spans."""
    assert [r.get("id") for r in a_rows] == [r.get("id") for r in b_rows]
    for a, b in zip(a_rows, b_rows):
        assert a.keys() == b.keys(), (a, b)
        if _near_threshold(a, b, threshold):
            continue
        for key in a:
            assert _close(a[key], b[key]), f"row {a.get('id')!r}, field {key!r}: {a[key]!r} != {b[key]!r}"


def _close(x, y) -> bool:
    if isinstance(x, float) or isinstance(y, float):
        return isinstance(x, (int, float)) and isinstance(y, (int, float)) and math.isclose(x, y, rel_tol=0,
                                                                                              abs_tol=SCORE_ATOL)
    if isinstance(x, list) and isinstance(y, list):
        return len(x) == len(y) and all(_close(p, q) for p, q in zip(x, y))
    if isinstance(x, dict) and isinstance(y, dict):
        return x.keys() == y.keys() and all(_close(x[k], y[k]) for k in x)
    return x == y
