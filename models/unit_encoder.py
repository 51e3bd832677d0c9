"""A cross-encoder fine-tuned to tell whether a response unit (a sentence or a clause) is supported by the source
pieces closest to it: the learnt feature of the grounding annotator (`eval.grounding.encoder`). It reads
`[CLS] unit [SEP] evidence [SEP]` and a linear head gives one logit (hallucinated > 0): on the [CLS] state
(`head="unit"`, trained on each unit's label), or on each of the unit's tokens (`head="token"`, LettuceDetect's
token classification, trained on which tokens lie in a hallucinated span), the unit's logit being its highest
token's.

Training (`fit_unit_encoder`) runs on CPU in bf16 autocast; scoring (`unit_logits`) in
fp32, one record's units per call, so that an export scores a row as the run that fitted it did. Saved as the
encoder's own `from_pretrained` directory plus `head.safetensors`: nothing that runs code on load.
"""
from __future__ import annotations

import math
import random
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file
from transformers import AutoModel, AutoTokenizer

from data_builders.common.progress import progress

HEAD_FILE = "head.safetensors"
HEADS = ("unit", "token")


@dataclass(frozen=True)
class EncoderTraining:
    """How a unit encoder is fine-tuned: passes over the training units, AdamW's peak learning rate (6% warmup,
    linear decay), tokens per (unit, evidence) pair, pairs per step, and the head (`HEADS`)."""
    epochs: float = 1.0
    lr: float = 5e-5
    max_len: int = 192
    batch_size: int = 32
    head: str = "unit"


Spans = list[tuple[int, int]]      # hallucinated character spans of a unit's text; [] when it is supported


class UnitEncoder(torch.nn.Module):
    def __init__(self, path: str | Path, head: dict[str, torch.Tensor] | None = None, max_len: int = 192,
                 kind: str = "unit"):
        super().__init__()
        if kind not in HEADS:
            raise ValueError(f"unit encoder head: expected one of {', '.join(HEADS)}, found {kind!r}")
        self.head_kind = kind
        self.encoder = AutoModel.from_pretrained(str(path), dtype=torch.float32)
        self.tokenizer = AutoTokenizer.from_pretrained(str(path))
        self.head = torch.nn.Linear(self.encoder.config.hidden_size, 1)
        if head is not None:
            self.head.load_state_dict(head)
        self.max_len = max_len

    def read(self, pairs: list[tuple[str, str]]):
        """The tokenized pairs; for the token head (they need a fast tokenizer) also each token's character
        offsets in its text and which tokens are the unit's (a unit truncated away entirely is read by its [CLS])."""
        per_token = self.head_kind == "token"
        batch = self.tokenizer([u for u, _ in pairs], [e for _, e in pairs], truncation="longest_first",
                               max_length=self.max_len, padding=True, return_offsets_mapping=per_token,
                               return_tensors="pt")
        if not per_token:
            return batch, None, None
        in_unit = torch.tensor([[i == 0 for i in batch.sequence_ids(row)] for row in range(len(pairs))])
        in_unit[:, 0] |= ~in_unit.any(1)
        return batch, batch.pop("offset_mapping"), in_unit

    def targets(self, pairs: list[tuple[str, str]], spans: list[Spans]) -> torch.Tensor:
        """What the loss compares the logits with: each unit's label, or each unit token's (inside a span)."""
        if self.head_kind == "unit":
            return torch.tensor([float(bool(s)) for s in spans])
        _, offsets, in_unit = self.read(pairs)
        marked = torch.tensor([[float(any(a < e and b > s for a, b in unit)) for s, e in row.tolist()]
                               for row, unit in zip(offsets, spans)])
        return marked[in_unit]

    def forward(self, pairs: list[tuple[str, str]], training: bool = False) -> torch.Tensor:
        """Each pair's logit; `training`: the loss's logits instead (one per unit, or one per unit token)."""
        batch, _, in_unit = self.read(pairs)
        if self.head_kind == "unit":
            return self.head(self.encoder(**batch).last_hidden_state[:, 0].float()).squeeze(-1)
        tokens = self.per_token(batch)
        return tokens[in_unit] if training else highest_unit_token(tokens, in_unit)

    def per_token(self, batch) -> torch.Tensor:
        """The head's logit on every token of the tokenized pairs (the token head's reading)."""
        return self.head(self.encoder(**batch).last_hidden_state.float()).squeeze(-1)

    def save(self, out: Path) -> None:
        self.encoder.save_pretrained(out, safe_serialization=True)
        self.tokenizer.save_pretrained(out)
        save_file({k: v.contiguous() for k, v in self.head.state_dict().items()}, str(out / HEAD_FILE))

    @classmethod
    def load(cls, directory: Path, max_len: int, kind: str = "unit") -> UnitEncoder:
        model = cls(directory, load_file(str(directory / HEAD_FILE)), max_len, kind)
        return model.eval()


def positive_share(model: UnitEncoder, pairs: list[tuple[str, str]], spans: list[Spans], desc: str) -> float:
    """The share of training targets (units, or unit tokens) that are hallucinated: the loss weighs positives by
    the rest's share. Refuses a training set with one kind only."""
    targets = torch.cat([model.targets(pairs[i:i + 512], spans[i:i + 512]) for i in range(0, len(pairs), 512)]
                        or [torch.zeros(0)])
    positive = float(targets.mean()) if len(targets) else 0.0
    if not 0 < positive < 1:
        raise ValueError(f"{desc}: fine-tuning needs hallucinated and supported {model.head_kind}s, found "
                         f"{int(targets.sum())} hallucinated of {len(targets)}")
    return positive


def fit_unit_encoder(path: str, pairs: list[tuple[str, str]], spans: list[Spans], training: EncoderTraining,
                     seed: int, desc: str = "unit encoder") -> UnitEncoder:
    """`path`'s encoder with a fresh head (`training.head`), fine-tuned on the pairs and their units'
    hallucinated spans (binary cross-entropy, the positives weighted by the negatives' share), in eval mode on
    return."""
    torch.manual_seed(seed)
    model = UnitEncoder(path, max_len=training.max_len, kind=training.head).train()
    positive = positive_share(model, pairs, spans, desc)
    total = max(1, math.ceil(training.epochs * len(pairs) / training.batch_size))
    optimizer = torch.optim.AdamW(model.parameters(), lr=training.lr, weight_decay=0.01)
    warmup = max(1, round(0.06 * total))
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: min(1.0, (s + 1) / warmup) * (total - s) / total)
    order: list[int] = []
    rng = random.Random(seed)
    for _ in progress(range(total), desc=desc):
        if len(order) < training.batch_size:
            fresh = list(range(len(pairs)))
            rng.shuffle(fresh)
            order += fresh
        step, order = order[:training.batch_size], order[training.batch_size:]
        batch = [pairs[i] for i in step]
        with torch.autocast("cpu", dtype=torch.bfloat16):     # the grounding annotator runs on CPU
            logits = model(batch, training=True).float()
        loss = torch.nn.functional.binary_cross_entropy_with_logits(
            logits, model.targets(batch, [spans[i] for i in step]), pos_weight=torch.tensor((1 - positive) / positive))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        optimizer.zero_grad()
    return model.eval()


def highest_unit_token(logits: torch.Tensor, in_unit: torch.Tensor) -> torch.Tensor:
    """A unit's logit under the token head: its highest unit token's (the last dimension runs over tokens)."""
    return logits.masked_fill(~in_unit, float("-inf")).amax(-1)


@torch.no_grad()
def token_readings(encoders: list[UnitEncoder], pairs: list[tuple[str, str]]
                   ) -> tuple[list[float], list[list[tuple[int, int, float]]]]:
    """From one pass of the token heads (fp32, one batch: a record's units): each unit's logit, as `unit_logits`
    gives it, and the heads' mean logit of each unit token, as (start, end, logit) in the unit's characters; the
    encoders share a tokenizer, so their tokens line up."""
    if not pairs:
        return [], []
    batch, offsets, in_unit = encoders[0].read(pairs)
    logits = torch.stack([e.per_token(batch) for e in encoders])
    units = highest_unit_token(logits, in_unit).mean(0).tolist()
    return units, [[(a, b, logit) for (a, b), logit, inside in zip(row.tolist(), row_logits.tolist(), mask.tolist())
                    if inside and b > a] for row, row_logits, mask in zip(offsets, logits.mean(0), in_unit)]


@torch.no_grad()
def unit_logits(encoders: list[UnitEncoder], pairs: list[tuple[str, str]]) -> list[float]:
    """The encoders' mean logit for each pair, in fp32 and one batch (a record's units)."""
    if not pairs:
        return []
    return torch.stack([e(pairs) for e in encoders]).mean(0).tolist()
