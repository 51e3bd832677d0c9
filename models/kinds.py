"""The kinds of annotator (`task.kind`), one record each: how a record becomes a training sample,
how samples are batched, which module is trained and how its loss is summed, how it predicts, and
what the memory plan and the export count. Every part of the toolkit that differs by kind reads
it from here (`kind_of(task)`), as torchtitan's `TrainSpec` does; a new kind is one new entry.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from data_builders.choices import TaskKind
from data_builders.collate import (
    HEAD_LABELS,
    IGNORE_INDEX,
    collate,
    collate_classification,
    encode_classification,
    encode_sample,
)
from data_builders.schema import SENTENCE_TYPES
from models.builders import load_causal_lm
from models.generate import greedy_batch, head_probs_batch
from models.heads import PooledClassifier, load_classifier
from models.loss import classifier_loss_sum, token_loss_sum
from models.response_lm import ResponseLM


@dataclass(frozen=True)
class Kind:
    name: str
    generates: bool            # an LM head writes the answer (else a classification head reads the prompt):
                               # packing, response_lm, vLLM, the logits term of the plan and LoRA's task type
    encode: Callable           # (record, tokenizer, task) -> training sample
    collate: Callable          # (samples, pad_id) -> batch
    load: Callable             # (path, head, dtype, attn_implementation) -> Hugging Face model
    for_inference: Callable    # (HF model, LoRA-wrapped or not) -> the module that predicts
    for_training: Callable     # (that module, trainer.loss_chunk_tokens) -> the module that is trained
    loss_sum: Callable         # (engine or module, batch, task, sp_rank, **sp kwargs) -> summed loss tensor
    targets: Callable          # (this rank's batch, samples in it, sp_rank) -> how many targets it counts
    predict: Callable          # (module, tokenizer, prompts of token ids, max_new_tokens) -> rows
    labels: Callable           # task -> the names of what it tells apart


def _lm_targets(batch: dict, n_samples: int, sp_rank: int) -> int:
    return int((batch["shift_labels"] != IGNORE_INDEX).sum())


def _head_targets(batch: dict, n_samples: int, sp_rank: int) -> int:
    return n_samples if sp_rank == 0 else 0     # SP rank 0 counts each sample once


KINDS: dict[str, Kind] = {
    TaskKind.generative: Kind(
        name="generative", generates=True,
        encode=lambda rec, tok, task: encode_sample(rec, tok, task.template, task.response_lm),
        collate=collate,
        load=lambda path, head, dtype, attn: load_causal_lm(path, dtype, attn),
        for_inference=lambda model: model,
        for_training=lambda module, chunk_tokens: ResponseLM(module, chunk_tokens),
        loss_sum=lambda model, batch, task, sp_rank, **kw: token_loss_sum(model, batch, **kw)[0],
        targets=_lm_targets,
        predict=lambda model, tok, prompts, new: [{"output": o} for o in greedy_batch(model, tok, prompts, new)],
        labels=lambda task: SENTENCE_TYPES if task.scorer == "anah" else HEAD_LABELS["binary"]),
    TaskKind.discriminative: Kind(
        name="discriminative", generates=False,
        encode=lambda rec, tok, task: encode_classification(rec, tok, task.template, task.head),
        collate=collate_classification,
        load=load_classifier,
        for_inference=PooledClassifier,
        for_training=lambda module, chunk_tokens: module,
        loss_sum=lambda model, batch, task, sp_rank, **kw: classifier_loss_sum(model, batch, task, sp_rank, **kw)[0],
        targets=_head_targets,
        predict=lambda model, tok, prompts, new: [{"probs": p} for p in head_probs_batch(model, prompts)],
        labels=lambda task: HEAD_LABELS[task.head]),
}


def kind_of(task) -> Kind:
    """The record of `task.kind` (a `task` config, or the kind's name)."""
    return KINDS[getattr(task, "kind", task)]
