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


def sentence_spans(text: str, language: str) -> list[tuple[int, int]]:
    """[start, end) character offsets of the sentences of `text` (`text[start:end]` is the
    sentence, surrounding white space excluded); closing quotes stay with their sentence and
    newlines always split."""
    spans, offset = [], 0
    for line in text.splitlines(keepends=True):
        body = line.splitlines()[0] if line.splitlines() else ""
        start = 0
        for cut in _cuts(body, language) + [len(body)]:
            piece = body[start:cut]
            if piece.strip():
                lead = len(piece) - len(piece.lstrip())
                spans.append((offset + start + lead, offset + start + len(piece.rstrip())))
            start = cut
        offset += len(line)
    return spans


_ZH_CLAUSE = re.compile(r"[，；：,;:]")
_EN_CLAUSE = re.compile(r"[,;:](?=\s)")


def clause_spans(text: str, language: str) -> list[tuple[int, int]]:
    """[start, end) offsets of the clauses of `text`: its sentences cut after ，；： (Chinese) or
    , ; : followed by a space (English); the punctuation stays with the clause it ends."""
    cut = _ZH_CLAUSE if language.startswith("zh") else _EN_CLAUSE
    spans = []
    for a, b in sentence_spans(text, language):
        start = a
        for m in cut.finditer(text, a, b):
            if text[start:m.end()].strip():
                spans.append((start, m.end()))
            start = m.end()
            while start < b and text[start].isspace():
                start += 1
        if start < b:
            spans.append((start, b))
    return spans


def unit_spans(text: str, language: str, unit: str = "sentence") -> list[tuple[int, int]]:
    """The offsets of the units an evidence-level annotator judges (`task.evidence_unit`)."""
    return clause_spans(text, language) if unit == "clause" else sentence_spans(text, language)


def split_sentences(text: str, language: str) -> list[str]:
    """Sentences of `text` (see `sentence_spans`)."""
    return [text[a:b] for a, b in sentence_spans(text, language)]
