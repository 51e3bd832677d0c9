"""`model.yarn_factor`: a decoder's RoPE window stretched by YaRN, for stages past its own."""
import pytest
import torch

from models.annotator import load_annotator
from models.builders import resolve_model_path, yarn_config


def test_yarn_stretches_the_window_and_changes_only_what_rope_reaches(tmp_path):
    path = resolve_model_path("embedded:qwen3-tiny")
    plain = load_annotator(path, "generative", dtype="float32").eval()
    scaled = load_annotator(path, "generative", dtype="float32", yarn_factor=4.0).eval()
    window = plain.config.max_position_embeddings
    assert scaled.config.rope_parameters["rope_type"] == "yarn"
    assert scaled.config.rope_parameters["original_max_position_embeddings"] == window
    assert scaled.config.max_position_embeddings == 4 * window
    ids = torch.randint(3, plain.config.vocab_size, (1, 16), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        first = (plain(ids).logits[0, 0], scaled(ids).logits[0, 0])    # position 0: no rotation at all
        later = (plain(ids).logits[0, -1], scaled(ids).logits[0, -1])
    torch.testing.assert_close(*first, rtol=0, atol=1e-5)
    assert (later[0] - later[1]).abs().max() > 1e-4                      # the frequencies did change
    scaled.save_pretrained(tmp_path)                                     # a stage's export keeps it ...
    assert yarn_config(str(tmp_path), 4.0) == {}                         # ... and the next stage adds none


def test_yarn_refuses_a_model_without_rotary_embeddings_and_a_factor_that_shrinks():
    with pytest.raises(ValueError, match="no rotary position embeddings"):
        yarn_config(resolve_model_path("embedded:minilm"), 2.0)
    with pytest.raises(ValueError, match="expected a factor > 1"):
        yarn_config(resolve_model_path("embedded:qwen3-tiny"), 0.5)
    assert yarn_config(resolve_model_path("embedded:qwen3-tiny"), None) == {}
