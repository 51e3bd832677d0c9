"""FaithBench's detector table recomputed from the released per-item outputs (each sample's
`metadata`): balanced accuracy and F1 of every detector over the 750 summaries, against the
benchmark's own binarisation (worst label of all annotations; Questionable and Unwanted count as
hallucinated; `vectara/FaithBench`, `scripts/binarize.py`).

    python -m eval.baselines.faithbench_detectors FaithBench/data_for_release [--out report.md]

A detector that gives a score (HHEM: factual consistency in [0, 1]) calls a summary hallucinated
below 0.5; the others give 1 (consistent) or 0 (hallucinated). Items a detector has no output for
(true_nli has 2) are left out of its row and counted.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from sklearn.metrics import balanced_accuracy_score, f1_score

from data_builders.common.user_errors import reports_user_errors
from data_builders.importers.faithbench import DETECTORS, import_faithbench

SCORE_THRESHOLD = 0.5


def detector_says_hallucinated(value: float | int) -> int:
    """A score (float) below the threshold, or a 0 verdict (int)."""
    return int(value < SCORE_THRESHOLD) if isinstance(value, float) else int(value == 0)


def detector_rows(records: list[dict]) -> list[dict]:
    """One row per detector with outputs: items scored, items without an output, balanced accuracy, F1 of the
    hallucinated class and macro F1 (percent)."""
    rows = []
    for name in DETECTORS:
        scored = [(r["label"], r["meta"]["detectors"].get(name)) for r in records]
        pairs = [(gold, detector_says_hallucinated(v)) for gold, v in scored if v is not None]
        if not pairs:
            continue
        gold, pred = [g for g, _ in pairs], [p for _, p in pairs]
        rows.append({"detector": name, "n": len(pairs), "missing": len(scored) - len(pairs),
                     "balanced_acc": 100 * balanced_accuracy_score(gold, pred),
                     "f1_hallucinated": 100 * f1_score(gold, pred, zero_division=0),
                     "f1_macro": 100 * f1_score(gold, pred, average="macro", zero_division=0)})
    return rows


def report(records: list[dict], rows: list[dict]) -> str:
    n_hallu = sum(r["label"] for r in records)
    lines = [f"FaithBench: {len(records)} summaries, {n_hallu} hallucinated (worst label in Questionable / "
             "Unwanted), detector outputs from the released metadata", "",
             "| detector | n | balanced acc. | F1 (hallucinated) | F1 (macro) |", "|---|---|---|---|---|"]
    for r in rows:
        n = f"{r['n']} ({r['missing']} without output)" if r["missing"] else str(r["n"])
        lines.append(f"| {r['detector']} | {n} | {r['balanced_acc']:.2f} | {r['f1_hallucinated']:.2f} | "
                     f"{r['f1_macro']:.2f} |")
    return "\n".join(lines) + "\n"


def read_batches(folder: Path) -> list[dict]:
    files = sorted(folder.glob("batch_*.json"), key=lambda p: int(p.stem.split("_")[1]))
    if not files:
        raise FileNotFoundError(f"{folder}: expected FaithBench's batch_<k>.json files, found none")
    return [rec for path in files for rec in import_faithbench(path)]


@reports_user_errors("eval.baselines.faithbench_detectors")
def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("folder", type=Path, help="FaithBench's data_for_release folder")
    p.add_argument("--out", type=Path, help="also write the table to this markdown file")
    args = p.parse_args(argv)
    records = read_batches(args.folder)
    text = report(records, detector_rows(records))
    print(text, end="")
    if args.out:
        args.out.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
