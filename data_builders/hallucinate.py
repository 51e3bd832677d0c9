"""The faithful rewrite g_i and one injection rule per hallucination type.

Each rule takes the facts of a unit and returns the rewrite h_i: the faithful
sentences with exactly one sentence changed (or, for event fabrication, one
sentence added), together with that sentence, its correction and a reason.
The eight types are those of LongNovel Appendix A.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import data_builders.novel_lexicon as nc


@dataclass
class Injected:
    sentences: list[str]
    sentence: str
    correction: str
    reason: str


def faithful_sentences(f) -> list[str]:
    """g_i: a paraphrase of the reference summary with the same facts."""
    mw, item = nc.ITEMS[f.item_idx]
    cause, effect = nc.CAUSES[f.cause_idx]
    return [
        f"在{f.place}，{f.a}和身为其{f.rel}的{f.b}{nc.VERBS[f.verb_idx][0]}。",
        f"上路时，{f.a}携带了{nc.chinese_number(f.num)}{mw}{item}。",
        f"对于{f.a}的请求，{f.b}{'最终答应了' if f.agreed else '并未答应'}。",
        f"{f.a}{f.errands[0]}之后，又{f.errands[1]}。",
        f"{effect}，原因是{cause}。",
    ]


def _swap(f, index: int, changed, reason: str) -> Injected:
    good = faithful_sentences(f)
    bad = faithful_sentences(changed) if not isinstance(changed, str) else None
    sentence = bad[index] if bad else changed
    out = list(good)
    out[index] = sentence
    return Injected(out, sentence, good[index], reason)


def entity(f) -> Injected:
    g = faithful_sentences(f)
    sentence = g[0].replace(f.a, f.decoy, 1)
    out = [sentence] + g[1:]
    return Injected(out, sentence, g[0], f"原文中在{f.place}与{f.b}相见的是{f.a}，不是{f.decoy}。")


def numerical(f) -> Injected:
    wrong = f.num + (f.num // 2 + 1 if f.num < 500 else -(f.num // 2))
    mw, item = nc.ITEMS[f.item_idx]
    return _swap(f, 1, replace(f, num=wrong),
                 f"原文写的是{f.a}带上了{nc.chinese_number(f.num)}{mw}{item}，数量不符。")


def relation(f) -> Injected:
    wrong = nc.RELATIONS[(nc.RELATIONS.index(f.rel) + 3) % len(nc.RELATIONS)]
    return _swap(f, 0, replace(f, rel=wrong), f"原文中{f.b}是{f.a}的{f.rel}，而非{wrong}。")


def logical_inversion(f) -> Injected:
    said = "最终答应了下来" if f.agreed else "终究没有答应"
    return _swap(f, 2, replace(f, agreed=not f.agreed), f"原文中{f.b}{said}，摘要把结论说反了。")


def event(f) -> Injected:
    wrong = (f.verb_idx + 1 + f.num % (len(nc.VERBS) - 1)) % len(nc.VERBS)
    return _swap(f, 0, replace(f, verb_idx=wrong),
                 f"原文中两人是{nc.VERBS[f.verb_idx][1]}，并没有{nc.VERBS[wrong][0]}。")


def temporal(f) -> Injected:
    first, second = f.errands
    return _swap(f, 3, replace(f, errands=(second, first)),
                 f"原文中{f.a}先{first}，随后才{second}，先后顺序被颠倒。")


def causal(f) -> Injected:
    cause, effect = nc.CAUSES[f.cause_idx]
    sentence = f"{cause}，原因是{effect}。"
    return _swap(f, 4, sentence, f"原文中是因为{cause}才导致{effect}，摘要因果倒置。")


def event_fabrication(f) -> Injected:
    g = faithful_sentences(f)
    sentence = f"随后{f.a}又赶往{f.fab_place}，救下了一名落水的孩童。"
    out = g[:2] + [sentence] + g[2:]
    return Injected(out, sentence, "（原文并无此事，应删去该句）",
                    f"原文没有提到{f.a}前往{f.fab_place}或救人的情节，属于虚构事件。")


HALLUCINATION_RULES: dict[str, Callable[..., Injected]] = {
    "entity": entity, "numerical": numerical, "relation": relation,
    "logical_inversion": logical_inversion, "event": event, "temporal": temporal,
    "causal": causal, "event_fabrication": event_fabrication,
}
