"""The summed losses of one micro-batch, per kind of annotator: the LM's cross-entropy on response
tokens, and a head's classification loss (their token-weighted reduction is `train.loss_reduction`)."""
from __future__ import annotations

import torch
import torch.nn.functional as F

from data_builders.model_inputs.collate import IGNORE_INDEX
from data_builders.model_inputs.head_targets import head_of
from models.heads import classification_loss_sum
from models.response_lm import ResponseLM


def token_loss_sum(model, batch: dict, **model_kwargs) -> tuple[torch.Tensor, int]:
    """Summed cross-entropy over labelled positions, and how many there are.

    `model` is a `ResponseLM`, an engine wrapping one, or a plain causal LM (wrapped here); the
    logits are computed in chunks of labelled positions only (see `models.response_lm`).
    """
    module = model if isinstance(getattr(model, "module", model), ResponseLM) else ResponseLM(model)
    return module(input_ids=batch["input_ids"], position_ids=batch["position_ids"], shift_labels=batch["shift_labels"],
                  attention_mask=batch.get("attention_mask"), **model_kwargs)


def classifier_loss_sum(model, batch: dict, task, sp_rank: int = 0, **model_kwargs) -> tuple[torch.Tensor, int]:
    """Summed head loss over the micro-batch's samples, and the sample count.

    Every rank of an SP group sees the pooled state, but only SP rank 0 counts the loss;
    the others still run backward so that the gradient reaches the rank holding the token.
    """
    if "token_type_ids" in batch:
        model_kwargs["token_type_ids"] = batch["token_type_ids"]
    logits = model(input_ids=batch["input_ids"], position_ids=batch["position_ids"],
                   last_index=batch["last_index"], attention_mask=batch.get("attention_mask"), **model_kwargs)
    loss = classification_loss_sum(logits, batch["labels"], head_of(task.head).multi_label,
                                   list(task.class_weights) if task.class_weights else None, task.focal_gamma)
    counted = sp_rank == 0
    return loss * counted, len(batch["labels"]) * counted


def token_classifier_loss_sum(model, batch: dict, task, **model_kwargs) -> tuple[torch.Tensor, int]:
    """Summed cross-entropy over this rank's labelled (response) tokens, and how many there are;
    `task.class_weights` weighs faithful / hallucinated tokens."""
    if "token_type_ids" in batch:
        model_kwargs["token_type_ids"] = batch["token_type_ids"]
    logits = model(input_ids=batch["input_ids"], position_ids=batch["position_ids"],
                   attention_mask=batch.get("attention_mask"), **model_kwargs)
    labels = batch["token_labels"].flatten()
    weight = torch.tensor(list(task.class_weights), device=logits.device) if task.class_weights else None
    ce = F.cross_entropy(logits.float().flatten(0, 1), labels, weight=weight, ignore_index=IGNORE_INDEX,
                         reduction="sum")
    return ce, int((labels != IGNORE_INDEX).sum())
