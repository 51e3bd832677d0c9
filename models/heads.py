"""Discriminative annotators: the pre-trained decoder with its LM head replaced by a linear
head (ANAH section 3.2), through transformers' `AutoModelForSequenceClassification`.

The head reads the hidden state of the last prompt token. Under sequence parallelism that
token lives on one rank of the SP group; `last_token_state` fetches it from there with a
differentiable all-reduce, so every rank sees it and gradients flow back to its owner.
"""
from __future__ import annotations

import logging
import warnings

import torch
import torch.nn.functional as F
from torch import nn
from transformers import AutoConfig, AutoModelForSequenceClassification, AutoModelForTokenClassification

from data_builders.model_inputs.head_targets import head_of
from models.builders import is_encoder, is_encoder_model, torch_dtype, yarn_config


def _label_kwargs(labels: tuple[str, ...]) -> dict:
    return {"num_labels": len(labels), "id2label": dict(enumerate(labels)),
            "label2id": {n: i for i, n in enumerate(labels)}}


def _attention(auto_class, path: str, requested: str) -> str:
    """The requested attention implementation, or eager attention where the architecture has no SDPA
    kernel (DeBERTa-v2 / v3), said once."""
    model_class = auto_class._model_mapping[type(AutoConfig.from_pretrained(path))]
    if requested == "sdpa" and not model_class._supports_sdpa:
        warnings.warn(f"{model_class.__name__} has no SDPA attention: it runs eager attention "
                      "(model.attn_implementation=eager)", stacklevel=3)
        return "eager"
    return requested


def _no_load_report(record: logging.LogRecord) -> bool:
    return "LOAD REPORT" not in record.getMessage()


def _from_pretrained(auto_class, path: str, **kwargs):
    """`auto_class.from_pretrained`, with transformers' load report (a table at every load, on every
    rank) replaced by what matters: a new head is expected on a base model and goes unsaid; weights of
    the body missing from the checkpoint (left random) are warned by name."""
    reporter = logging.getLogger("transformers.modeling_utils")
    reporter.addFilter(_no_load_report)
    try:
        model, info = auto_class.from_pretrained(path, output_loading_info=True, **kwargs)
    finally:
        reporter.removeFilter(_no_load_report)
    body = model.base_model_prefix + "."
    missing = [k for k in info["missing_keys"] if k.startswith(body)]
    if missing:
        warnings.warn(f"{path}: {len(missing)} weights of the model body are not in the checkpoint and start "
                      f"random: {', '.join(sorted(missing)[:8])}{' ...' if len(missing) > 8 else ''}", stacklevel=3)
    return model


def load_classifier(path: str, head: str, dtype: str = "auto", attn_implementation: str = "sdpa",
                    yarn_factor: float | None = None):
    """A sequence classifier on the decoder or encoder at `path` (a base model or an earlier classifier)."""
    spec = head_of(head)
    return _from_pretrained(
        AutoModelForSequenceClassification, path, **_label_kwargs(spec.labels),
        problem_type="multi_label_classification" if spec.multi_label else "single_label_classification",
        dtype=torch_dtype(dtype), attn_implementation=_attention(AutoModelForSequenceClassification, path,
                                                                 attn_implementation),
        **yarn_config(path, yarn_factor))


def load_token_classifier(path: str, head: str = "binary", dtype: str = "auto", attn_implementation: str = "sdpa",
                          yarn_factor: float | None = None):
    """A token classifier (hallucinated / faithful per token) on the decoder or encoder at `path`. A
    decoder's head reads its hidden states without dropout, as the other heads on decoders do (and as
    sequence-parallel equality needs); an encoder keeps its own classifier dropout."""
    config = AutoConfig.from_pretrained(path, **_label_kwargs(head_of("binary").labels),
                                        **yarn_config(path, yarn_factor))
    if not is_encoder(path):
        config.classifier_dropout = 0.0
    return _from_pretrained(
        AutoModelForTokenClassification, path, config=config, dtype=torch_dtype(dtype),
        attn_implementation=_attention(AutoModelForTokenClassification, path, attn_implementation))


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


class EncoderClassifier(nn.Module):
    """Wraps an encoder's `*ForSequenceClassification`: the encoder pools the pair itself ([CLS])."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids, position_ids=None, last_index=None, attention_mask=None, token_type_ids=None):
        segments = {"token_type_ids": token_type_ids} if token_type_ids is not None else {}
        return self.model(input_ids=input_ids, attention_mask=attention_mask, **segments).logits


class TokenClassifier(nn.Module):
    """Wraps a `*ForTokenClassification` model (decoder or encoder): logits for every token. Under
    sequence parallelism each rank holds its tokens' logits; nothing crosses ranks but attention."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids, position_ids=None, attention_mask=None, token_type_ids=None, sp_group=None,
                sp_doc_lens=None):
        extra = {"sp_group": sp_group, "sp_doc_lens": sp_doc_lens} if sp_doc_lens is not None else {}
        if token_type_ids is not None:
            extra["token_type_ids"] = token_type_ids
        if not is_encoder_model(self.model):
            extra["use_cache"] = False
        return self.model(input_ids=input_ids, position_ids=position_ids, attention_mask=attention_mask,
                          **extra).logits


def sequence_classifier(model) -> nn.Module:
    """The module that predicts with a sequence classifier: last-prompt-token pooling on a decoder,
    the encoder's own pooling on an encoder."""
    return EncoderClassifier(model) if is_encoder_model(model) else PooledClassifier(model)


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
