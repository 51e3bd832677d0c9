"""Convert released datasets into record files of the shared schema.

    python -m data_builders.convert DATASET --help      (each dataset's own arguments)
    python -m data_builders.convert anah person.jsonl event.jsonl ... --out DIR [--ranker minilm]
    python -m data_builders.convert faithbench batch_1.json ... --out DIR [--pooling worst]
    python -m data_builders.convert halueval qa_data.json --subset qa --out DIR
    python -m data_builders.convert ragtruth response.jsonl source_info.jsonl --out DIR
    python -m data_builders.convert ragtruth_faithjudge ragtruth_summary.jsonl ragtruth_qa.jsonl ... --out DIR
    python -m data_builders.convert uhgeval dataset_uhgeval_concise.jsonl --out DIR
    python -m data_builders.convert summedits summedits_news.json summedits_samsum.json ... --out DIR
    python -m data_builders.convert hallumix hallumix.jsonl --out DIR

DIR receives `<split>.jsonl` (datasets without splits go to `--split`, default test) and
`convert_report.txt`. A training run reads such a directory with `data=records data.root=DIR`.
Records whose id another record already has keep apart as `<id>~2`, `<id>~3`, ... (counted and
listed in the report); past `--max-duplicate-fraction` the conversion fails. An input error
prints one line and exits with status 1 (2 for a usage error); `--debug` shows the traceback.
"""
from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

from data_builders.importers import anah_released, faithbench, hallumix, halueval, ragtruth, summedits, uhgeval
from data_builders.importers.registry import IMPORTERS
from data_builders.records import write_jsonl

# each module registers its importers when imported
IMPORTER_MODULES = (anah_released, faithbench, hallumix, halueval, ragtruth, summedits, uhgeval)


class ConvertError(ValueError):
    pass


def separate_duplicates(out: dict[str, list[dict]]) -> list[str]:
    """Give every repeated id a `~k` suffix (k = 2, 3, ... in reading order); return the ids renamed."""
    seen: Counter = Counter()
    renamed = []
    for rows in out.values():
        for rec in rows:
            seen[rec["id"]] += 1
            if seen[rec["id"]] > 1:
                renamed.append(f"{rec['id']} -> {rec['id']}~{seen[rec['id']]}")
                rec["id"] = f"{rec['id']}~{seen[rec['id']]}"
    return renamed


def convert(args) -> str:
    out, report = IMPORTERS[args.dataset].read(args)
    total = sum(len(rows) for rows in out.values())
    if not total:
        raise ConvertError(f"{args.dataset}: no records in {args.inputs}: the input is empty")
    renamed = separate_duplicates(out)
    if len(renamed) > args.max_duplicate_fraction * total:
        raise ConvertError(f"{args.dataset}: {len(renamed)} of {total} records repeat an id, more than "
                           f"--max-duplicate-fraction={args.max_duplicate_fraction}; first: {renamed[:5]}")
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    counts = ", ".join(f"{write_jsonl(out_dir / f'{split}.jsonl', rows)} {split}" for split, rows in out.items())
    if args.parquet:
        from data_builders.hf_datasets import records_dataset

        for split, rows in out.items():
            records_dataset(rows).to_parquet(str(out_dir / f"{split}.parquet"))
    report = f"{args.dataset}: {counts} records written to {out_dir}\n{report}\n"
    if renamed:
        report += f"{len(renamed)} records repeated an id and were kept apart:\n" + \
            "".join(f"  {r}\n" for r in renamed)
    (out_dir / "convert_report.txt").write_text(report, encoding="utf-8")
    return report


def _common_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("inputs", nargs="+")
    parser.add_argument("--out", required=True, help="directory for <split>.jsonl")
    parser.add_argument("--split", default="test", help="split name for datasets without splits")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-duplicate-fraction", type=float, default=0.01,
                        help="fail when more records than this share repeat an id (default 0.01)")
    parser.add_argument("--parquet", action="store_true",
                        help="also write <split>.parquet (load with datasets.Dataset.from_parquet)")
    parser.add_argument("--debug", action="store_true", help="show the traceback of an input error")


def parser() -> argparse.ArgumentParser:
    """One sub-command per registered importer, each with the common arguments and its own."""
    top = argparse.ArgumentParser(prog="python -m data_builders.convert", description=__doc__,
                                  formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = top.add_subparsers(dest="dataset", required=True, metavar="DATASET")
    for name, entry in IMPORTERS.items():
        one = sub.add_parser(name, help=entry.help, description=entry.help)
        _common_arguments(one)
        entry.arguments(one)
    return top


def main(argv: list[str] | None = None) -> None:
    args = parser().parse_args(argv)
    try:
        print(convert(args), end="")
    except (ValueError, OSError) as e:      # RecordError, ConvertError, a missing or unreadable file
        if args.debug:
            raise
        print(f"convert: error: {e}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
