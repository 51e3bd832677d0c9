"""Learning curves and early stopping (`trainer.eval_every`, `trainer.early_stopping_patience`).

Every `eval_every` optimizer steps of a stage, and at its last step, the current weights are exported
to `<run>/curve/latest` and scored on the validation records of the stage's own bucket by the final
evaluation's own predictor (a head's threshold chosen on them) and scorer. Each point is a row of `<run>/curve.jsonl`
(the validation MCC and accuracy), drawn with the training loss in `<run>/curve.png`, and the final
evaluation's report shows the plot. With a patience, a stage stops once its validation MCC has not
improved for that many points in a row, and the stage's export is its best point's weights
(`<run>/curve/best-<stage index>`). A resumed run reads its points back from `curve.jsonl`.
"""
from __future__ import annotations

import json
import logging
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from data_builders.records import read_jsonl
from train.distributed import all_reduce_sum, barrier

logger = logging.getLogger(__name__)

CURVE_FILE, CURVE_PLOT, CURVE_DIR = "curve.jsonl", "curve.png", "curve"

Score = Callable[[Path], "dict | None"]     # an export -> {"mcc", "acc", "n"} on the main rank, None elsewhere
Export = Callable[[Path], None]             # writes the engine's current weights there (every rank calls it)


@dataclass
class Curve:
    run_dir: Path
    stage_index: int
    stage_name: str
    every: int
    patience: int
    is_main: bool
    best: float | None = None
    since_best: int = 0

    @classmethod
    def resumed(cls, run_dir: Path, stage_index: int, stage_name: str, every: int, patience: int,
                is_main: bool) -> Curve:
        """The stage's curve, with the points an earlier launch recorded."""
        curve = cls(run_dir, stage_index, stage_name, every, patience, is_main)
        for row in curve_rows(run_dir):
            if row["stage_index"] == stage_index:
                curve._count(row["mcc"])
        return curve

    @property
    def best_dir(self) -> Path:
        return self.run_dir / CURVE_DIR / f"best-{self.stage_index}"

    def due(self, stage_step: int, total_steps: int) -> bool:
        return stage_step % self.every == 0 or stage_step == total_steps

    def _count(self, mcc: float | None) -> bool:
        improved = mcc is not None and (self.best is None or mcc > self.best)
        self.best, self.since_best = (mcc, 0) if improved else (self.best, self.since_best + 1)
        return improved

    def point(self, export: Export, score: Score, stage_step: int, global_step: int) -> bool:
        """Score the current weights and record the point; True when the patience has run out
        (every rank gets the same answer)."""
        latest = self.run_dir / CURVE_DIR / "latest"
        export(latest)
        barrier()                  # the main rank writes the export; every rank then reads it
        scored = score(latest)
        stop = 0.0
        if self.is_main:
            mcc = scored["mcc"]
            if self._count(mcc) and self.patience:
                shutil.rmtree(self.best_dir, ignore_errors=True)
                shutil.copytree(latest, self.best_dir)
            row = {"stage_index": self.stage_index, "stage": self.stage_name, "stage_step": stage_step,
                   "step": global_step, **scored}
            with open(self.run_dir / CURVE_FILE, "a", encoding="utf-8") as f:
                f.write(json.dumps(row) + "\n")
            plot_curve(self.run_dir)
            logger.info(f"validation at step {global_step} ({self.stage_name} step {stage_step}): MCC {_fmt(mcc)}, "
                        f"accuracy {_fmt(scored['acc'])} on {scored['n']} records (best {_fmt(self.best)})")
            stop = float(bool(self.patience) and self.since_best >= self.patience)
        return all_reduce_sum([stop])[0] > 0

    def keep_best(self, export_dir: Path) -> None:
        """Early stopping: the stage's export becomes its best point's weights (its annotator.json and
        model card stay the stage's own)."""
        if self.is_main and self.patience and self.best_dir.is_dir():
            for f in self.best_dir.iterdir():
                if f.suffix in (".safetensors", ".bin") or f.name == "config.json":
                    shutil.copy2(f, export_dir / f.name)
        barrier()


def _fmt(x) -> str:
    return "-" if x is None else f"{x:.4f}"


def curve_rows(run_dir: Path) -> list[dict]:
    path = run_dir / CURVE_FILE
    return read_jsonl(path) if path.is_file() else []


def truncate_curve(run_dir: Path, global_step: int, is_main: bool) -> None:
    """A resumed run forgets the points recorded after the step it resumes from."""
    path = run_dir / CURVE_FILE
    if is_main and path.is_file():
        kept = [r for r in read_jsonl(path) if r["step"] <= global_step]
        path.write_text("".join(json.dumps(r) + "\n" for r in kept), encoding="utf-8")


def plot_curve(run_dir: Path) -> Path:
    """The training loss and the validation MCC against the global step, stage by stage."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    log = run_dir / "train_log.jsonl"
    steps = read_jsonl(log) if log.is_file() else []
    points = curve_rows(run_dir)
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(7, 5), sharex=True)
    top.plot([r["step"] for r in steps], [r["loss"] for r in steps], lw=0.8, color="tab:gray")
    top.set_ylabel("training loss")
    bottom.plot([r["step"] for r in points], [r["mcc"] for r in points], marker="o", color="tab:blue")
    bottom.set_ylabel("validation MCC")
    mccs = [r["mcc"] for r in points if r["mcc"] is not None]
    if mccs:                        # at least 0.2 of MCC in view: noise must not look like a trend
        middle = (max(mccs) + min(mccs)) / 2
        half = max(0.1, (max(mccs) - min(mccs)) / 2 + 0.05)
        bottom.set_ylim(middle - half, middle + half)
    bottom.set_xlabel("global step")
    for stage in sorted({r["stage_index"] for r in points})[1:]:
        first = min(r["step"] for r in points if r["stage_index"] == stage)
        for ax in (top, bottom):
            ax.axvline(first, color="k", lw=0.5, ls=":")
    fig.tight_layout()
    out = run_dir / CURVE_PLOT
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return out


def curve_markdown(run_dir: Path, out_dir: Path) -> list[str]:
    """The report's learning-curve section (the plot copied beside the report), or nothing."""
    points = curve_rows(run_dir)
    if not points:
        return []
    shutil.copy2(plot_curve(run_dir), out_dir / CURVE_PLOT)
    lines = ["", "## Learning curve (validation split)", "", "| stage | step | MCC | accuracy | n |",
             "|---|---|---|---|---|"]
    lines += [f"| {r['stage']} | {r['step']} | {_fmt(r['mcc'])} | {_fmt(r['acc'])} | {r['n']} |" for r in points]
    return lines + ["", f"![learning curve]({CURVE_PLOT})", ""]
