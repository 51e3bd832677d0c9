"""An exact-match cue carried in the text: the characters of a sentence that its evidence lacks,
put between 【 and 】 (in the spirit of DrQA's token features).

Any tokenizer and backbone can read it, and it flags what a small model cannot memorise: a name,
number or relation of a held-out book that the evidence shown does not contain. The sentence-level
LongNovel prompt (`sentence_check`) and the marked ANAH prompts (`anah_a5+marks`, ...) use it.
"""
from __future__ import annotations

MARK_OPEN, MARK_CLOSE = "【", "】"
PUNCTUATION = set("，。、：；！？“”‘’（）《》,.:;!?\"'() \n")


def mark_unsupported(sentence: str, evidence: str) -> str:
    """`sentence` with each run of characters that `evidence` does not contain put in 【】."""
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
