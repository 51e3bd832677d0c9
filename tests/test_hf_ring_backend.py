"""The ring backend plugs into any HF decoder through transformers' AttentionInterface."""
import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM

from models.attention.hf_ring import register


@pytest.mark.parametrize("arch", [(LlamaConfig, LlamaForCausalLM), (Qwen2Config, Qwen2ForCausalLM)],
                         ids=["llama", "qwen2"])
def test_ring_backend_matches_sdpa_on_other_decoders(arch):
    config_cls, model_cls = arch
    config = config_cls(vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256)
    torch.manual_seed(0)
    model = model_cls(config).eval()
    ids = torch.randint(0, 128, (1, 40))
    pos = torch.cat([torch.arange(25), torch.arange(15)])[None]     # two packed documents
    model.set_attn_implementation(register())
    ring = model(input_ids=ids, position_ids=pos, sp_group=None, sp_doc_lens=[25, 15]).logits
    model.set_attn_implementation("sdpa")
    first = model(input_ids=ids[:, :25]).logits
    second = model(input_ids=ids[:, 25:]).logits
    torch.testing.assert_close(ring, torch.cat([first, second], 1), atol=1e-5, rtol=1e-5)
