"""Importer for UHGEval (IAAR-Shanghai/UHGEval, `dataset_uhgeval_{concise,full}.jsonl`): Chinese news
beginnings, an LLM's continuation, and its annotated keywords (`keyword<sep>合理`, or `keyword<sep>不合理...`
with the reason). A record's source is the headline, date and beginning as UHGEval's prompts show
them; its response is the continuation; its `spans` are the unreasonable keywords.

UHGEval's labels are about the real-world truth of a continuation (a made-up minister, a wrong
date), not only its faithfulness to the beginning: a keyword can be unreasonable although the
beginning says nothing about it.
"""
from __future__ import annotations

from functools import cache
from importlib import resources
from pathlib import Path

from data_builders.importers.registry import Splits, importer, one_split
from data_builders.records import RecordError, iter_jsonl, validate_record
from data_builders.span_offsets import find_span, span

REQUIRED = ("id", "headLine", "broadcastDate", "newsBeginning", "hallucinatedContinuation", "annotations")
SEP, UNREASONABLE = "<sep>", "不合理"


def uhgeval_source(row: dict) -> str:
    return f"《{row['headLine']}》\n{row['broadcastDate']}\n{row['newsBeginning']}"


@cache
def _keyword_prompt() -> str:
    return resources.files("data_builders.prompt_texts").joinpath("uhgeval_is_kw_hallucinated.txt").read_text(
        encoding="utf-8")


def keyword_messages(record: dict) -> list[dict]:
    """UHGEval's keyword question as its repository asks it: three worked examples, then the news beginning
    (headline, date and beginning joined by a written backslash-n, as its template has them), the
    continuation, and the keyword in triple quotes, which the answer completes. The keyword is
    `meta.keyword` of a unit record (eval/aggregation/by_keyword.py); a source not in `uhgeval_source`'s shape goes
    in whole as the headline."""
    keyword = (record.get("meta") or {}).get("keyword")
    if not keyword:
        raise ValueError(f"record {record.get('id')!r}: the uhgeval_keyword template needs meta.keyword, the keyword "
                         f"to judge")
    parts = record["source"].split("\n", 2)
    headline, date, beginning = ((parts[0][1:-1], parts[1], parts[2])
                                 if len(parts) == 3 and parts[0].startswith("《") and parts[0].endswith("》")
                                 else (record["source"], "", ""))
    text = (_keyword_prompt().replace("[HEADLINE]", headline).replace("[DATE]", date)
            .replace("[BEGINNING]", beginning).replace("[CONTINUATION]", record["response"])
            .replace("[KEYWORD]", keyword))
    return [{"role": "user", "content": text}]


def keywords(row: dict, path: str, line: int) -> list[dict]:
    """The annotated keywords in order, each located in the continuation: its first occurrence after the
    previous keyword (the annotations follow the text), else its first occurrence; None where absent."""
    out, after = [], 0
    response = row["hallucinatedContinuation"]
    for i, item in enumerate(row["annotations"]):
        if not isinstance(item, str) or SEP not in item:
            raise RecordError(f"annotations[{i}]: expected 'keyword{SEP}judgement', found {item!r:.60}", path, line,
                              "annotations")
        text, judgement = item.split(SEP, 1)
        bounds = find_span(response, text, after=after)
        if bounds is not None:
            after = bounds[1]
        out.append({"text": text, "hallucinated": judgement.startswith(UNREASONABLE), "judgement": judgement,
                    "start": bounds[0] if bounds else None, "end": bounds[1] if bounds else None})
    return out


def import_uhgeval(path: str | Path) -> list[dict]:
    path, records = Path(path), []
    for line, row in iter_jsonl(path):
        for name in REQUIRED:
            if not isinstance(row, dict) or name not in row:
                raise RecordError("missing required field", str(path), line, name)
        if not isinstance(row["annotations"], list):
            raise RecordError("expected a list of 'keyword<sep>judgement'", str(path), line, "annotations")
        kws = keywords(row, str(path), line)
        bad = [k for k in kws if k["hallucinated"]]
        rec = {"id": f"uhgeval-{row['id']}", "task": "continuation", "language": "zh", "source": uhgeval_source(row),
               "response": row["hallucinatedContinuation"], "label": int(bool(bad)),
               "spans": [span((k["start"], k["end"]), type="unreasonable", text=k["text"])
                         for k in bad if k["start"] is not None],
               "hallucinated_sentences": [k["text"] for k in bad],
               "meta": {"keywords": kws, "unlocated_spans": sum(k["start"] is None for k in bad),
                        "generated_by": row.get("generatedBy"), "news_type": row.get("type")}}
        records.append(validate_record(rec, str(path), line))
    if not records:
        raise RecordError("no items: the file is empty", str(path), None)
    return records


@importer("uhgeval", "UHGEval's dataset_uhgeval_concise.jsonl")
def convert_uhgeval(args) -> tuple[Splits, str]:
    return one_split([r for p in args.inputs for r in import_uhgeval(p)], args.split)
