"""Token-weighted causal-LM loss on response tokens only."""
from __future__ import annotations

import torch

from models.heads import classification_loss_sum, head_spec
from models.response_lm import ResponseLM


def token_loss_sum(model, batch: dict, **model_kwargs) -> tuple[torch.Tensor, int]:
    """Summed cross-entropy over labelled positions, and how many there are.

    `model` is a `ResponseLM`, an engine wrapping one, or a plain causal LM (wrapped here); the
    logits are computed in chunks of labelled positions only (see `models.response_lm`).
    """
    module = model if isinstance(getattr(model, "module", model), ResponseLM) else ResponseLM(model)
    return module(input_ids=batch["input_ids"], position_ids=batch["position_ids"], shift_labels=batch["shift_labels"],
                  attention_mask=batch.get("attention_mask"), **model_kwargs)


def backward_scale(world_size: int, grad_accum: int, global_tokens: float) -> float:
    """Factor turning a rank's summed loss into its share of the step's token mean.

    DeepSpeed divides by grad_accum in backward and averages gradients over all
    ranks, so scaling by world_size * grad_accum / global_tokens leaves exactly
    sum(all token losses) / global_tokens. This holds with sequence parallelism
    too: the ranks of an SP group hold disjoint tokens of one sample, so their
    summed losses add up to the sample's (no extra 1/sp_size factor).
    """
    return world_size * grad_accum / global_tokens


def classifier_loss_sum(model, batch: dict, task, sp_rank: int = 0, **model_kwargs) -> tuple[torch.Tensor, int]:
    """Summed head loss over the micro-batch's samples, and the sample count.

    Every rank of an SP group sees the pooled state, but only SP rank 0 counts the loss;
    the others still run backward so that the gradient reaches the rank holding the token.
    """
    logits = model(input_ids=batch["input_ids"], position_ids=batch["position_ids"],
                   last_index=batch["last_index"], attention_mask=batch.get("attention_mask"), **model_kwargs)
    loss = classification_loss_sum(logits, batch["labels"], head_spec(task.head).multi_label,
                                   list(task.class_weights) if task.class_weights else None, task.focal_gamma)
    counted = sp_rank == 0
    return loss * counted, len(batch["labels"]) * counted
