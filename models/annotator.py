"""Loading an annotator of either kind from a Hugging Face directory."""
from __future__ import annotations

from models.heads import PooledClassifier
from models.kinds import kind_of
from models.lora import add_lora
from models.response_lm import ResponseLM


def load_annotator(path: str, kind: str, head: str = "binary", dtype: str = "auto",
                   attn_implementation: str = "sdpa", lora=None):
    """A causal LM (`generative`), or the decoder with a linear head wrapped for last-token pooling
    (`discriminative`); with `lora` (the `model.lora` settings), LoRA adapters on top."""
    spec = kind_of(kind)
    model = spec.load(path, head, dtype, attn_implementation)
    if lora is not None:
        model = add_lora(model, lora, discriminative=not spec.generates)
    return spec.for_inference(model)


def hf_model(module):
    """The Hugging Face model inside a (possibly wrapped) module."""
    return module.model if isinstance(module, (PooledClassifier, ResponseLM)) else module
