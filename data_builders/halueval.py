"""Importer for HaluEval's released files (qa, dialogue, summarization, general).

qa / dialogue / summarization rows hold a right and a hallucinated output: each row yields a
faithful (label 0) and a hallucinated (label 1) record. general rows carry a yes/no label.
"""
from __future__ import annotations

from pathlib import Path

from data_builders.schema import RecordError, iter_jsonl, validate_record

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


def located_spans(response: str, texts: list) -> list[dict]:
    """general's `hallucination_spans` (texts) with offsets into the response; a text that is not in
    it keeps None offsets."""
    out = []
    for text in texts:
        start = response.find(text) if isinstance(text, str) and text else -1
        out.append({"text": text, "start": start if start >= 0 else None,
                    "end": start + len(text) if start >= 0 else None})
    return out


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
            spans = located_spans(row["chatgpt_response"], row.get("hallucination_spans") or [])
            rows = [{"id": stem, "task": "qa", "language": "en", "source": "", "question": row["user_query"],
                     "response": row["chatgpt_response"], "label": int(flag == "yes"),
                     "hallucinated_sentences": [x["text"] for x in spans], "meta": {"no_source": True, "spans": spans}}]
        else:
            rows = _pair(subset, row, stem)
        records += [validate_record(r, str(path), line) for r in rows]
    return records
