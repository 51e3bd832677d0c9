"""Running an annotator over records: raw generations, or head probabilities."""
from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from data_builders.common.progress import progress as progress_of
from data_builders.sources import in_bucket
from eval.backends.backend import Row, Write
from models.generate import length_batches, unbatched_note
from models.kinds import kind_of

logger = logging.getLogger(__name__)


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


def predict_records(model, tokenizer, records: list[dict], task, max_new_tokens: int,
                    progress: bool = False, on_result: Callable[[dict], None] | None = None,
                    batch_size: int = 1, batch_tokens: int | None = None, padded: bool = False) -> list[dict]:
    """One prediction row per record ({'id', 'output'}, {'id', 'probs'} or, from a span annotator,
    {'id', 'probs', 'token_probs'}), in record order.

    A record is judged by one input or, on an encoder, by one per evidence chunk, pooled into its
    row (`Kind.pool`). Inputs are batched by length (greedy decoding: equal lengths only unless
    `padded`, see `models.generate`); `on_result` sees each row as soon as its last input is done.
    """
    spec = kind_of(task)
    inputs, owner = [], []
    for i, rec in enumerate(records):
        for x in spec.inputs(rec, tokenizer, task):
            inputs.append(x)
            owner.append(i)
    results: dict[int, list] = {i: [] for i in range(len(records))}
    left = Counter(owner)
    rows: dict[int, dict] = {}
    prompts = [x["input_ids"] for x in inputs]
    equal_length = spec.generates and not padded
    batches = length_batches(prompts, batch_size, equal_length, batch_tokens)
    note = unbatched_note(prompts, batches, batch_size, batch_tokens) if equal_length and progress else None
    padding = {"padded": True} if spec.generates and padded else {}
    if note:
        logger.info(note)
    with progress_of(total=len(records), desc="predict", unit="record", disable=not progress) as bar:
        for batch in batches:
            for j, res in zip(batch, spec.predict(model, tokenizer, [inputs[j] for j in batch], max_new_tokens,
                                                     **padding)):
                i = owner[j]
                results[i].append(res)
                left[i] -= 1
                if not left[i]:
                    rows[i] = {"id": records[i]["id"], **spec.pool(results.pop(i))}
                    if on_result is not None:
                        on_result(rows[i])
                    bar.update(1)
    return [rows[i] for i in range(len(records))]


def _single(rows: list) -> list[list]:
    return [rows]


@dataclass(frozen=True)
class Shard:
    """Which share of the records this process predicts, and how every process's rows are gathered
    (the trainer's ranks share its final evaluation; `eval/run.py` is one process)."""
    rank: int = 0
    world_size: int = 1
    gather: Callable[[list], list[list]] = field(default=_single)


ONE_PROCESS = Shard()


@dataclass(frozen=True)
class InProcess:
    """The model in this process (Hugging Face), each process predicting its share (`shard`) of the records."""
    model: Any                     # the module the kind predicts with (`models.annotator.load_annotator`)
    tokenizer: Any
    task: Any                      # a run's task config, or an export's spec
    max_new_tokens: int
    batch_size: int
    batch_tokens: int | None
    padded: bool
    shard: Shard = ONE_PROCESS

    def rows(self, records: list[dict], progress: bool, on_result: Write | None) -> list[Row]:
        s = self.shard
        mine = predict_records(self.model, self.tokenizer, records[s.rank::s.world_size], self.task,
                               self.max_new_tokens, progress=progress, on_result=on_result,
                               batch_size=self.batch_size, batch_tokens=self.batch_tokens, padded=self.padded)
        by_id = {row["id"]: row for part in s.gather(mine) for row in part}
        return [by_id[r["id"]] for r in records]
