"""vLLM backend: YaRN settings of seed 000 E.1 (pure), and greedy decoding on a GPU (marked `gpu`)."""
import json

import pytest

from eval.backends.vllm import yarn_rope_scaling


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
    from eval.backends.vllm import vllm_generate
    from models.builders import load_causal_lm, resolve_model_path
    from models.generate import greedy_batch

    path = resolve_model_path("embedded:qwen3-tiny")
    texts = ["<|im_start|>user\n你好<|im_end|>\n<|im_start|>assistant\n"]
    prompts = [tokenizer(texts[0])["input_ids"]]
    ours = greedy_batch(load_causal_lm(path).cuda(), tokenizer, prompts, 8)
    assert vllm_generate(path, prompts, 8, yarn="none") == ours


def test_vllm_gets_the_prompts_of_the_hf_path_sentence_by_sentence(monkeypatch, tokenizer):
    """eval.backend=vllm decodes the token ids training renders, one prompt per response sentence
    under task.evidence_sentences (it used to skip the sentence-level formulation). vLLM itself
    needs a GPU; here its function records what it is handed."""
    from hydra import compose, initialize_config_dir

    import configs.schema  # noqa: F401
    import eval.backends.vllm
    from configs.schema import typed
    from data_builders.model_inputs.collate import prompt_ids
    from data_builders.model_inputs.evidence import evidence_records
    from eval.predictors import AnnotatorPredictor, Inference
    from tests.conftest import REPO

    with initialize_config_dir(config_dir=str(REPO / "configs"), version_base="1.3"):
        cfg = typed(compose("sft", overrides=["+exp=longnovel_curriculum_demo", "eval.backend=vllm"]))
    record = {"id": "r1", "task": "summarization", "language": "zh", "label": 0,
              "source": "林远走进书房。他拿起那本旧书。窗外下着雨。", "response": "林远走进书房。他拿起书。"}
    handed = []
    monkeypatch.setattr(eval.backends.vllm, "vllm_generate",
                        lambda path, prompts, *a: handed.extend(prompts) or ['{"verdict": "无幻觉"}'] * len(prompts))
    predictor = AnnotatorPredictor(cfg.task, Inference.of(cfg.model, cfg.eval), path="unused")
    predictor.tokenizer = tokenizer
    predictor.prepare({})
    rows = predictor.rows([record])
    sentences = evidence_records(record, cfg.task.evidence_sentences, labelled=False)
    assert len(sentences) == 2 and len(rows) == 1 and rows[0]["id"] == "r1"
    assert handed == [prompt_ids(e, tokenizer, cfg.task.template) for e in sentences]
