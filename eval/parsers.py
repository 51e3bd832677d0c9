"""Parsers of raw model outputs."""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from data_builders.prompts import FAITHFUL, HALLUCINATED, TYPE_ZH, ZH_TYPE

_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.S)
_TRUE = {HALLUCINATED, "是", "yes", "true", "hallucinated", True}
_FALSE = {FAITHFUL, "否", "no", "false", "faithful", False}


@dataclass
class Verdict:
    label: int                                  # 1 hallucinated, 0 faithful
    types: list[str] = field(default_factory=list)
    details: list[dict] = field(default_factory=list)


def _json_objects(text: str):
    """Every JSON object that decodes starting at some '{' of `text`, in order."""
    decoder = json.JSONDecoder()
    for m in re.finditer(r"\{", text):
        try:
            obj, _ = decoder.raw_decode(text, m.start())
        except json.JSONDecodeError:
            continue
        if isinstance(obj, dict):
            yield obj


def _label(value) -> int | None:
    if not isinstance(value, (str, bool, int)):
        return None
    key = value.strip().lower() if isinstance(value, str) else value
    if key in _TRUE:
        return 1
    if key in _FALSE:
        return 0
    return None


def _type_key(name) -> str | None:
    if not isinstance(name, str):
        return None
    name = name.strip()
    return ZH_TYPE.get(name) or (name if name in TYPE_ZH else None)


def parse_longnovel_verdict(text: str) -> Verdict | None:
    """The last verdict object in `text` (after chain-of-thought, inside fences or not).

    Returns None when no object with a recognisable `has_hallucination` is found.
    """
    if not isinstance(text, str):
        return None
    candidates = [*_FENCE.findall(text), text, text.replace('\\"', '"')]
    for chunk in candidates:
        found = [o for o in _json_objects(chunk) if "has_hallucination" in o]
        if not found:
            continue
        obj = found[-1]
        label = _label(obj["has_hallucination"])
        if label is None:
            return None
        details = obj.get("details") if isinstance(obj.get("details"), list) else []
        types = [t for t in (_type_key(d.get("hallucination_type")) for d in details
                             if isinstance(d, dict)) if t]
        return Verdict(label, types, details)
    return None


# ---------------------------------------------------------------- ANAH annotations

_NO_FACT = re.compile(r"<\s*(?:no\s*fact|无事实)\s*>", re.I)
_HALLU = re.compile(r"<\s*(?:hallucination|幻觉)\s*>\s*([^<\n]*)", re.I)
_REFERENCE = re.compile(r"<\s*(?:reference|参考)\s*>(.*?)(?=<\s*(?:hallucination|幻觉|correction|改正)\s*>|$)",
                        re.I | re.S)
_CORRECTION = re.compile(r"<\s*(?:correction|改正)\s*>(.*)", re.I | re.S)
_REWRITE = re.compile(r'将?\s*["“]([^"”]*)["”]\s*(?:to|改为)\s*["“]([^"”]*)["”]', re.I)


@dataclass
class AnahAnnotation:
    type: str                                   # none | contradictory | unverifiable | no_fact
    reference: list[str] = field(default_factory=list)
    correction: str = ""
    rewrite: tuple[str, str] | None = None      # ("XXX", "YYY") of '"XXX" to "YYY"'


def _anah_type(value: str) -> str | None:
    v = value.strip().strip("。.，,:：").lower()
    if v.startswith("无法验证") or v.startswith("unverifiable"):      # before '无'
        return "unverifiable"
    if v.startswith("矛盾") or v.startswith("contradict"):
        return "contradictory"
    if v.startswith("无") or v.startswith("none") or v == "no":
        return "none"
    return None


def parse_anah_annotation(text: str) -> AnahAnnotation | None:
    """ANAH's tagged annotation (seed 004, Figs. A5-A9) in Chinese or English tags.

    `<No Fact>` / `<无事实>` anywhere wins; otherwise the `<Hallucination>` / `<幻觉>`
    value decides ('无法验证' is checked before '无'); references are split on <SEP>.
    """
    if not isinstance(text, str):
        return None
    if _NO_FACT.search(text):
        return AnahAnnotation("no_fact")
    found = _HALLU.search(text)
    kind = _anah_type(found.group(1)) if found else None
    if kind is None:
        return None
    ref = _REFERENCE.search(text)
    reference = [p.strip() for p in re.split(r"<\s*SEP\s*>", ref.group(1), flags=re.I)] if ref else []
    corr = _CORRECTION.search(text)
    correction = corr.group(1).strip() if corr else ""
    rewrite = _REWRITE.search(correction)
    return AnahAnnotation(kind, [r for r in reference if r], correction,
                          (rewrite.group(1), rewrite.group(2)) if rewrite else None)


# ---------------------------------------------------------------- binary answers

_NEGATIVE = re.compile(r"(无幻觉|没有幻觉|不存在幻觉|不包含幻觉|不是幻觉|^否|^不是|\bno\b|\bfalse\b|"
                       r"\bnot hallucinated\b|\bfaithful\b|(?<!not )\bsupported\b)", re.I)
_POSITIVE = re.compile(r"(有幻觉|存在幻觉|包含幻觉|^是|\byes\b|\btrue\b|\bhallucinated\b|"
                       r"\bcontains? (?:a )?hallucination|\bunfaithful\b|\bnot supported\b)", re.I)


def parse_binary_answer(text: str) -> int | None:
    """1 (hallucinated) / 0 (faithful) from a yes/no style answer in zh or en; None if unclear.

    The question is taken to be "is the response hallucinated?". Negated phrases are
    removed before looking for positive ones ('没有幻觉' contains '有幻觉'); an answer
    that reads both ways, or neither, is rejected.
    """
    if not isinstance(text, str):
        return None
    t = text.strip().strip("*#>\"'“”「」【】[]()（）").strip()
    t = re.sub(r"^(?:answer|答案|回答|结论)\s*[:：]\s*", "", t, flags=re.I)
    neg = bool(_NEGATIVE.search(t))
    pos = bool(_POSITIVE.search(_NEGATIVE.sub(" ", t)))
    if neg == pos:
        return None
    return 1 if pos else 0
