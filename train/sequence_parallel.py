"""The sequence-parallel data path (the layout of the ranks is `train.parallel_dims`).

Within an SP group every sequence (each document of a packed row)
is cut into 2 * sp_size equal chunks and rank r holds chunks r and
2 * sp_size - 1 - r (the zigzag layout, which balances causal work). Labels
are shifted on the global sequence before the split (see data_builders.model_inputs.collate),
so splitting never re-shifts.
"""
from __future__ import annotations

import torch

from data_builders.model_inputs.collate import TOKEN_FIELDS

SP_MODES = ("zigzag", "zigzag_varlen")


def doc_lengths(position_ids: torch.Tensor) -> list[int]:
    """Lengths of the packed documents of one row: a document starts where positions restart at 0."""
    starts = (position_ids == 0).nonzero().flatten().tolist()
    if not starts or starts[0] != 0:
        raise ValueError("position_ids of a row must start at 0 (each packed sample restarts at 0)")
    return [b - a for a, b in zip(starts, starts[1:] + [position_ids.numel()])]


def zigzag_index(doc_lens: list[int], sp_size: int, sp_rank: int) -> torch.Tensor:
    """Positions (in the row) that rank `sp_rank` holds; every length must divide by 2 * sp_size."""
    parts, offset = [], 0
    for n in doc_lens:
        if n % (2 * sp_size):
            raise ValueError(f"document length {n} is not a multiple of 2 * sp_size = {2 * sp_size}")
        c = n // (2 * sp_size)
        for chunk in (sp_rank, 2 * sp_size - 1 - sp_rank):
            parts.append(torch.arange(offset + chunk * c, offset + (chunk + 1) * c))
        offset += n
    return torch.cat(parts)


def pad_documents(row: dict, multiple: int, pad_id: int) -> tuple[dict, list[int]]:
    """Pad every document of a one-row batch to a multiple of `multiple`.

    Pads go right after their document (so causal attention never lets a real token
    see them), carry label IGNORE_INDEX and continue that document's positions.
    """
    if row["input_ids"].shape[0] != 1 or "attention_mask" in row:
        raise ValueError("sequence parallelism takes one (possibly packed) row per micro-batch: "
                         "set optim.micro_batch_size=1")
    lens = doc_lengths(row["position_ids"][0])
    fill = {k: v for k, v in (("input_ids", pad_id), *TOKEN_FIELDS.items()) if k in row}
    parts: dict[str, list] = {k: [] for k in [*fill, "position_ids", "real"]}
    padded, start = [], 0
    for n in lens:
        extra = -n % multiple
        for key, value in fill.items():
            parts[key] += [row[key][0, start:start + n], torch.full((extra,), value)]
        parts["real"] += [torch.ones(n, dtype=torch.bool), torch.zeros(extra, dtype=torch.bool)]
        parts["position_ids"].append(torch.arange(n + extra))
        padded.append(n + extra)
        start += n
    return {k: torch.cat(v)[None] for k, v in parts.items()}, padded


def shard_batch(row: dict, sp_size: int, sp_rank: int, pad_id: int, mode: str = "zigzag_varlen") -> dict:
    """This rank's slice of a one-row batch, plus `sp_doc_lens` (local document lengths).

    Mode `zigzag` takes one sequence per row; `zigzag_varlen` also packed rows. A
    `last_index` (classification) becomes this rank's local index of that token, or -1.
    """
    if mode not in SP_MODES:
        raise ValueError(f"parallel.sp_mode: expected one of {list(SP_MODES)}, found {mode!r}")
    if mode == "zigzag" and len(doc_lengths(row["position_ids"][0])) > 1:
        raise ValueError("a packed row (position_ids restart inside it) needs parallel.sp_mode=zigzag_varlen")
    padded, lens = pad_documents(row, 2 * sp_size, pad_id)
    idx = zigzag_index(lens, sp_size, sp_rank)
    local = {k: v[:, idx] for k, v in padded.items()}
    local["n_real_tokens"] = int(local.pop("real").sum())
    local["sp_doc_lens"] = [n // sp_size for n in lens]
    if "last_index" in row:
        if len(lens) > 1:
            raise ValueError("classification rows hold one document; found a packed row")
        # padding goes after the document, so its tokens keep their indices
        hit = (idx == int(row["last_index"][0])).nonzero().flatten()
        local["last_index"] = torch.tensor([int(hit[0]) if len(hit) else -1])
    for key in ("labels",):
        if key in row:
            local[key] = row[key]
    return local


def zigzag_gather(parts: list[torch.Tensor], doc_lens: list[int], dim: int = 1) -> torch.Tensor:
    """Inverse of the split: the full (padded) sequence from every rank's slice, in rank order."""
    sp = len(parts)
    total = sum(doc_lens)
    shape = list(parts[0].shape)
    shape[dim] = total
    out = parts[0].new_empty(shape)
    for r, part in enumerate(parts):
        out.index_copy_(dim, zigzag_index(doc_lens, sp, r).to(part.device), part)
    return out
