"""PNG plots for reports (matplotlib, headless)."""
from __future__ import annotations

from pathlib import Path

import numpy as np


def _pyplot():
    """matplotlib's pyplot, headless, imported at the first plot: every process that never plots
    (each training rank but the first) starts 0.4 s sooner."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def bucket_bars(by_bucket: dict, path: Path) -> None:
    names = list(by_bucket)
    acc = [100 * (by_bucket[b]["acc"] or 0) for b in names]
    mcc = [by_bucket[b]["mcc"] or 0 for b in names]
    plt = _pyplot()
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(8, 3.2))
    a1.bar(names, acc, color="#4477aa")
    a1.axhline(50, color="grey", lw=0.8, ls="--")
    a1.set(title="Acc. (%) per length bucket", ylim=(0, 100))
    a2.bar(names, mcc, color="#ee6677")
    a2.axhline(0, color="grey", lw=0.8)
    a2.set(title="MCC per length bucket", ylim=(-1, 1))
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def recall_heatmap(table: dict[str, dict[str, float | None]], path: Path, title: str) -> None:
    """table[row][column] -> recall in [0, 1] (None drawn blank)."""
    rows = list(table)
    cols = list(table[rows[0]])
    grid = np.array([[np.nan if table[r].get(c) is None else 100 * table[r][c] for c in cols] for r in rows])
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(1.2 + 0.9 * len(cols), 0.9 + 0.4 * len(rows)))
    im = ax.imshow(grid, cmap="viridis", vmin=0, vmax=100, aspect="auto")
    ax.set_xticks(range(len(cols)), cols)
    ax.set_yticks(range(len(rows)), rows)
    for i in range(len(rows)):
        for j in range(len(cols)):
            if not np.isnan(grid[i, j]):
                ax.text(j, i, f"{grid[i, j]:.0f}", ha="center", va="center", color="white", fontsize=8)
    ax.set_title(title)
    fig.colorbar(im, ax=ax, label="recall (%)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def confusion(gold: list, pred: list, labels: list, path: Path, title: str) -> None:
    """Rows: gold; columns: predicted, with a 'parse failure' column."""
    cols = labels + ["parse failure"]
    m = np.zeros((len(labels), len(cols)), dtype=int)
    for g, p in zip(gold, pred):
        m[labels.index(g), cols.index(p) if p in labels else len(labels)] += 1
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(1.5 + 1.1 * len(cols), 1.2 + 0.7 * len(labels)))
    ax.imshow(m, cmap="Blues")
    ax.set_xticks(range(len(cols)), [str(c) for c in cols], rotation=30, ha="right")
    ax.set_yticks(range(len(labels)), [str(c) for c in labels])
    ax.set(xlabel="predicted", ylabel="gold", title=title)
    for i in range(m.shape[0]):
        for j in range(m.shape[1]):
            ax.text(j, i, str(m[i, j]), ha="center", va="center",
                    color="white" if m[i, j] > m.max() / 2 else "black")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def score_histogram(scores: list[tuple[float, str | None]], threshold: float | None, path: Path) -> None:
    """(score, label) of annotated rows: their scores in 20 bins over [0, 1], stacked by label, with
    the decision threshold."""
    plt = _pyplot()
    labels = sorted({str(label) for _, label in scores})
    fig, ax = plt.subplots(figsize=(6, 3.2))
    ax.hist([[s for s, label in scores if str(label) == name] for name in labels], bins=np.linspace(0, 1, 21),
            stacked=True, label=labels)
    if threshold is not None:
        ax.axvline(threshold, color="black", lw=1, ls="--", label=f"threshold {threshold:.3f}")
    ax.set(xlabel="score", ylabel="rows", title=f"Scores of {len(scores):,} rows")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
