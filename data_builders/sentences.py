"""Sentence splitting for Chinese (。！？；) and English."""
from __future__ import annotations

import re

_ZH_END = re.compile(r"[。！？；!?;][”’」』\"']*")
_EN_END = re.compile(r"[.!?][\"')\]]*(?=\s+[\"'(\[]?[A-Z0-9])")
_ABBREVIATIONS = {"dr", "mr", "mrs", "ms", "st", "jr", "sr", "prof", "vs", "etc", "e.g", "i.e", "no", "fig", "inc"}


def _cuts(line: str, language: str) -> list[int]:
    if language.startswith("zh"):
        return [m.end() for m in _ZH_END.finditer(line)]
    cuts = []
    for m in _EN_END.finditer(line):
        word = line[:m.start()].split()[-1].lower().rstrip(".") if line[:m.start()].split() else ""
        if line[m.start()] == "." and (word in _ABBREVIATIONS or len(word) == 1):
            continue
        cuts.append(m.end())
    return cuts


def split_sentences(text: str, language: str) -> list[str]:
    """Sentences of `text`; closing quotes stay with their sentence. Newlines always split."""
    out = []
    for line in text.splitlines():
        start = 0
        for cut in _cuts(line, language) + [len(line)]:
            piece = line[start:cut].strip()
            if piece:
                out.append(piece)
            start = cut
    return out
