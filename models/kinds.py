"""The kinds of annotator (`task.kind`), one record each: how a record becomes a training sample
and the inputs that judge it (a decoder's prompt, an encoder's (evidence, response) pairs), how
samples are batched, which module is trained and how its loss is summed, how it predicts, and
what the memory plan and the export count. Every part of the toolkit that differs by kind reads
it from here (`kind_of(task)`), as torchtitan's `TrainSpec` does; a new kind is one new entry.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from configs.choices import TaskKind
from data_builders.collate import (
    HEAD_LABELS,
    IGNORE_INDEX,
    collate,
    collate_classification,
    encode_classification,
    encode_sample,
    head_target,
    prompt_ids,
)
from data_builders.pairs import PairTooLong, best_chunk, pair_inputs, pool_chunks, uses_pairs, whole_pair
from data_builders.schema import SENTENCE_TYPES
from data_builders.token_spans import labelled_sample, prompt_input
from models.builders import load_causal_lm
from models.generate import greedy_batch, head_probs_batch, token_probs_batch
from models.heads import TokenClassifier, load_classifier, load_token_classifier, sequence_classifier
from models.loss import classifier_loss_sum, token_classifier_loss_sum, token_loss_sum
from models.response_lm import ResponseLM


@dataclass(frozen=True)
class Kind:
    name: str
    generates: bool            # an LM head writes the answer (else a classification head reads the input):
                               # packing, response_lm, vLLM and the logits term of the plan
    lora_task: str             # peft's task type of its LoRA adapters
    encode: Callable           # (record, tokenizer, task) -> training sample
    inputs: Callable           # (record, tokenizer, task) -> the model inputs that judge it (an encoder: one per chunk)
    collate: Callable          # (samples, pad_id) -> batch
    load: Callable             # (path, head, dtype, attn_implementation) -> Hugging Face model
    for_inference: Callable    # (HF model, LoRA-wrapped or not) -> the module that predicts
    for_training: Callable     # (that module, trainer.loss_chunk_tokens) -> the module that is trained
    loss_sum: Callable         # (engine or module, batch, task, sp_rank, **sp kwargs) -> summed loss tensor
    targets: Callable          # (this rank's batch, samples in it, sp_rank) -> how many targets it counts
    predict: Callable          # (module, tokenizer, inputs, max_new_tokens) -> a result per input
    pool: Callable             # (results of one record's inputs) -> its prediction row's fields
    labels: Callable           # task -> the names of what it tells apart


def _lm_targets(batch: dict, n_samples: int, sp_rank: int) -> int:
    return int((batch["shift_labels"] != IGNORE_INDEX).sum())


def _token_targets(batch: dict, n_samples: int, sp_rank: int) -> int:
    return int((batch["token_labels"] != IGNORE_INDEX).sum())


def _head_targets(batch: dict, n_samples: int, sp_rank: int) -> int:
    return n_samples if sp_rank == 0 else 0     # SP rank 0 counts each sample once


def _prompt_inputs(rec: dict, tok, task) -> list[dict]:
    return pair_inputs(rec, tok) if uses_pairs(tok) else [{"input_ids": prompt_ids(rec, tok, task.template)}]


def _training_pair(rec: dict, tok) -> dict:
    """An encoder's training input: the evidence chunk most likely to hold the evidence; a pair that
    cannot fit the window comes back whole (longer than the stage's max_seq_len: skipped and counted)."""
    try:
        return best_chunk(pair_inputs(rec, tok), rec)
    except PairTooLong:
        return whole_pair(rec, tok)


def _encode_classification(rec: dict, tok, task) -> dict:
    if not uses_pairs(tok):
        return encode_classification(rec, tok, task.template, task.head)
    pair = _training_pair(rec, tok)
    return {"id": rec["id"], "input_ids": pair["input_ids"], "token_type_ids": pair["token_type_ids"],
            "label": head_target(rec, task.head)}


def _span_inputs(rec: dict, tok, task) -> list[dict]:
    return pair_inputs(rec, tok) if uses_pairs(tok) else [prompt_input(rec, tok, task.template)]


def _encode_spans(rec: dict, tok, task) -> dict:
    return labelled_sample(rec, _training_pair(rec, tok) if uses_pairs(tok) else prompt_input(rec, tok, task.template))


def _pool_heads(results: list[dict]) -> dict:
    """One input: its probabilities; an encoder's chunks (binary head): the hallucination probability's min."""
    if len(results) == 1:
        return results[0]
    hallucinated = pool_chunks([[r["probs"][1]] for r in results])[0]
    return {"probs": [1 - hallucinated, hallucinated]}


def _pool_tokens(results: list[dict]) -> dict:
    """A response's tokens as [start, end, probability] (pooled over chunks), and its response-level
    probability: its most suspicious token's."""
    probs = pool_chunks([r["token_probs"] for r in results])
    worst = max(probs, default=0.0)
    return {"probs": [1 - worst, worst],
            "token_probs": [[a, b, round(p, 6)] for (_, a, b), p in zip(results[0]["tokens"], probs)]}


KINDS: dict[str, Kind] = {
    TaskKind.generative: Kind(
        name="generative", generates=True, lora_task="CAUSAL_LM",
        encode=lambda rec, tok, task: encode_sample(rec, tok, task.template, task.response_lm),
        inputs=_prompt_inputs,
        collate=collate,
        load=lambda path, head, dtype, attn: load_causal_lm(path, dtype, attn),
        for_inference=lambda model: model,
        for_training=lambda module, chunk_tokens: ResponseLM(module, chunk_tokens),
        loss_sum=lambda model, batch, task, sp_rank, **kw: token_loss_sum(model, batch, **kw)[0],
        targets=_lm_targets,
        predict=lambda model, tok, inputs, new: [
            {"output": o} for o in greedy_batch(model, tok, [x["input_ids"] for x in inputs], new)],
        pool=lambda results: results[0],
        labels=lambda task: SENTENCE_TYPES if task.scorer == "anah" else HEAD_LABELS["binary"]),
    TaskKind.discriminative: Kind(
        name="discriminative", generates=False, lora_task="SEQ_CLS",
        encode=_encode_classification,
        inputs=_prompt_inputs,
        collate=collate_classification,
        load=load_classifier,
        for_inference=sequence_classifier,
        for_training=lambda module, chunk_tokens: module,
        loss_sum=lambda model, batch, task, sp_rank, **kw: classifier_loss_sum(model, batch, task, sp_rank, **kw)[0],
        targets=_head_targets,
        predict=lambda model, tok, inputs, new: [{"probs": p} for p in head_probs_batch(model, inputs)],
        pool=_pool_heads,
        labels=lambda task: HEAD_LABELS[task.head]),
    TaskKind.spans: Kind(
        name="spans", generates=False, lora_task="TOKEN_CLS",
        encode=_encode_spans,
        inputs=_span_inputs,
        collate=collate,
        load=load_token_classifier,
        for_inference=TokenClassifier,
        for_training=lambda module, chunk_tokens: module,
        loss_sum=lambda model, batch, task, sp_rank, **kw: token_classifier_loss_sum(model, batch, task, **kw)[0],
        targets=_token_targets,
        predict=lambda model, tok, inputs, new: [
            {"token_probs": p, "tokens": x["tokens"]} for x, p in zip(inputs, token_probs_batch(model, inputs))],
        pool=_pool_tokens,
        labels=lambda task: HEAD_LABELS["binary"]),
}


def kind_of(task) -> Kind:
    """The record of `task.kind` (a `task` config, or the kind's name)."""
    return KINDS[getattr(task, "kind", task)]
