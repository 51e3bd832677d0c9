"""UHGEval's keyword-level judge (`task.template=uhgeval_keyword`, `+exp=uhgeval_judge`): a model asked,
keyword by keyword, whether each of a continuation's annotated keywords is true to reality, as UHGEval's
`DiscriminativeEvaluatorKeywordLevel` asks it. Only the keywords UHGEval's metric reads are asked about: per
item, the first N unreasonable and the first N reasonable ones (`balanced_keywords`). A record's row keeps
every answer, its reading (1, 0, or None when it starts with neither "不符合现实" nor "符合现实") and, as
`spans`, the keywords judged unreasonable where the continuation holds them."""
from __future__ import annotations

from eval.aggregation.by_sentence import token_usage
from eval.scorers.parsers import parse_uhgeval_keyword_answer
from eval.scorers.uhgeval_keywords import balanced_keywords


def keyword_units(record: dict) -> list[dict]:
    """One record per keyword to judge: the item's source and continuation, the keyword in `meta`."""
    chosen = balanced_keywords((record.get("meta") or {}).get("keywords") or [])
    return [{"id": f"{record['id']}#k{i}", "task": record.get("task"), "language": record.get("language", "zh"),
             "source": record["source"], "response": record["response"],
             "meta": {"record": record["id"], "keyword": k["text"], "start": k["start"], "end": k["end"]}}
            for i, k in enumerate(chosen)]


def keyword_row(record_id: str, units: list[dict], rows: list[dict]) -> dict:
    """The record's row from its keywords' answers, in keyword order (no keyword to judge: no span, label 0)."""
    labels = [parse_uhgeval_keyword_answer(row.get("output"), unit["meta"]["keyword"])
              for unit, row in zip(units, rows)]
    return {"id": record_id, "keywords": [u["meta"]["keyword"] for u in units], "keyword_labels": labels,
            "keyword_outputs": [r.get("output") for r in rows],
            "label": 1 if 1 in labels else None if None in labels else 0,
            "spans": [[u["meta"]["start"], u["meta"]["end"]] for u, label in zip(units, labels)
                      if label == 1 and u["meta"]["start"] is not None], **token_usage(rows)}
