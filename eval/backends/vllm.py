"""Greedy generation with vLLM (the `gpu` extra), with YaRN rope scaling as LongNovel's
baselines were run (seed 000, E.1): factor 4 for Qwen and InternLM, 8 for Llama 3.1, none
for models with a native long window (GLM-4-9B)."""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from configs.schema import VllmConfig
from data_builders.model_inputs.collate import prompt_ids
from eval.backends.backend import Row, Write, output_rows

YARN_FACTORS = {"qwen": 4.0, "internlm": 4.0, "llama": 8.0}


def yarn_rope_scaling(model_dir: str, mode: str = "auto") -> dict | None:
    """The `rope_scaling` override for a local model directory; None keeps the model's own.

    mode: 'auto' (E.1's factor by model family), 'none', or a factor such as '4'.
    """
    if mode == "none":
        return None
    config = json.loads((Path(model_dir) / "config.json").read_text())
    family = next((k for k in YARN_FACTORS if str(config.get("model_type", "")).lower().startswith(k)), None)
    if mode == "auto" and family is None:
        return None
    factor = YARN_FACTORS[family] if mode == "auto" else float(mode)
    original = config.get("max_position_embeddings")
    if original is None:
        raise ValueError(f"{model_dir}/config.json has no max_position_embeddings; YaRN needs the original window")
    return {"rope_type": "yarn", "factor": factor, "original_max_position_embeddings": int(original)}


def vllm_generate(model_dir: str, prompts: list[list[int]], max_new_tokens: int, yarn: str = "auto",
                  tensor_parallel_size: int = 1, max_model_len: int | None = None) -> list[str]:
    """Greedy completions of prompts given as token ids (`data_builders.model_inputs.collate.prompt_ids`, as
    training renders them)."""
    from vllm import LLM, SamplingParams

    scaling = yarn_rope_scaling(model_dir, yarn)
    llm = LLM(model=model_dir, tensor_parallel_size=tensor_parallel_size, max_model_len=max_model_len,
              hf_overrides={"rope_scaling": scaling} if scaling else None)
    params = SamplingParams(temperature=0.0, max_tokens=max_new_tokens)
    outs = llm.generate([{"prompt_token_ids": p} for p in prompts], params)
    return [o.outputs[0].text for o in outs]


@dataclass(frozen=True)
class Vllm:
    """vLLM decodes every record in this process, from the token ids the HF path and training use."""
    path: str
    tokenizer: Any
    template: str
    max_new_tokens: int
    config: VllmConfig

    def rows(self, records: list[dict], progress: bool, on_result: Write | None) -> list[Row]:
        prompts = [prompt_ids(r, self.tokenizer, self.template) for r in records]
        c = self.config
        outputs = vllm_generate(self.path, prompts, self.max_new_tokens, c.yarn, c.tensor_parallel_size,
                                c.max_model_len)
        return output_rows(records, outputs, on_result)
