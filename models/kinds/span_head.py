"""A span annotator: a head labels every response token hallucinated or faithful; its runs of
flagged tokens are the predicted spans."""
from __future__ import annotations

from data_builders.model_inputs.collate import IGNORE_INDEX, collate
from data_builders.model_inputs.head_targets import head_of
from data_builders.model_inputs.pairs import pair_inputs, pool_chunks, uses_pairs
from data_builders.model_inputs.token_spans import labelled_sample, prompt_input
from models.generate import token_probs_batch
from models.heads import TokenClassifier, load_token_classifier
from models.kinds.kind_spec import Kind, training_pair
from models.loss import token_classifier_loss_sum


class Spans(Kind):
    name, generates, lora_task, token_probs = "spans", False, "TOKEN_CLS", True

    def encode(self, rec, tok, task):
        return labelled_sample(rec, training_pair(rec, tok) if uses_pairs(tok) else
                               prompt_input(rec, tok, task.template))

    def inputs(self, rec, tok, task):
        return pair_inputs(rec, tok) if uses_pairs(tok) else [prompt_input(rec, tok, task.template)]

    def collate(self, samples, pad_id):
        return collate(samples, pad_id)

    def load(self, path, head, dtype, attn_implementation, yarn_factor):
        return load_token_classifier(path, head, dtype, attn_implementation, yarn_factor)

    def for_inference(self, model):
        return TokenClassifier(model)

    def for_training(self, module, chunk_tokens):
        return module

    def loss_sum(self, model, batch, task, sp_rank, **sp):
        return token_classifier_loss_sum(model, batch, task, **sp)[0]

    def targets(self, batch, n_samples, sp_rank):
        return int((batch["token_labels"] != IGNORE_INDEX).sum())

    def predict(self, model, tok, inputs, max_new_tokens, padded=False):
        return [{"token_probs": p, "tokens": x["tokens"]} for x, p in zip(inputs, token_probs_batch(model, inputs))]

    def pool(self, results):
        """A response's tokens as [start, end, probability] (pooled over chunks), and its response-level
        probability: its most suspicious token's."""
        probs = pool_chunks([r["token_probs"] for r in results])
        worst = max(probs, default=0.0)
        return {"probs": [1 - worst, worst],
                "token_probs": [[a, b, round(p, 6)] for (_, a, b), p in zip(results[0]["tokens"], probs)]}

    def labels(self, task):
        return head_of("binary").labels

    def thresholded(self, task):
        return True

    def card_title(self, task):
        return "spans (a label per response token)"


KIND = Spans()
