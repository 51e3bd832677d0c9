"""Convert released datasets into record files of the shared schema.

    python -m data_builders.convert anah person.jsonl event.jsonl ... --out DIR [--ranker minilm]
    python -m data_builders.convert faithbench batch_1.json ... --out DIR [--pooling worst]
    python -m data_builders.convert halueval qa_data.json --subset qa --out DIR
    python -m data_builders.convert ragtruth response.jsonl source_info.jsonl --out DIR
    python -m data_builders.convert ragtruth_faithjudge ragtruth_summary.jsonl ragtruth_qa.jsonl ... --out DIR
    python -m data_builders.convert uhgeval dataset_uhgeval_concise.jsonl --out DIR
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

from data_builders.schema import write_jsonl

DATASETS = ("anah", "faithbench", "halueval", "ragtruth", "ragtruth_faithjudge", "uhgeval", "hallumix")
HALUEVAL_FILES = {"qa_data": "qa", "dialogue_data": "dialogue", "summarization_data": "summarization",
                  "general_data": "general"}


class ConvertError(ValueError):
    pass


def halueval_subset(args) -> str:
    """--subset, or the one HaluEval's released file names imply (qa_data.json -> qa)."""
    if args.subset:
        return args.subset
    implied = {HALUEVAL_FILES.get(Path(p).stem) for p in args.inputs}
    if len(implied) != 1 or None in implied:
        raise ConvertError(f"halueval: pass --subset qa|dialogue|summarization|general; it cannot be told from "
                           f"the file names {[Path(p).name for p in args.inputs]}")
    subset = implied.pop()
    print(f"halueval: --subset {subset} (from the file name)", file=sys.stderr)
    return subset


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


def _anah(args) -> tuple[dict[str, list[dict]], str]:
    from data_builders.anah_released import AnahImportReport, import_anah
    from data_builders.retrieval import EmbeddingRanker

    report = AnahImportReport()
    ranker = EmbeddingRanker(args.ranker) if args.ranker != "none" else None
    out = import_anah(args.inputs, args.test_topics, args.test_questions, args.seed, ranker=ranker, report=report)
    groups = {g: sum(r["meta"]["test_group"] == g for r in out["test"]) for g in ("unseen_topic", "unseen_question")}
    return out, report.summary() + f"; test groups {groups}" + "".join(f"\n  skipped {s}" for s in report.skipped)


def _single(args) -> tuple[dict[str, list[dict]], str]:
    if args.dataset == "faithbench":
        from data_builders.faithbench import import_faithbench

        rows = [r for p in args.inputs for r in import_faithbench(p, args.pooling)]
    elif args.dataset == "halueval":
        from data_builders.halueval import import_halueval

        subset = halueval_subset(args)
        rows = [r for p in args.inputs for r in import_halueval(p, subset)]
    elif args.dataset == "ragtruth_faithjudge":
        from data_builders.ragtruth import import_ragtruth_faithjudge

        rows = [r for p in args.inputs for r in import_ragtruth_faithjudge(p)]
    elif args.dataset == "uhgeval":
        from data_builders.uhgeval import import_uhgeval

        rows = [r for p in args.inputs for r in import_uhgeval(p)]
    else:
        from data_builders.hallumix import import_hallumix

        rows = [r for p in args.inputs for r in import_hallumix(p)]
    n_hallu = sum(r.get("label") == 1 for r in rows)
    report = f"{len(rows)} records ({n_hallu} hallucinated, {len(rows) - n_hallu} faithful)"
    untyped = sum(r.get("label") == 1 and r.get("faithfulness_labels") == [] for r in rows)
    if untyped:
        report += (f"\n{untyped} hallucinated records have no Intrinsic / Extrinsic label in their annotations: "
                   "their faithfulness_labels are empty")
    return {args.split: rows}, report + span_report(rows)


def span_report(rows: list[dict]) -> str:
    """How many annotated spans the records carry, and how many could not be located in their response."""
    n = sum(len(r.get("spans") or []) for r in rows)
    if not n and not any("spans" in r for r in rows):
        return ""
    lost = sum((r.get("meta") or {}).get("unlocated_spans", 0) for r in rows)
    return f"\n{n} annotated spans located in their responses; {lost} not found there (left out of spans)"


def convert(args) -> str:
    if args.dataset == "anah":
        out, report = _anah(args)
    elif args.dataset == "ragtruth":
        from data_builders.ragtruth import import_ragtruth

        if len(args.inputs) != 2:
            raise ConvertError("ragtruth: expected two inputs, response.jsonl and source_info.jsonl")
        out = import_ragtruth(*args.inputs)
        report = "RAGTruth splits from the 'split' field"
    else:
        out, report = _single(args)
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


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("dataset", choices=DATASETS)
    parser.add_argument("inputs", nargs="+")
    parser.add_argument("--out", required=True, help="directory for <split>.jsonl")
    parser.add_argument("--split", default="test", help="split name for datasets without splits")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--test-topics", type=float, default=0.1, help="anah: share of topics held out")
    parser.add_argument("--test-questions", type=float, default=0.1,
                        help="anah: share of questions held out of the remaining topics")
    parser.add_argument("--ranker", default="none",
                        help="anah: 'minilm' (bundled MiniLM), a sentence-transformers path, or 'none' (BM25 only)")
    parser.add_argument("--pooling", default="worst", help="faithbench: worst | best | majority")
    parser.add_argument("--subset", choices=sorted(set(HALUEVAL_FILES.values())),
                        help="halueval: which file (default: from HaluEval's released file names)")
    parser.add_argument("--max-duplicate-fraction", type=float, default=0.01,
                        help="fail when more records than this share repeat an id (default 0.01)")
    parser.add_argument("--parquet", action="store_true",
                        help="also write <split>.parquet (load with datasets.Dataset.from_parquet)")
    parser.add_argument("--debug", action="store_true", help="show the traceback of an input error")
    args = parser.parse_args(argv)
    try:
        print(convert(args), end="")
    except (ValueError, OSError) as e:      # RecordError, ConvertError, a missing or unreadable file
        if args.debug:
            raise
        print(f"convert: error: {e}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
