"""The scorers (`task.scorer`), one module each (`longnovel`, `binary`, `anah`, `spans`,
`uhgeval_keywords`, `summedits_domains`):
how predictions are scored against gold records, how the scores are shown (report lines, plots, W&B
tables), what `train.tools.check_run` reads of them, and the fields `eval.annotate` writes for a
prediction (`scorer_spec.Scorer`). A new benchmark's scorer is one new module and one entry of `SCORERS`.
"""
from __future__ import annotations

from configs.choices import Scorer as ScorerName
from eval.scorers import anah, binary, longnovel, spans, summedits_domains, uhgeval_keywords
from eval.scorers.scorer_spec import Scorer, Summary

SCORERS: dict[str, Scorer] = {
    ScorerName.longnovel: longnovel.SCORER,
    ScorerName.binary: binary.SCORER,
    ScorerName.anah: anah.SCORER,
    ScorerName.spans: spans.SCORER,
    ScorerName.uhgeval: uhgeval_keywords.SCORER,
    ScorerName.summedits: summedits_domains.SCORER,
}

__all__ = ["SCORERS", "Scorer", "Summary"]
