"""Check a finished run directory against the run-directory contract, and optionally against the
scores its annotator must reach (what CI asks of the README's demo).

    python -m train.tools.check_run outputs/longnovel_curriculum_demo/<stamp> --min-mcc 0.3 --max-parse-failures 0.05
    python -m train.tools.check_run --latest outputs/longnovel_discriminative_demo --min-mcc 0.5 --type-recall-above 0
    python -m train.tools.check_run --latest outputs/anah_discriminative_demo --min-acc-over-majority 0.15 \
        --type-recall-above 0

Exit status 0 when every check holds, 1 otherwise (each failed check is listed).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import yaml

from data_builders.records import read_jsonl
from eval.scorers.scoring import Summary, scorer
from train.run_dir import LOG_FIELDS


def contract_problems(run_dir: Path) -> list[str]:
    """What the run directory lacks: config, a log row per step with its fields, every stage's
    export, the final evaluation."""
    problems = []
    config_path = run_dir / "config.yaml"
    if not config_path.is_file():
        return [f"{config_path}: missing"]
    config = yaml.safe_load(config_path.read_text(encoding="utf-8"))
    log = run_dir / "train_log.jsonl"
    rows = read_jsonl(log) if log.is_file() else []
    if not rows:
        problems.append(f"{log}: missing or empty")
    for i, row in enumerate(rows):
        lacking = [f for f in LOG_FIELDS if f not in row]
        if lacking:
            problems.append(f"{log}:{i + 1}: lacks {lacking}")
            break
    for i, stage in enumerate(config["curriculum"]["stages"]):
        export = run_dir / "checkpoints" / f"{i}-{stage['name']}" / "hf" / "config.json"
        if not export.is_file():
            problems.append(f"{export}: missing (stage {stage['name']!r} has no export)")
        if rows and not any(r.get("stage") == stage["name"] for r in rows):
            problems.append(f"{log}: no step of stage {stage['name']!r}")
    if config["eval"]["enabled"]:
        problems += [f"{p}: missing" for p in (run_dir / "eval" / "metrics.json", run_dir / "eval" / "report.md")
                     if not p.is_file()]
    return problems


def score_problems(s: Summary, min_mcc: float | None, max_parse_failures: float | None,
                   min_acc_over_majority: float | None, min_held_out: int | None = None,
                   type_recall_above: float | None = None) -> list[str]:
    """The score checks, on what the run's scorer summarises of its metrics (`eval.scorers.scoring`)."""
    problems = []
    if min_held_out is not None and s.n < min_held_out:
        problems.append(f"{s.n} held-out records scored, fewer than {min_held_out}")
    if min_mcc is not None and not (s.mcc or 0) >= min_mcc:
        problems.append(f"overall MCC {s.mcc} < {min_mcc}")
    if max_parse_failures is not None and s.n and s.parse_failures / s.n > max_parse_failures:
        problems.append(f"parse failures {s.parse_failures}/{s.n} > {max_parse_failures:.0%}")
    if type_recall_above is not None:
        if not s.recall_by_type:
            problems.append("no recall per type in the metrics")
        problems += [f"recall of {t} {recall} <= {type_recall_above} (n={count})"
                     for t, (recall, count) in sorted(s.recall_by_type.items())
                     if not (recall or 0) > type_recall_above]
    if min_acc_over_majority is not None:
        majority = s.majority if s.majority is not None else 1.0
        if not (s.acc or 0) >= majority + min_acc_over_majority:
            problems.append(f"accuracy {s.acc} < majority class {majority:.4f} + {min_acc_over_majority}")
    return problems


def _scorer_of(run_dir: Path) -> str:
    return yaml.safe_load((run_dir / "config.yaml").read_text(encoding="utf-8"))["task"]["scorer"]


def degenerate_problems(rows: list[dict]) -> list[str]:
    """A run whose annotator is useless whatever its scores say: no answer could be read, or it
    gave the same answer to every record (`eval/predictions.parsed.jsonl`, `pred` None when unreadable)."""
    preds = [r.get("pred") for r in rows]
    if not preds:
        return []
    if all(p is None for p in preds):
        return [f"every answer is unparseable ({len(preds)} of {len(preds)})"]
    read = [p for p in preds if p is not None]
    if len(preds) > 1 and len({json.dumps(p) for p in read}) == 1:
        rest = f"; {len(preds) - len(read)} unparseable" if len(read) < len(preds) else ""
        return [f"the annotator gave the same answer ({read[0]!r}) to every record it answered "
                f"({len(read)} of {len(preds)}{rest})"]
    return []


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("run_dir", type=Path, help="a run directory, or with --latest the directory holding runs")
    p.add_argument("--latest", action="store_true", help="check the newest run directory under RUN_DIR")
    p.add_argument("--min-held-out", type=int, help="fewest test records the evaluation must score")
    p.add_argument("--min-mcc", type=float)
    p.add_argument("--max-parse-failures", type=float, help="largest share of unparseable outputs, e.g. 0.05")
    p.add_argument("--min-acc-over-majority", type=float, help="ANAH: accuracy above the majority class, e.g. 0.15")
    p.add_argument("--allow-degenerate", action="store_true",
                   help="accept a run whose answers are all unparseable or all the same (smoke runs)")
    p.add_argument("--type-recall-above", type=float,
                   help="every hallucination type's (ANAH: every gold type's) recall must exceed this, e.g. 0")
    args = p.parse_args(argv)
    run_dir = args.run_dir
    if args.latest:
        runs = sorted(d for d in run_dir.iterdir() if (d / "config.yaml").is_file()) if run_dir.is_dir() else []
        if not runs:
            print(f"check_run: no run directory (with config.yaml) under {run_dir}", file=sys.stderr)
            return 2
        run_dir = runs[-1]
    problems = contract_problems(run_dir)
    metrics_path = run_dir / "eval" / "metrics.json"
    if metrics_path.is_file():
        summary = scorer(_scorer_of(run_dir)).summary(json.loads(metrics_path.read_text(encoding="utf-8")))
        problems += score_problems(summary, args.min_mcc, args.max_parse_failures, args.min_acc_over_majority,
                                   args.min_held_out, args.type_recall_above)
    parsed = run_dir / "eval" / "predictions.parsed.jsonl"
    if parsed.is_file() and not args.allow_degenerate:
        problems += degenerate_problems(read_jsonl(parsed))
    for line in problems:
        print(f"FAIL {line}")
    print(f"{run_dir}: {'all checks hold' if not problems else f'{len(problems)} check(s) failed'}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
