"""The scorers, one record each, registered once: how predictions are scored against gold records
and how the scores are shown (report, plots, W&B tables). `eval/score.py`, `eval/run.py` and the
trainer's final evaluation all score through `score_records` / `score_files`."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from configs.choices import Scorer as ScorerName
from data_builders.schema import SENTENCE_TYPES
from eval.anah import score_anah
from eval.binary import score_binary
from eval.inputs import read_gold, read_predictions
from eval.longnovel import score_longnovel
from eval.report import anah_markdown, binary_markdown, longnovel_markdown, longnovel_plots, no_plots, write_eval
from eval.spans import score_spans, spans_markdown
from eval.tables import anah_tables, longnovel_tables, no_tables
from eval.uhgeval import score_uhgeval, uhgeval_markdown


@dataclass(frozen=True)
class Summary:
    """What `train.tools.check_run` can check of any scored run."""
    n: int
    parse_failures: int
    acc: float | None
    mcc: float | None
    recall_by_type: dict            # type -> (recall, how many gold records of it)
    majority: float | None          # the majority class's share (where the classes are unbalanced)


def _detection_summary(m: dict) -> Summary:
    """LongNovel (`overall`, `by_type` per injected type) and binary (flat) metrics."""
    o = m.get("overall", m)
    return Summary(o.get("n") or 0, o.get("parse_failures", 0), o.get("acc"), o.get("mcc"),
                   {t: (v.get("recall"), v.get("n")) for t, v in (m.get("by_type") or {}).items()}, None)


def _anah_summary(m: dict) -> Summary:
    support = m.get("support") or {}
    return Summary(m.get("n") or 0, m.get("parse_failures", 0), m.get("acc"), None,
                   {t: (r, support.get(t)) for t, r in (m.get("recall_by_type") or {}).items()},
                   max(support.values()) / sum(support.values()) if support else None)


def _spans_summary(m: dict) -> Summary:
    e = m["example"]
    return Summary(m["n"], m["parse_failures"], e["acc"], e["mcc"], {}, None)


def _uhgeval_summary(m: dict) -> Summary:
    return Summary(m["n"], m["parse_failures"], m["acc"], None, {}, None)


@dataclass(frozen=True)
class Scorer:
    name: str
    title: str                       # the report's heading
    gold_fields: tuple[str, ...]     # what every gold record must carry
    score: Callable                  # (gold, predictions by id, bertscore) -> (metrics, per-record rows)
    markdown: Callable               # metrics -> report lines
    plots: Callable                  # (metrics, rows, out_dir) -> PNG names beyond the confusion matrix
    tables: Callable                 # metrics -> W&B tables beyond the predictions
    labels: tuple                    # the confusion matrix's classes
    summary: Callable                # metrics -> Summary (what train.tools.check_run checks)
    labels_note: str = ""
    unit_threshold: bool = False     # it judges spans, not responses: a sentence-level annotator's decision
                                     # threshold is chosen on its units' labels (UHGEval: every response has one)


SCORERS: dict[str, Scorer] = {
    ScorerName.longnovel: Scorer("longnovel", "LongNovel detection", ("label",), score_longnovel, longnovel_markdown,
                                 longnovel_plots, longnovel_tables, (0, 1), _detection_summary, " (1 = hallucinated)"),
    ScorerName.binary: Scorer("binary", "Binary hallucination detection", ("label",), score_binary, binary_markdown,
                              no_plots, no_tables, (0, 1), _detection_summary, " (1 = hallucinated)"),
    ScorerName.anah: Scorer("anah", "ANAH sentence annotation", ("type",), score_anah, anah_markdown, no_plots,
                            anah_tables, tuple(SENTENCE_TYPES), _anah_summary),
    ScorerName.spans: Scorer("spans", "Hallucinated spans", ("spans",), score_spans, spans_markdown, no_plots,
                             no_tables, (0, 1), _spans_summary, " (1 = the response has a span)"),
    ScorerName.uhgeval: Scorer("uhgeval", "UHGEval keyword-level judgement", ("spans",), score_uhgeval,
                               uhgeval_markdown, no_plots, no_tables, (0, 1), _uhgeval_summary,
                               " (1 = some span predicted)", unit_threshold=True),
}


def scorer(name: str) -> Scorer:
    if name not in SCORERS:
        raise ValueError(f"task: expected one of {sorted(SCORERS)}, found {name!r}")
    return SCORERS[name]


def score_records(task: str, gold: list[dict], preds: dict[str, dict], bertscore=None) -> tuple[dict, list[dict]]:
    """Metrics and per-record rows. `bertscore` (configs.schema.BertScoreConfig) adds `bertscore_f1`
    to ANAH scores; the other tasks ignore it."""
    return scorer(task).score(gold, preds, bertscore)


def score_files(task: str, gold_path: str, predictions_path: str, output_dir: str | Path,
                plots: bool = True, bertscore=None) -> dict:
    s = scorer(task)
    gold = read_gold(gold_path, s.name, s.gold_fields)
    preds = read_predictions(predictions_path, {r["id"] for r in gold})
    metrics, rows = s.score(gold, preds, bertscore)
    write_eval(Path(output_dir), s, metrics, rows, plot=plots)
    return metrics
