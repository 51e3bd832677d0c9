"""Running an annotator over records: raw generations, or head probabilities."""
from __future__ import annotations

from collections.abc import Callable

from tqdm import tqdm

from data_builders.collate import prompt_ids
from data_builders.sources import in_bucket
from eval.generate import classifier_probs, greedy_generate


def _capped(pool: list[dict], cap: int) -> list[dict]:
    """At most `cap` records: half hallucinated, half faithful when records carry a binary label."""
    if all(r.get("label") in (0, 1) for r in pool):
        return [r for r in pool if r["label"] == 1][: (cap + 1) // 2] + [r for r in pool if r["label"] == 0][: cap // 2]
    return pool[:cap]


def select_eval_records(records: list[dict], buckets: list[str], cap: int | None) -> list[dict]:
    """Records of the given buckets ('all': every record), at most `cap` per bucket."""
    chosen = []
    for b in buckets:
        pool = in_bucket(records, b)
        chosen += _capped(pool, cap) if cap is not None else pool
    return chosen


def predict_records(model, tokenizer, records: list[dict], kind: str, template: str, max_new_tokens: int,
                    progress: bool = False, on_result: Callable[[dict], None] | None = None) -> list[dict]:
    """One prediction row per record ({'id', 'output'} or {'id', 'probs'}), in record order.

    `on_result` sees each row as soon as it exists (to write predictions as they come).
    """
    rows = []
    for rec in tqdm(records, desc="predict", disable=not progress, dynamic_ncols=True):
        ids = [prompt_ids(rec, tokenizer, template)]
        if kind == "discriminative":
            row = {"id": rec["id"], "probs": classifier_probs(model, ids)[0]}
        else:
            row = {"id": rec["id"], "output": greedy_generate(model, tokenizer, ids, max_new_tokens)[0]}
        rows.append(row)
        if on_result is not None:
            on_result(row)
    return rows
