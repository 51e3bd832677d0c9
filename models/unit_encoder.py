"""A cross-encoder fine-tuned to tell whether a response unit (a sentence or a clause) is supported by the source
pieces closest to it: the learnt feature of the grounding annotator (`eval.grounding.encoder`). It reads
`[CLS] unit [SEP] evidence [SEP]` and a linear head on the [CLS] state gives one logit (hallucinated > 0).

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


@dataclass(frozen=True)
class EncoderTraining:
    """How a unit encoder is fine-tuned: passes over the training units, AdamW's peak learning rate (6% warmup,
    linear decay), tokens per (unit, evidence) pair, pairs per step."""
    epochs: float = 1.0
    lr: float = 5e-5
    max_len: int = 192
    batch_size: int = 32


class UnitEncoder(torch.nn.Module):
    def __init__(self, path: str | Path, head: dict[str, torch.Tensor] | None = None, max_len: int = 192):
        super().__init__()
        self.encoder = AutoModel.from_pretrained(str(path), dtype=torch.float32)
        self.tokenizer = AutoTokenizer.from_pretrained(str(path))
        self.head = torch.nn.Linear(self.encoder.config.hidden_size, 1)
        if head is not None:
            self.head.load_state_dict(head)
        self.max_len = max_len

    def forward(self, pairs: list[tuple[str, str]]) -> torch.Tensor:
        batch = self.tokenizer([u for u, _ in pairs], [e for _, e in pairs], truncation="longest_first",
                               max_length=self.max_len, padding=True, return_tensors="pt")
        cls = self.encoder(**batch).last_hidden_state[:, 0]
        return self.head(cls.float()).squeeze(-1)

    def save(self, out: Path) -> None:
        self.encoder.save_pretrained(out, safe_serialization=True)
        self.tokenizer.save_pretrained(out)
        save_file({k: v.contiguous() for k, v in self.head.state_dict().items()}, str(out / HEAD_FILE))

    @classmethod
    def load(cls, directory: Path, max_len: int) -> UnitEncoder:
        model = cls(directory, load_file(str(directory / HEAD_FILE)), max_len)
        return model.eval()


def fit_unit_encoder(path: str, pairs: list[tuple[str, str]], labels: list[int], training: EncoderTraining,
                     seed: int, desc: str = "unit encoder") -> UnitEncoder:
    """`path`'s encoder with a fresh head, fine-tuned on the pairs (binary cross-entropy, the positives
    weighted by the negatives' share), in eval mode on return."""
    if len(set(labels)) < 2:
        raise ValueError(f"{desc}: fine-tuning needs hallucinated and supported units, found labels {set(labels)} "
                         f"in {len(labels)} units")
    torch.manual_seed(seed)
    model = UnitEncoder(path, max_len=training.max_len).train()
    y = torch.tensor(labels, dtype=torch.float32)
    positive = float(y.mean())
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
        with torch.autocast("cpu", dtype=torch.bfloat16):     # the grounding annotator runs on CPU
            logits = model([pairs[i] for i in step]).float()
        loss = torch.nn.functional.binary_cross_entropy_with_logits(
            logits, y[step], pos_weight=torch.tensor((1 - positive) / positive))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        optimizer.zero_grad()
    return model.eval()


@torch.no_grad()
def unit_logits(encoders: list[UnitEncoder], pairs: list[tuple[str, str]]) -> list[float]:
    """The encoders' mean logit for each pair, in fp32 and one batch (a record's units)."""
    if not pairs:
        return []
    return torch.stack([e(pairs) for e in encoders]).mean(0).tolist()
