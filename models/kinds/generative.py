"""A generative annotator: a decoder writes its verdict (Prompt-E's JSON, ANAH's tags) after the prompt."""
from __future__ import annotations

from data_builders.model_inputs.collate import IGNORE_INDEX, collate, encode_sample
from data_builders.model_inputs.head_targets import head_of
from data_builders.records import SENTENCE_TYPES
from models.builders import load_causal_lm
from models.generate import greedy_completions
from models.kinds.kind_spec import Kind, prompt_inputs
from models.loss import token_loss_sum
from models.response_lm import ResponseLM


def _lm_targets(batch: dict, n_samples: int, sp_rank: int) -> int:
    return int((batch["shift_labels"] != IGNORE_INDEX).sum())


KIND = Kind(
    name="generative", generates=True, lora_task="CAUSAL_LM",
    encode=lambda rec, tok, task: encode_sample(rec, tok, task.template, task.response_lm),
    inputs=prompt_inputs,
    collate=collate,
    load=lambda path, head, dtype, attn, yarn: load_causal_lm(path, dtype, attn, yarn),
    for_inference=lambda model: model,
    for_training=lambda module, chunk_tokens: ResponseLM(module, chunk_tokens),
    loss_sum=lambda model, batch, task, sp_rank, **kw: token_loss_sum(model, batch, **kw)[0],
    targets=_lm_targets,
    predict=lambda model, tok, inputs, new, padded=False: greedy_completions(
        model, tok, [x["input_ids"] for x in inputs], new, padded),
    pool=lambda results: results[0],
    labels=lambda task: SENTENCE_TYPES if task.scorer == "anah" else head_of("binary").labels,
    thresholded=lambda task: False,
    on_encoder=lambda task: False,
    card_title=lambda task: "generative")
