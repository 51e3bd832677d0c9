"""Convert released datasets into record files of the shared schema.

    python -m data_builders.convert anah person.jsonl event.jsonl ... --out DIR [--ranker minilm]
    python -m data_builders.convert faithbench batch_1.json ... --out DIR [--pooling worst]
    python -m data_builders.convert halueval qa_data.json --subset qa --out DIR
    python -m data_builders.convert ragtruth response.jsonl source_info.jsonl --out DIR
    python -m data_builders.convert hallumix hallumix.jsonl --out DIR

DIR receives `<split>.jsonl` (datasets without splits go to `--split`, default test) and
`convert_report.txt`. A training run reads such a directory with `data=records data.root=DIR`.
"""
from __future__ import annotations

import argparse
from pathlib import Path

from data_builders.schema import write_jsonl

DATASETS = ("anah", "faithbench", "halueval", "ragtruth", "hallumix")


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

        rows = [r for p in args.inputs for r in import_halueval(p, args.subset)]
    else:
        from data_builders.hallumix import import_hallumix

        rows = [r for p in args.inputs for r in import_hallumix(p)]
    n_hallu = sum(r.get("label") == 1 for r in rows)
    return {args.split: rows}, f"{len(rows)} records ({n_hallu} hallucinated, {len(rows) - n_hallu} faithful)"


def convert(args) -> str:
    if args.dataset == "anah":
        out, report = _anah(args)
    elif args.dataset == "ragtruth":
        from data_builders.ragtruth import import_ragtruth

        if len(args.inputs) != 2:
            raise SystemExit("ragtruth: expected two inputs, response.jsonl and source_info.jsonl")
        out = import_ragtruth(*args.inputs)
        report = "RAGTruth splits from the 'split' field"
    else:
        out, report = _single(args)
    out_dir = Path(args.out)
    counts = ", ".join(f"{write_jsonl(out_dir / f'{split}.jsonl', rows)} {split}" for split, rows in out.items())
    report = f"{args.dataset}: {counts} records written to {out_dir}\n{report}\n"
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
    parser.add_argument("--subset", default="qa", help="halueval: qa | dialogue | summarization | general")
    print(convert(parser.parse_args(argv)), end="")


if __name__ == "__main__":
    main()
