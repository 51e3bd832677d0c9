"""Scored runs as flat scalars and small tables, for experiment trackers (W&B) and comparisons."""
from __future__ import annotations

from eval.scorers.scorer_spec import Table

RAW_CHARS = 400   # a prediction table keeps the start of each raw output


def scalars(metrics: dict, prefix: str = "eval") -> dict[str, float]:
    """Every number in the (nested) metrics, keyed 'eval/by_bucket/S/acc' and so on."""
    out = {}
    for key, value in metrics.items():
        name = f"{prefix}/{key}"
        if isinstance(value, dict):
            out.update(scalars(value, name))
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            out[name] = value
    return out


def tables(scorer, metrics: dict, rows: list[dict]) -> dict[str, Table]:
    """The scorer's own tables (`eval.scorers.scoring.Scorer.tables`), and the predictions with gold,
    parsed decision and raw output."""
    out = dict(scorer.tables(metrics))
    out["predictions"] = (["id", "gold", "pred", "correct", "raw"],
                          [[r["id"], str(r.get("gold")), str(r.get("pred")), bool(r.get("correct")),
                            str(r.get("raw") or "")[:RAW_CHARS]] for r in rows])
    return out
