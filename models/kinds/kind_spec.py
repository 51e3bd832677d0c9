"""What every kind of annotator provides (`Kind`), and the helpers two kinds share."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from data_builders.model_inputs.collate import prompt_ids
from data_builders.model_inputs.pairs import PairTooLong, best_chunk, pair_inputs, uses_pairs, whole_pair


def _none(task) -> str | None:
    return None


@dataclass(frozen=True)
class Kind:
    name: str
    generates: bool            # an LM head writes the answer (else a classification head reads the input):
                               # packing, response_lm, vLLM and the logits term of the plan
    lora_task: str             # peft's task type of its LoRA adapters
    encode: Callable           # (record, tokenizer, task) -> training sample
    inputs: Callable           # (record, tokenizer, task) -> the model inputs that judge it (an encoder: one per chunk)
    collate: Callable          # (samples, pad_id) -> batch
    load: Callable             # (path, head, dtype, attn_implementation, yarn_factor) -> Hugging Face model
    for_inference: Callable    # (HF model, LoRA-wrapped or not) -> the module that predicts
    for_training: Callable     # (that module, trainer.loss_chunk_tokens) -> the module that is trained
    loss_sum: Callable         # (engine or module, batch, task, sp_rank, **sp kwargs) -> summed loss tensor
    targets: Callable          # (this rank's batch, samples in it, sp_rank) -> how many targets it counts
    predict: Callable          # (module, tokenizer, inputs, max_new_tokens) -> a result per input
    pool: Callable             # (results of one record's inputs) -> its prediction row's fields
    labels: Callable           # task -> the names of what it tells apart
    thresholded: Callable      # task -> whether its rows carry a hallucination probability to threshold
    on_encoder: Callable       # task -> whether an encoder backbone (BERT family) can be trained for it
    card_title: Callable       # (task or export spec) -> how the model card names it
    task_problem: Callable[[object], str | None] = _none   # task -> what it refuses in the task's settings
    token_probs: bool = False  # its rows carry a probability per response token (spans at a threshold)


def prompt_inputs(rec: dict, tok, task) -> list[dict]:
    """A decoder reads one chat prompt; an encoder reads its (evidence, response) chunks."""
    return pair_inputs(rec, tok) if uses_pairs(tok) else [{"input_ids": prompt_ids(rec, tok, task.template)}]


def training_pair(rec: dict, tok) -> dict:
    """An encoder's training input: the evidence chunk most likely to hold the evidence; a pair that
    cannot fit the window comes back whole (longer than the stage's max_seq_len: skipped and counted)."""
    try:
        return best_chunk(pair_inputs(rec, tok), rec)
    except PairTooLong:
        return whole_pair(rec, tok)


def not_generative(task) -> str | None:
    if task.response_lm:
        return (f"task.response_lm=true trains the LM head on the response: it needs task.kind=generative, "
                f"found {task.kind!r}")
    return None
