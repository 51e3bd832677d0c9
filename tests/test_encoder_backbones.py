"""Every encoder architecture the toolkit names (BERT, RoBERTa, DeBERTa-v3, ModernBERT, XLM-R), as a tiny
random local model directory with its architecture's own tokenizer and pair format: its pairs cover the
source and round-trip the gold spans, and `train/sft.py` trains, evaluates and exports a span head (and a
binary head) on it; an encoder that reads Chinese trains a span annotator on the embedded corpus."""
import json
import logging
import shutil
import subprocess
import sys
import warnings

import pytest
from transformers import AutoModelForSequenceClassification, AutoModelForTokenClassification

from data_builders.model_inputs.pairs import pair_inputs
from data_builders.records import read_jsonl, write_jsonl
from data_builders.synthetic.length_extension import build_longnovel
from data_builders.synthetic.novel_corpus import generate_corpus
from models.builders import load_tokenizer
from models.heads import load_classifier, load_token_classifier
from tests.conftest import REPO
from tests.test_cross_validation import _records
from tests.test_span_annotators import _round_trip, _spans_of_every_row
from tests.tiny_encoders import ENCODER_TYPES, write_tiny_encoder

ARCHITECTURE = {"bert": "Bert", "roberta": "Roberta", "deberta-v2": "DebertaV2", "modernbert": "ModernBert",
                "xlm-roberta": "XLMRoberta"}


def _text(records: list[dict]) -> str:
    return " ".join(r["source"] + " " + r["response"] for r in records)


@pytest.fixture(scope="module")
def encoders(tmp_path_factory):
    root = tmp_path_factory.mktemp("encoders")
    return {t: write_tiny_encoder(root / t, t, _text(_records())) for t in ENCODER_TYPES}


@pytest.mark.parametrize("model_type", ENCODER_TYPES)
def test_pairs_cover_a_long_source_and_round_trip_the_gold_spans(model_type, encoders):
    tok = load_tokenizer(str(encoders[model_type]))
    record = _records()[1]
    long = {**record, "source": " ".join([record["source"]] * 40)}
    inputs = pair_inputs(long, tok)
    assert len(inputs) > 1 and all(len(x["input_ids"]) <= tok.model_max_length for x in inputs)
    assert [x["chunk"] for x in inputs][0][0] == 0 and inputs[-1]["chunk"][1] == len(long["source"])
    assert all(a["chunk"][1] == b["chunk"][0] for a, b in zip(inputs, inputs[1:]))
    for x in inputs:
        assert _round_trip(long, x) == [[s["start"], s["end"]] for s in long["spans"]]


class _Logged(logging.Handler):
    def __init__(self):
        super().__init__()
        self.messages = []

    def emit(self, record):
        self.messages.append(record.getMessage())


def test_a_base_encoder_gets_its_head_quietly_and_a_body_missing_weights_is_named(encoders, tmp_path):
    from safetensors.torch import load_file, save_file

    logged = _Logged()
    logging.getLogger("transformers.modeling_utils").addHandler(logged)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")          # a new head on a base model is expected: nothing said
            load_token_classifier(str(encoders["bert"]), dtype="float32")
    finally:
        logging.getLogger("transformers.modeling_utils").removeHandler(logged)
    assert not [m for m in logged.messages if "LOAD REPORT" in m]
    model_dir = tmp_path / "partial"
    shutil.copytree(encoders["bert"], model_dir)
    weights = model_dir / "model.safetensors"
    save_file({k: v for k, v in load_file(weights).items() if ".layer.1." not in k}, weights, metadata={"format": "pt"})
    with pytest.warns(UserWarning, match=r"weights of the model body are not in the checkpoint .*layer\.1\."):
        load_classifier(str(model_dir), "binary", dtype="float32")


def _train(tmp_path, model_dir, data_root, task: str, *extra: str):
    cmd = [sys.executable, str(REPO / "train" / "sft.py"), "+exp=ragtruth_minilm_spans", f"task={task}",
           f"model.name_or_path={model_dir}", f"data.root={data_root}", "data.folds=0", "trainer.progress=false",
           "curriculum.stages=[{name: pairs, bucket: all, max_seq_len: 512, max_steps: 3}]",
           "optim.micro_batch_size=4", f"output_dir={tmp_path / 'run'}", *extra]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    log = read_jsonl(tmp_path / "run" / "train_log.jsonl")
    assert len(log) == 3 and all(r["loss"] == r["loss"] and r["loss"] > 0 for r in log)
    return tmp_path / "run"


def _english(tmp_path):
    records = _records()
    write_jsonl(tmp_path / "data" / "train.jsonl", records[:14])
    write_jsonl(tmp_path / "data" / "test.jsonl", records[14:])
    return tmp_path / "data", {r["id"]: r for r in records}


@pytest.mark.slow
@pytest.mark.parametrize("model_type", ENCODER_TYPES)
def test_each_encoder_trains_a_span_head_and_exports_it(model_type, encoders, tmp_path):
    root, records = _english(tmp_path)
    run = _train(tmp_path, encoders[model_type], root, "spans")
    assert json.loads((run / "eval" / "metrics.json").read_text())["n"] == 6
    _spans_of_every_row(run, records)
    model = AutoModelForTokenClassification.from_pretrained(run / "checkpoints" / "0-pairs" / "hf")
    assert type(model).__name__ == f"{ARCHITECTURE[model_type]}ForTokenClassification"


@pytest.mark.slow
@pytest.mark.parametrize("model_type", ["roberta", "deberta-v2"])
def test_an_encoder_without_segment_embeddings_trains_a_binary_head(model_type, encoders, tmp_path):
    root, _ = _english(tmp_path)
    run = _train(tmp_path, encoders[model_type], root, "response_binary")
    rows = read_jsonl(run / "eval" / "predictions.jsonl")
    assert len(rows) == 6 and all(0 <= r["probs"][1] <= 1 for r in rows)
    model = AutoModelForSequenceClassification.from_pretrained(run / "checkpoints" / "0-pairs" / "hf")
    assert type(model).__name__ == f"{ARCHITECTURE[model_type]}ForSequenceClassification"


@pytest.mark.slow
def test_a_chinese_reading_encoder_trains_a_span_annotator_on_the_embedded_corpus(tokenizer, tmp_path):
    """The embedded corpus's records (built as the decoder demos build them; their injected edits carry
    exact spans), read by an XLM-R-shaped encoder whose vocabulary holds their characters."""
    splits = build_longnovel(generate_corpus(n_books=4, units_per_book=6, unit_chars=(500, 700)), tokenizer,
                             {"S": 2048}, test_books=1)
    for split in ("train", "test"):
        write_jsonl(tmp_path / "data" / f"{split}.jsonl", splits[split])
    records = {r["id"]: r for r in splits["train"] + splits["test"]}
    assert any(r["spans"] for r in splits["train"])
    encoder = write_tiny_encoder(tmp_path / "xlmr", "xlm-roberta", _text(list(records.values())))
    run = _train(tmp_path, encoder, tmp_path / "data", "spans", "eval.max_per_bucket=6")
    metrics = json.loads((run / "eval" / "metrics.json").read_text())
    assert metrics["n"] == 6 and "f1" in metrics["char"]
    rows = _spans_of_every_row(run, records)
    chunks = [len(pair_inputs(records[r["id"]], load_tokenizer(str(encoder)))) for r in rows]
    assert min(chunks) > 1, chunks         # each source is longer than the window: pooled over chunks
