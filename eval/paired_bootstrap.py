"""Two evaluation runs over the same records, compared by a paired bootstrap: is B's headline figure
(the scorer's `headline`) above A's by more than the records' draw could make it?

Each resample draws the records with replacement, once for both runs, and scores both on the draw with the
scorer itself, so a figure pooled over records (balanced accuracy, character F1, SummEdits' mean over
domains) is recomputed as the run computed it. A cross-validated run is read from its folds
(`fold_<i>/eval/{gold,predictions}.jsonl`, each record scored once, by its fold's annotator), any other
from `eval/`.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from data_builders.common.progress import progress
from eval.scorers.inputs import read_gold, read_predictions
from eval.scorers.scorer_spec import Figure, Scorer


@dataclass(frozen=True)
class ScoredRun:
    name: str
    gold: list[dict]
    predictions: dict[str, dict]


def scored_parts(run_dir: Path) -> list[Path]:
    """Where a run's gold records and predictions lie: the eval directory of each fold it dealt
    (`folds/fold_<i>`), else its own."""
    dealt = sorted((d.name for d in (run_dir / "folds").glob("fold_*") if d.is_dir()), key=lambda n: int(n[5:]))
    parts = [run_dir / name / "eval" for name in dealt] or [run_dir / "eval", run_dir]
    found = [d for d in parts if (d / "gold.jsonl").exists() and (d / "predictions.jsonl").exists()]
    if dealt and len(found) < len(dealt):
        missing = [str(d) for d in parts if d not in found]
        raise ValueError(f"{run_dir}: {len(dealt)} folds dealt, {len(missing)} not predicted yet (no gold.jsonl and "
                         f"predictions.jsonl in {', '.join(missing)}); a paired comparison reads every fold")
    if not found:
        raise FileNotFoundError(f"{run_dir}: expected gold.jsonl and predictions.jsonl in fold_<i>/eval/ (a "
                                "cross-validated run), eval/ or the directory itself; found none")
    return found if dealt else found[:1]


def read_scored_run(run_dir: Path, scorer: Scorer) -> ScoredRun:
    """The run's gold records and predictions, validated as eval/score.py validates them; a record without a
    prediction (a run still going) is refused."""
    gold, predictions = [], {}
    for part in scored_parts(run_dir):
        records = read_gold(part / "gold.jsonl", scorer.name, scorer.gold_fields)
        rows = read_predictions(part / "predictions.jsonl", {r["id"] for r in records})
        unpredicted = [r["id"] for r in records if r["id"] not in rows]
        if unpredicted:
            raise ValueError(f"{part / 'predictions.jsonl'}: {len(unpredicted)} of its {len(records)} gold records "
                             f"have no prediction (first {unpredicted[:3]}); is the run finished?")
        gold += records
        predictions.update(rows)
    return ScoredRun(str(run_dir), gold, predictions)


def check_same_records(a: ScoredRun, b: ScoredRun) -> None:
    ids_a, ids_b = {r["id"] for r in a.gold}, {r["id"] for r in b.gold}
    if ids_a != ids_b:
        only_a, only_b = sorted(ids_a - ids_b), sorted(ids_b - ids_a)
        raise ValueError(f"a paired comparison needs the same records in both runs: {len(only_a)} only in {a.name} "
                         f"(first {only_a[:3]}), {len(only_b)} only in {b.name} (first {only_b[:3]})")


def headline(scorer: Scorer, gold: list[dict], predictions: dict[str, dict]) -> list[float | None]:
    metrics, _ = scorer.score(gold, predictions, None)
    return [figure.of(metrics) for figure in scorer.headline]


def drawn(gold: list[dict], draw: np.ndarray) -> list[dict]:
    """The drawn records, each under an id of its own (a record drawn twice counts twice)."""
    return [{**gold[i], "id": f"{gold[i]['id']}#{k}"} for k, i in enumerate(draw)]


def rows_for(records: list[dict], originals: list[str], predictions: dict[str, dict]) -> dict[str, dict]:
    return {r["id"]: {**predictions[o], "id": r["id"]} for r, o in zip(records, originals)}


@dataclass(frozen=True)
class PairedFigure:
    figure: Figure
    a: float | None
    b: float | None
    low: float                  # the central interval of B - A over the resamples
    high: float
    b_above: float              # the share of resamples where B is above A


def paired_bootstrap(scorer: Scorer, a: ScoredRun, b: ScoredRun, resamples: int = 1000, seed: int = 0,
                     level: float = 0.95) -> list[PairedFigure]:
    if not scorer.headline:
        raise ValueError(f"the {scorer.name} scorer names no headline figure to compare (Scorer.headline)")
    check_same_records(a, b)
    gold = sorted(a.gold, key=lambda r: r["id"])
    rng = np.random.default_rng(seed)
    deltas = []
    for _ in progress(range(resamples), desc="paired bootstrap"):
        draw = rng.integers(0, len(gold), len(gold))
        records, originals = drawn(gold, draw), [gold[i]["id"] for i in draw]
        deltas.append([_difference(x, y) for x, y in zip(
            headline(scorer, records, rows_for(records, originals, a.predictions)),
            headline(scorer, records, rows_for(records, originals, b.predictions)))])
    deltas = np.array(deltas, dtype=float)
    tail = 100 * (1 - level) / 2
    whole = zip(scorer.headline, headline(scorer, gold, a.predictions), headline(scorer, gold, b.predictions))
    return [PairedFigure(figure, x, y, *np.nanpercentile(deltas[:, j], [tail, 100 - tail]),
                         float(np.nanmean(deltas[:, j] > 0)))
            for j, (figure, x, y) in enumerate(whole)]


def _difference(x: float | None, y: float | None) -> float:
    return np.nan if x is None or y is None else y - x        # a figure undefined on a draw (one class only)


def paired_markdown(a: ScoredRun, b: ScoredRun, figures: list[PairedFigure], resamples: int, level: float) -> str:
    lines = ["# Paired bootstrap", "", f"A: {a.name}", f"B: {b.name}", "",
             f"{len(a.gold)} records, {resamples} resamples of them (with replacement, the same draw for both runs); "
             f"the interval is the central {100 * level:g}% of B - A over the resamples.", "",
             f"| figure | A | B | B - A | {100 * level:g}% interval of B - A | resamples with B above A |",
             "|---|---|---|---|---|---|"]
    for p in figures:
        f = p.figure
        lines.append(f"| {f.name} | {f.text(p.a)} | {f.text(p.b)} | {f.text(_difference(p.a, p.b))} | "
                     f"{f.text(p.low)} to {f.text(p.high)} | {100 * p.b_above:.1f}% |")
    return "\n".join(lines) + "\n"
