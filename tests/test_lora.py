"""LoRA: the merged export gives the same logits as the unmerged adapter; a ZeRO-3 run with
LoRA trains only the adapters and exports a plain Hugging Face model."""
import json

import pytest
import torch
from omegaconf import OmegaConf
from peft import get_peft_model
from safetensors.torch import load_file

from configs.schema import LoraSettings
from models.builders import load_causal_lm, resolve_model_path
from models.heads import PooledClassifier, TokenClassifier, load_classifier, load_token_classifier
from models.lora import lora_config, merged_copy
from tests.conftest import torchrun
from tests.test_trainer_e2e import TINY, _ok
from train.run_dir import read_train_log

LORA = OmegaConf.structured(LoraSettings(enabled=True, r=4, alpha=8))


@pytest.mark.parametrize("task_type", ["CAUSAL_LM", "SEQ_CLS", "TOKEN_CLS"])
def test_merged_export_equals_the_adapter(task_type):
    path = resolve_model_path("embedded:qwen3-tiny")
    load = {"CAUSAL_LM": lambda: load_causal_lm(path), "SEQ_CLS": lambda: load_classifier(path, "anah"),
            "TOKEN_CLS": lambda: load_token_classifier(path)}[task_type]
    has_head = task_type != "CAUSAL_LM"
    torch.manual_seed(0)
    base = load()
    if has_head:
        base.score.weight.data.normal_()                 # the head is random: fix it for both copies
    head = base.score.weight.detach().clone() if has_head else None
    adapted = get_peft_model(base, lora_config(LORA, task_type, init_weights=False))  # non-zero B
    ids = torch.randint(3, 500, (2, 23))
    pos, last = torch.arange(23).expand(2, 23), torch.tensor([22, 22])

    def logits(model):
        with torch.no_grad():
            if task_type == "SEQ_CLS":
                return PooledClassifier(model)(ids, pos, last)
            return TokenClassifier(model)(ids, pos) if has_head else model(input_ids=ids).logits

    expected = logits(adapted.eval())
    fresh = load()
    if has_head:
        fresh.score.weight.data.copy_(head)
    merged = merged_copy(fresh, adapted.state_dict(), LORA, task_type).eval()
    assert not any("lora_" in k for k in merged.state_dict())
    torch.testing.assert_close(logits(merged), expected, atol=1e-5, rtol=1e-5)


@pytest.mark.slow
@pytest.mark.parametrize("task, architecture", [("longnovel_detection", "Qwen3ForCausalLM"),
                                                ("spans", "Qwen3ForTokenClassification")])
def test_lora_training_under_zero3_exports_a_merged_model(tmp_path, task, architecture):
    one_stage = ["curriculum.stages=[{name: s2k, bucket: S, max_seq_len: 2048, max_steps: 3}]", f"task={task}",
                 "eval.enabled=false", "model.lora.enabled=true", "model.lora.r=4"]
    _ok(torchrun(2, TINY + one_stage + [f"output_dir={tmp_path}"]))
    log = read_train_log(tmp_path)
    assert len(log) == 3 and log[-1]["loss"] < log[0]["loss"]
    hf = tmp_path / "checkpoints" / "0-s2k" / "hf"
    weights = load_file(hf / "model.safetensors")
    assert not any("lora" in k for k in weights)
    base = load_file(resolve_model_path("embedded:qwen3-tiny") + "/model.safetensors")
    changed = [k for k in base if not torch.equal(base[k], weights[k])]      # the decoder's weights: adapters only
    assert changed and all(k.endswith(("q_proj.weight", "k_proj.weight", "v_proj.weight", "o_proj.weight"))
                           for k in changed), changed
    assert json.loads((hf / "config.json").read_text())["architectures"] == [architecture]
