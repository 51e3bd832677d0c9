"""A deterministic ANAH-style sample (Chinese) built from the novel corpus.

Each unit is a topic; the question asks what happens in it; the answer is the unit's
hallucinated rewrite h_i plus a closing remark without facts. Every answer sentence becomes
one record: `none` with the source sentence as reference, the injected sentence
`contradictory` (or `unverifiable` for a fabricated event) with its correction, the remark
`no_fact`. The reference window of each sentence, the remark's too, is retrieved by BM25
(`meta.window`), so that the prompt never tells the type by what it shows.
"""
from __future__ import annotations

import random

from data_builders.model_inputs.anah_prompts import SourceIndex
from data_builders.records import validate_record
from data_builders.sentences import split_sentences
from data_builders.synthetic.novel_corpus import Unit

REMARKS = ["以上就是我的回答。", "希望这个回答对你有帮助。", "这个问题很有意思。", "如有疑问欢迎继续提问。"]


def _sentence_records(u: Unit, rng: random.Random) -> list[dict]:
    sentences = split_sentences(u.hallucinated_summary, "zh")
    fabricated = u.hallucination_type == "event_fabrication"
    base = {"task": "qa", "language": "zh", "source": u.text,
            "question": f"{u.book_id}第{u.unit_index + 1}章讲了什么？"}
    index, out, fact = SourceIndex(u.text, "zh"), [], 0
    for k, sentence in enumerate(sentences + [rng.choice(REMARKS)]):
        rec = {**base, "id": f"{u.book_id}-u{u.unit_index:03d}-s{k}", "response": sentence, "reference": [],
               "correction": "", "meta": {"name": f"{u.book_id}第{u.unit_index + 1}章", "book_id": u.book_id,
                                          "unit": u.unit_index, "window": index.window(sentence)}}
        if k == len(sentences):
            rec["type"] = "no_fact"
        elif sentence == u.hallucinated_sentence and fabricated:
            rec.update(type="unverifiable", correction=f'"{sentence}" 改为 ""')
        else:
            bad = sentence == u.hallucinated_sentence
            rec.update(type="contradictory" if bad else "none", reference=[u.fact_sentences[fact]],
                       correction=f'"{sentence}" 改为 "{u.correction}"' if bad else "")
            fact += 1
        out.append(validate_record(rec))
    return out


def build_anah_sample(units: list[Unit], test_books: int, seed: int = 0) -> dict[str, list[dict]]:
    """Sentence records split by book: the last `test_books` books are the test split."""
    books = sorted({u.book_id for u in units})
    if not 0 < test_books < len(books):
        raise ValueError(f"data.corpus.test_books={test_books}: expected 1..{len(books) - 1}")
    test = set(books[-test_books:])
    rng = random.Random(seed)
    out: dict[str, list[dict]] = {"train": [], "test": []}
    for u in units:
        out["test" if u.book_id in test else "train"] += _sentence_records(u, rng)
    return out
