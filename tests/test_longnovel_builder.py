"""The length-extension builder and the rule-injected corpus."""
from collections import Counter

import pytest

from data_builders.records import HALLUCINATION_TYPES
from data_builders.synthetic.hallucinate import HALLUCINATION_RULES, faithful_sentences
from data_builders.synthetic.length_extension import SUMMARY_SEP, BuildReport, build_longnovel, position_of
from data_builders.synthetic.novel_corpus import generate_corpus
from data_builders.synthetic.novel_lexicon import chinese_number, draw_facts, make_cast
from data_builders.synthetic.novel_text import TEXTS

BUDGETS = {"S": 2048, "M": 4096}


@pytest.fixture(scope="module")
def corpus():
    return generate_corpus(n_books=5, units_per_book=14, unit_chars=(250, 350), seed=3)


@pytest.fixture(scope="module")
def built(corpus, tokenizer):
    report = BuildReport()
    return build_longnovel(corpus, tokenizer, BUDGETS, test_books=2, report=report), report


def test_corpus_is_deterministic_and_covers_every_type(corpus):
    again = generate_corpus(n_books=5, units_per_book=14, unit_chars=(250, 350), seed=3)
    assert [u.to_dict() for u in corpus] == [u.to_dict() for u in again]
    assert set(Counter(u.hallucination_type for u in corpus)) == set(HALLUCINATION_TYPES)


@pytest.mark.parametrize("language", sorted(TEXTS))
@pytest.mark.parametrize("htype", HALLUCINATION_TYPES)
def test_each_rule_changes_exactly_one_sentence(htype, language):
    import random

    text = TEXTS[language]
    rng = random.Random(htype)
    facts = draw_facts(rng, make_cast(rng, 8, text.lexicon), text.lexicon)
    good = faithful_sentences(facts, text)
    out = HALLUCINATION_RULES[htype](facts, text)
    changed = [s for s in out.sentences if s not in good]
    assert changed == [out.sentence]
    assert len(out.sentences) == len(good) + (htype == "event_fabrication")
    if htype != "event_fabrication":
        assert out.correction in good and out.correction not in out.sentences
    assert out.reason and (out.reason + out.sentence + out.correction).isascii() == (language == "en")


def test_an_english_corpus_tells_the_same_facts_in_english_and_its_records_say_so(tokenizer):
    books = generate_corpus(n_books=3, units_per_book=4, unit_chars=(600, 800), seed=3, language="en")
    assert books == generate_corpus(n_books=3, units_per_book=4, unit_chars=(600, 800), seed=3, language="en")
    for unit in books:
        assert unit.text.isascii() and unit.summary.isascii() and unit.language == "en"
        assert all(fact in unit.text for fact in unit.fact_sentences)
        assert unit.hallucinated_sentence in unit.hallucinated_summary
        assert unit.hallucinated_sentence not in unit.faithful_summary
        assert 600 <= len(unit.text) < 1100
    records = build_longnovel(books, tokenizer, {"S": 4096}, test_books=1)
    assert {r["language"] for split in records.values() for r in split} == {"en"}
    hallucinated = [r for r in records["train"] if r["label"] == 1]
    assert all(r["response"][s["start"]:s["end"]] for r in hallucinated for s in r["spans"])


def test_chinese_numbers():
    assert [chinese_number(n) for n in (3, 10, 14, 20, 105, 110, 999, 1005)] == \
        ["三", "十", "十四", "二十", "一百零五", "一百一十", "九百九十九", "一千零五"]


def test_replaced_unit_is_the_only_difference(built, corpus):
    records, _ = built
    units = {(u.book_id, u.unit_index): u for u in corpus}
    by_stem = {}
    for rec in records["train"] + records["test"]:
        by_stem.setdefault(rec["id"][:-2], {})[rec["id"][-1]] = rec
    assert by_stem
    for pair in by_stem.values():
        h, f = pair["h"], pair["f"]
        assert h["source"] == f["source"] and (h["label"], f["label"]) == (1, 0)
        hs, fs = h["response"].split(SUMMARY_SEP), f["response"].split(SUMMARY_SEP)
        diff = [i for i, (a, b) in enumerate(zip(hs, fs)) if a != b]
        meta = h["meta"]
        offset = meta["replaced_unit"] - meta["first_unit"]
        assert diff == [offset]
        unit = units[(meta["book_id"], meta["replaced_unit"])]
        assert hs[offset] == unit.hallucinated_summary and fs[offset] == unit.faithful_summary
        assert h["hallucination_types"] == [unit.hallucination_type]
        assert h["hallucinated_sentences"] == [unit.hallucinated_sentence]
        assert unit.hallucinated_sentence in h["response"] and unit.hallucinated_sentence not in f["response"]
        assert h["position"] == position_of(offset, meta["n_units"])
        # the span is exactly the injected edit: outside it the two responses agree, and it lies in the sentence
        (span,) = h["spans"]
        a, b = span["start"], span["end"]
        assert a < b and f["spans"] == [] and span["type"] == unit.hallucination_type
        tail = len(h["response"]) - b
        assert f["response"][:a] == h["response"][:a] and f["response"][len(f["response"]) - tail:] == h["response"][b:]
        assert h["response"][a:b] != f["response"][a:len(f["response"]) - tail]
        at = h["response"].index(unit.hallucinated_sentence)
        assert at <= a and b <= at + len(unit.hallucinated_sentence)


def test_positions_and_buckets(built):
    records, _ = built
    all_records = records["train"] + records["test"]
    for rec in all_records:
        assert rec["n_tokens"] <= BUDGETS[rec["length_bucket"]]
        if rec["length_bucket"] == "M":
            assert rec["n_tokens"] >= 0.75 * BUDGETS["M"] and rec["meta"]["n_units"] > 1
        else:
            assert rec["meta"]["n_units"] == 1
    positions = Counter(r["position"] for r in all_records if r["length_bucket"] == "M")
    assert set(positions) == {"beginning", "middle", "end"}
    assert [position_of(o, 9) for o in range(9)] == ["beginning"] * 3 + ["middle"] * 3 + ["end"] * 3


def test_splits_by_book_and_balanced_labels(built):
    records, report = built
    books = {s: {r["meta"]["book_id"] for r in records[s]} for s in records}
    assert books["train"] and books["test"] and not books["train"] & books["test"] and not books["val"]
    assert books["test"] == {"book003", "book004"}
    for split in ("train", "test"):
        for bucket in BUDGETS:
            labels = Counter(r["label"] for r in records[split] if r["length_bucket"] == bucket)
            assert labels[0] == labels[1] > 0, (split, bucket, labels)
    assert sum(report.counts.values()) == sum(len(v) for v in records.values())


def test_bad_split_request(corpus, tokenizer):
    with pytest.raises(ValueError, match="test_books=5"):
        build_longnovel(corpus, tokenizer, BUDGETS, test_books=5)
    with pytest.raises(ValueError, match="val_books=3"):
        build_longnovel(corpus, tokenizer, BUDGETS, test_books=2, val_books=3)


def test_validation_books_are_their_own_split(corpus, tokenizer):
    out = build_longnovel(corpus, tokenizer, {"S": 2048}, test_books=2, val_books=1)
    books = {s: {r["meta"]["book_id"] for r in out[s]} for s in out}
    assert books == {"train": {"book000", "book001"}, "val": {"book002"}, "test": {"book003", "book004"}}
