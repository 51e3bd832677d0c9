"""An export's model card starts with the metadata the Hugging Face Hub reads (pipeline, base model
and its licence, training data, held-out scores as model-index), checked with huggingface_hub's own
ModelCard reader. The trained export's card: tests/test_annotate.py."""
from huggingface_hub import ModelCard

from models.export_spec import AnnotatorSpec, write_model_card


def _spec(kind: str, base: str) -> AnnotatorSpec:
    return AnnotatorSpec(kind=kind, head="binary", template="sentence_check", evidence_sentences=6, scorer="spans",
                         language="en", max_seq_len=2048, max_new_tokens=8, labels=["faithful", "hallucinated"],
                         base_model=base, stage="sentences", training={"source": "records", "records": 1570})


def test_an_embedded_base_model_is_named_by_its_hub_repository_and_licence(tmp_path):
    write_model_card(tmp_path, _spec("discriminative", "embedded:smollm2-135m"), "| all | 1 |",
                     {"accuracy": 0.7268, "mcc": 0.44684})
    card = ModelCard.load(tmp_path / "README.md")
    meta = card.data.to_dict()
    assert meta["pipeline_tag"] == "text-classification" and meta["license"] == "apache-2.0"
    assert meta["base_model"] == "HuggingFaceTB/SmolLM2-135M-Instruct" and meta["datasets"] == ["records"]
    [result] = meta["model-index"][0]["results"]
    assert result["task"]["type"] == "text-classification" and result["dataset"]["split"] == "test"
    assert {m["type"]: m["value"] for m in result["metrics"]} == {"accuracy": 0.7268, "mcc": 0.4468}
    assert card.text.lstrip().startswith("# Hallucination annotator")


def test_a_local_base_model_lends_its_own_cards_licence_and_a_random_one_claims_none(tmp_path):
    base = tmp_path / "base"
    base.mkdir()
    (base / "README.md").write_text("---\nlicense: mit\nbase_model: org/encoder\n---\n# an encoder\n")
    write_model_card(tmp_path, _spec("spans", str(base)))
    meta = ModelCard.load(tmp_path / "README.md").data.to_dict()
    assert (meta["pipeline_tag"], meta["license"], meta["base_model"]) == ("token-classification", "mit", "org/encoder")
    assert "model-index" not in meta                       # not evaluated yet: no scores claimed
    write_model_card(tmp_path, _spec("generative", "embedded:qwen3-tiny"))
    meta = ModelCard.load(tmp_path / "README.md").data.to_dict()
    assert meta["pipeline_tag"] == "text-generation" and "license" not in meta and "base_model" not in meta
