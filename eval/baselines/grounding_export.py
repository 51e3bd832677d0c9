"""Exports of the grounding annotator (`eval.method=grounding`): its fitted regressions, and with
`eval.grounding.encoder` its fine-tuned unit encoders, written as an annotator export that `eval.annotate` and
`Annotator.load` apply.

    <export>/annotator.json   the spec (method: grounding, the scorer that reads its rows, its threshold)
            /grounding.json   the fitted model: coefficients, word counts, thresholds and how each was chosen
            /unit_encoder_*/  with an encoder: each fine-tuned encoder (safetensors, tokenizer, head.safetensors)
            /README.md        a card: what it reads, how it was fitted, the cross-validated scores

`eval/run.py ... eval.export=DIR` writes it: without folds, the model that scored the test split; with
`data.folds=k`, after the k folds are pooled, one more fit on every record (dealt into train and val as a
fold's are, so its thresholds are chosen as the folds' were). Nothing in it is a pickle.
"""
from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path

from configs.schema import TaskConfig
from eval.baselines.grounding import TASK_TYPE_FIELD, GroundingModel
from models.export_spec import CARD_FILE, AnnotatorSpec
from models.kinds import kind_of

MODEL_FILE = "grounding.json"
GROUNDING = "grounding"


def write_grounding_export(out: Path, fitted: Path, task: TaskConfig, records: list[dict], provenance: str,
                           held_out: str | None) -> AnnotatorSpec:
    """`fitted` (a grounding.json) as an export in `out`, with its spec and card; `records` are what it was fitted
    on, `provenance` how, `held_out` the cross-validated report of the recipe."""
    out.mkdir(parents=True, exist_ok=True)
    body = _body(fitted)
    shutil.copyfile(fitted, out / MODEL_FILE)
    for name in (body.get("encoder") or {}).get("dirs", []):
        shutil.rmtree(out / name, ignore_errors=True)
        shutil.copytree(fitted.parent / name, out / name)
    model = GroundingModel.load(out / MODEL_FILE)
    languages = Counter(r.get("language") or "en" for r in records)
    spec = AnnotatorSpec(kind="discriminative", head="binary", template="", evidence_sentences=0,
                         scorer=str(task.scorer), language=languages.most_common(1)[0][0], max_seq_len=0,
                         max_new_tokens=0, labels=["faithful", "hallucinated"], threshold=model.threshold,
                         threshold_source=body.get("threshold_source"), thresholds_by=model.thresholds_by,
                         base_model=model.config.encoder or model.config.embedder or model.config.lm or "",
                         training={"source": "records", "records": len(records), "fitted": provenance},
                         method=GROUNDING)
    spec.save(out)
    _write_card(out, spec, model, held_out, (body.get("encoder") or {}).get("fitted"))
    return spec


def _body(path: Path) -> dict:
    return json.loads(Path(path).read_text(encoding="utf-8"))


def _response_models(model: GroundingModel) -> str:
    if not model.response:
        return "no (its units decide)"
    if not model.task_responses:
        return "yes"
    return f"one per task type ({', '.join(model.task_responses)}), and one for all that scores any other type"


def _write_card(out: Path, spec: AnnotatorSpec, model: GroundingModel, held_out: str | None,
                encoders_fitted: str | None) -> None:
    c = model.config
    readers = ", ".join(filter(None, [f"sentence encoder `{c.embedder}`" if c.embedder else None,
                                      f"causal LM `{c.lm}`" if c.lm else None,
                                      f"unit encoder fine-tuned from `{c.encoder}` ({len(model.encoders)} halves, "
                                      f"{c.encoder_head} head, {c.encoder_epochs:g} epochs, lr {c.encoder_lr:g}, "
                                      f"{c.encoder_evidence} source pieces a unit)" if c.encoder else None]))
    readers = readers or "none (words only)"
    flags = ", ".join(name for name in ("stem", "negation", "word_odds") if getattr(c, name)) or "none"
    lines = ["---", "library_name: hallucination-annotators", "pipeline_tag: text-classification",
             "tags: [hallucination-detection, grounding-features]", f"language: [{spec.language}]", "---", "",
             "# Hallucination annotator: grounding features (two logistic regressions)", "",
             f"- fitted on {spec.training['records']} records: {spec.training['fitted']}",
             f"- units: {c.unit}; readers: {readers}; feature flags: {flags}",
             f"- reads each row's `source` and `response`, and its task type ({TASK_TYPE_FIELD}) as one of "
             f"{model.task_types}: a row of another type is scored with no task feature set, as no training "
             "record was",
             *([f"- unit encoders: {encoders_fitted}"] if encoders_fitted else []),
             f"- response model: {_response_models(model)}; "
             f"unit model: {'yes' if model.sentence else 'no (no gold spans: none marked)'}",
             f"- decision threshold: {model.threshold:.4f} ({spec.threshold_source}); span threshold "
             f"{model.span_threshold:.4f}" + (f", token threshold {model.token_threshold:.4f}"
                                               if c.encoder_token_spans != "whole_units" else ""),
             "", "## Cross-validated evaluation of this recipe", "",
             held_out.strip() if held_out else "Not cross-validated (the run that wrote it scored one test split).",
             "", "## Use", "", "```bash", "python -m eval.annotate model=THIS_DIR input=IN.jsonl output=OUT.jsonl",
             "```", "", f"Everything it needs is in `{MODEL_FILE}` (numbers and word counts as JSON) and "
             "`annotator.json`."]
    (out / CARD_FILE).write_text("\n".join(lines) + "\n", encoding="utf-8")


class GroundingAnnotator:
    """A grounding export as `eval.annotate`'s predictor: one row per record, as `eval/run.py` wrote it, with
    the probabilities a head's row carries (`probs`), so the scorers read it as they read a head's."""

    tokenizer = None          # it reads words, not tokens: no prompt length to check

    def __init__(self, path: str | Path):
        self.model = GroundingModel.load(Path(path) / MODEL_FILE)
        self.kind = kind_of("discriminative")
        self.threshold = self.model.threshold

    def rows(self, records: list[dict], progress: bool | None = None) -> list[dict]:
        rows = []
        for rec in records:
            row = self.model.predict(rec)
            rows.append({**row, "probs": [1 - row["score"], row["score"]]})
        return rows
