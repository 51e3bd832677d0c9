"""Parsers of raw model outputs."""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from data_builders.prompts import FAITHFUL, HALLUCINATED, TYPE_ZH, ZH_TYPE

_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.S)
_TRUE = {HALLUCINATED, "是", "yes", "true", "hallucinated", True, 1}
_FALSE = {FAITHFUL, "否", "no", "false", "faithful", False, 0}


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
