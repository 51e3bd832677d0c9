"""Test assertions of the tolerance contract (eval/tolerance.py, docs/design.md "Resume and batch contract")."""
from __future__ import annotations

from eval.tolerance import SCORE_ATOL, near_threshold, within_tolerance

__all__ = ["SCORE_ATOL", "assert_same_annotations"]


def assert_same_annotations(a_rows: list[dict], b_rows: list[dict], threshold: float | None = None) -> None:
    """Output rows of `eval.annotate` (or prediction rows) equal but for floats within SCORE_ATOL; a
    row whose score lies within SCORE_ATOL of `threshold` may carry the other label and spans."""
    assert [r.get("id") for r in a_rows] == [r.get("id") for r in b_rows]
    for a, b in zip(a_rows, b_rows):
        assert a.keys() == b.keys(), (a, b)
        if near_threshold(a, b, threshold):
            continue
        for key in a:
            assert within_tolerance(a[key], b[key]), f"row {a.get('id')!r}, field {key!r}: {a[key]!r} != {b[key]!r}"
