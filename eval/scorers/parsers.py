"""Parsers of raw model outputs. The ANAH tag parser lives in data_builders (importers read the
same tags) and is re-exported here."""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from data_builders.model_inputs.anah_tags import AnahAnnotation, parse_anah_annotation  # noqa: F401  (re-exported)
from data_builders.model_inputs.prompts import FAITHFUL, HALLUCINATED, TYPE_ZH, ZH_TYPE

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


def type_key(name) -> str | None:
    """The schema's key of a hallucination type named in Chinese or by its key; None otherwise."""
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
        types = [t for t in (type_key(d.get("hallucination_type")) for d in details
                             if isinstance(d, dict)) if t]
        return Verdict(label, types, details)
    return None


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


_CONSISTENCY = re.compile(r"^\W*(yes|no)\b", re.I)
_INCONSISTENT = re.compile(r"(?:\bnot|n't)\s+(?:\w+\s+)?consistent\b|\binconsistent\b", re.I)
_CONSISTENT = re.compile(r"\bconsistent\b", re.I)


def parse_consistency_answer(text: str) -> int | None:
    """1 (hallucinated) / 0 (faithful) from an answer to "is the summary factually consistent with
    the document?" (the `consistency` template): its first word, "No" or "Yes"; else its first
    sentence's "(not) consistent" / "inconsistent"; None otherwise."""
    if not isinstance(text, str):
        return None
    m = _CONSISTENCY.match(text)
    if m:
        return int(m.group(1).lower() == "no")
    first = re.split(r"(?<=[.!?])\s|\n", text.strip(), maxsplit=1)[0]
    if _INCONSISTENT.search(first):
        return 1
    return 0 if _CONSISTENT.search(first) else None


_KEYWORD_ECHO = re.compile(r'^(?:续写中的)?["“”\'\s]*(?P<kw>[^"“”]*?)["“”\'\s]*(?=不?符合现实)')


def parse_uhgeval_keyword_answer(text: str, keyword: str) -> int | None:
    """1 (hallucinated) / 0 from an answer to UHGEval's keyword question (the `uhgeval_keyword` template): it
    starts "不符合现实" or "符合现实", as UHGEval reads it, after an echo of the question's own ending (续写中的
    and the keyword in triple quotes) where a chat model repeats it; None otherwise."""
    if not isinstance(text, str):
        return None
    t = text.strip()
    echo = _KEYWORD_ECHO.match(t)
    if echo and echo.group("kw") in ("", keyword):
        t = t[echo.end():]
    if t.startswith("不符合现实"):
        return 1
    return 0 if t.startswith("符合现实") else None
