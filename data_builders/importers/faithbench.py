"""Importer for FaithBench (vectara/FaithBench, `data_for_release/batch_<k>.json`).

A batch is `{"samples": [...]}` (or a bare list); a sample has `sample_id`, `source`, `summary`,
`annotations` (span annotations by several annotators, each with a list of `label`s such as
`Unwanted`, `Unwanted.Intrinsic`, `Unwanted.Extrinsic`, `Questionable`, `Benign`) and
`metadata` (or flat `meta_*` keys). The sample label follows the benchmark's own binarisation:
pool the labels of all annotations by severity (worst by default) and call the sample
hallucinated when the pooled label is in `hallucinated` (default: Questionable and Unwanted).
"""
from __future__ import annotations

import json
from pathlib import Path

from data_builders.importers.registry import Splits, importer, one_split
from data_builders.records import RecordError, validate_record
from data_builders.span_offsets import find_span, span

SEVERITY = {"Benign": 1, "Questionable": 2, "Unwanted": 3}
DEFAULT_HALLUCINATED = ("Questionable", "Unwanted")
POOLING = ("worst", "best", "majority")
# The detectors whose per-item outputs each released sample carries: a factual-consistency score in
# [0, 1] (HHEM), or 1 (consistent) / 0 (hallucinated)
DETECTORS = ("hhemv1", "hhem-2.1", "hhem-2.1-english", "trueteacher", "true_nli", "gpt-3.5-turbo", "gpt-4-turbo",
             "gpt_4o")


def _label_class(label: str) -> str | None:
    """'Unwanted.Intrinsic' -> 'Unwanted'; also accepts the released typo 'Unwanted.Instrinsic'."""
    head = label.split(".")[0].strip()
    return head if head in SEVERITY else None


def pooled_label(labels: list[str], pooling: str = "worst") -> str | None:
    """The sample-level class, or None when nobody annotated a span (consistent)."""
    if not labels:
        return None
    severities = [SEVERITY[_label_class(x)] for x in labels]
    if pooling == "worst":
        chosen = max(severities)
    elif pooling == "best":
        chosen = min(severities)
    else:
        chosen = max(set(severities), key=lambda s: (severities.count(s), s))
    return next(name for name, s in SEVERITY.items() if s == chosen)


def _samples(path: Path) -> list:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise RecordError(f"malformed JSON ({e.msg} at line {e.lineno})", str(path), e.lineno) from None
    samples = data.get("samples") if isinstance(data, dict) else data
    if not isinstance(samples, list):
        raise RecordError("expected a list of samples or an object with 'samples'", str(path), None, "samples")
    return samples


def _sample_labels(sample: dict, path: str, where: str) -> list[str]:
    labels = []
    for a in sample.get("annotations") or []:
        for label in a.get("label") or []:
            if not isinstance(label, str) or _label_class(label) is None:
                raise RecordError(f"{where}: expected labels in {sorted(SEVERITY)} (optionally '.Intrinsic' / "
                                  f"'.Extrinsic'), found {label!r}", path, None, "annotations.label")
            labels.append(label)
    return labels


def _faithfulness(labels: list[str], hallucinated: bool) -> list[str]:
    if not hallucinated:
        return ["faithful"]
    subtypes = [x.split(".", 1)[1].lower() for x in labels if "." in x]
    kinds = {"intrinsic" if s.startswith("in") else "extrinsic" for s in subtypes}   # 'Instrinsic' typo too
    return sorted(kinds)


def _annotation_spans(sample: dict, response: str, lead: int) -> tuple[list[dict], int]:
    """Every annotation's span as a record span (`type`: its most specific label, e.g.
    'Unwanted.Intrinsic'; `text`, `note`): the released offsets index the raw summary, whose leading
    whitespace the record drops, so they are shifted; where they do not point at the span's text,
    its first occurrence is taken. Also how many spans are not in the response."""
    spans, missing = [], 0
    for a in sample.get("annotations") or []:
        text, start = a.get("summary_span"), a.get("summary_start")
        bounds = find_span(response, text, start - lead if isinstance(start, int) else None)
        if bounds is None:
            missing += 1
            continue
        labels = a.get("label") or []
        spans.append(span(bounds, type=labels[-1] if labels else None, text=text, note=a.get("note")))
    return spans, missing


def import_faithbench(path: str | Path, pooling: str = "worst",
                      hallucinated: tuple[str, ...] = DEFAULT_HALLUCINATED) -> list[dict]:
    if pooling not in POOLING:
        raise ValueError(f"FaithBench pooling: expected one of {list(POOLING)}, found {pooling!r}")
    bad = [h for h in hallucinated if h not in SEVERITY]
    if bad:
        raise ValueError(f"FaithBench hallucinated classes: expected values in {sorted(SEVERITY)}, found {bad}")
    path, records = Path(path), []
    for i, sample in enumerate(_samples(path)):
        where = f"sample {i}"
        for name in ("sample_id", "source", "summary"):
            if not isinstance(sample, dict) or name not in sample:
                raise RecordError(f"{where}: missing required field", str(path), None, name)
        labels = _sample_labels(sample, str(path), where)
        pooled = pooled_label(labels, pooling)
        label = int(pooled in hallucinated)
        meta = sample.get("metadata") or {k[5:]: v for k, v in sample.items() if k.startswith("meta_")}
        response = sample["summary"].strip()
        lead = len(sample["summary"]) - len(sample["summary"].lstrip())
        annotated, missing = _annotation_spans(sample, response, lead)
        spans = [x for x in annotated if _label_class(x["type"] or "") in hallucinated]
        rec = {"id": f"faithbench-{path.stem}-{sample['sample_id']}", "task": "summarization", "language": "en",
               "source": sample["source"], "response": response, "label": label, "spans": spans,
               "faithfulness_labels": _faithfulness(labels, bool(label)),
               "hallucinated_sentences": sorted({x["text"] for x in spans}),
               "meta": {"pooled_label": pooled or "Consistent", "other_spans": [x for x in annotated if x not in spans],
                        "unlocated_spans": missing,
                        "summarizer": meta.get("summarizer") or meta.get("model"), "batch": path.stem,
                        "detectors": {k: meta[k] for k in DETECTORS if k in meta}}}
        records.append(validate_record(rec, str(path), None))
    return records


def _arguments(parser) -> None:
    parser.add_argument("--pooling", default="worst", choices=POOLING,
                        help="how the annotators' labels of a summary pool into one (default: worst)")


@importer("faithbench", "FaithBench's data_for_release/batch_*.json", _arguments)
def convert_faithbench(args) -> tuple[Splits, str]:
    return one_split([r for p in args.inputs for r in import_faithbench(p, args.pooling)], args.split)
