"""vLLM backend: YaRN settings of seed 000 E.1 (pure), and greedy decoding on a GPU (marked `gpu`)."""
import json

import pytest

from eval.vllm_backend import yarn_rope_scaling


def _model_dir(tmp_path, model_type, window=32768):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": model_type, "max_position_embeddings": window}))
    return str(tmp_path)


@pytest.mark.parametrize("model_type, factor", [("qwen3", 4.0), ("qwen2", 4.0), ("internlm2", 4.0),
                                                 ("llama", 8.0), ("chatglm", None)])
def test_yarn_factors_follow_e1(tmp_path, model_type, factor):
    scaling = yarn_rope_scaling(_model_dir(tmp_path, model_type, 8192))
    if factor is None:
        assert scaling is None
    else:
        assert scaling == {"rope_type": "yarn", "factor": factor, "original_max_position_embeddings": 8192}


def test_yarn_modes(tmp_path):
    d = _model_dir(tmp_path, "chatglm")
    assert yarn_rope_scaling(d, "none") is None
    assert yarn_rope_scaling(d, "2")["factor"] == 2.0


@pytest.mark.gpu
def test_vllm_greedy_matches_hf_on_the_tiny_model(tokenizer):
    pytest.importorskip("vllm")
    from eval.generate import greedy_batch
    from eval.vllm_backend import vllm_generate
    from models.builders import load_causal_lm, resolve_model_path

    path = resolve_model_path("embedded:qwen3-tiny")
    texts = ["<|im_start|>user\n你好<|im_end|>\n<|im_start|>assistant\n"]
    ours = greedy_batch(load_causal_lm(path).cuda(), tokenizer, [tokenizer(texts[0])["input_ids"]], 8)
    assert vllm_generate(path, texts, 8, yarn="none") == ours
