"""`model.trainable_layers`: the top N layers and the head train; the embeddings and the layers below get no
gradient, so backward stops at the lowest trained layer."""
import pytest
import torch

from models.annotator import load_annotator, train_top_layers
from models.builders import resolve_model_path


def test_only_the_top_layers_and_the_head_get_gradients():
    module = load_annotator(resolve_model_path("embedded:qwen3-tiny"), "spans")
    hf = module.model
    trainable, total = train_top_layers(hf, 1)          # the tiny Qwen3 has 2 layers
    assert 0 < trainable < total
    ids = torch.randint(10, 200, (1, 12))
    hf(input_ids=ids, labels=torch.zeros(1, 12, dtype=torch.long)).loss.backward()
    grads = {name: p.grad is not None for name, p in hf.named_parameters()}
    assert not any(v for k, v in grads.items() if "embed_tokens" in k or ".layers.0." in k)
    assert all(v for k, v in grads.items() if ".layers.1." in k or k.startswith("score"))
    assert sum(p.numel() for p in hf.parameters() if p.grad is not None) == trainable
    for wrong in (0, 3):
        with pytest.raises(ValueError, match=rf"model.trainable_layers={wrong}: expected 1..2"):
            train_top_layers(hf, wrong)
