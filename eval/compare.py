"""Compare finished runs: a markdown table of final metrics per bucket, the config keys that
differ, and PNG plots of loss curves and per-bucket Acc / MCC.

    python eval/compare.py RUN_DIR [RUN_DIR | wandb:entity/project/run_id ...] [--out DIR]

Works offline from run directories alone; W&B run paths need the API (online).

Two evaluation runs over the same records (eval/run.py's output_dir, cross-validated or not), their
headline figures compared by a paired bootstrap (eval/paired_bootstrap.py):

    python eval/compare.py RUN_A RUN_B --paired SCORER [--resamples 1000] [--out DIR]
"""
from __future__ import annotations

import argparse
from pathlib import Path

from data_builders.common.user_errors import reports_user_errors
from eval.paired_bootstrap import paired_bootstrap, paired_markdown, read_scored_run
from eval.reports.finished_runs import Run, config_differences, load_run
from eval.scorers.scoring import SCORERS, scorer

METRICS = (("acc", "Acc.", 100), ("mcc", "MCC", 1), ("hallu_acc", "Hallu.", 100), ("nonhallu_acc", "Non-H.", 100))


def _fmt(value, scale) -> str:
    if value is None:
        return "-"
    return f"{value * 100:.2f}" if scale == 100 else f"{value:.4f}"


def buckets_of(runs: list[Run]) -> list[str]:
    names = []
    for r in runs:
        for b in (r.metrics or {}).get("by_bucket", {}):
            if b not in names:
                names.append(b)
    return names + ["overall"]


def _stats(run: Run, bucket: str) -> dict:
    m = run.metrics or {}
    return (m.get("overall") if bucket == "overall" else m.get("by_bucket", {}).get(bucket)) or {}


def markdown(runs: list[Run]) -> str:
    lines = ["# Run comparison", "", "| run | bucket | n | " + " | ".join(m[1] for m in METRICS) + " | final loss |",
             "|---" * (len(METRICS) + 4) + "|"]
    for r in runs:
        final = f"{r.steps[-1]['loss']:.4f}" if r.steps else "-"
        for b in buckets_of(runs):
            s = _stats(r, b)
            lines.append(f"| {r.label} | {b} | {s.get('n', '-')} | "
                         + " | ".join(_fmt(s.get(k), scale) for k, _, scale in METRICS) + f" | {final} |")
    diffs = config_differences(runs)
    if diffs:
        lines += ["", "## Config differences", "", "| key | " + " | ".join(r.label for r in runs) + " |",
                  "|---" * (len(runs) + 1) + "|"]
        lines += [f"| `{k}` | " + " | ".join(str(v) for v in vals) + " |" for k, vals in diffs.items()]
    missing = [r.label for r in runs if r.metrics is None]
    if missing:
        lines += ["", f"No eval/metrics.json for: {', '.join(missing)}"]
    return "\n".join(lines + ["", "![loss](loss.png)", "![buckets](buckets.png)"]) + "\n"


def plot(runs: list[Run], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    fig, ax = plt.subplots(figsize=(7, 3.5))
    for r in runs:
        ax.plot([s["step"] for s in r.steps], [s["loss"] for s in r.steps], label=r.label, lw=1.2)
    ax.set(xlabel="optimizer step", ylabel="loss", yscale="log", title="training loss")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out / "loss.png", dpi=120)
    plt.close(fig)
    buckets = buckets_of(runs)
    x, width = np.arange(len(buckets)), 0.8 / max(1, len(runs))
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.5))
    for i, r in enumerate(runs):
        for ax, key, scale in ((axes[0], "acc", 100), (axes[1], "mcc", 1)):
            vals = [(_stats(r, b).get(key) or 0) * scale for b in buckets]
            ax.bar(x + i * width, vals, width, label=r.label)
    for ax, title, lim in ((axes[0], "Acc. (%)", (0, 100)), (axes[1], "MCC", (-1, 1))):
        ax.set_xticks(x + width * (len(runs) - 1) / 2, buckets)
        ax.set(title=title, ylim=lim)
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out / "buckets.png", dpi=120)
    plt.close(fig)


def compare(specs: list[str], out: Path) -> str:
    runs = [load_run(s) for s in specs]
    labels = [r.label for r in runs]
    for i, r in enumerate(runs):           # keep labels unique
        if labels.count(r.label) > 1:
            r.label = f"{r.label}#{i}"
    out.mkdir(parents=True, exist_ok=True)
    text = markdown(runs)
    (out / "comparison.md").write_text(text, encoding="utf-8")
    plot(runs, out)
    return text


def compare_paired(specs: list[str], scorer_name: str, resamples: int, out: Path, level: float = 0.95) -> str:
    if len(specs) != 2:
        raise ValueError(f"--paired compares two runs, A then B; found {len(specs)}: {specs}")
    s = scorer(scorer_name)
    a, b = (read_scored_run(Path(spec), s) for spec in specs)
    figures = paired_bootstrap(s, a, b, resamples, level=level)
    text = paired_markdown(a, b, figures, resamples, level)
    out.mkdir(parents=True, exist_ok=True)
    (out / "paired.md").write_text(text, encoding="utf-8")
    return text


@reports_user_errors("eval/compare.py")
def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", nargs="+", help="run directories or wandb:entity/project/run_id")
    parser.add_argument("--out", default="comparison", help="output directory (default: ./comparison)")
    parser.add_argument("--paired", choices=sorted(SCORERS), help="two evaluation runs' headline figures under "
                        "this scorer, compared by a paired bootstrap over their records")
    parser.add_argument("--resamples", type=int, default=1000, help="bootstrap resamples (default: 1000)")
    args = parser.parse_args()
    if args.paired:
        print(compare_paired(args.runs, args.paired, args.resamples, Path(args.out)), end="")
    else:
        print(compare(args.runs, Path(args.out)), end="")


if __name__ == "__main__":
    main()
