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


class Generative(Kind):
    name, generates, lora_task = "generative", True, "CAUSAL_LM"

    def encode(self, rec, tok, task):
        return encode_sample(rec, tok, task.template, task.response_lm)

    def inputs(self, rec, tok, task):
        return prompt_inputs(rec, tok, task)

    def collate(self, samples, pad_id):
        return collate(samples, pad_id)

    def load(self, path, head, dtype, attn_implementation, yarn_factor):
        return load_causal_lm(path, dtype, attn_implementation, yarn_factor)

    def for_inference(self, model):
        return model

    def for_training(self, module, chunk_tokens):
        return ResponseLM(module, chunk_tokens)

    def loss_sum(self, model, batch, task, sp_rank, **sp):
        return token_loss_sum(model, batch, **sp)[0]

    def targets(self, batch, n_samples, sp_rank):
        return int((batch["shift_labels"] != IGNORE_INDEX).sum())

    def predict(self, model, tok, inputs, max_new_tokens, padded=False):
        return greedy_completions(model, tok, [x["input_ids"] for x in inputs], max_new_tokens, padded)

    def pool(self, results):
        return results[0]

    def labels(self, task):
        return SENTENCE_TYPES if task.scorer == "anah" else head_of("binary").labels

    def thresholded(self, task):
        return False

    def card_title(self, task):
        return "generative"


KIND = Generative()
