"""Loading an annotator of either kind from a Hugging Face directory."""
from __future__ import annotations

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
