"""Importer for HaluEval's released files (qa, dialogue, summarization, general).

qa / dialogue / summarization rows hold a right and a hallucinated output: each row yields a
faithful (label 0) and a hallucinated (label 1) record. general rows carry a yes/no label.
"""
from __future__ import annotations

import logging
from pathlib import Path

from data_builders.importers.registry import Splits, importer, one_split
from data_builders.records import RecordError, iter_jsonl, validate_record
from data_builders.span_offsets import find_span, span

logger = logging.getLogger(__name__)

FIELDS = {
    "qa": ("knowledge", "question", "right_answer", "hallucinated_answer"),
    "dialogue": ("knowledge", "dialogue_history", "right_response", "hallucinated_response"),
    "summarization": ("document", "right_summary", "hallucinated_summary"),
    "general": ("user_query", "chatgpt_response", "hallucination"),
}


def _pair(subset: str, row: dict, stem: str) -> list[dict]:
    if subset == "summarization":
        base = {"task": "summarization", "source": row["document"]}
        right, wrong = "right_summary", "hallucinated_summary"
    elif subset == "qa":
        base = {"task": "qa", "source": row["knowledge"], "question": row["question"]}
        right, wrong = "right_answer", "hallucinated_answer"
    else:
        base = {"task": "dialogue", "source": row["knowledge"], "question": row["dialogue_history"]}
        right, wrong = "right_response", "hallucinated_response"
    return [{**base, "id": f"{stem}-r", "language": "en", "response": row[right], "label": 0},
            {**base, "id": f"{stem}-h", "language": "en", "response": row[wrong], "label": 1}]


def located_spans(response: str, texts: list) -> tuple[list[dict], list]:
    """general's `hallucination_spans` (texts) as record spans of the response, and the texts that
    do not occur in it."""
    spans, missing = [], []
    for text in texts:
        bounds = find_span(response, text)
        if bounds is None:
            missing.append(text)
        else:
            spans.append(span(bounds, text=text))
    return spans, missing


def import_halueval(path: str | Path, subset: str) -> list[dict]:
    if subset not in FIELDS:
        raise ValueError(f"HaluEval subset: expected one of {sorted(FIELDS)}, found {subset!r}")
    path, records = Path(path), []
    for line, row in iter_jsonl(path):
        for name in FIELDS[subset]:
            if name not in row:
                raise RecordError("missing required field", str(path), line, name)
        stem = f"halueval-{subset}-{path.stem}-{row.get('ID', line)}"   # the file's name keeps two files apart
        if subset == "general":
            flag = str(row["hallucination"]).strip().lower()
            if flag not in ("yes", "no"):
                raise RecordError(f"expected 'yes' or 'no', found {row['hallucination']!r}", str(path), line,
                                  "hallucination")
            texts = row.get("hallucination_spans") or []
            spans, missing = located_spans(row["chatgpt_response"], texts)
            rows = [{"id": stem, "task": "qa", "language": "en", "source": "", "question": row["user_query"],
                     "response": row["chatgpt_response"], "label": int(flag == "yes"), "spans": spans,
                     "hallucinated_sentences": [t for t in texts if isinstance(t, str)],
                     "meta": {"no_source": True, "unlocated_spans": len(missing)}}]
        else:
            rows = _pair(subset, row, stem)
        records += [validate_record(r, str(path), line) for r in rows]
    return records


HALUEVAL_FILES = {"qa_data": "qa", "dialogue_data": "dialogue", "summarization_data": "summarization",
                  "general_data": "general"}


def halueval_subset(args) -> str:
    """--subset, or the one HaluEval's released file names imply (qa_data.json -> qa)."""
    if args.subset:
        return args.subset
    implied = {HALUEVAL_FILES.get(Path(p).stem) for p in args.inputs}
    if len(implied) != 1 or None in implied:
        raise ValueError(f"halueval: pass --subset qa|dialogue|summarization|general; it cannot be told from "
                         f"the file names {[Path(p).name for p in args.inputs]}")
    subset = implied.pop()
    logger.warning(f"halueval: --subset {subset} (from the file name)")
    return subset


def _arguments(parser) -> None:
    parser.add_argument("--subset", choices=sorted(set(HALUEVAL_FILES.values())),
                        help="which file (default: from HaluEval's released file names)")


@importer("halueval", "HaluEval's data/{qa,dialogue,summarization,general}_data.json", _arguments)
def convert_halueval(args) -> tuple[Splits, str]:
    subset = halueval_subset(args)
    return one_split([r for p in args.inputs for r in import_halueval(p, subset)], args.split)
