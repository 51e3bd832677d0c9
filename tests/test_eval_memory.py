"""Evaluating 32k-token prompts needs memory linear in their length (bounded by the model's size),
never a length x length attention matrix: a padded batch with a mask would need tens of GB."""
from types import SimpleNamespace

import pytest
from transformers import AutoConfig

from data_builders.model_inputs.collate import prompt_ids
from eval.backends.in_process import predict_records
from models.annotator import load_annotator
from models.builders import resolve_model_path
from train.host_memory import peak_rss, reset_peak_rss, return_freed_memory

TARGET = 32_768


def long_records(tokenizer, lengths: list[int]) -> list[dict]:
    """Records whose Prompt-E prompts have about the given token counts (all different)."""
    unit = "那一年连日大雨不停，山路被冲毁，众人议论纷纷。"
    base = {"task": "summarization", "language": "zh", "response": "山路被冲毁。", "label": 0}
    count = lambda k: len(prompt_ids({**base, "id": "u", "source": unit * k}, tokenizer))  # noqa: E731
    overhead, per_unit = count(0), (count(200) - count(0)) / 200
    return [{**base, "id": f"r{i}", "source": unit * int((n - overhead) / per_unit)} for i, n in enumerate(lengths)]


def bound_bytes(path: str, length: int) -> int:
    """What one prompt of `length` tokens may take beyond the loaded model: its KV cache and a few
    layer-sized activations per token, fp32, and 64 MB for everything else."""
    c = AutoConfig.from_pretrained(path)
    kv = 2 * c.num_hidden_layers * c.num_key_value_heads * c.head_dim
    activations = 8 * max(c.hidden_size, c.intermediate_size)
    return 4 * length * (kv + activations) + (64 << 20)


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["generative", "discriminative"])
def test_a_batch_of_32k_prompts_of_different_lengths_stays_within_a_model_derived_bound(tokenizer, kind):
    return_freed_memory()
    path = resolve_model_path("embedded:qwen3-tiny")
    model = load_annotator(path, kind, "binary")
    records = long_records(tokenizer, [TARGET - 1500, TARGET - 700, TARGET])
    lengths = [len(prompt_ids(r, tokenizer)) for r in records]
    assert len(set(lengths)) == 3 and max(lengths) <= TARGET + 64 and min(lengths) > TARGET - 2000
    before = reset_peak_rss() and peak_rss()
    assert before, "cannot reset the peak RSS on this system"
    rows = predict_records(model, tokenizer, records, SimpleNamespace(kind=kind, template="prompt_e"), max_new_tokens=4,
                           batch_size=8,
                           batch_tokens=16384)
    grew = peak_rss() - before
    assert [r["id"] for r in rows] == [r["id"] for r in records]
    bound = bound_bytes(path, max(lengths))
    print(f"{kind}: peak RSS growth {grew / 2**20:.0f} MB for prompts of {lengths} tokens; "
          f"bound {bound / 2**20:.0f} MB")
    assert grew < bound
