"""A span annotator: a head labels every response token hallucinated or faithful; its runs of
flagged tokens are the predicted spans."""
from __future__ import annotations

from data_builders.model_inputs.collate import IGNORE_INDEX, collate
from data_builders.model_inputs.head_targets import head_of
from data_builders.model_inputs.pairs import pair_inputs, pool_chunks, uses_pairs
from data_builders.model_inputs.token_spans import labelled_sample, prompt_input
from models.generate import token_probs_batch
from models.heads import TokenClassifier, load_token_classifier
from models.kinds.kind_spec import Kind, not_generative, training_pair
from models.loss import token_classifier_loss_sum


def _inputs(rec: dict, tok, task) -> list[dict]:
    return pair_inputs(rec, tok) if uses_pairs(tok) else [prompt_input(rec, tok, task.template)]


def _encode(rec: dict, tok, task) -> dict:
    return labelled_sample(rec, training_pair(rec, tok) if uses_pairs(tok) else prompt_input(rec, tok, task.template))


def _token_targets(batch: dict, n_samples: int, sp_rank: int) -> int:
    return int((batch["token_labels"] != IGNORE_INDEX).sum())


def _pool(results: list[dict]) -> dict:
    """A response's tokens as [start, end, probability] (pooled over chunks), and its response-level
    probability: its most suspicious token's."""
    probs = pool_chunks([r["token_probs"] for r in results])
    worst = max(probs, default=0.0)
    return {"probs": [1 - worst, worst],
            "token_probs": [[a, b, round(p, 6)] for (_, a, b), p in zip(results[0]["tokens"], probs)]}


def _task_problem(task) -> str | None:
    if task.evidence_sentences or task.head != "binary":
        return (f"task.kind=spans labels the response's own tokens: it needs task.evidence_sentences=0 and "
                f"task.head=binary, found {task.evidence_sentences} and {task.head}")
    return not_generative(task)


KIND = Kind(
    name="spans", generates=False, lora_task="TOKEN_CLS",
    encode=_encode,
    inputs=_inputs,
    collate=collate,
    load=load_token_classifier,
    for_inference=TokenClassifier,
    for_training=lambda module, chunk_tokens: module,
    loss_sum=lambda model, batch, task, sp_rank, **kw: token_classifier_loss_sum(model, batch, task, **kw)[0],
    targets=_token_targets,
    predict=lambda model, tok, inputs, new: [
        {"token_probs": p, "tokens": x["tokens"]} for x, p in zip(inputs, token_probs_batch(model, inputs))],
    pool=_pool,
    labels=lambda task: head_of("binary").labels,
    thresholded=lambda task: True,
    on_encoder=lambda task: True,
    card_title=lambda task: "spans (a label per response token)",
    task_problem=_task_problem,
    token_probs=True)
