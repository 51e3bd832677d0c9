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


def tables(task: str, metrics: dict, rows: list[dict]) -> dict[str, Table]:
    """Per-bucket Acc/MCC and per-type / per-position recall (longnovel), per-language scores
    (anah), and the predictions with gold, parsed decision and raw output."""
    out: dict[str, Table] = {}
    if task == "longnovel":
        keys = ("n", "hallu_acc", "nonhallu_acc", "acc", "mcc", "parse_failures")
        out["buckets"] = (["bucket", *keys], _rows({**metrics["by_bucket"], "overall": metrics["overall"]}, keys))
        out["type_recall"] = (["type", "n", "recall"], _rows(metrics.get("by_type") or {}, ("n", "recall")))
        out["position_recall"] = (["position", "n", "recall"], _rows(metrics.get("by_position") or {}, ("n", "recall")))
    elif task == "anah":
        keys = ("n", "acc", "f1_weighted", "rougeL", "pre4", "parse_failures")
        out["languages"] = (["language", *keys], _rows({**metrics["by_language"], "all": metrics}, keys))
    out["predictions"] = (["id", "gold", "pred", "correct", "raw"],
                          [[r["id"], str(r.get("gold")), str(r.get("pred")), bool(r.get("correct")),
                            str(r.get("raw") or "")[:RAW_CHARS]] for r in rows])
    return out
