"""Scored runs as flat scalars and small tables, for experiment trackers (W&B) and comparisons."""
from __future__ import annotations

Table = tuple[list[str], list[list]]
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


def _rows(groups: dict, keys: tuple[str, ...]) -> list[list]:
    return [[name, *(stats.get(k) for k in keys)] for name, stats in groups.items()]


def longnovel_tables(metrics: dict) -> dict[str, Table]:
    """Per-bucket Acc / MCC, and per-type and per-position recall."""
    keys = ("n", "hallu_acc", "nonhallu_acc", "acc", "mcc", "parse_failures")
    return {"buckets": (["bucket", *keys], _rows({**metrics["by_bucket"], "overall": metrics["overall"]}, keys)),
            "type_recall": (["type", "n", "recall"], _rows(metrics.get("by_type") or {}, ("n", "recall"))),
            "position_recall": (["position", "n", "recall"], _rows(metrics.get("by_position") or {}, ("n", "recall")))}


def anah_tables(metrics: dict) -> dict[str, Table]:
    """Scores per language and overall."""
    keys = ("n", "acc", "f1_weighted", "rougeL", "pre4", "parse_failures")
    return {"languages": (["language", *keys], _rows({**metrics["by_language"], "all": metrics}, keys))}


def no_tables(metrics: dict) -> dict[str, Table]:
    return {}


def tables(scorer, metrics: dict, rows: list[dict]) -> dict[str, Table]:
    """The scorer's own tables (`eval.scoring.Scorer.tables`), and the predictions with gold,
    parsed decision and raw output."""
    out = dict(scorer.tables(metrics))
    out["predictions"] = (["id", "gold", "pred", "correct", "raw"],
                          [[r["id"], str(r.get("gold")), str(r.get("pred")), bool(r.get("correct")),
                            str(r.get("raw") or "")[:RAW_CHARS]] for r in rows])
    return out
