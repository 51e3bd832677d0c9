"""A discriminative annotator: a classification head (binary, ANAH's four types, faithfulness) reads
the prompt, or an encoder's (evidence, response) chunks."""
from __future__ import annotations

from data_builders.model_inputs.collate import collate_classification, encode_classification, head_target
from data_builders.model_inputs.head_targets import head_of
from data_builders.model_inputs.pairs import pool_chunks, uses_pairs
from models.generate import head_probs_batch
from models.heads import load_classifier, sequence_classifier
from models.kinds.kind_spec import Kind, prompt_inputs, training_pair
from models.loss import classifier_loss_sum


class Discriminative(Kind):
    name, generates, lora_task = "discriminative", False, "SEQ_CLS"

    def encode(self, rec, tok, task):
        if not uses_pairs(tok):
            return encode_classification(rec, tok, task.template, task.head)
        pair = training_pair(rec, tok)
        return {"id": rec["id"], "input_ids": pair["input_ids"], "token_type_ids": pair["token_type_ids"],
                "label": head_target(rec, task.head)}

    def inputs(self, rec, tok, task):
        return prompt_inputs(rec, tok, task)

    def collate(self, samples, pad_id):
        return collate_classification(samples, pad_id)

    def load(self, path, head, dtype, attn_implementation, yarn_factor):
        return load_classifier(path, head, dtype, attn_implementation, yarn_factor)

    def for_inference(self, model):
        return sequence_classifier(model)

    def for_training(self, module, chunk_tokens):
        return module

    def loss_sum(self, model, batch, task, sp_rank, **sp):
        return classifier_loss_sum(model, batch, task, sp_rank, **sp)[0]

    def targets(self, batch, n_samples, sp_rank):
        return n_samples if sp_rank == 0 else 0     # SP rank 0 counts each sample once

    def predict(self, model, tok, inputs, max_new_tokens, padded=False):
        return [{"probs": p} for p in head_probs_batch(model, inputs)]

    def pool(self, results):
        """One input: its probabilities; an encoder's chunks (binary head): the hallucination probability's min."""
        if len(results) == 1:
            return results[0]
        hallucinated = pool_chunks([[r["probs"][1]] for r in results])[0]
        return {"probs": [1 - hallucinated, hallucinated]}

    def labels(self, task):
        return head_of(task.head).labels

    def thresholded(self, task):
        return task.head == "binary"

    def card_title(self, task):
        return f"discriminative ({task.head} head)"


KIND = Discriminative()
