"""LoRA adapters (peft) for both kinds of annotator, merged into a full model on export."""
from __future__ import annotations

from typing import TYPE_CHECKING

from configs.schema import LoraSettings

if TYPE_CHECKING:       # peft is imported where LoRA is used: 1.4 s off every other process's start
    from peft import LoraConfig


def lora_config(lora: LoraSettings, task_type: str, init_weights: bool = True) -> LoraConfig:
    """`lora` is `model.lora`; `task_type` is peft's (the kind's `lora_task`). A classification head
    (`score`, on a decoder) is trained in full beside the adapters."""
    from peft import LoraConfig

    return LoraConfig(r=lora.r, lora_alpha=lora.alpha, lora_dropout=lora.dropout,
                      target_modules=list(lora.target_modules),
                      modules_to_save=None if task_type == "CAUSAL_LM" else ["score"],
                      task_type=task_type, init_lora_weights=init_weights)


def add_lora(model, lora: LoraSettings, task_type: str):
    from peft import get_peft_model

    return get_peft_model(model, lora_config(lora, task_type))


def merged_copy(base, adapter_state: dict, lora: LoraSettings, task_type: str):
    """`base` (a fresh, unpartitioned copy of the weights the stage started from) with the
    trained adapter state loaded and merged in: a plain Hugging Face model."""
    from peft import get_peft_model

    peft_model = get_peft_model(base, lora_config(lora, task_type))
    missing, unexpected = peft_model.load_state_dict(adapter_state, strict=False)
    if unexpected or any("lora_" in k for k in missing):
        raise ValueError(f"LoRA state does not fit the model: missing {missing[:5]}, unexpected {unexpected[:5]}")
    return peft_model.merge_and_unload()
