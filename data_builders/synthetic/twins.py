"""Hallucinated twins of real faithful responses, with exact spans, and HalluMix's pairings (seed 001).

A twin is a faithful record (label 0) whose response got one edit, marked as its one span:

- `numerical`: a number changed, to another number the source states (a conflict with the source)
  or, where it states none, to a nearby value;
- `temporal`: a year or a month changed (years to another year, month names to another month);
- `entity`: a name changed to another name of the source (English: capitalised words not opening a
  sentence; Chinese: jieba's person / place / organisation words);
- `logical_inversion`: a negation inserted (`is` -> `is not`, `是` -> `不是`);
- `event_fabrication`: a sentence of another record's response inserted (what the source does not say).

HalluMix's pairings: `swapped` pairs a faithful response with another record's source (hallucinated
as a whole), `distractor` appends another record's source to a faithful record's (still faithful).

Everything a twin borrows comes from the records it is given: cross-validation builds twins of a
fold's training part only (`data.synthetic`), so no test source ever reaches training.

    python -m data_builders.synthetic.twins records.jsonl --out twins.jsonl --per-record 1 --swapped 0.2
"""
from __future__ import annotations

import argparse
import logging
import random
import re
import sys
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from data_builders.common.user_errors import reports_user_errors
from data_builders.records import read_records, validate_record, write_jsonl
from data_builders.sentences import sentence_spans

EDITS = ("numerical", "temporal", "entity", "logical_inversion", "event_fabrication")
MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
          "November", "December")
YEAR = re.compile(r"(?<!\d)(1[89]\d\d|20\d\d)(?!\d)")
MONTH = re.compile(r"\b(" + "|".join(MONTHS) + r")\b")
ZH_DATE = re.compile(r"(\d{1,4})(?=[年月日号])")
NUMBER = re.compile(r"(?<![\d.,:])\d+(?:\.\d+)?(?![\d.,:]*\d)")
EN_ENTITY = re.compile(r"(?<=[a-z,;] )[A-Z][a-zA-Z'&-]+(?: [A-Z][a-zA-Z'&-]+)*")
EN_NEGATABLE = re.compile(r"\b(is|are|was|were|can|will|does|did|has|have|should)\b(?! not\b)")
EN_NEGATION = {"can": "cannot"}
ZH_NEGATABLE = re.compile(r"(?<![不没非])(是|有|会|能|可以|应该)")
ZH_NEGATION = {"有": "没有"}
ZH_ENTITY_TAGS = ("nr", "ns", "nt", "nz")


@dataclass(frozen=True)
class Edit:
    start: int
    end: int
    text: str         # what replaces response[start:end]


@dataclass(frozen=True)
class Pool:
    """What a twin may borrow: the sentences of other records' responses, and other records' sources."""
    sentences: dict[str, list[str]]     # language -> sentences of faithful responses
    sources: list[tuple[str, str]]      # (record id, source)


def source_text(rec: dict) -> str:
    return rec.get("source") or "\n\n".join(rec.get("documents") or [])


def _pick(rng: random.Random, options: list):
    return options[rng.randrange(len(options))] if options else None


def number_edit(rec: dict, rng: random.Random) -> Edit | None:
    response = rec["response"]
    hits = [m for m in NUMBER.finditer(response) if not YEAR.fullmatch(m.group())]
    m = _pick(rng, hits)
    if m is None:
        return None
    stated = sorted({n for n in NUMBER.findall(source_text(rec)) if n != m.group() and not YEAR.fullmatch(n)})
    if stated:
        return Edit(m.start(), m.end(), _pick(rng, stated))
    value = float(m.group())
    new = value + rng.choice([-1, 1]) * max(1.0, round(abs(value) * rng.uniform(0.2, 0.5)))
    text = f"{new:g}" if "." in m.group() else str(int(new))
    return Edit(m.start(), m.end(), text) if text != m.group() and not text.startswith("-") else None


def date_edit(rec: dict, rng: random.Random) -> Edit | None:
    response = rec["response"]
    pattern = ZH_DATE if rec.get("language") == "zh" else None
    hits = [("year", m) for m in YEAR.finditer(response)] + [("month", m) for m in MONTH.finditer(response)]
    if pattern is not None:
        hits += [("zh", m) for m in pattern.finditer(response) if not YEAR.fullmatch(m.group(1))]
    picked = _pick(rng, hits)
    if picked is None:
        return None
    kind, m = picked
    if kind == "month":
        text = _pick(rng, [x for x in MONTHS if x != m.group()])
    elif kind == "year":
        text = str(int(m.group()) + rng.choice([-3, -2, -1, 1, 2, 3]))
    else:
        text = str(max(1, int(m.group(1)) + rng.choice([-2, -1, 1, 2])))
        if text == m.group(1):
            return None
    return Edit(m.start(1) if kind == "zh" else m.start(), m.end(1) if kind == "zh" else m.end(), text)


def _zh_entities(text: str) -> list[tuple[int, int, str]]:
    import jieba
    import jieba.posseg as posseg

    jieba.setLogLevel(logging.WARNING)
    out, pos = [], 0
    for pair in posseg.cut(text):
        if pair.flag in ZH_ENTITY_TAGS and len(pair.word) > 1:
            out.append((pos, pos + len(pair.word), pair.word))
        pos += len(pair.word)
    return out


def _entities(text: str, language: str) -> list[tuple[int, int, str]]:
    if language == "zh":
        return _zh_entities(text)
    return [(m.start(), m.end(), m.group()) for m in EN_ENTITY.finditer(text)]


def entity_edit(rec: dict, rng: random.Random) -> Edit | None:
    language = rec.get("language") or "en"
    found = _entities(rec["response"], language)
    picked = _pick(rng, found)
    if picked is None:
        return None
    named = {name for _, _, name in found}
    others = sorted({name for _, _, name in _entities(source_text(rec), language) if name not in named})
    text = _pick(rng, others)
    return Edit(picked[0], picked[1], text) if text else None


def negation_edit(rec: dict, rng: random.Random) -> Edit | None:
    zh = rec.get("language") == "zh"
    m = _pick(rng, list((ZH_NEGATABLE if zh else EN_NEGATABLE).finditer(rec["response"])))
    if m is None:
        return None
    word = m.group()
    text = (ZH_NEGATION.get(word, "不" + word)) if zh else EN_NEGATION.get(word, word + " not")
    return Edit(m.start(), m.end(), text)


def insertion_edit(rec: dict, rng: random.Random, pool: Pool) -> Edit | None:
    language = rec.get("language") or "en"
    foreign = [s for s in pool.sentences.get(language, []) if s not in rec["response"]]
    sentence = _pick(rng, foreign)
    bounds = sentence_spans(rec["response"], language)
    if sentence is None or not bounds:
        return None
    end = _pick(rng, [e for _, e in bounds])
    joiner = "" if language in ("zh", "ja") else " "
    prefix = joiner if end > 0 and not rec["response"][end - 1].isspace() else ""
    return Edit(end, end, prefix + sentence)


EDITORS: dict[str, Callable] = {"numerical": number_edit, "temporal": date_edit, "entity": entity_edit,
                                "logical_inversion": negation_edit}


def apply_edit(rec: dict, edit: Edit, kind: str, tag: str) -> dict:
    """The twin: the edited response, its one span over the new text, label 1."""
    response = rec["response"]
    lead = len(edit.text) - len(edit.text.lstrip())          # an inserted sentence's joining space
    new = response[:edit.start] + edit.text + response[edit.end:]
    span = {"start": edit.start + lead, "end": edit.start + len(edit.text), "type": kind}
    meta = {**(rec.get("meta") or {}), "twin_of": rec["id"], "edit": kind}
    twin = {**rec, "id": f"{rec['id']}~{tag}", "response": new, "label": 1, "spans": [span],
            "hallucination_types": [kind], "meta": meta}
    return validate_record(twin)


def make_pool(records: list[dict]) -> Pool:
    sentences: dict[str, list[str]] = {}
    for rec in records:
        if rec.get("label") == 0:
            language = rec.get("language") or "en"
            sentences.setdefault(language, []).extend(
                rec["response"][a:b].strip() for a, b in sentence_spans(rec["response"], language))
    return Pool({k: sorted(set(v) - {""}) for k, v in sentences.items()},
                [(r["id"], source_text(r)) for r in records])


def twins_of(rec: dict, rng: random.Random, pool: Pool, edits: tuple[str, ...], n: int) -> list[dict]:
    """Up to n twins of one faithful record, each of an edit kind its response allows."""
    out = []
    for kind in rng.sample(list(edits), len(edits)):
        if len(out) == n:
            break
        edit = insertion_edit(rec, rng, pool) if kind == "event_fabrication" else EDITORS[kind](rec, rng)
        if edit is not None and edit.text != rec["response"][edit.start:edit.end]:
            out.append(apply_edit(rec, edit, kind, f"twin-{kind}"))
    return out


def _paired(rec: dict, rng: random.Random, pool: Pool, edit: str, borrowed: str,
            source: Callable[[str], str], **fields) -> dict | None:
    """`rec` with another record's source put to use by `source(that source)`; None when the pool
    has no other source."""
    other = _pick(rng, [(i, s) for i, s in pool.sources if i != rec["id"] and s != source_text(rec)])
    if other is None:
        return None
    meta = {**(rec.get("meta") or {}), "twin_of": rec["id"], "edit": edit, borrowed: other[0]}
    kept = {k: v for k, v in rec.items() if k != "documents"}
    return validate_record({**kept, "id": f"{rec['id']}~{edit}", "source": source(other[1]), "meta": meta,
                            **fields})


def swapped(rec: dict, rng: random.Random, pool: Pool) -> dict | None:
    """HalluMix: a faithful response paired with another record's source, hallucinated as a whole."""
    whole = [{"start": 0, "end": len(rec["response"]), "type": "swapped"}]
    return _paired(rec, rng, pool, "swapped", "source_of", lambda other: other, label=1, spans=whole)


def with_distractor(rec: dict, rng: random.Random, pool: Pool) -> dict | None:
    """HalluMix: another record's source appended to a faithful record's; still faithful."""
    own = source_text(rec)
    return _paired(rec, rng, pool, "distractor", "distractor_of", lambda other: own + "\n\n" + other)


@dataclass(frozen=True)
class SyntheticSettings:
    twins: int = 0                 # twins per faithful record (each of another edit kind)
    swapped: float = 0.0           # share of faithful records also paired with another record's source
    distractor: float = 0.0        # share of faithful records also given a distractor source
    edits: tuple[str, ...] = EDITS
    seed: int = 0


def synthesize(records: list[dict], s: SyntheticSettings) -> tuple[list[dict], Counter]:
    """The synthetic records built from `records` alone, and how many of each kind (and how many
    faithful records allowed no edit)."""
    unknown = sorted(set(s.edits) - set(EDITS))
    if unknown:
        raise ValueError(f"data.synthetic.edits: unknown {unknown}; expected some of {', '.join(EDITS)}")
    rng, pool, out, counts = random.Random(s.seed), make_pool(records), [], Counter()
    for rec in records:
        if rec.get("label") != 0:
            continue
        counts["faithful"] += 1
        made = twins_of(rec, rng, pool, s.edits, s.twins) if s.twins else []
        counts["no_edit"] += bool(s.twins) and not made
        if s.swapped and rng.random() < s.swapped:
            made += [x for x in [swapped(rec, rng, pool)] if x]
        if s.distractor and rng.random() < s.distractor:
            made += [x for x in [with_distractor(rec, rng, pool)] if x]
        counts.update(x["meta"]["edit"] for x in made)
        out += made
    return out, counts


def count_line(counts: Counter) -> str:
    kinds = ", ".join(f"{k} {counts[k]}" for k in (*EDITS, "swapped", "distractor") if counts[k])
    return (f"synthetic: {kinds or 'none'} from {counts['faithful']} faithful records "
            f"({counts['no_edit']} allowed no edit)")


@reports_user_errors("data_builders.synthetic.twins")
def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("records", nargs="+", type=Path, help="record files (JSONL of the shared schema)")
    p.add_argument("--out", type=Path, required=True, help="the synthetic records (JSONL)")
    p.add_argument("--per-record", type=int, default=1, help="twins per faithful record")
    p.add_argument("--swapped", type=float, default=0.0, help="share of faithful records paired with another source")
    p.add_argument("--distractor", type=float, default=0.0, help="share given a distractor source")
    p.add_argument("--edits", nargs="+", default=list(EDITS), help=f"edit kinds, some of {' '.join(EDITS)}")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    records = [rec for path in args.records for rec in read_records(path)]
    made, counts = synthesize(records, SyntheticSettings(args.per_record, args.swapped, args.distractor,
                                                         tuple(args.edits), args.seed))
    write_jsonl(args.out, made)
    print(f"{count_line(counts)}; {len(made)} records written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
