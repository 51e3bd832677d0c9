"""What a stage export (`checkpoints/<i>-<stage>/hf/`) carries beside its weights so that it can
be used on its own: `annotator.json` (everything inference needs) and a model card `README.md`.

`python -m eval.annotate model=EXPORT_DIR ...` and `eval.annotate.Annotator.load` read it; a
directory without it is refused with an error that names the file.
"""
from __future__ import annotations

import json
import re
from dataclasses import MISSING, asdict, dataclass, field, fields
from pathlib import Path

import yaml

from models.builders import EMBEDDED_ORIGIN, EMBEDDED_PREFIX
from models.card_usage import usage_snippet
from models.kinds import kind_of

SPEC_FILE = "annotator.json"
CARD_FILE = "README.md"
FORMAT = 1
PIPELINE_TAGS = {"generative": "text-generation", "discriminative": "text-classification",
                 "spans": "token-classification"}


class ExportError(ValueError):
    pass


@dataclass
class AnnotatorSpec:
    kind: str                           # task.kind: generative | discriminative | spans
    head: str                           # task.head (discriminative)
    template: str                       # task.template, with its +marks cue when it has one
    evidence_sentences: int             # > 0: each response sentence against its k best source sentences
    scorer: str                         # task.scorer: how its answers read (longnovel | anah | binary)
    language: str                       # the language of its training records
    max_seq_len: int                    # the longest prompt it was trained on (whole-source: a longer one is refused)
    max_new_tokens: int                 # generative: the answer budget
    labels: list[str]                   # what it tells apart
    threshold: float | None = None      # binary head: the decision threshold
    threshold_source: str | None = None
    thresholds_by: dict | None = None   # {"field": a record path, "values": {value: threshold}} (eval.threshold_by)
    base_model: str = ""
    stage: str = ""
    training: dict = field(default_factory=dict)   # data.source, records
    evidence_unit: str = "sentence"     # what evidence_sentences judges one at a time: sentence | clause
    method: str = "annotator"           # annotator (weights beside it) | grounding (fitted regressions: grounding.json)
    format: int = FORMAT

    def save(self, directory: str | Path) -> None:
        (Path(directory) / SPEC_FILE).write_text(json.dumps(asdict(self), indent=2, ensure_ascii=False) + "\n",
                                                 encoding="utf-8")

    @classmethod
    def load(cls, directory: str | Path) -> AnnotatorSpec:
        path = Path(directory) / SPEC_FILE
        if not Path(directory).is_dir():
            raise ExportError(f"model={directory}: expected an annotator export directory, found none")
        if not path.is_file():
            raise ExportError(f"model={directory}: not an annotator export: {SPEC_FILE} is missing (exports written "
                              "by train/sft.py carry it: <run>/checkpoints/<i>-<stage>/hf)")
        data = json.loads(path.read_text(encoding="utf-8"))
        known = {f.name for f in fields(cls)}
        missing = [f.name for f in fields(cls) if f.name not in data and f.default is MISSING
                   and f.default_factory is MISSING]
        if missing or data.get("format") != FORMAT:
            raise ExportError(f"{path}: expected format {FORMAT} with fields {sorted(known)}; missing {missing}, "
                              f"format {data.get('format')!r}")
        return cls(**{k: v for k, v in data.items() if k in known})


def _base_origin(base_model: str) -> tuple[str | None, str | None]:
    """(Hub repository, licence) of the base model: an embedded one's, or what a local directory's own
    card says (`base_model` is the directory's name there only when its card names none)."""
    if base_model.startswith(EMBEDDED_PREFIX):
        return EMBEDDED_ORIGIN.get(base_model[len(EMBEDDED_PREFIX):], (None, None))
    card = Path(base_model) / CARD_FILE
    meta = {}
    if card.is_file():
        m = re.match(r"---\n(.*?)\n---", card.read_text(encoding="utf-8", errors="ignore"), re.S)
        meta = (yaml.safe_load(m.group(1)) if m else None) or {}
    repo = meta.get("base_model") if isinstance(meta.get("base_model"), str) else None
    return repo, meta.get("license") if isinstance(meta.get("license"), str) else None


def hub_metadata(spec: AnnotatorSpec, scores: dict[str, float] | None = None) -> dict:
    """The card's YAML front matter as the Hugging Face Hub reads it: pipeline, base model, licence,
    training data, and the held-out scores as `model-index`."""
    tag = PIPELINE_TAGS[spec.kind]
    repo, licence = _base_origin(spec.base_model)
    source = str(spec.training.get("source") or "unknown")
    meta = {"library_name": "transformers", "pipeline_tag": tag, "tags": ["hallucination-detection", spec.kind],
            "language": [spec.language], "datasets": [source]}
    meta |= {"base_model": repo} if repo else {}
    meta |= {"license": licence} if licence else {}
    if scores:
        meta["model-index"] = [{"name": f"hallucination annotator ({spec.kind}, {spec.stage})", "results": [{
            "task": {"type": tag, "name": "hallucination detection"},
            "dataset": {"type": source, "name": source, "split": "test"},
            "metrics": [{"type": k, "name": k, "value": round(float(v), 4)} for k, v in scores.items()]}]}]
    return meta


def write_model_card(directory: str | Path, spec: AnnotatorSpec, held_out: str | None = None,
                     scores: dict[str, float] | None = None) -> None:
    """The export's README.md: Hub metadata, what it is, what it was trained on, how it scored, how to
    run it."""
    front = yaml.safe_dump(hub_metadata(spec, scores), sort_keys=False, allow_unicode=True).strip()
    lines = ["---", front, "---", "", f"# Hallucination annotator: {kind_of(spec).card_title(spec)}", "",
             f"- base model: `{spec.base_model}`; curriculum stage `{spec.stage}`",
             f"- training data: `{spec.training.get('source', '?')}`, {spec.training.get('records', '?')} records "
             f"({spec.language})",
             f"- prompt: `{spec.template}`" + (f", {spec.evidence_unit} by {spec.evidence_unit} against the "
                                               f"{spec.evidence_sentences} best-matching source sentences"
                                               if spec.evidence_sentences else
                                               f", the whole source (at most {spec.max_seq_len:,} tokens)"),
             f"- labels: {', '.join(spec.labels)}"]
    if spec.threshold is not None:
        lines.append(f"- decision threshold: {spec.threshold:.4f} ({spec.threshold_source})")
    if spec.thresholds_by:
        by = ", ".join(f"{k} {v:.4f}" for k, v in spec.thresholds_by["values"].items())
        lines.append(f"- decision thresholds by `{spec.thresholds_by['field']}`: {by} (the others: the one above)")
    lines += ["", "## Held-out evaluation", "",
              held_out.strip() if held_out else "Not evaluated at this stage (the run's final export carries it).",
              "", "## Use", "", "```bash",
              "python -m eval.annotate model=THIS_DIR input=IN.jsonl output=OUT.jsonl", "```", "",
              "Input rows: `{\"id\"?, \"source\" | \"documents\", \"response\", \"question\"?}`. "
              f"Everything the annotator needs is in `{SPEC_FILE}`.", "",
              "From Python, with `transformers`:", "", "```python", usage_snippet(spec, directory).rstrip(), "```"]
    (Path(directory) / CARD_FILE).write_text("\n".join(lines) + "\n", encoding="utf-8")
