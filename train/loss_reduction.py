"""The token-weighted reduction of the loss across SP ranks, data-parallel ranks and gradient
accumulation (the per-kind losses themselves are `models.loss`)."""
from __future__ import annotations


def backward_scale(world_size: int, grad_accum: int, global_tokens: float) -> float:
    """Factor turning a rank's summed loss into its share of the step's token mean.

    DeepSpeed divides by grad_accum in backward and averages gradients over all
    ranks, so scaling by world_size * grad_accum / global_tokens leaves exactly
    sum(all token losses) / global_tokens. This holds with sequence parallelism
    too: the ranks of an SP group hold disjoint tokens of one sample, so their
    summed losses add up to the sample's (no extra 1/sp_size factor).
    """
    return world_size * grad_accum / global_tokens
