"""Packing: rows of whole samples with restarted positions; the ring backend keeps documents apart,
so a packed row's summed loss and gradients equal those of its samples taken one by one."""
import torch

from data_builders.model_inputs.collate import collate, encode_sample, pack_samples, padded_fraction
from models.builders import load_causal_lm, resolve_model_path
from models.loss import token_loss_sum
from train.sequence_parallel import shard_batch

REC = {"id": "x", "task": "summarization", "language": "zh", "response": "摘要", "label": 0}


def _samples(tokenizer, sizes):
    return [encode_sample({**REC, "id": f"r{i}", "source": "原文" * n}, tokenizer) for i, n in enumerate(sizes)]


def test_first_fit_decreasing_keeps_whole_samples():
    samples = [{"id": str(n), "input_ids": [1] * n, "shift_labels": [-100] * n} for n in (6, 5, 4, 3, 2)]
    rows = pack_samples(samples, 10)
    assert sorted(len(r["input_ids"]) for r in rows) == [10, 10]
    assert {r["id"] for r in rows} == {"6+4", "5+3+2"}
    assert rows[0]["position_ids"] == list(range(6)) + list(range(4))
    assert padded_fraction([[r] for r in rows]) == 0.0
    assert abs(padded_fraction([samples[:2]]) - 1 / 12) < 1e-12


def test_packed_row_equals_its_samples(tokenizer):
    from models.attention.hf_ring import register

    path = resolve_model_path("embedded:qwen3-tiny")
    torch.manual_seed(0)
    samples = _samples(tokenizer, (40, 15, 27))
    ring = load_causal_lm(path, "float32", register())
    row = collate(pack_samples(samples, 10_000), tokenizer.pad_token_id)
    local = shard_batch(row, 1, 0, tokenizer.pad_token_id, "zigzag_varlen")
    doc_lens = local.pop("sp_doc_lens")
    local.pop("n_real_tokens")
    packed_loss, packed_n = token_loss_sum(ring, local, sp_group=None, sp_doc_lens=doc_lens)
    packed_loss.backward()
    packed_grads = [p.grad.clone() for p in ring.parameters()]

    plain = load_causal_lm(path, "float32", "sdpa")
    total, n = 0.0, 0
    for s in samples:
        loss, k = token_loss_sum(plain, collate([s], tokenizer.pad_token_id))
        loss.backward()
        total, n = total + loss.item(), n + k
    assert packed_n == n
    torch.testing.assert_close(packed_loss.item(), total, rtol=1e-5, atol=1e-5)
    for a, p in zip(packed_grads, plain.parameters()):
        torch.testing.assert_close(a, p.grad, rtol=1e-4, atol=1e-6)
