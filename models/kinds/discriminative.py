"""A discriminative annotator: a classification head (binary, ANAH's four types, faithfulness) reads
the prompt, or an encoder's (evidence, response) chunks."""
from __future__ import annotations

from data_builders.model_inputs.collate import collate_classification, encode_classification, head_target
from data_builders.model_inputs.head_targets import head_of
from data_builders.model_inputs.pairs import pool_chunks, uses_pairs
from models.generate import head_probs_batch
from models.heads import load_classifier, sequence_classifier
from models.kinds.kind_spec import Kind, not_generative, prompt_inputs, training_pair
from models.loss import classifier_loss_sum


def _encode(rec: dict, tok, task) -> dict:
    if not uses_pairs(tok):
        return encode_classification(rec, tok, task.template, task.head)
    pair = training_pair(rec, tok)
    return {"id": rec["id"], "input_ids": pair["input_ids"], "token_type_ids": pair["token_type_ids"],
            "label": head_target(rec, task.head)}


def _head_targets(batch: dict, n_samples: int, sp_rank: int) -> int:
    return n_samples if sp_rank == 0 else 0     # SP rank 0 counts each sample once


def _pool(results: list[dict]) -> dict:
    """One input: its probabilities; an encoder's chunks (binary head): the hallucination probability's min."""
    if len(results) == 1:
        return results[0]
    hallucinated = pool_chunks([[r["probs"][1]] for r in results])[0]
    return {"probs": [1 - hallucinated, hallucinated]}


def _task_problem(task) -> str | None:
    if task.evidence_sentences and task.head != "binary":
        return (f"task.evidence_sentences={task.evidence_sentences} scores a record by its worst sentence: a "
                f"discriminative annotator needs task.head=binary, found {task.head!r}")
    return not_generative(task)


KIND = Kind(
    name="discriminative", generates=False, lora_task="SEQ_CLS",
    encode=_encode,
    inputs=prompt_inputs,
    collate=collate_classification,
    load=load_classifier,
    for_inference=sequence_classifier,
    for_training=lambda module, chunk_tokens: module,
    loss_sum=lambda model, batch, task, sp_rank, **kw: classifier_loss_sum(model, batch, task, sp_rank, **kw)[0],
    targets=_head_targets,
    predict=lambda model, tok, inputs, new: [{"probs": p} for p in head_probs_batch(model, inputs)],
    pool=_pool,
    labels=lambda task: head_of(task.head).labels,
    thresholded=lambda task: task.head == "binary",
    on_encoder=lambda task: task.head == "binary",
    card_title=lambda task: f"discriminative ({task.head} head)",
    task_problem=_task_problem)
