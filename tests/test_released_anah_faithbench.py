"""Importers of the released ANAH and FaithBench files, the embedding re-ranker, training mixtures
and the convert command, on fixture rows written in the released schemas."""
import json
import subprocess
import sys

import pytest
from omegaconf import OmegaConf

from data_builders.importers.anah_released import AnahImportReport, held_out_group, import_anah
from data_builders.importers.faithbench import import_faithbench, pooled_label
from data_builders.mixture import MixtureError, mix_records, weighted
from data_builders.model_inputs.anah_prompts import WINDOW_TOKENS, SourceIndex
from data_builders.model_inputs.anah_tags import parse_anah_annotation
from data_builders.model_inputs.collate import encode_sample
from data_builders.model_inputs.prompts import render_messages
from data_builders.records import RecordError, read_records, write_jsonl
from tests.test_span_benchmarks import UHG

DOCS_ZH = ["欧玛尔·海亚姆是波斯诗人。他生于1048年，卒于1131年。他著有《鲁拜集》。" * 40,
           "他在天文学上修订了历法。他也研究代数。"]
ZH_ANNS = [
    "<要点>海亚姆生于1050年。\n<幻觉>矛盾\n<参考>参考1：他生于1048年<SEP>参考2：卒于1131年\n"
    "<改正>\"1050\" 改为 \"1048\"",
    "<要点>他著有《鲁拜集》。\n<幻觉>无\n<参考>他著有《鲁拜集》。\n<改正>无",
    "<要点>他还是一名画家。\n<幻觉>无法验证\n<参考>无\n<改正>将 \"他还是一名画家。\" 改为 \"\"",
    "<要点>希望对你有帮助。\n<无事实>",
]
EN_ANNS = ["<Hallucination> None\n<Reference> He was born in 1048.\n<Correction> None",
           "<No Fact>\n<Reference> None\n<Correction> None"]


def _topic(name, language="zh", n_questions=3):
    anns = ZH_ANNS if language == "zh" else EN_ANNS
    answer = "海亚姆生于1050年。他著有《鲁拜集》。他还是一名画家。希望对你有帮助。" if language == "zh" \
        else "He was born in 1048. I hope this helps."
    docs = DOCS_ZH if language == "zh" else ["Omar Khayyam was a Persian poet. He was born in 1048."]
    return {"name": name, "documents": docs, "selected_questions": [f"{name}问题{i}" for i in range(n_questions)],
            "GPT3.5_answers_D": [answer] * n_questions, "InternLM_answers": [answer] * n_questions,
            "human_GPT3.5_answers_D_ann": [anns] * n_questions, "human_InternLM_answers_ann": [anns] * n_questions,
            "language": language}


def _jsonl(path, rows):
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


def test_released_tags_parse():
    a = parse_anah_annotation(ZH_ANNS[0])
    assert (a.type, a.reference, a.key_point) == ("contradictory", ["他生于1048年", "卒于1131年"], "海亚姆生于1050年。")
    assert a.rewrite == ("1050", "1048")
    b = parse_anah_annotation(ZH_ANNS[1])
    assert (b.type, b.correction) == ("none", "")
    c = parse_anah_annotation(ZH_ANNS[2])
    assert (c.type, c.reference, c.rewrite) == ("unverifiable", [], ("他还是一名画家。", ""))
    assert parse_anah_annotation(ZH_ANNS[3]).type == "no_fact"
    assert parse_anah_annotation(EN_ANNS[0]).reference == ["He was born in 1048."]


def test_import_anah_records_and_splits(tmp_path):
    topics = [_topic(f"主题{i}") for i in range(30)] + [_topic("Khayyam", "en")]
    out = import_anah([_jsonl(tmp_path / "person.jsonl", topics)], test_topics=0.2, test_questions=0.3)
    train, test = out["train"], out["test"]
    assert len(train) + len(test) == 30 * 3 * 2 * 4 + 3 * 2 * 2
    zh = [r for r in train if r["language"] == "zh"]
    assert [r["type"] for r in zh[:4]] == ["contradictory", "none", "unverifiable", "no_fact"]
    assert zh[0]["response"] == "海亚姆生于1050年。" and zh[0]["label"] == 1 and zh[1]["label"] == 0
    en = [r for r in train + test if r["language"] == "en"]
    assert [r["response"] for r in en[:2]] == ["He was born in 1048.", "I hope this helps."]   # split, no key point
    # unseen topics are wholly in test; unseen-question topics keep other questions in train
    groups = {r["meta"]["test_group"] for r in test}
    assert groups == {"unseen_topic", "unseen_question"}
    train_topics = {r["meta"]["name"] for r in train}
    assert not {r["meta"]["name"] for r in test if r["meta"]["test_group"] == "unseen_topic"} & train_topics
    uq = [r for r in test if r["meta"]["test_group"] == "unseen_question"]
    assert {r["meta"]["name"] for r in uq} <= train_topics
    train_q = {(r["meta"]["name"], r["question"]) for r in train}
    assert not {(r["meta"]["name"], r["question"]) for r in uq} & train_q
    assert len({r["id"] for r in train + test}) == len(train + test)


def test_anah_windows_widen_unverifiable_in_train_only(tmp_path):
    topics = [_topic(f"主题{i}") for i in range(40)]
    out = import_anah([_jsonl(tmp_path / "t.jsonl", topics)], test_topics=0.3, test_questions=0.0)
    budget = WINDOW_TOKENS["zh"]
    for split, rows in out.items():
        for r in rows:
            size = len("".join(r["meta"]["window"].split()))
            wide = r["type"] == "unverifiable" and split == "train"
            assert size <= budget * (6 if wide else 1)
            if wide:
                assert size > budget        # the source is long enough to fill a widened window
    assert any(r["type"] == "unverifiable" for r in out["test"])


def test_held_out_group_is_deterministic_and_keeps_a_training_question():
    for q in range(3):
        assert held_out_group("x", q, 3, 0.0, 1.0, 0) == held_out_group("x", q, 3, 0.0, 1.0, 0)
    assert [held_out_group("x", q, 3, 0.0, 1.0, 0) for q in range(3)].count(None) == 1
    assert held_out_group("x", 0, 1, 0.0, 1.0, 0) is None
    assert held_out_group("x", 0, 3, 1.0, 0.0, 0) == "unseen_topic"


def test_import_anah_bad_input(tmp_path):
    row = _topic("a")
    del row["documents"]
    with pytest.raises(RecordError, match=r"t.jsonl:1 field 'documents'"):
        import_anah([_jsonl(tmp_path / "t.jsonl", [row])])
    row = _topic("a")
    row["InternLM_answers"] = row["InternLM_answers"][:2]
    with pytest.raises(RecordError, match="human_InternLM_answers_ann"):
        import_anah([_jsonl(tmp_path / "t.jsonl", [row])])
    row = _topic("a")
    row["human_GPT3.5_answers_D_ann"] = [["garbled"] + ZH_ANNS[1:]] * 3
    with pytest.raises(RecordError, match="3 of 48 annotations could not be read"):
        import_anah([_jsonl(tmp_path / "t.jsonl", [row, _topic("b")])], test_topics=0)
    report = AnahImportReport()
    out = import_anah([_jsonl(tmp_path / "t.jsonl", [row, _topic("b")])], max_skip_fraction=0.5, report=report)
    assert len(report.skipped) == 3 and "t.jsonl:1 q0 gpt35 s0: no hallucination type" in report.skipped[0]
    assert sum(map(len, out.values())) == 45


def test_embedding_ranker_finds_the_paraphrase():
    from data_builders.model_inputs.retrieval import EmbeddingRanker

    source = ("The committee met on Tuesday. Revenue grew by ten percent last year. "
              "The weather was mild. A dog barked outside.")
    bm25_only = SourceIndex(source, "en")
    fused = SourceIndex(source, "en", EmbeddingRanker("minilm"))
    query = "Sales rose 10% in the previous twelve months."
    assert fused.sents[fused.best(query)] == "Revenue grew by ten percent last year."
    assert bm25_only.best("The weather was mild.") == fused.best("The weather was mild.") == 2


FAITHBENCH = {"samples": [
    {"sample_id": 0, "source": "Poseidon grossed $181m on a budget of $160m.",
     "summary": " Poseidon grossed $181m, with a production budget of $160m.",
     "annotations": [{"annot_id": 1, "label": ["Unwanted", "Unwanted.Instrinsic"], "note": "budget",
                      "summary_span": "production", "summary_start": 33, "summary_end": 43},
                     {"annot_id": 2, "label": ["Benign"], "note": "", "summary_span": "grossed",
                      "summary_start": 9, "summary_end": 16}],
     "metadata": {"summarizer": "mistral", "hhemv1": 0.99}},
    {"sample_id": 1, "source": "A cat sat.", "summary": "A cat sat.", "annotations": [],
     "metadata": {"summarizer": "gpt"}},
    {"sample_id": 2, "source": "It rained.", "summary": "It rained heavily.",
     "annotations": [{"annot_id": 3, "label": ["Benign"], "note": "", "summary_span": "heavily",
                      "summary_start": 10, "summary_end": 17}], "metadata": {"summarizer": "gpt"}},
    {"sample_id": 3, "source": "It rained.", "summary": "It snowed.",
     "annotations": [{"annot_id": 4, "label": ["Questionable"], "note": "", "summary_span": "snowed",
                      "summary_start": 3, "summary_end": 9}], "meta_model": "llama"},
]}


def test_faithbench(tmp_path):
    path = tmp_path / "batch_1.json"
    path.write_text(json.dumps(FAITHBENCH), encoding="utf-8")
    recs = import_faithbench(path)
    assert [r["label"] for r in recs] == [1, 0, 0, 1]
    assert recs[0]["faithfulness_labels"] == ["intrinsic"] and recs[1]["faithfulness_labels"] == ["faithful"]
    # the benign span is annotated but not a hallucination: spans and hallucinated_sentences leave it out
    assert recs[0]["hallucinated_sentences"] == ["production"] and recs[2]["hallucinated_sentences"] == []
    assert [(x["text"], x["type"]) for x in recs[0]["spans"]] == [("production", "Unwanted.Instrinsic")]
    assert recs[0]["response"][recs[0]["spans"][0]["start"]:recs[0]["spans"][0]["end"]] == "production"
    assert recs[0]["meta"]["summarizer"] == "mistral" and recs[3]["meta"]["summarizer"] == "llama"
    assert [r["label"] for r in import_faithbench(path, hallucinated=("Unwanted",))] == [1, 0, 0, 0]
    assert [r["label"] for r in import_faithbench(path, pooling="best")] == [0, 0, 0, 1]
    assert pooled_label(["Benign", "Unwanted", "Unwanted.Extrinsic"], "majority") == "Unwanted"


def test_faithbench_bad_label(tmp_path):
    bad = json.loads(json.dumps(FAITHBENCH))
    bad["samples"][2]["annotations"][0]["label"] = ["Wrong"]
    path = tmp_path / "batch_2.json"
    path.write_text(json.dumps(bad), encoding="utf-8")
    with pytest.raises(RecordError, match=r"batch_2.json:\? field 'annotations.label': sample 2: .*'Wrong'"):
        import_faithbench(path)


def _records_dir(root, prefix, n, **extra):
    rows = [{"id": f"{prefix}{i}", "task": "qa", "language": "zh", "source": "源。", "response": "答。",
             "label": i % 2, **extra} for i in range(n)]
    write_jsonl(root / "train.jsonl", rows)
    write_jsonl(root / "test.jsonl", [{**r, "id": f"{r['id']}t"} for r in rows[:2]])
    return root


def test_mixture_weights_templates_and_collisions(tmp_path, tokenizer):
    a = _records_dir(tmp_path / "a", "a", 10)
    b = _records_dir(tmp_path / "b", "b", 10, type="none", reference=["源。"], meta={"name": "题"})
    sources = OmegaConf.create([{"name": "det", "root": str(a), "weight": 2.0, "template": "prompt_e",
                                 "evaluate": True},
                                {"name": "anah", "root": str(b), "weight": 0.5, "template": "anah_a5",
                                 "evaluate": False}])
    out, report = mix_records(sources, seed=0)
    assert len(out["train"]) == 20 + 5 and len(out["test"]) == 2
    assert len({r["id"] for r in out["train"]}) == 25 and "a3~2" in {r["id"] for r in out["train"]}
    assert "det: 10 train records x weight 2.0 -> 20" in report
    anah = next(r for r in out["train"] if r["meta"]["mix_source"] == "anah")
    assert "<幻觉>" in render_messages(anah, "prompt_e")[0]["content"]      # its own template wins
    sample = encode_sample(anah, tokenizer, "prompt_e")
    assert "<幻觉>无" in tokenizer.decode([t for t in sample["shift_labels"] if t >= 0])
    assert mix_records(sources, seed=0)[0] == out                           # deterministic
    assert [r["id"] for r in weighted(out["test"], 0.0, __import__("random").Random(0))] == []
    clash = OmegaConf.create([{"name": "x", "root": str(a), "weight": 1.0, "template": None, "evaluate": True},
                              {"name": "y", "root": str(a), "weight": 1.0, "template": None, "evaluate": True}])
    with pytest.raises(MixtureError, match="id 'a0' is in both 'x' and 'y'"):
        mix_records(clash, seed=0)


def test_convert_cli(tmp_path):
    src = _jsonl(tmp_path / "thing.jsonl", [_topic(f"主题{i}") for i in range(12)])
    fb = tmp_path / "batch_1.json"
    fb.write_text(json.dumps(FAITHBENCH), encoding="utf-8")
    uhg = _jsonl(tmp_path / "dataset_uhgeval_concise.jsonl", [UHG])
    rag = _jsonl(tmp_path / "ragtruth_summary.jsonl", [{"source_id": 1, "source": "Ann won.", "responses": [
        {"response": "Bob won.", "model": "m", "labels": [{"start": 0, "end": 3, "text": "Bob"}]}]}])
    for args in (["anah", str(src), "--out", str(tmp_path / "anah"), "--test-topics", "0.3"],
                 ["faithbench", str(fb), "--out", str(tmp_path / "fb")],
                 ["uhgeval", str(uhg), "--out", str(tmp_path / "uhg")],
                 ["ragtruth_faithjudge", str(rag), "--out", str(tmp_path / "rag")]):
        done = subprocess.run([sys.executable, "-m", "data_builders.convert", *args], capture_output=True,
                              text=True, timeout=120)
        assert done.returncode == 0, done.stderr
    assert "2 annotated spans located in their responses; 0 not found" in (tmp_path / "uhg" / "convert_report.txt"
                                                                           ).read_text()
    assert read_records(tmp_path / "rag" / "test.jsonl")[0]["spans"][0]["text"] == "Bob"
    assert "12 topics, 288 annotated sentences, 0 skipped" in (tmp_path / "anah" / "convert_report.txt").read_text()
    assert sum(len(read_records(tmp_path / "anah" / f"{s}.jsonl")) for s in ("train", "test")) == 288
    assert len(read_records(tmp_path / "fb" / "test.jsonl")) == 4
