"""ANAH's tagged sentence annotations (seed 004, Figs. A5-A9), in Chinese or English tags.

One parser serves both the importer of the released dataset (gold annotations) and the
harness (model outputs): `<No Fact>` / `<无事实>` anywhere wins; otherwise the
`<Hallucination>` / `<幻觉>` value decides ('无法验证' is checked before '无'); references are
split on <SEP>, with the released data's "参考1：" numbering and "无" / "None" dropped.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

_TAG_NAMES = r"hallucination|幻觉|reference|参考|correction|改正|key\s*point|要点|no\s*fact|无事实"
_NO_FACT = re.compile(r"<\s*(?:no\s*fact|无事实)\s*>", re.I)
_HALLU = re.compile(r"<\s*(?:hallucination|幻觉)\s*>\s*([^<\n]*)", re.I)
_REFERENCE = re.compile(r"<\s*(?:reference|参考)\s*>(.*?)(?=<\s*(?:hallucination|幻觉|correction|改正)\s*>|$)",
                        re.I | re.S)
_CORRECTION = re.compile(r"<\s*(?:correction|改正)\s*>(.*)", re.I | re.S)
_KEY_POINT = re.compile(rf"<\s*(?:key\s*point|要点)\s*>(.*?)(?=<\s*(?:{_TAG_NAMES})\s*>|$)", re.I | re.S)
_REWRITE = re.compile(r'将?\s*["“]([^"”]*)["”]\s*(?:to|改为)\s*["“]([^"”]*)["”]', re.I)
_REF_NUMBER = re.compile(r"^(?:参考|reference)\s*\d+\s*[:：]\s*", re.I)
_EMPTY = {"", "无", "none", "n/a"}


@dataclass
class AnahAnnotation:
    type: str                                   # none | contradictory | unverifiable | no_fact
    reference: list[str] = field(default_factory=list)
    correction: str = ""
    rewrite: tuple[str, str] | None = None      # ("XXX", "YYY") of '"XXX" to "YYY"'
    key_point: str = ""                         # the <要点> / <Key Point> the annotation is about


def _anah_type(value: str) -> str | None:
    v = value.strip().strip("。.，,:：").lower()
    if v.startswith("无法验证") or v.startswith("unverifiable"):      # before '无'
        return "unverifiable"
    if v.startswith("矛盾") or v.startswith("contradict"):
        return "contradictory"
    if v.startswith("无") or v.startswith("none") or v == "no":
        return "none"
    return None


def _fragments(text: str) -> list[str]:
    out = []
    for part in re.split(r"<\s*SEP\s*>|\n", text, flags=re.I):
        part = _REF_NUMBER.sub("", part.strip()).strip()
        if part.lower().strip("。.") not in _EMPTY:
            out.append(part)
    return out


def parse_anah_annotation(text: str) -> AnahAnnotation | None:
    """The annotation in `text`, or None when no hallucination type can be read from it."""
    if not isinstance(text, str):
        return None
    key = _KEY_POINT.search(text)
    key_point = key.group(1).strip() if key else ""
    if _NO_FACT.search(text):
        return AnahAnnotation("no_fact", key_point=key_point)
    found = _HALLU.search(text)
    kind = _anah_type(found.group(1)) if found else None
    if kind is None:
        return None
    ref = _REFERENCE.search(text)
    corr = _CORRECTION.search(text)
    correction = corr.group(1).strip() if corr else ""
    if correction.lower().strip("。.") in _EMPTY:
        correction = ""
    rewrite = _REWRITE.search(correction)
    return AnahAnnotation(kind, _fragments(ref.group(1)) if ref else [], correction,
                          (rewrite.group(1), rewrite.group(2)) if rewrite else None, key_point)
