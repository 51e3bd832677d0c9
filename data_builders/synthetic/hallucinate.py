"""The faithful rewrite g_i and one injection rule per hallucination type.

Each rule takes the facts of a unit and the language its books are written in, and returns the
rewrite h_i: the faithful sentences with exactly one sentence changed (or, for event fabrication,
one sentence added), together with that sentence, its correction and a reason. The eight types are
those of LongNovel Appendix A.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from data_builders.synthetic.novel_lexicon import UnitFacts
from data_builders.synthetic.novel_text import TEXTS, ChineseText, EnglishText

Text = ChineseText | EnglishText
CHINESE = TEXTS["zh"]


@dataclass
class Injected:
    sentences: list[str]
    sentence: str
    correction: str
    reason: str


def faithful_sentences(f: UnitFacts, text: Text = CHINESE) -> list[str]:
    """g_i: a paraphrase of the reference summary with the same facts."""
    return text.faithful(f)


def _swap(f: UnitFacts, text: Text, index: int, changed: UnitFacts | str, reason: str) -> Injected:
    good = text.faithful(f)
    sentence = changed if isinstance(changed, str) else text.faithful(changed)[index]
    out = list(good)
    out[index] = sentence
    return Injected(out, sentence, good[index], reason)


def entity(f: UnitFacts, text: Text = CHINESE) -> Injected:
    g = text.faithful(f)
    sentence = g[0].replace(f.a, f.decoy, 1)
    return Injected([sentence] + g[1:], sentence, g[0], text.reason("entity", f))


def numerical(f: UnitFacts, text: Text = CHINESE) -> Injected:
    wrong = f.num + (f.num // 2 + 1 if f.num < 500 else -(f.num // 2))
    return _swap(f, text, 1, replace(f, num=wrong), text.reason("numerical", f))


def relation(f: UnitFacts, text: Text = CHINESE) -> Injected:
    relations = text.lexicon.relations
    wrong = relations[(relations.index(f.rel) + 3) % len(relations)]
    return _swap(f, text, 0, replace(f, rel=wrong), text.reason("relation", f, wrong))


def logical_inversion(f: UnitFacts, text: Text = CHINESE) -> Injected:
    return _swap(f, text, 2, replace(f, agreed=not f.agreed), text.reason("logical_inversion", f))


def event(f: UnitFacts, text: Text = CHINESE) -> Injected:
    verbs = text.lexicon.verbs
    wrong = (f.verb_idx + 1 + f.num % (len(verbs) - 1)) % len(verbs)
    return _swap(f, text, 0, replace(f, verb_idx=wrong), text.reason("event", f, wrong))


def temporal(f: UnitFacts, text: Text = CHINESE) -> Injected:
    first, second = f.errands
    return _swap(f, text, 3, replace(f, errands=(second, first)), text.reason("temporal", f))


def causal(f: UnitFacts, text: Text = CHINESE) -> Injected:
    return _swap(f, text, 4, text.reversed_cause(f), text.reason("causal", f))


def event_fabrication(f: UnitFacts, text: Text = CHINESE) -> Injected:
    g = text.faithful(f)
    sentence, correction = text.fabricated(f)
    return Injected(g[:2] + [sentence] + g[2:], sentence, correction, text.reason("event_fabrication", f))


HALLUCINATION_RULES: dict[str, Callable[..., Injected]] = {
    "entity": entity, "numerical": numerical, "relation": relation,
    "logical_inversion": logical_inversion, "event": event, "temporal": temporal,
    "causal": causal, "event_fabrication": event_fabrication,
}
