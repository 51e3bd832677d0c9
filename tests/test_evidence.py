"""Sentence-level evidence records (task.evidence_sentences) and the sentence_check prompt."""
import json

import numpy as np
import pytest
from omegaconf import OmegaConf

from configs.rules import ConfigError, check_task
from configs.schema import TaskConfig
from data_builders.model_inputs.anah_prompts import SourceIndex, _terms
from data_builders.model_inputs.evidence import evidence_records
from data_builders.model_inputs.marks import mark_unsupported
from data_builders.model_inputs.prompts import render_messages, verdict_target
from data_builders.sentences import clause_spans, sentence_spans, split_sentences, unit_spans
from data_builders.sources import DataError
from data_builders.synthetic.length_extension import context_records
from data_builders.synthetic.novel_corpus import generate_corpus
from data_builders.synthetic.novel_lexicon import VERBS
from eval.aggregation.by_sentence import aggregate, flagged_sentences
from train.data import sentence_pools


def test_marks_the_characters_the_evidence_lacks_and_never_punctuation():
    evidence = "这一日，郑雪晴在落霞山遇见了赵惊鸿。"
    assert mark_unsupported("在落霞山，杨雪晴遇见了赵惊鸿。", evidence) == "在落霞山，【杨】雪晴遇见了赵惊鸿。"
    assert mark_unsupported("郑雪晴比武，后来下棋。", evidence) == "郑雪晴【比武】，【后来下棋】。"
    assert mark_unsupported("郑雪晴在落霞山。", evidence) == "郑雪晴在落霞山。"


def test_english_marks_are_words_the_evidence_lacks():
    evidence = "Poseidon grossed $181 million worldwide. It opened in May."
    marked = mark_unsupported("It earned $181 million worldwide.", evidence, "en")
    assert marked == "It 【earned】 $181 million worldwide."
    marked = mark_unsupported("Poseidon lost big money in June.", evidence, "en")
    assert marked == "Poseidon 【lost big money】 in 【June】."
    assert mark_unsupported("it OPENED in may", evidence, "en") == "it OPENED in may"     # case does not matter


def test_top_returns_the_k_best_sentences_in_source_order():
    source = "李云飞在青石镇遇见了王明远。天色暗了下来。李云飞带上了三把长剑。街边的小贩高声吆喝。王明远答应了。"
    index = SourceIndex(source, "zh")
    assert index.top("李云飞和王明远在青石镇谈话。", 2) == [0, 4]
    assert index.top("李云飞带着三把长剑上路。", 1) == [2]
    assert index.top("李云飞", 9) == [0, 1, 2, 3, 4]
    assert SourceIndex("", "zh").top("李云飞", 2) == []


@pytest.fixture(scope="module")
def unit_records():
    units = generate_corpus(n_books=1, units_per_book=8, unit_chars=(300, 400), seed=3)
    return [rec for u in units for rec in context_records([u], 0, "S", "train")]


def test_only_the_hallucinated_sentence_carries_the_label(unit_records):
    for rec in unit_records:
        sentences = evidence_records(rec, 3)
        assert [s["meta"]["sentence"] for s in sentences] == list(range(len(sentences)))
        assert {s["meta"]["record"] for s in sentences} == {rec["id"]}
        assert "".join(s["response"] for s in sentences) == rec["response"].replace("\n", "")
        positives = [s for s in sentences if s["label"] == 1]
        if rec["label"] == 0:
            assert positives == []
        else:
            assert [s["response"] for s in positives] == rec["hallucinated_sentences"]
            assert positives[0]["hallucination_types"] == rec["hallucination_types"]
            assert (positives[0]["corrections"], positives[0]["reasons"]) == (rec["corrections"], rec["reasons"])
            assert verdict_target(positives[0]).count(rec["corrections"][0]) == 1     # what a generative one says
        whole = split_sentences(rec["source"], "zh")
        for s in sentences:       # evidence: 3 whole sentences of the source
            parts = split_sentences(s["source"], "zh")
            assert len(parts) == 3 and all(p in whole for p in parts)


def test_the_evidence_of_a_fact_sentence_is_its_narration(unit_records):
    for rec in (r for r in unit_records if r["label"] == 0):
        first = evidence_records(rec, 3)[0]        # "在{place}，{a}和身为其{rel}的{b}{verb}。"
        content = render_messages(first, "sentence_check")[0]["content"]
        assert content.startswith(f"原文：{first['source']}\n句子：")
        # names, place and relation come from the two narration sentences; only template words
        # and the summary's verb (the narration uses a synonym) are missing
        template_words = set("在，和身为其的。") | {c for verb, _ in VERBS for c in verb}
        assert set(first["response"]) - set(first["source"]) <= template_words, content


def test_sentences_overlapped_by_a_records_spans_carry_its_label():
    response = "The film opened in May. It earned $181 million worldwide. Critics liked it."
    start = response.index("earned")
    rec = {"id": "fb", "task": "summarization", "language": "en", "label": 1, "response": response,
           "source": "Poseidon opened in May. It grossed $181 million. Critics praised it.",
           "spans": [{"start": start, "end": start + 6}], "hallucinated_sentences": ["earned"]}
    parts = evidence_records(rec, 2)
    assert [p["label"] for p in parts] == [0, 1, 0]
    assert [response[p["meta"]["start"]:p["meta"]["end"]] for p in parts] == [p["response"] for p in parts]
    assert all(p["hallucinated_sentences"] == [] for p in parts)    # a span is not a sentence: no generative gold
    with pytest.raises(ValueError, match="overlapped by its spans"):
        evidence_records(dict(rec, spans=[{"start": 0, "end": 0}]), 2)


def test_flagged_sentences_follow_the_threshold_and_always_hold_the_worst_of_a_flagged_record():
    row = {"probs": [0.3, 0.7], "sentence_probs": [0.1, 0.7, 0.55]}
    assert flagged_sentences(row, 0.5) == [1, 2]
    assert flagged_sentences(row, 0.6) == [1]
    assert flagged_sentences(row, 0.8) == []
    rounded = {"probs": [0.49996, 0.50004], "sentence_probs": [0.1, 0.5]}   # rounded below a threshold it passes
    assert flagged_sentences(rounded, 0.50003) == [1]
    assert flagged_sentences({"sentence_labels": [0, None, 1, 1]}, None) == [2, 3]


def test_a_hallucinated_record_whose_sentence_is_not_in_its_response_is_refused(unit_records):
    rec = dict(next(r for r in unit_records if r["label"] == 1), hallucinated_sentences=["不在摘要里的句子。"],
               spans=[])
    with pytest.raises(ValueError, match="no sentence of its response is named"):
        evidence_records(rec, 3)
    assert all(s["label"] == 0 for s in evidence_records(rec, 3, labelled=False))     # prediction needs no label
    good = [r for r in unit_records if r["id"] != rec["id"]]
    [pool] = sentence_pools([good + [rec]], 3, "s", max_skip_fraction=0.1)
    assert len(pool) == sum(
        len(evidence_records(r, 3)) for r in good)
    with pytest.raises(DataError, match="1 of 2 records"):
        sentence_pools([[good[0], rec]], 3, "s", max_skip_fraction=0.1)


def test_the_evidence_pool_is_built_once_and_read_by_later_launches(unit_records, tmp_path, monkeypatch):
    """Every rank of every launch needs the pool (BM25 over every record: 31 s for the discriminative
    demo's 1,228 records); the first builds it into the cache, the others read it, skips counted alike."""
    monkeypatch.setenv("HALLU_CACHE", str(tmp_path))
    broken = dict(next(r for r in unit_records if r["label"] == 1), hallucinated_sentences=["不在摘要里的句子。"],
                  spans=[])
    records = [r for r in unit_records if r["id"] != broken["id"]] + [broken]
    [first] = sentence_pools([records], 3, "s", max_skip_fraction=0.5)
    [stored] = (tmp_path / "evidence_pools").glob("*.json")
    assert json.loads(stored.read_text())["skipped"] == 1
    stored.write_text(json.dumps({**json.loads(stored.read_text()), "pool": first[:2]}))
    assert sentence_pools([records], 3, "s", max_skip_fraction=0.5) == [first[:2]]    # read, not rebuilt
    assert len(sentence_pools([records], 2, "s", max_skip_fraction=0.5)[0]) == len(first)  # other settings: rebuilt
    for _ in range(2):                                # built, then read: the skip counts alike
        with pytest.raises(DataError, match="1 of 2 records"):
            sentence_pools([records[-2:]], 3, "s", max_skip_fraction=0.1)


def test_a_later_stage_reads_the_pools_of_the_buckets_an_earlier_one_built(unit_records, tmp_path, monkeypatch):
    """S -> S+M -> S+M+L: each bucket's pool is built once; skips count over the stage's buckets."""
    import train.data

    monkeypatch.setenv("HALLU_CACHE", str(tmp_path))
    built = []
    build = train.data._evidence_pool
    monkeypatch.setattr(train.data, "_evidence_pool", lambda recs, *a: built.append(len(recs)) or build(recs, *a))
    s, m, long_ = unit_records[:6], unit_records[6:10], unit_records[10:12]
    assert len(sentence_pools([s], 3, "S", 0.0)) == 1 and built == [6]
    pools = sentence_pools([s, m], 3, "S+M", 0.0)
    assert built == [6, 4] and [p[0]["id"].split("#")[0] for p in pools] == [s[0]["id"], m[0]["id"]]
    sentence_pools([s, m, long_], 3, "S+M+L", 0.0)
    assert built == [6, 4, 2]
    broken = dict(next(r for r in long_ if r["label"] == 1), hallucinated_sentences=["不在摘要里的句子。"], spans=[])
    with pytest.raises(DataError, match="1 of 12 records"):
        sentence_pools([s, m, [broken, *(r for r in long_ if r["id"] != broken["id"])]], 3, "S+M+L", 0.05)
    assert len(sentence_pools([s, m, [broken]], 3, "S+M+L", 0.1)[2]) == 0      # 1 of 11: under the threshold
    with pytest.raises(DataError, match=r"1 of 1 records .*\(none left to train on\)"):
        sentence_pools([[broken]], 3, "S+M+L", max_skip_fraction=1.0)      # every one skipped: refused all the same


def test_a_record_scores_its_most_suspicious_sentence():
    rows = [{"id": f"r#s{i}", "probs": [1 - p, p]} for i, p in enumerate([0.1, 0.8, 0.4])]
    row = aggregate("r", rows, ["甲。", "乙。", "丙。"])
    assert row["probs"] == pytest.approx([0.2, 0.8]) and row["flagged_sentence"] == "乙。"
    assert row["sentence_probs"] == [0.1, 0.8, 0.4]
    with pytest.raises(ValueError, match="no sentence"):
        aggregate("r", [], [])


def test_a_generated_record_speaks_for_its_first_hallucinated_sentence():
    faithful = '{"has_hallucination": "无幻觉", "details": []}'
    entity = ('{"has_hallucination": "有幻觉", "details": [{"hallucination_type": "实体幻觉", '
              '"hallucinated_sentence": "乙。", "corrected_content": "丙。", "reason": ""}]}')
    rows = [{"id": f"r#s{i}", "output": o} for i, o in enumerate([faithful, "乱码", entity, entity])]
    row = aggregate("r", rows, ["甲。", "乙。", "丙。", "丁。"])
    assert row["output"] == entity and row["flagged_sentence"] == "丙。"
    assert row["sentence_labels"] == [0, None, 1, 1]
    unread = aggregate("r", rows[:2], ["甲。", "乙。"])     # no sentence flagged, one unreadable: a parse failure
    assert unread["output"] == "乱码" and "flagged_sentence" not in unread
    assert aggregate("r", rows[:1], ["甲。"])["output"] == faithful


@pytest.mark.parametrize("changes, message", [
    ({"evidence_sentences": -1}, "expected 0"),
    ({"evidence_sentences": 2, "kind": "discriminative", "head": "anah"}, "task.head=binary"),
])
def test_task_config_refuses_evidence_without_a_binary_head(changes, message):
    task = OmegaConf.structured(TaskConfig(**changes))
    with pytest.raises(ConfigError, match=message):
        check_task(task)


@pytest.mark.parametrize("language, text, clauses", [
    ("zh", "根据调查局的说法，郑宇锡涉嫌受贿；该公司是承包商。第二句：好。",
     ["根据调查局的说法，", "郑宇锡涉嫌受贿；", "该公司是承包商。", "第二句：", "好。"]),
    ("en", "It opened in May, and earned $181,674,817; critics: mixed. Next one.",
     ["It opened in May,", "and earned $181,674,817;", "critics:", "mixed.", "Next one."]),
])
def test_clauses_cut_sentences_at_their_commas_and_index_the_text(language, text, clauses):
    spans = clause_spans(text, language)
    assert [text[a:b] for a, b in spans] == clauses          # "181,674,817": no space after its commas
    assert unit_spans(text, language, "sentence") == sentence_spans(text, language)


def test_clause_units_label_only_the_clause_that_holds_the_span():
    response = "根据韩国法务部调查局的说法，郑亿根的儿子郑宇锡涉嫌受贿，而该公司是承包商。"
    start = response.index("郑宇锡")
    rec = {"id": "u", "task": "continuation", "language": "zh", "label": 1, "response": response,
           "source": "郑亿根涉嫌受贿。该公司是承包商。", "spans": [{"start": start, "end": start + 3}]}
    assert [p["label"] for p in evidence_records(rec, 2, unit="clause")] == [0, 1, 0]
    assert [p["label"] for p in evidence_records(rec, 2)] == [1], "one sentence: all its keywords alike"


@pytest.mark.parametrize("language", ["zh", "en"])
def test_bm25_scores_are_rank_bm25s_to_the_bit(language):
    from rank_bm25 import BM25Okapi

    units = generate_corpus(n_books=1, units_per_book=6, unit_chars=(300, 400), seed=5)
    source = " ".join(u.text for u in units) if language == "zh" else \
        "The mill opened in May. Its owner, Ann Lee, sold grain. The mill closed in June; grain rotted. " * 3
    index = SourceIndex(source, language)
    corpus = [_terms(s, language) or ["_"] for s in index.sents]
    queries = [_terms(u.summary, language) for u in units] if language == "zh" else \
        [_terms(q, "en") for q in ("the mill closed in june june", "nothing here matches", "Ann Lee sold the mill")]
    for query in queries:
        assert np.array_equal(index.bm25.get_scores(query), BM25Okapi(corpus).get_scores(query))
