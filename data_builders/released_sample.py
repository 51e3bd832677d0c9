"""Released-format LongNovel files written from the embedded sample corpus: `train.jsonl` and
`test.jsonl` with the released fields (`id, language, article, summary, instruction, input, output`,
the prompt in `instruction` / `input` as Prompt-E renders it), for a dry run of the paper's recipe
(`data.root=` of `+exp=longnovel_curriculum`) before renting GPUs.

    python -m data_builders.released_sample --tokenizer local/qwen3-tiny --out local/longnovel-sample

The tokenizer sizes the S / M / L contexts (2k / 16k / 32k tokens); records are taken as
hallucinated / faithful pairs, in turn from S, M and L.
"""
from __future__ import annotations

import argparse
import sys
from itertools import zip_longest
from pathlib import Path

from data_builders.common.user_errors import reports_user_errors
from data_builders.importers.longnovel_released import released_row
from data_builders.records import write_jsonl
from data_builders.synthetic.length_extension import DEFAULT_BUDGETS, build_longnovel
from data_builders.synthetic.novel_corpus import generate_corpus

BUCKETS = ("S", "M", "L")
# 8 books of 48 units (the last 2 for test): 2 M (16k) and 1 L (32k) contexts a book
BOOKS, UNITS_PER_BOOK, UNIT_CHARS, TEST_BOOKS, SEED = 8, 48, (1000, 1400), 2, 0


def pairs_in_turn(records: list[dict], n: int) -> list[dict]:
    """`n` records (n even): hallucinated / faithful pairs taken from S, M, L in turn."""
    if n < 2 or n % 2:
        raise ValueError(f"expected an even number of records >= 2 (pairs), found {n}")
    by_bucket = {b: [records[i:i + 2] for i in range(0, len(records), 2) if records[i]["length_bucket"] == b]
                 for b in BUCKETS}
    turns = [pair for group in zip_longest(*by_bucket.values()) for pair in group if pair]
    if len(turns) * 2 < n:
        raise ValueError(f"the embedded corpus has {len(turns) * 2} records of this split, fewer than {n}")
    return [rec for pair in turns[:n // 2] for rec in pair]


def write_sample(tokenizer, out: Path, n_train: int, n_test: int) -> dict[str, Path]:
    units = generate_corpus(BOOKS, UNITS_PER_BOOK, UNIT_CHARS, SEED)
    budgets = {b: DEFAULT_BUDGETS[b] for b in BUCKETS}
    splits = build_longnovel(units, tokenizer, budgets, TEST_BOOKS, "prompt_e")
    out.mkdir(parents=True, exist_ok=True)
    paths = {}
    for split, n in (("train", n_train), ("test", n_test)):
        paths[split] = out / f"{split}.jsonl"
        write_jsonl(paths[split], [released_row(r) for r in pairs_in_turn(splits[split], n)])
    return paths


@reports_user_errors("data_builders.released_sample")
def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tokenizer", required=True, help="a local model directory (its tokenizer sizes the contexts)")
    p.add_argument("--out", type=Path, required=True, help="directory to write train.jsonl and test.jsonl into")
    p.add_argument("--train", type=int, default=20, help="training records (even: hallucinated / faithful pairs)")
    p.add_argument("--test", type=int, default=10, help="test records (even)")
    args = p.parse_args(argv)
    from transformers import AutoTokenizer

    paths = write_sample(AutoTokenizer.from_pretrained(args.tokenizer), args.out, args.train, args.test)
    for path in paths.values():
        print(f"wrote {path}")
    print(f"use it as data.root={args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
