"""The embedded tokenizer and model: deterministic, offline, and the same as the cached build."""
from transformers import AutoTokenizer

from models.builders import ModelPathError, resolve_model_path
from models.tokenizer import build_tokenizer


def test_tokenizer_is_deterministic_and_matches_the_cached_build():
    built = build_tokenizer()
    cached = AutoTokenizer.from_pretrained(resolve_model_path("embedded:qwen3-tiny"))
    assert built.backend_tokenizer.to_str() == build_tokenizer().backend_tokenizer.to_str()
    assert built.backend_tokenizer.to_str() == cached.backend_tokenizer.to_str(), \
        "the tokenizer's inputs changed: bump models.builders.BUILD_VERSION"


def test_tokenizer_round_trips_chinese_and_english_and_has_a_chat_template(tokenizer):
    for text in ("郑雪晴在落霞山遇见了赵惊鸿。", "The teacher wrote it in 1998, in Zürich; 東京 too."):
        assert tokenizer.decode(tokenizer(text)["input_ids"]) == text
    chat = tokenizer.apply_chat_template([{"role": "user", "content": "你好"}], tokenize=False,
                                         add_generation_prompt=True)
    assert chat == "<|im_start|>user\n你好<|im_end|>\n<|im_start|>assistant\n"
    zh = "郑雪晴清点行装，带上了二百六十五石粮食，准备动身。" * 20
    assert 1.2 < len(zh) / len(tokenizer(zh)["input_ids"]) < 3.0      # Qwen-like density on Chinese


def test_unknown_embedded_model_is_named():
    import pytest

    with pytest.raises(ModelPathError, match="unknown embedded model 'llama-tiny'"):
        resolve_model_path("embedded:llama-tiny")


def test_an_incomplete_embedded_build_is_replaced(tmp_path, monkeypatch):
    """A cache directory holding only the tokenizer (what a rank other than 0 of a process group used
    to leave: save_pretrained writes nothing there) is rebuilt, not loaded."""
    from models.builders import materialize_embedded

    monkeypatch.setenv("HALLU_CACHE", str(tmp_path))
    path = materialize_embedded("qwen3-tiny")
    for name in ("config.json", "model.safetensors", "generation_config.json"):
        (path / name).unlink()
    assert materialize_embedded("qwen3-tiny") == path
    assert (path / "config.json").exists() and (path / "model.safetensors").exists()
