"""ANAH-style annotation: sentence splitting, templates, tagged targets, BM25 windows, sample data."""
import itertools

import pytest

from data_builders.model_inputs.anah_prompts import (
    TEMPLATES,
    TRAIN_TEMPLATES,
    SourceIndex,
    annotation_messages,
    annotation_target,
    pick_template,
)
from data_builders.sentences import split_sentences
from data_builders.synthetic.anah_sample import build_anah_sample
from data_builders.synthetic.novel_corpus import generate_corpus
from eval.scorers.parsers import parse_anah_annotation


@pytest.mark.parametrize("text, lang, expected", [
    ("他说：“走吧。”然后离开了。真的吗？是的！", "zh", ["他说：“走吧。”", "然后离开了。", "真的吗？", "是的！"]),
    ("第一句；第二句\n第三句", "zh", ["第一句；", "第二句", "第三句"]),
    ('Dr. Smith went home. He said "yes." Then 3 people left! OK?', "en",
     ["Dr. Smith went home.", 'He said "yes."', "Then 3 people left!", "OK?"]),
    ("He bought fruit, e.g. Apples and pears. It costs 3.5 dollars.", "en",
     ["He bought fruit, e.g. Apples and pears.", "It costs 3.5 dollars."]),
])
def test_split_sentences(text, lang, expected):
    assert split_sentences(text, lang) == expected


RECORD = {"id": "q1-s0", "task": "qa", "source": "源文。", "question": "问题?", "response": "他生于1050年。",
          "meta": {"name": "海亚姆", "window": "他生于1048年。"}}


@pytest.mark.parametrize("template, lang, kind", itertools.product(
    TEMPLATES, ["zh", "en"], ["none", "contradictory", "unverifiable", "no_fact"]))
def test_targets_parse_back(template, lang, kind):
    rec = {**RECORD, "language": lang, "type": kind, "reference": ["他生于1048年。", "卒于1131年。"],
           "correction": '"1050" 改为 "1048"' if lang == "zh" else '"1050" to "1048"'}
    parsed = parse_anah_annotation(annotation_target(rec, template))
    assert parsed is not None and parsed.type == kind
    if kind != "no_fact":
        assert parsed.reference == rec["reference"]
    if kind in ("contradictory", "unverifiable"):
        assert parsed.rewrite == ("1050", "1048")
    prompt = annotation_messages(rec, template)[0]["content"]
    for part in ("海亚姆", "问题?", "他生于1048年。", "他生于1050年。"):   # name, question, window, sentence
        assert part in prompt


def test_augmentation_never_uses_the_unseen_template():
    chosen = {pick_template({"id": f"r{i}"}, "anah_random") for i in range(200)}
    assert chosen == set(TRAIN_TEMPLATES) and "anah_a9" not in chosen
    assert pick_template({"id": "x"}, "anah_a9") == "anah_a9"


def test_marked_templates_show_what_the_reference_lacks_and_keep_the_target():
    rec = {**RECORD, "language": "zh", "type": "contradictory", "reference": ["他生于1048年。"],
           "correction": '"1050" 改为 "1048"'}
    for template in ("anah_a5", "anah_a9", "anah_random"):
        marked = annotation_messages(rec, template + "+marks")[0]["content"]
        assert "他生于10【5】0年。" in marked
        assert marked.replace("【5】", "5") == annotation_messages(rec, template)[0]["content"]
        assert annotation_target(rec, template + "+marks") == annotation_target(rec, template)
    assert pick_template(rec, "anah_random+marks") == pick_template(rec, "anah_random")


def test_the_source_window_centres_on_the_match_within_budget():
    source = "。".join(f"第{i}句讲的是事情{i}" for i in range(300)) + "。"
    window = SourceIndex(source, "zh").window("事情150")
    assert "第150句讲的是事情150。" in window and len(window) <= 540
    english = " ".join(f"Sentence {i} is about topic{i}." for i in range(300))
    window = SourceIndex(english, "en").window("what about topic42", budget=50)
    assert "topic42." in window and len(window.split()) <= 50


@pytest.fixture(scope="module")
def sample():
    return build_anah_sample(generate_corpus(n_books=3, units_per_book=4, unit_chars=(500, 600)), test_books=1)


def test_sample_records(sample):
    recs = sample["train"] + sample["test"]
    assert {r["type"] for r in recs} == {"none", "contradictory", "unverifiable", "no_fact"}
    for r in recs:
        assert all(ref in r["source"] for ref in r["reference"])          # fragments are copied from the source
        if r["type"] in ("contradictory", "unverifiable"):
            assert r["correction"].startswith(f'"{r["response"]}" 改为')
        if r["type"] == "none":
            assert r["reference"] and not r["correction"]
        assert r["meta"]["window"]     # every type, no_fact too: the prompt never tells the type by its reference
    books = {s: {r["meta"]["book_id"] for r in sample[s]} for s in sample}
    assert not books["train"] & books["test"]
