"""Loading an annotator of either kind from a Hugging Face directory."""
from __future__ import annotations

import re

from models.heads import EncoderClassifier, PooledClassifier, TokenClassifier
from models.kinds import kind_of
from models.lora import add_lora
from models.response_lm import ResponseLM


def load_annotator(path: str, kind: str, head: str = "binary", dtype: str = "auto",
                   attn_implementation: str = "sdpa", lora=None, yarn_factor: float | None = None):
    """A causal LM (`generative`), a sequence classifier (`discriminative`: a decoder pooled at its last
    prompt token, an encoder at its own) or a token classifier (`spans`), wrapped as the kind predicts
    with it; with `lora` (the `model.lora` settings), LoRA adapters on top; with `yarn_factor`, its RoPE
    window stretched by YaRN."""
    spec = kind_of(kind)
    model = spec.load(path, head, dtype, attn_implementation, yarn_factor)
    if lora is not None:
        model = add_lora(model, lora, spec.lora_task)
    return spec.for_inference(model)


WRAPPERS = (PooledClassifier, EncoderClassifier, TokenClassifier, ResponseLM)   # each holds its model as `.model`


def hf_model(module):
    """The Hugging Face model inside a (possibly wrapped) module."""
    return module.model if isinstance(module, WRAPPERS) else module


_LAYER = re.compile(r"(?:^|\.)layers?\.(\d+)\.")


def train_top_layers(hf, n: int) -> tuple[int, int]:
    """Freeze the embeddings and every transformer layer but the top `n` (`model.trainable_layers`): the
    layers above them, the final norm and the head stay trainable, and backward stops at the lowest trained
    layer. Returns (trainable, all) parameter counts."""
    layers = max((int(m.group(1)) + 1 for name, _ in hf.named_parameters() if (m := _LAYER.search(name))),
                 default=0)
    if not 0 < n <= layers:
        raise ValueError(f"model.trainable_layers={n}: expected 1..{layers}, the model's number of layers")
    for name, param in hf.named_parameters():
        found = _LAYER.search(name)
        below = found is not None and int(found.group(1)) < layers - n
        param.requires_grad_(not (below or "embed" in name.split(".")[-2]))
    params = list(hf.parameters())
    return sum(p.numel() for p in params if p.requires_grad), sum(p.numel() for p in params)
