"""The causal LM as it is trained: decoder, then the LM head and cross-entropy on the labelled
positions only, a chunk of positions at a time.

At 36,864 tokens and Qwen3's 151,936-token vocabulary, fp32 logits of a whole sample are 22 GB.
Prompt positions carry no label and get no logits at all; the labelled ones go through the LM
head `chunk_tokens` at a time, and each chunk's logits are recomputed in backward instead of
stored, so at most one chunk of logits (chunk_tokens x vocab, fp32) exists at once. DeepSpeed
engines wrap this module (the loss is computed inside the root forward, where ZeRO-3 gathers
parameters), as they wrap `PooledClassifier` for a head.
"""
from __future__ import annotations

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

from data_builders.model_inputs.collate import IGNORE_INDEX

DEFAULT_CHUNK_TOKENS = 1024


class ResponseLM(nn.Module):
    def __init__(self, model, chunk_tokens: int = DEFAULT_CHUNK_TOKENS):
        super().__init__()
        if chunk_tokens < 1:
            raise ValueError(f"trainer.loss_chunk_tokens: expected >= 1, found {chunk_tokens}")
        self.model = model
        self.chunk_tokens = chunk_tokens

    def forward(self, input_ids, position_ids, shift_labels, attention_mask=None, sp_group=None,
                sp_doc_lens=None) -> tuple[torch.Tensor, int]:
        """Summed cross-entropy over the labelled positions, and how many there are."""
        ring = {"sp_group": sp_group, "sp_doc_lens": sp_doc_lens} if sp_doc_lens is not None else {}
        hidden = self.decoder(input_ids=input_ids, position_ids=position_ids, attention_mask=attention_mask,
                              use_cache=False, **ring).last_hidden_state
        labelled = shift_labels != IGNORE_INDEX
        states, targets = hidden[labelled], shift_labels[labelled]
        starts = [k * self.chunk_tokens for k in range(self._chunk_count(len(targets)))]
        loss = sum(checkpoint(self._chunk_loss, states[a:a + self.chunk_tokens], targets[a:a + self.chunk_tokens],
                              use_reentrant=False) for a in starts)
        return loss, len(targets)

    def _chunk_count(self, n: int) -> int:
        """Chunks this forward runs: the most any rank needs, at least one. Under ZeRO-3 each call
        of the LM head gathers its weight in a collective, so every rank must call it (here and in
        the recomputation) equally often, also a rank without labels; empty chunks add 0."""
        count = torch.tensor([max(1, -(-n // self.chunk_tokens))])
        if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
            dist.all_reduce(count, op=dist.ReduceOp.MAX)
        return int(count)

    def _chunk_loss(self, states: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(self.lm_head(states).float(), targets, reduction="sum")

    @property
    def causal_lm(self):
        """The model with the LM head, also when it is wrapped by peft (LoRA)."""
        return self.model.get_base_model() if hasattr(self.model, "get_base_model") else self.model

    @property
    def decoder(self):
        return self.causal_lm.base_model

    @property
    def lm_head(self):
        return self.causal_lm.get_output_embeddings()
