"""The sentences of the synthetic novel corpus in each of its languages: how the source narrates a
unit's facts, how the reference summary s_i and the faithful rewrite g_i restate them, and the words
the injection rules (`hallucinate.py`) need (a fabricated event, a reversed cause, each type's reason).

Both languages tell the same facts in the same places, so an English book and a Chinese book of one
seed differ in their words only where their lexicons differ in size.
"""
from __future__ import annotations

from data_builders.synthetic.novel_lexicon import EN, ZH, Lexicon, UnitFacts, chinese_number


class ChineseText:
    lexicon: Lexicon = ZH
    sentence_joiner = ""

    def number(self, n: int) -> str:
        return chinese_number(n)

    def narrate(self, f: UnitFacts) -> list[str]:
        """Source sentences that state each fact."""
        mw, item = ZH.items[f.item_idx]
        cause, effect = ZH.causes[f.cause_idx]
        decision = "最终答应了下来" if f.agreed else "终究没有答应"
        return [
            f"这一日，{f.a}在{f.place}遇见了{f.b}。{f.b}是{f.a}的{f.rel}，两人{ZH.verbs[f.verb_idx][1]}了许久。",
            f"{f.a}清点行装，带上了{chinese_number(f.num)}{mw}{item}，准备动身。",
            f"{f.a}恳请{f.b}出手相助，{f.b}沉吟片刻，{decision}。",
            f"天亮之后，{f.a}先{f.errands[0]}，随后又{f.errands[1]}。",
            f"那一年{cause}，{effect}，众人议论纷纷。",
        ]

    def reference(self, f: UnitFacts) -> list[str]:
        """s_i: the human-style summary sentences."""
        mw, item = ZH.items[f.item_idx]
        cause, effect = ZH.causes[f.cause_idx]
        return [
            f"{f.a}与{f.rel}{f.b}在{f.place}{ZH.verbs[f.verb_idx][0]}。",
            f"{f.a}带着{chinese_number(f.num)}{mw}{item}上路。",
            f"{f.b}{'答应了' if f.agreed else '没有答应'}{f.a}的请求。",
            f"{f.a}先{f.errands[0]}，后{f.errands[1]}。",
            f"因为{cause}，{effect}。",
        ]

    def faithful(self, f: UnitFacts) -> list[str]:
        """g_i: a paraphrase of the reference summary with the same facts."""
        mw, item = ZH.items[f.item_idx]
        cause, effect = ZH.causes[f.cause_idx]
        return [
            f"在{f.place}，{f.a}和身为其{f.rel}的{f.b}{ZH.verbs[f.verb_idx][0]}。",
            f"上路时，{f.a}携带了{chinese_number(f.num)}{mw}{item}。",
            f"对于{f.a}的请求，{f.b}{'最终答应了' if f.agreed else '并未答应'}。",
            f"{f.a}{f.errands[0]}之后，又{f.errands[1]}。",
            f"{effect}，原因是{cause}。",
        ]

    def reversed_cause(self, f: UnitFacts) -> str:
        cause, effect = ZH.causes[f.cause_idx]
        return f"{cause}，原因是{effect}。"

    def fabricated(self, f: UnitFacts) -> tuple[str, str]:
        """An event the source never tells, and its correction."""
        return f"随后{f.a}又赶往{f.fab_place}，救下了一名落水的孩童。", "（原文并无此事，应删去该句）"

    def reason(self, htype: str, f: UnitFacts, wrong=None) -> str:
        """Why the injected sentence of `htype` is wrong (`wrong`: the value the rule put in)."""
        mw, item = ZH.items[f.item_idx]
        cause, effect = ZH.causes[f.cause_idx]
        first, second = f.errands
        return {
            "entity": lambda: f"原文中在{f.place}与{f.b}相见的是{f.a}，不是{f.decoy}。",
            "numerical": lambda: f"原文写的是{f.a}带上了{chinese_number(f.num)}{mw}{item}，数量不符。",
            "relation": lambda: f"原文中{f.b}是{f.a}的{f.rel}，而非{wrong}。",
            "logical_inversion": lambda: f"原文中{f.b}{'最终答应了下来' if f.agreed else '终究没有答应'}，"
                                         "摘要把结论说反了。",
            "event": lambda: f"原文中两人是{ZH.verbs[f.verb_idx][1]}，并没有{ZH.verbs[wrong][0]}。",
            "temporal": lambda: f"原文中{f.a}先{first}，随后才{second}，先后顺序被颠倒。",
            "causal": lambda: f"原文中是因为{cause}才导致{effect}，摘要因果倒置。",
            "event_fabrication": lambda: f"原文没有提到{f.a}前往{f.fab_place}或救人的情节，属于虚构事件。",
        }[htype]()


def _capital(text: str) -> str:
    return text[:1].upper() + text[1:]


class EnglishText:
    lexicon: Lexicon = EN
    sentence_joiner = " "

    def number(self, n: int) -> str:
        return str(n)

    def narrate(self, f: UnitFacts) -> list[str]:
        _, item = EN.items[f.item_idx]
        cause, effect = EN.causes[f.cause_idx]
        decision = "finally agreed" if f.agreed else "in the end refused"
        return [
            f"That day {f.a} met {f.b} at {f.place}. {f.b} is the {f.rel} of {f.a}, and the two of them "
            f"{EN.verbs[f.verb_idx][1]} for a long while.",
            f"{f.a} checked the baggage and packed {f.num} {item} for the journey.",
            f"{f.a} begged {f.b} for help, and after a moment's thought {f.b} {decision}.",
            f"After daybreak {f.a} first {f.errands[0]}, and then {f.errands[1]}.",
            f"That year {cause}, so {effect}, and everyone talked about it.",
        ]

    def reference(self, f: UnitFacts) -> list[str]:
        _, item = EN.items[f.item_idx]
        cause, effect = EN.causes[f.cause_idx]
        return [
            f"{f.a} {EN.verbs[f.verb_idx][0]} {f.b}, the {f.rel} of {f.a}, at {f.place}.",
            f"{f.a} set out with {f.num} {item}.",
            f"{f.b} {'agreed to' if f.agreed else 'turned down'} the request of {f.a}.",
            f"{f.a} first {f.errands[0]}, then {f.errands[1]}.",
            f"Because {cause}, {effect}.",
        ]

    def faithful(self, f: UnitFacts) -> list[str]:
        _, item = EN.items[f.item_idx]
        cause, effect = EN.causes[f.cause_idx]
        return [
            f"At {f.place}, {f.a} {EN.verbs[f.verb_idx][0]} {f.b}, who is the {f.rel} of {f.a}.",
            f"When setting out, {f.a} carried {f.num} {item}.",
            f"As for the request of {f.a}, {f.b} {'finally agreed' if f.agreed else 'did not agree'}.",
            f"After {f.a} {f.errands[0]}, {f.a} {f.errands[1]}.",
            f"{_capital(effect)}, because {cause}.",
        ]

    def reversed_cause(self, f: UnitFacts) -> str:
        cause, effect = EN.causes[f.cause_idx]
        return f"{_capital(cause)}, because {effect}."

    def fabricated(self, f: UnitFacts) -> tuple[str, str]:
        return (f"Then {f.a} hurried to {f.fab_place} and pulled a drowning child out of the water.",
                "(the source tells no such event: the sentence should be removed)")

    def reason(self, htype: str, f: UnitFacts, wrong=None) -> str:
        _, item = EN.items[f.item_idx]
        cause, effect = EN.causes[f.cause_idx]
        first, second = f.errands
        return {
            "entity": lambda: f"In the source it is {f.a}, not {f.decoy}, who meets {f.b} at {f.place}.",
            "numerical": lambda: f"The source says {f.a} packed {f.num} {item}: the number is wrong.",
            "relation": lambda: f"In the source {f.b} is the {f.rel} of {f.a}, not the {wrong}.",
            "logical_inversion": lambda: f"In the source {f.b} {'finally agreed' if f.agreed else 'refused'}: the "
                                         "summary turns the outcome around.",
            "event": lambda: f"In the source the two {EN.verbs[f.verb_idx][1]}: the summary's "
                             f"\"{EN.verbs[wrong][0]}\" is not what happened.",
            "temporal": lambda: f"In the source {f.a} first {first} and only then {second}: the order is reversed.",
            "causal": lambda: f"In the source {cause}, and that is why {effect}: cause and effect are swapped.",
            "event_fabrication": lambda: f"The source never tells of {f.a} going to {f.fab_place} or saving "
                                         "anyone: the event is made up.",
        }[htype]()


TEXTS = {"zh": ChineseText(), "en": EnglishText()}
