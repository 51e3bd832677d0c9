"""Token-weighted causal-LM loss on response tokens only."""
from __future__ import annotations

import torch
import torch.nn.functional as F

from data_builders.collate import IGNORE_INDEX
from models.heads import classification_loss_sum, head_spec


def token_loss_sum(model, batch: dict, **model_kwargs) -> tuple[torch.Tensor, int]:
    """Summed cross-entropy over labelled positions, and how many there are.

    Logits are computed only where some row has a label (`logits_to_keep`), so a
    32k-token prompt never materialises a 32k x vocab logits tensor.
    """
    labels = batch["shift_labels"]
    keep = (labels != IGNORE_INDEX).any(dim=0).nonzero().squeeze(1)
    out = model(input_ids=batch["input_ids"], position_ids=batch["position_ids"],
                attention_mask=batch.get("attention_mask"), logits_to_keep=keep, use_cache=False,
                **model_kwargs)
    kept = labels[:, keep]
    loss = F.cross_entropy(out.logits.float().flatten(0, 1), kept.flatten(),
                           ignore_index=IGNORE_INDEX, reduction="sum")
    return loss, int((kept != IGNORE_INDEX).sum())


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
