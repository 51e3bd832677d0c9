"""The SP x DP layout (ParallelDims) and the data path (split then gather is the identity)."""
import pytest
import torch

from data_builders.model_inputs.collate import IGNORE_INDEX
from train.parallel_dims import ParallelDims
from train.sequence_parallel import (
    doc_lengths,
    pad_documents,
    shard_batch,
    zigzag_gather,
    zigzag_index,
)


@pytest.mark.parametrize("world, sp, groups", [
    (1, 1, [[0]]), (2, 2, [[0, 1]]), (4, 2, [[0, 1], [2, 3]]), (8, 4, [[0, 1, 2, 3], [4, 5, 6, 7]]),
])
def test_mesh(world, sp, groups):
    mesh = ParallelDims(world, sp)
    assert mesh.sp_groups() == groups and mesh.dp_size == len(groups)
    for g, ranks in enumerate(groups):
        assert [mesh.dp_rank(r) for r in ranks] == [g] * sp
        assert [mesh.sp_rank(r) for r in ranks] == list(range(sp))


@pytest.mark.parametrize("world, sp", [(6, 4), (2, 3), (4, 0)])
def test_mesh_rejects_bad_sizes(world, sp):
    with pytest.raises(ValueError, match="parallel.sp_size"):
        ParallelDims(world, sp)
    with pytest.raises(ValueError, match="curriculum stage 'long' sp_size"):
        ParallelDims(world, sp, "curriculum stage 'long' sp_size")


def test_zigzag_layout():
    # 2 ranks, 8 tokens: chunks [0,1][2,3][4,5][6,7]; rank 0 holds chunks 0 and 3, rank 1 chunks 1 and 2
    assert zigzag_index([8], 2, 0).tolist() == [0, 1, 6, 7]
    assert zigzag_index([8], 2, 1).tolist() == [2, 3, 4, 5]
    assert zigzag_index([4, 8], 2, 1).tolist() == [1, 2, 6, 7, 8, 9]
    with pytest.raises(ValueError, match="multiple of 2 \\* sp_size"):
        zigzag_index([6], 2, 0)


def _packed_row(lengths, vocab=50):
    ids = torch.cat([torch.randint(3, vocab, (n,)) for n in lengths])[None]
    labels = torch.cat([torch.cat([torch.full((n // 2,), IGNORE_INDEX), torch.randint(3, vocab, (n - n // 2,))])
                        for n in lengths])[None]
    pos = torch.cat([torch.arange(n) for n in lengths])[None]
    return {"input_ids": ids, "shift_labels": labels, "position_ids": pos}


@pytest.mark.parametrize("sp", [1, 2, 4])
@pytest.mark.parametrize("lengths", [[16], [37], [5, 23, 11]])
def test_split_then_gather_is_identity(sp, lengths):
    row = _packed_row(lengths)
    padded, padded_lens = pad_documents(row, 2 * sp, pad_id=0)
    shards = [shard_batch(row, sp, r, pad_id=0) for r in range(sp)]
    for key in ("input_ids", "shift_labels", "position_ids"):
        assert torch.equal(zigzag_gather([s[key] for s in shards], padded_lens), padded[key])
    assert sum(s["n_real_tokens"] for s in shards) == sum(lengths)
    assert all(s["sp_doc_lens"] == [n // sp for n in padded_lens] for s in shards)
    # labels and positions follow their tokens; every target token is kept exactly once
    kept = sorted(int(x) for s in shards for x in s["shift_labels"][0] if x != IGNORE_INDEX)
    assert kept == sorted(int(x) for x in row["shift_labels"][0] if x != IGNORE_INDEX)


def test_padding_restarts_positions_and_is_ignored():
    row = _packed_row([5, 3])
    padded, lens = pad_documents(row, 4, pad_id=0)
    assert lens == [8, 4]
    assert padded["position_ids"][0].tolist() == list(range(8)) + list(range(4))
    assert padded["shift_labels"][0, 5:8].tolist() == [IGNORE_INDEX] * 3
    assert doc_lengths(padded["position_ids"][0]) == [8, 4]


def test_sp_needs_one_row_per_micro_batch():
    row = _packed_row([8])
    two = {k: v.repeat(2, 1) for k, v in row.items()}
    with pytest.raises(ValueError, match="micro_batch_size=1"):
        shard_batch(two, 2, 0, pad_id=0)


def test_plain_zigzag_rejects_packed_rows():
    with pytest.raises(ValueError, match="sp_mode=zigzag_varlen"):
        shard_batch(_packed_row([8, 8]), 2, 0, pad_id=0, mode="zigzag")
    assert shard_batch(_packed_row([16]), 2, 0, pad_id=0, mode="zigzag")["sp_doc_lens"] == [8]
