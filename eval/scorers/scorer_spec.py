"""What every scorer provides (`Scorer`, its functions typed by the aliases below, as torchtitan's
`TrainSpec`), what `train.tools.check_run` reads of any scored run (`Summary`), and the formatting its
reports share."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

Table = tuple[list[str], list[list]]          # a W&B table: its columns and rows
Metrics = dict[str, Any]                      # what a scorer measured (metrics.json)
Row = dict[str, Any]                          # a gold record, a prediction row, or a scored row


@dataclass(frozen=True)
class Summary:
    """What `train.tools.check_run` can check of any scored run."""
    n: int
    parse_failures: int
    acc: float | None
    mcc: float | None
    recall_by_type: dict            # type -> (recall, how many gold records of it)
    majority: float | None          # the majority class's share (where the classes are unbalanced)


ScoreFn = Callable[[list[Row], dict[str, Row], Any], tuple[Metrics, list[Row]]]
                                              # (gold, predictions by id, BERTScore or None) -> (metrics, scored rows)
MarkdownFn = Callable[[Metrics], list[str]]   # the report's lines
PlotsFn = Callable[[Metrics, list[Row], Path], list[str]]    # PNGs written there, beyond the confusion matrix
TablesFn = Callable[[Metrics], dict[str, Table]]             # W&B tables beyond the predictions
SummaryFn = Callable[[Metrics], Summary]                     # what train.tools.check_run checks
AnnotationFn = Callable[[Row, Row], Row]                     # (record, prediction row) -> `eval.annotate`'s fields


@dataclass(frozen=True)
class Figure:
    """A headline figure of a scorer's metrics (what the benchmark's papers report): where it sits in
    metrics.json, and whether it prints as a percentage."""
    name: str
    path: tuple[str, ...]
    percent: bool = True

    def of(self, metrics: Metrics) -> float | None:
        value = metrics
        for key in self.path:
            value = value.get(key) if isinstance(value, dict) else None
        return value

    def text(self, value: float | None) -> str:
        if value is None or value != value:           # undefined (NaN: a draw with one class only)
            return "-"
        return pct(value) if self.percent else num(value)


@dataclass(frozen=True)
class Scorer:
    name: str
    title: str                       # the report's heading
    gold_fields: tuple[str, ...]     # what every gold record must carry
    score: ScoreFn
    markdown: MarkdownFn
    plots: PlotsFn
    tables: TablesFn
    labels: tuple                    # the confusion matrix's classes
    summary: SummaryFn
    annotation: AnnotationFn
    labels_note: str = ""
    unit_threshold: bool = False     # it judges spans, not responses: a sentence-level annotator's decision
                                     # threshold is chosen on its units' labels (UHGEval: every response has one)
    span_f1: bool = False            # it reports character-level span F1: a token-level annotator's threshold
                                     # is chosen for it
    one_sentence: bool = False       # a record is one response sentence judged against a reference window (ANAH):
                                     # `eval.annotate` retrieves the window where a row has none; RAG refuses it
    headline: tuple[Figure, ...] = ()   # the figures a paired comparison of two runs bootstraps (eval/compare.py)


def pct(x) -> str:
    return "-" if x is None else f"{100 * x:.2f}"


def num(x, digits=4) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


def no_plots(m: dict, rows: list[dict], out: Path) -> list[str]:
    return []


def no_tables(metrics: dict) -> dict[str, Table]:
    return {}


def table_rows(groups: dict, keys: tuple[str, ...]) -> list[list]:
    return [[name, *(stats.get(k) for k in keys)] for name, stats in groups.items()]


def detection_summary(m: dict) -> Summary:
    """LongNovel (`overall`, `by_type` per injected type) and binary (flat) metrics."""
    o = m.get("overall", m)
    return Summary(o.get("n") or 0, o.get("parse_failures", 0), o.get("acc"), o.get("mcc"),
                   {t: (v.get("recall"), v.get("n")) for t, v in (m.get("by_type") or {}).items()}, None)


def span(response: str, start: int, end: int, kind: str | None = None) -> dict:
    """An output span of `eval.annotate`: `[start, end)` of the response, its text and type."""
    return {"start": start, "end": end, "text": response[start:end], **({"type": kind} if kind else {})}
