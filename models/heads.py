"""Discriminative annotators: the pre-trained decoder with its LM head replaced by a linear
head (ANAH section 3.2), through transformers' `AutoModelForSequenceClassification`.

The head reads the hidden state of the last prompt token. Under sequence parallelism that
token lives on one rank of the SP group; `last_token_state` fetches it from there with a
differentiable all-reduce, so every rank sees it and gradients flow back to its owner.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn
from transformers import AutoModelForSequenceClassification

from data_builders.collate import HEAD_LABELS
from models.builders import torch_dtype


@dataclass(frozen=True)
class HeadSpec:
    labels: tuple[str, ...]
    multi_label: bool = False


HEADS = {name: HeadSpec(tuple(labels), multi_label=(name == "faithfulness")) for name, labels in HEAD_LABELS.items()}


def head_spec(name: str) -> HeadSpec:
    if name not in HEADS:
        raise ValueError(f"task.head: expected one of {sorted(HEADS)}, found {name!r}")
    return HEADS[name]


def load_classifier(path: str, head: str, dtype: str = "auto", attn_implementation: str = "sdpa"):
    """A sequence classifier on the decoder at `path` (a causal LM or an earlier classifier)."""
    spec = head_spec(head)
    return AutoModelForSequenceClassification.from_pretrained(
        path, num_labels=len(spec.labels), id2label=dict(enumerate(spec.labels)),
        label2id={n: i for i, n in enumerate(spec.labels)},
        problem_type="multi_label_classification" if spec.multi_label else "single_label_classification",
        dtype=torch_dtype(dtype), attn_implementation=attn_implementation)


def last_token_state(hidden: torch.Tensor, last_local: torch.Tensor, group=None) -> torch.Tensor:
    """[batch, hidden] states at `last_local` (local index per row, -1 where another rank holds it)."""
    rows = torch.arange(hidden.shape[0], device=hidden.device)
    here = last_local >= 0
    state = torch.where(here[:, None], hidden[rows, last_local.clamp(min=0)], torch.zeros_like(hidden[:, 0]))
    if group is not None:
        from torch.distributed.nn.functional import all_reduce

        state = all_reduce(state, group=group)
    return state


class PooledClassifier(nn.Module):
    """Wraps a `*ForSequenceClassification` model: decoder, last-prompt-token state, linear head.

    Pooling is by explicit index (`last_index`), not by searching pad tokens, so it works for
    right-padded batches and for zigzag shards alike. DeepSpeed engines wrap this module.
    """

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids, position_ids, last_index, attention_mask=None, sp_group=None,
                sp_doc_lens=None):
        ring = {"sp_group": sp_group, "sp_doc_lens": sp_doc_lens} if sp_doc_lens is not None else {}
        out = self.decoder(input_ids=input_ids, position_ids=position_ids,
                           attention_mask=attention_mask, use_cache=False, **ring)
        return self.model.score(last_token_state(out.last_hidden_state, last_index, sp_group))

    @property
    def decoder(self):
        """The decoder body, also when the model is wrapped by peft (LoRA)."""
        inner = self.model.get_base_model() if hasattr(self.model, "get_base_model") else self.model
        return inner.base_model


def classification_loss_sum(logits: torch.Tensor, labels: torch.Tensor, multi_label: bool,
                            class_weights: list[float] | None = None, focal_gamma: float = 0.0) -> torch.Tensor:
    """Summed per-sample loss: cross-entropy (optionally class-weighted / focal) or, for
    multi-label heads, binary cross-entropy averaged over labels."""
    logits = logits.float()
    if multi_label:
        return F.binary_cross_entropy_with_logits(logits, labels.float(), reduction="none").mean(-1).sum()
    ce = F.cross_entropy(logits, labels, reduction="none")
    if focal_gamma:
        ce = ce * (1 - torch.exp(-ce)) ** focal_gamma
    if class_weights is not None:
        ce = ce * torch.tensor(class_weights, device=ce.device)[labels]
    return ce.sum()
