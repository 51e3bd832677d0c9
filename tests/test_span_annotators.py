"""Span annotators (`task.kind=spans`) and encoder backbones: token labels from character spans and
back, (evidence, response) pairs whose chunks cover the whole source, the vocabulary and backbone
checks, and span annotators that train, evaluate, export and annotate on a decoder and on MiniLM."""
import json
import subprocess
import sys

import pytest
from transformers import AutoModelForTokenClassification

from data_builders.importers.ragtruth import import_ragtruth_faithjudge
from data_builders.model_inputs.pairs import chunk_bounds, pair_inputs, pool_chunks
from data_builders.model_inputs.token_spans import labelled_sample, prompt_input
from data_builders.records import read_jsonl, write_jsonl
from eval.annotate import Annotator
from eval.scorers.spans import chars
from eval.thresholds import flagged_spans
from models.builders import load_tokenizer, resolve_model_path
from models.export_spec import AnnotatorSpec
from tests.conftest import REPO, shared_data, torchrun
from tests.served import served_rows
from tests.snippets import card_snippet
from tests.test_cross_validation import _records
from tests.test_trainer_e2e import SMALL, _ok
from tests.tolerance import SCORE_ATOL, assert_same_annotations


@pytest.fixture(scope="module")
def minilm():
    return load_tokenizer(resolve_model_path("embedded:minilm"))


def _round_trip(record: dict, model_input: dict) -> list[list[int]]:
    """The record's gold spans turned into token labels, and the labels back into character spans."""
    labels = labelled_sample(record, model_input)["token_labels"]
    return flagged_spans([[a, b, float(labels[t])] for t, a, b in model_input["tokens"]], 0.5)


def _multi_word(record: dict) -> dict:
    """The record with a second, multi-word span ("opened a library") beside its own."""
    at = record["response"].index("opened a library")
    return {**record, "label": 1, "spans": [*record["spans"], {"start": at, "end": at + 16}]}


@pytest.mark.parametrize("backbone", ["decoder", "encoder"])
def test_span_labels_from_offsets_round_trip_to_the_gold_character_spans(backbone, tokenizer, minilm):
    for record in [*_records()[:4], _multi_word(_records()[1])]:
        model_input = prompt_input(record, tokenizer, "prompt_e") if backbone == "decoder" else \
            pair_inputs(record, minilm)[0]
        gold = sorted([s["start"], s["end"]] for s in record["spans"])
        assert _round_trip(record, model_input) == gold, record["id"]


def test_on_ragtruth_the_round_trip_keeps_every_gold_character(minilm):
    """On the released annotations the token-level round trip loses no gold character and adds
    almost none (a span that starts or ends inside a word grows to the word's tokens)."""
    records = [r for t in ("summary", "qa", "data2txt") for r in
               import_ragtruth_faithjudge(shared_data("ragtruth_faithjudge") / f"ragtruth_{t}.jsonl")[:150]]
    kept = added = gold_chars = 0
    for record in records:
        gold, back = chars((s["start"], s["end"]) for s in record["spans"]), chars(_round_trip(record, pair_inputs(
            record, minilm)[0]))
        kept, added, gold_chars = kept + len(gold & back), added + len(back - gold), gold_chars + len(gold)
    assert gold_chars > 5000 and kept == gold_chars and added < 0.01 * gold_chars, (kept, added, gold_chars)


def test_chunks_cover_every_character_of_a_long_source_and_fit_the_window(minilm):
    sentences = [f"In {1900 + i} the council of {c} counted {i * 37} lamps along the river."
                 for i, c in enumerate(["Lyon", "Porto", "Graz", "Turku"] * 40)]
    record = {"id": "long", "source": " ".join(sentences), "response": "The council counted lamps.", "label": 0}
    inputs = pair_inputs(record, minilm, window=96)
    bounds = [tuple(x["chunk"]) for x in inputs]
    assert len(bounds) > 10 and bounds[0][0] == 0 and bounds[-1][1] == len(record["source"])
    assert all(a[1] == b[0] for a, b in zip(bounds, bounds[1:])), "consecutive, no gap, no overlap"
    assert all(len(x["input_ids"]) <= 96 for x in inputs)
    assert all(record["source"][a - 1] == " " for a, _ in bounds[1:]), "cut at word starts"
    assert len({tuple((a, b) for _, a, b in x["tokens"]) for x in inputs}) == 1, "the whole response in every chunk"
    words = " ".join(minilm.decode(x["input_ids"]).split("[SEP]")[0].replace("[CLS]", "").strip() for x in inputs)
    assert words.split() == minilm.decode(minilm(record["source"], add_special_tokens=False)["input_ids"]).split()
    assert chunk_bounds([(0, 3), (4, 7)], 7, 5) == [(0, 7)]
    assert pool_chunks([[0.9, 0.2], [0.1, 0.7]]) == [0.1, 0.2], "supported where some chunk supports it"


def test_chinese_records_on_minilm_fail_with_the_clear_error(minilm, tmp_path):
    zh = [{"id": f"zh-{i}", "task": "summarization", "language": "zh", "label": i % 2,
           "source": f"林远走进第{i}间书房，拿起一本旧书。", "response": f"林远在第{i}个花园里读报纸。",
           "spans": [{"start": 0, "end": 2}] if i % 2 else []} for i in range(6)]
    with pytest.raises(ValueError, match=r"record 'zh-0' \(language 'zh'\): \d+% of its response tokens are unknown"):
        pair_inputs(zh[0], minilm)
    write_jsonl(tmp_path / "data" / "test.jsonl", zh)
    cmd = [sys.executable, str(REPO / "train" / "sft.py"), "+exp=ragtruth_minilm_spans", "data.folds=2",
           f"data.root={tmp_path / 'data'}", "trainer.progress=false", f"output_dir={tmp_path / 'run'}"]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1 and "sft.py: error: record 'zh-" in proc.stderr, proc.stderr[-2000:]
    assert "(language 'zh')" in proc.stderr and "English only" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.parametrize("overrides, message", [
    (["task=longnovel_detection"], "it trains a binary head (task.kind=discriminative task.head=binary) or a span"),
    (["task=spans", "parallel=sp2"], "it needs parallel.sp_size=1 (found 2)"),
    (["task=spans", "task.evidence_sentences=3"], "task.kind=spans labels the response's own tokens"),
    (["data=longnovel_embedded"], "data.source=embedded builds Chinese samples for a decoder's chat prompt"),
])
def test_what_an_encoder_cannot_train_fails_in_one_line(tmp_path, overrides, message):
    write_jsonl(tmp_path / "test.jsonl", _records())
    cmd = [sys.executable, str(REPO / "train" / "sft.py"), "+exp=ragtruth_minilm_spans", f"data.root={tmp_path}",
           *overrides, f"output_dir={tmp_path / 'run'}"]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1 and message in proc.stderr, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr and not (tmp_path / "run").exists()


def _spans_of_every_row(out, records: dict) -> list[dict]:
    rows = read_jsonl(out / "eval" / "predictions.jsonl")
    for row in rows:
        response = records[row["id"]]["response"]
        assert row["token_probs"][0][0] >= 0 and row["token_probs"][-1][1] == len(response)
        assert bool(row["spans"]) == (row["probs"][1] >= row["threshold"])
        assert all(0 <= a < b <= len(response) for a, b in row["spans"])
    return rows


@pytest.mark.slow
def test_a_decoder_span_annotator_trains_at_sp2_and_evaluates_on_the_embedded_corpus(tmp_path):
    stages = ["curriculum.stages=[{name: s2k, bucket: S, max_seq_len: 2048, max_steps: 3}]", "eval.buckets=[S]",
              "eval.max_per_bucket=4"]
    _ok(torchrun(2, ["+exp=longnovel_whole_source_demo", *SMALL, *stages, "task=spans", "parallel=sp2",
                     f"output_dir={tmp_path}"]))
    log = [json.loads(line) for line in (tmp_path / "train_log.jsonl").read_text().splitlines()]
    assert len(log) == 3 and log[-1]["loss"] < log[0]["loss"] and all(r["target_tokens"] > 0 for r in log)
    metrics = json.loads((tmp_path / "eval" / "metrics.json").read_text())
    assert metrics["n"] == 4 and "f1" in metrics["char"] and metrics["missing_ids"] == []
    records = {r["id"]: r for r in read_jsonl(tmp_path / "data" / "test.jsonl")}
    _spans_of_every_row(tmp_path, records)
    hf = tmp_path / "checkpoints" / "0-s2k" / "hf"
    assert type(AutoModelForTokenClassification.from_pretrained(hf)).__name__ == "Qwen3ForTokenClassification"


@pytest.mark.slow
def test_minilm_span_annotator_trains_evaluates_exports_and_annotates(tmp_path):
    write_jsonl(tmp_path / "data" / "test.jsonl", _records())
    proc = torchrun(2, ["+exp=ragtruth_minilm_spans", f"data.root={tmp_path / 'data'}", "data.folds=2",
                        "data.fold_val_fraction=0.25", "trainer.progress=false", f"output_dir={tmp_path / 'run'}",
                        "curriculum.stages=[{name: pairs, bucket: all, max_seq_len: 512, max_steps: 3}]",
                        "optim.micro_batch_size=4"])
    _ok(proc)
    run, records = tmp_path / "run", {r["id"]: r for r in _records()}
    pooled = json.loads((run / "eval" / "metrics.json").read_text())
    assert pooled["n"] == 20 and pooled["missing_ids"] == [] and "char" in pooled
    _spans_of_every_row(run / "fold_0", records)
    hf = run / "fold_0" / "checkpoints" / "0-pairs" / "hf"
    assert type(AutoModelForTokenClassification.from_pretrained(hf)).__name__ == "BertForTokenClassification"
    rows = [{"id": r["id"], "model": f"m{k % 2}", "documents": _passages(r["source"]),
             "question": "What did the mayor open?", "response": r["response"]} for k, r in enumerate(_records()[:6])]
    write_jsonl(tmp_path / "in.jsonl", rows)
    annotate = subprocess.run([sys.executable, "-m", "eval.annotate", f"model={hf}", f"input={tmp_path / 'in.jsonl'}",
                               f"output={tmp_path / 'out.jsonl'}", "progress=false"],
                              cwd=REPO, capture_output=True, text=True, timeout=300)
    assert annotate.returncode == 0, annotate.stderr[-2000:]
    out = read_jsonl(tmp_path / "out.jsonl")
    for row in out:
        response = records[row["id"]]["response"]
        assert row["label"] in ("hallucinated", "faithful") and 0 <= row["score"] <= 1
        assert all(response[s["start"]:s["end"]] == s["text"] for s in row["spans"])
        assert bool(row["spans"]) == (row["label"] == "hallucinated")
    _summary_written(annotate.stdout, tmp_path / "out.jsonl", out)
    assert_same_annotations(out, served_rows(hf, rows), AnnotatorSpec.load(hf).threshold)     # `hallu serve`
    annotator = Annotator.load(hf)
    _predict_agrees_with_the_command(annotator, rows, out)
    _the_cards_snippet_agrees_with_the_annotator(hf, annotator, rows)
    _batches_of_1_7_and_32_agree(hf)


def _the_cards_snippet_agrees_with_the_annotator(export, annotator, rows: list[dict]) -> None:
    """Plain transformers, as the card shows, gives the annotator's token probabilities (within the
    tolerance contract) and spans."""
    for row in rows:
        source = "\n".join(row["documents"])
        ran = card_snippet(export, source, row["response"], row["question"])
        tokens = annotator.predict(context=row["documents"], question=row["question"], answer=row["response"],
                                   output_format="tokens")
        assert [(a, b) for a, b, _ in ran["tokens"]] == [(t["start"], t["end"]) for t in tokens]
        assert max(abs(p - t["prob"]) for (_, _, p), t in zip(ran["tokens"], tokens)) <= SCORE_ATOL
        if all(abs(t["prob"] - annotator.spec.threshold) > SCORE_ATOL for t in tokens):
            assert ran["spans"] == flagged_spans([[t["start"], t["end"], t["pred"]] for t in tokens], 0.5)


def _batches_of_1_7_and_32_agree(export) -> None:
    """35 rows annotated in batches of 1, 7 and 32 pairs: the same labels and spans, scores within
    the tolerance contract (padding a pair beside longer ones must not move its tokens' probabilities)."""
    records = _records()
    rows = [{"id": f"{records[k % 20]['id']}#{k}", "source": records[k % 20]["source"],
             "response": records[k % 20]["response"]} for k in range(35)]
    outputs = [Annotator.load(export, batch_size=b, batch_tokens=10_000_000).annotate_rows(rows) for b in (1, 7, 32)]
    for other in outputs[1:]:
        assert_same_annotations(outputs[0], other, AnnotatorSpec.load(export).threshold)


def _passages(source: str) -> list[str]:
    """The article as two retrieved passages (its first sentence, the rest)."""
    first = source.index(". ") + 1
    return [source[:first], source[first + 1:]]


def _summary_written(stdout: str, output, out: list[dict]) -> None:
    flagged = sum(r["label"] == "hallucinated" for r in out)
    assert f"{len(out)} rows: {flagged} flagged" in stdout and "## By `model`" in stdout
    assert output.with_name("out.jsonl.summary.md").read_text() in stdout
    assert output.with_name("out.jsonl.scores.png").read_bytes()[:4] == b"\x89PNG"


def _predict_agrees_with_the_command(annotator, rows: list[dict], out: list[dict]) -> None:
    """predict(context, question, answer), one row at a time, gives the command's spans (batched)
    within the tolerance contract; its tokens, thresholded and merged, are its spans, and the worst
    token's probability is the row's score."""
    for row, written in zip(rows, out):
        kwargs = {"context": row["documents"], "question": row["question"], "answer": row["response"]}
        spans, tokens = annotator.predict(**kwargs), annotator.predict(**kwargs, output_format="tokens")
        assert all(row["response"][t["start"]:t["end"]] == t["token"] and 0 <= t["prob"] <= 1 for t in tokens)
        assert flagged_spans([[t["start"], t["end"], t["pred"]] for t in tokens], 0.5) == \
            [[s["start"], s["end"]] for s in spans]
        assert max(t["prob"] for t in tokens) == pytest.approx(written["score"], abs=SCORE_ATOL)
        if all(abs(t["prob"] - annotator.spec.threshold) > SCORE_ATOL for t in tokens):
            assert spans == written["spans"]
