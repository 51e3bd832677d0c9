"""An exact-match cue carried in the text: the characters of a sentence that its evidence lacks,
put between 【 and 】 (in the spirit of DrQA's token features).

Any tokenizer and backbone can read it, and it flags what a small model cannot memorise: a name,
number or relation of a held-out book that the evidence shown does not contain. The sentence-level
LongNovel prompt (`sentence_check`) and the marked ANAH prompts (`anah_a5+marks`, ...) use it.
"""
from __future__ import annotations

import re

MARK_OPEN, MARK_CLOSE = "【", "】"
PUNCTUATION = set("，。、：；！？“”‘’（）《》,.:;!?\"'() \n")


_WORD = re.compile(r"\w+")


def mark_unsupported(sentence: str, evidence: str, language: str = "zh") -> str:
    """`sentence` with each run of characters (Chinese) or words (other languages, compared
    lower-cased) that `evidence` does not contain put in 【】."""
    if not language.startswith("zh"):
        return _mark_words(sentence, evidence)
    present, out, inside = set(evidence), [], False
    for ch in sentence:
        missing = ch not in present and ch not in PUNCTUATION
        if missing != inside:
            out.append(MARK_OPEN if missing else MARK_CLOSE)
            inside = missing
        out.append(ch)
    if inside:
        out.append(MARK_CLOSE)
    return "".join(out)


def _mark_words(sentence: str, evidence: str) -> str:
    present = {w.lower() for w in _WORD.findall(evidence)}
    runs: list[list[int]] = []          # [start, end] of consecutive missing words
    previous_missing = False
    for m in _WORD.finditer(sentence):
        missing = m.group().lower() not in present
        if missing and previous_missing:
            runs[-1][1] = m.end()
        elif missing:
            runs.append([m.start(), m.end()])
        previous_missing = missing
    out, at = [], 0
    for start, end in runs:
        out += [sentence[at:start], MARK_OPEN, sentence[start:end], MARK_CLOSE]
        at = end
    return "".join(out) + sentence[at:]
