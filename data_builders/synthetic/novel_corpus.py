"""Deterministic generator of a small novel-like corpus, in Chinese (LongNovel's language) or English.

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

from data_builders.records import HALLUCINATION_TYPES
from data_builders.synthetic.hallucinate import HALLUCINATION_RULES
from data_builders.synthetic.novel_lexicon import UnitFacts, draw_facts, make_cast
from data_builders.synthetic.novel_text import TEXTS, ChineseText, EnglishText


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
    language: str = "zh"

    def to_dict(self) -> dict:
        return asdict(self)


def source_text(rng: random.Random, f: UnitFacts, cast: list[str], n_chars: int,
                text: ChineseText | EnglishText = TEXTS["zh"]) -> str:
    """Fact sentences in order, spread among filler until about n_chars."""
    facts = text.narrate(f)
    filler: list[str] = []
    budget = n_chars - sum(len(s) for s in facts)
    while budget > 0:
        s = rng.choice(text.lexicon.filler).format(p=f.place, x=rng.choice(cast))
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
    paragraphs = [text.sentence_joiner.join(out[i:i + 6]) for i in range(0, len(out), 6)]
    return "\n".join(paragraphs)


def generate_book(book_index: int, n_units: int, unit_chars: tuple[int, int], seed: int,
                  language: str = "zh") -> list[Unit]:
    text = TEXTS[language]
    rng = random.Random(f"{seed}-book-{book_index}")
    cast = make_cast(rng, 8, text.lexicon)
    book_id = f"book{book_index:03d}"
    join = text.sentence_joiner.join
    units = []
    for i in range(n_units):
        facts = draw_facts(rng, cast, text.lexicon)
        source = source_text(rng, facts, cast, rng.randint(*unit_chars), text)
        htype = HALLUCINATION_TYPES[(book_index * 3 + i) % len(HALLUCINATION_TYPES)]
        injected = HALLUCINATION_RULES[htype](facts, text)
        units.append(Unit(
            book_id=book_id, unit_index=i, text=source,
            summary=join(text.reference(facts)),
            faithful_summary=join(text.faithful(facts)),
            hallucinated_summary=join(injected.sentences),
            hallucination_type=htype, hallucinated_sentence=injected.sentence,
            correction=injected.correction, reason=injected.reason, fact_sentences=text.narrate(facts),
            language=language))
    return units


def generate_corpus(n_books: int = 8, units_per_book: int = 40, unit_chars: tuple[int, int] = (1300, 1700),
                    seed: int = 0, language: str = "zh") -> list[Unit]:
    """All units of `n_books` books in `language` (zh, or en), deterministic in its arguments."""
    return [u for b in range(n_books) for u in generate_book(b, units_per_book, unit_chars, seed, language)]
