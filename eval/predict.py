"""Running an annotator over records: raw generations, or head probabilities."""
from __future__ import annotations

from collections.abc import Callable

from tqdm import tqdm

from data_builders.collate import prompt_ids
from data_builders.sources import in_bucket
from models.generate import length_batches
from models.kinds import kind_of


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
                    progress: bool = False, on_result: Callable[[dict], None] | None = None,
                    batch_size: int = 1, batch_tokens: int | None = None) -> list[dict]:
    """One prediction row per record ({'id', 'output'} or {'id', 'probs'}), in record order.

    Prompts are batched by length (greedy decoding: equal lengths only, see `models.generate`);
    `on_result` sees each row as soon as its batch is done (to write predictions as they come).
    """
    spec = kind_of(kind)
    prompts = [prompt_ids(rec, tokenizer, template) for rec in records]
    rows: dict[int, dict] = {}
    with tqdm(total=len(records), desc="predict", disable=not progress, dynamic_ncols=True) as bar:
        for batch in length_batches(prompts, batch_size, spec.generates, batch_tokens):
            results = spec.predict(model, tokenizer, [prompts[i] for i in batch], max_new_tokens)
            for i, res in zip(batch, results):
                rows[i] = {"id": records[i]["id"], **res}
                if on_result is not None:
                    on_result(rows[i])
            bar.update(len(batch))
    return [rows[i] for i in range(len(records))]
