"""Deterministic generator of a small Chinese novel-like corpus.

It follows LongNovel's construction (seed 000, sections 3.1-3.3): books are
split into units; each unit has its source text, a reference summary s_i, a
faithful rewrite g_i and a hallucinated rewrite h_i carrying one rule-injected
hallucination (see `hallucinate.py`), so every label is exact.

The plot of a unit is a small set of facts; the source narrates each fact
among filler sentences, the summaries restate them.
"""
from __future__ import annotations

import random
from dataclasses import asdict, dataclass

from data_builders.hallucinate import HALLUCINATION_RULES, faithful_sentences
from data_builders.novel_lexicon import (
    CAUSES,
    FILLER,
    ITEMS,
    VERBS,
    UnitFacts,
    chinese_number,
    draw_facts,
    make_cast,
)
from data_builders.schema import HALLUCINATION_TYPES


@dataclass
class Unit:
    book_id: str
    unit_index: int
    text: str
    summary: str                  # s_i
    faithful_summary: str         # g_i
    hallucinated_summary: str     # h_i
    hallucination_type: str
    hallucinated_sentence: str
    correction: str
    reason: str
    fact_sentences: list[str]     # the source sentences that state the facts, in summary order

    def to_dict(self) -> dict:
        return asdict(self)


def narrate(f: UnitFacts) -> list[str]:
    """Source sentences that state each fact."""
    mw, item = ITEMS[f.item_idx]
    cause, effect = CAUSES[f.cause_idx]
    decision = "最终答应了下来" if f.agreed else "终究没有答应"
    return [
        f"这一日，{f.a}在{f.place}遇见了{f.b}。{f.b}是{f.a}的{f.rel}，两人{VERBS[f.verb_idx][1]}了许久。",
        f"{f.a}清点行装，带上了{chinese_number(f.num)}{mw}{item}，准备动身。",
        f"{f.a}恳请{f.b}出手相助，{f.b}沉吟片刻，{decision}。",
        f"天亮之后，{f.a}先{f.errands[0]}，随后又{f.errands[1]}。",
        f"那一年{cause}，{effect}，众人议论纷纷。",
    ]


def reference_summary(f: UnitFacts) -> list[str]:
    """s_i: the human-style summary sentences."""
    mw, item = ITEMS[f.item_idx]
    cause, effect = CAUSES[f.cause_idx]
    return [
        f"{f.a}与{f.rel}{f.b}在{f.place}{VERBS[f.verb_idx][0]}。",
        f"{f.a}带着{chinese_number(f.num)}{mw}{item}上路。",
        f"{f.b}{'答应了' if f.agreed else '没有答应'}{f.a}的请求。",
        f"{f.a}先{f.errands[0]}，后{f.errands[1]}。",
        f"因为{cause}，{effect}。",
    ]


def source_text(rng: random.Random, f: UnitFacts, cast: list[str], n_chars: int) -> str:
    """Fact sentences in order, spread among filler until about n_chars."""
    facts = narrate(f)
    filler: list[str] = []
    budget = n_chars - sum(len(s) for s in facts)
    while budget > 0:
        s = rng.choice(FILLER).format(p=f.place, x=rng.choice(cast))
        filler.append(s)
        budget -= len(s)
    slots = sorted(rng.sample(range(len(filler) + 1), len(facts))) if len(filler) + 1 >= len(facts) \
        else list(range(len(facts)))
    out, fi = [], 0
    for k, slot in enumerate(slots):
        out.extend(filler[fi:slot])
        fi = max(fi, slot)
        out.append(facts[k])
    out.extend(filler[fi:])
    paragraphs = ["".join(out[i:i + 6]) for i in range(0, len(out), 6)]
    return "\n".join(paragraphs)


def generate_book(book_index: int, n_units: int, unit_chars: tuple[int, int], seed: int) -> list[Unit]:
    rng = random.Random(f"{seed}-book-{book_index}")
    cast = make_cast(rng, 8)
    book_id = f"book{book_index:03d}"
    units = []
    for i in range(n_units):
        facts = draw_facts(rng, cast)
        text = source_text(rng, facts, cast, rng.randint(*unit_chars))
        htype = HALLUCINATION_TYPES[(book_index * 3 + i) % len(HALLUCINATION_TYPES)]
        injected = HALLUCINATION_RULES[htype](facts)
        units.append(Unit(
            book_id=book_id, unit_index=i, text=text,
            summary="".join(reference_summary(facts)),
            faithful_summary="".join(faithful_sentences(facts)),
            hallucinated_summary="".join(injected.sentences),
            hallucination_type=htype, hallucinated_sentence=injected.sentence,
            correction=injected.correction, reason=injected.reason, fact_sentences=narrate(facts)))
    return units


def generate_corpus(n_books: int = 8, units_per_book: int = 40,
                    unit_chars: tuple[int, int] = (1300, 1700), seed: int = 0) -> list[Unit]:
    """All units of `n_books` books, deterministic in its arguments."""
    return [u for b in range(n_books) for u in generate_book(b, units_per_book, unit_chars, seed)]
