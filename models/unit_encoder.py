"""A cross-encoder fine-tuned to tell whether a response unit (a sentence or a clause) is supported by the source
pieces closest to it: the learnt feature of the grounding annotator (`eval.grounding.encoder`). It reads
`[CLS] unit [SEP] evidence [SEP]` and a linear head gives one logit (hallucinated > 0): on the [CLS] state
(`head="unit"`, trained on each unit's label), or on each of the unit's tokens (`head="token"`, LettuceDetect's
token classification, trained on which tokens lie in a hallucinated span), the unit's logit being its highest
token's.

Training (`fit_unit_encoder`) runs on CPU in bf16 autocast where the CPU computes bf16 natively (AVX512-BF16,
AMX), in fp32 elsewhere (`training_autocast`: emulated bf16 is many times slower); scoring (`unit_logits`) in
fp32, one record's units per call, so that an export scores a row as the run that fitted it did. Saved as the
encoder's own `from_pretrained` directory plus `head.safetensors`: nothing that runs code on load.
"""
from __future__ import annotations

import functools
import hashlib
import json
import math
import os
import random
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file
from transformers import AutoModel, AutoTokenizer

from data_builders.common.progress import progress

HEAD_FILE = "head.safetensors"
HEADS = ("unit", "token")


@functools.cache
def native_bf16() -> tuple[str, ...]:
    """This CPU's native bf16 instructions (`models.builders.cpu_bf16_features`), probed once."""
    from models.builders import cpu_bf16_features

    return tuple(cpu_bf16_features())


def training_precision() -> str:
    """What fine-tuning computes in on this CPU, and why: bf16 autocast where it is native, fp32 elsewhere."""
    if native_bf16():
        return f"bf16 autocast ({', '.join(native_bf16())})"
    return "fp32 (this CPU has no native bf16: no AVX512-BF16, no AMX)"


def training_autocast():
    return torch.autocast("cpu", dtype=torch.bfloat16, enabled=bool(native_bf16()))


Spans = list[tuple[int, int]]      # hallucinated character spans of a unit's text; [] when it is supported


@dataclass(frozen=True)
class EncoderTraining:
    """How a unit encoder is fine-tuned: passes over the training units, AdamW's peak learning rate (6% warmup,
    linear decay), tokens per (unit, evidence) pair, pairs per step, and the head (`HEADS`)."""
    epochs: float = 1.0
    lr: float = 5e-5
    max_len: int = 192
    batch_size: int = 32
    head: str = "unit"
    patience: int | None = None     # with validation pairs: stop after this many epochs without a better figure


@dataclass
class Validation:
    """Pairs the encoder never trains on, read after each epoch (`fit_unit_encoder`): the ROC AUC of its logits
    against their targets (units, or unit tokens) is the figure early stopping keeps the best epoch of."""
    pairs: list[tuple[str, str]]
    spans: list[Spans]
    batch_size: int = 64

    @torch.no_grad()
    def roc_auc(self, model: UnitEncoder) -> float:
        from sklearn.metrics import roc_auc_score

        training = model.training
        model.eval()
        logits, targets = [], []
        for i in range(0, len(self.pairs), self.batch_size):
            pairs, spans = self.pairs[i:i + self.batch_size], self.spans[i:i + self.batch_size]
            with training_autocast():
                logits.append(model(pairs, training=True).float())
            targets.append(model.targets(pairs, spans))
        model.train(training)
        return float(roc_auc_score(torch.cat(targets).numpy(), torch.cat(logits).numpy()))


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
        self.curve: list[tuple[float, float]] = []       # (epochs trained, validation ROC AUC), with early stopping
        self.sources: list[str] = []                     # the sources it was fine-tuned on (`source_key`s)

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
                     seed: int, desc: str = "unit encoder", validation: Validation | None = None,
                     checkpoint: Path | None = None, head: dict[str, torch.Tensor] | None = None) -> UnitEncoder:
    """`path`'s encoder with a fresh head (`training.head`), or `head`'s weights where given, fine-tuned on the
    pairs and their units' hallucinated spans (binary cross-entropy, the positives weighted by the negatives'
    share), in eval mode on return. With `validation` and `training.patience`, read after each epoch: training stops
    after `patience` epochs without a better ROC AUC and the best epoch's weights are returned (with `head`, the
    start is read first, as epoch 0); `model.curve` holds the figures. With `checkpoint` (a directory), the state is
    saved there after each epoch and the finished encoder when done, and a later call with the same arguments goes
    on from them (`Checkpoint`)."""
    saved = Checkpoint(checkpoint, path, pairs, spans, training, seed, validation) if checkpoint else None
    if saved and saved.finished():
        print(f"{desc}: finished by an earlier run, read from {saved.directory}", flush=True)
        return saved.load_finished(training)
    torch.manual_seed(seed)
    print(f"{desc}: fine-tuned in {training_precision()}", flush=True)
    model = UnitEncoder(path, head, max_len=training.max_len, kind=training.head).train()
    positive = positive_share(model, pairs, spans, desc)
    pos_weight = torch.tensor((1 - positive) / positive)
    per_epoch = math.ceil(len(pairs) / training.batch_size)
    total = max(1, math.ceil(training.epochs * len(pairs) / training.batch_size))
    stopping = EarlyStopping(validation, training.patience, desc) if validation and training.patience else None
    run = TrainingState(model, training, total, stopping, random.Random(seed))
    state = saved and saved.epoch_state()
    if state:
        run.restore(state)
        print(f"{desc}: going on from step {run.step} of {total}, saved in {saved.directory}", flush=True)
    elif stopping and head is not None:     # an encoder fitted before goes on: where it starts is kept unless beaten
        stopping.stop(model, 0, per_epoch)
    for step in progress(range(run.step, total), desc=desc, initial=run.step, total=total):
        batch = run.next_batch(len(pairs))
        run.train_on([pairs[i] for i in batch], [spans[i] for i in batch], pos_weight)
        epoch_end = (step + 1) % per_epoch == 0 or step + 1 == total
        if stopping and epoch_end and stopping.stop(model, step + 1, per_epoch):
            break
        if saved and epoch_end and step + 1 < total:
            saved.save_epoch(run.state())
    if stopping:
        stopping.restore(model)
    if saved:
        saved.save_finished(model)
    return model.eval()


class EarlyStopping:
    """The validation figure after each epoch, the best epoch's weights, and whether `patience` epochs have
    passed without a better one."""
    def __init__(self, validation: Validation, patience: int, desc: str):
        self.validation, self.patience, self.desc = validation, patience, desc
        self.curve: list[tuple[float, float]] = []        # (epochs trained, validation ROC AUC)
        self.best = 0                                     # the curve's index of the best epoch
        self.best_weights: dict[str, torch.Tensor] | None = None

    def stop(self, model: UnitEncoder, steps: int, per_epoch: int) -> bool:
        figure = self.validation.roc_auc(model)
        self.curve.append((round(steps / per_epoch, 2), figure))
        print(f"{self.desc}: epoch {self.curve[-1][0]:g}, validation ROC AUC {figure:.4f} "
              f"({len(self.validation.pairs):,} pairs it never trains on)", flush=True)
        if self.best_weights is None or figure > self.curve[self.best][1]:
            self.best = len(self.curve) - 1
            self.best_weights = {k: v.detach().clone() for k, v in model.state_dict().items()}
        return len(self.curve) - 1 - self.best >= self.patience

    def restore(self, model: UnitEncoder) -> None:
        """The best epoch's weights back in `model`, and the curve on it."""
        if self.best_weights is not None:
            model.load_state_dict(self.best_weights)
        model.curve = self.curve


class TrainingState:
    """A unit encoder in training: AdamW (6% warmup, then linear decay to 0 at `total` steps), the steps taken, the
    shuffled order of the pairs still to come, and what an epoch's checkpoint holds of them, of both random
    generators (the shuffle's, dropout's) and of early stopping."""
    def __init__(self, model: UnitEncoder, training: EncoderTraining, total: int, stopping: EarlyStopping | None,
                 rng: random.Random):
        self.model, self.batch_size, self.stopping, self.rng = model, training.batch_size, stopping, rng
        self.optimizer = torch.optim.AdamW(model.parameters(), lr=training.lr, weight_decay=0.01)
        warmup = max(1, round(0.06 * total))
        self.schedule = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, lambda s: min(1.0, (s + 1) / warmup) * (total - s) / total)
        self.step, self.order = 0, []

    def next_batch(self, pairs: int) -> list[int]:
        if len(self.order) < self.batch_size:
            fresh = list(range(pairs))
            self.rng.shuffle(fresh)
            self.order += fresh
        batch, self.order = self.order[:self.batch_size], self.order[self.batch_size:]
        return batch

    def train_on(self, pairs: list[tuple[str, str]], spans: list[Spans], pos_weight: torch.Tensor) -> None:
        """One step: binary cross-entropy of the logits against the targets, the positives weighted."""
        with training_autocast():
            logits = self.model(pairs, training=True).float()
        loss = torch.nn.functional.binary_cross_entropy_with_logits(logits, self.model.targets(pairs, spans),
                                                                    pos_weight=pos_weight)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
        self.optimizer.step()
        self.schedule.step()
        self.optimizer.zero_grad()
        self.step += 1

    def state(self) -> dict:
        stopping = self.stopping and {"curve": self.stopping.curve, "best": self.stopping.best,
                                      "best_weights": self.stopping.best_weights}
        return {"model": self.model.state_dict(), "optimizer": self.optimizer.state_dict(),
                "schedule": self.schedule.state_dict(), "step": self.step, "order": self.order,
                "rng": self.rng.getstate(), "torch_rng": torch.get_rng_state(), "stopping": stopping}

    def restore(self, state: dict) -> None:
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.schedule.load_state_dict(state["schedule"])
        self.step, self.order = state["step"], list(state["order"])
        self.rng.setstate(state["rng"])
        torch.set_rng_state(state["torch_rng"])
        stopping = state["stopping"]
        if self.stopping and stopping:
            self.stopping.curve = [tuple(c) for c in stopping["curve"]]
            self.stopping.best, self.stopping.best_weights = stopping["best"], stopping["best_weights"]


class Checkpoint:
    """A unit encoder's training saved in `directory`, so that a stopped run goes on where it was: `epoch.pt`
    after each epoch (read back with `weights_only`: tensors and numbers, no code runs) and the finished encoder
    in `finished/`. Both belong to a fingerprint of the pairs, the spans and the settings; a directory holding
    another training's is cleared."""
    EPOCH, FINISHED, STAMP = "epoch.pt", "finished", "fingerprint.json"

    def __init__(self, directory: Path, path: str, pairs: list[tuple[str, str]], spans: list[Spans],
                 training: EncoderTraining, seed: int, validation: Validation | None):
        self.directory = Path(directory)
        what = [str(path), asdict(training), seed, pairs, spans, validation and [validation.pairs, validation.spans]]
        digest = hashlib.sha256(json.dumps(what).encode()).hexdigest()
        stamp = self.directory / self.STAMP
        if stamp.exists() and json.loads(stamp.read_text()).get("sha256") != digest:
            print(f"{self.directory}: saved for other pairs or settings; training afresh", flush=True)
            shutil.rmtree(self.directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        stamp.write_text(json.dumps({"sha256": digest}))

    def finished(self) -> bool:
        return (self.directory / self.FINISHED / HEAD_FILE).exists()

    def load_finished(self, training: EncoderTraining) -> UnitEncoder:
        model = UnitEncoder.load(self.directory / self.FINISHED, training.max_len, training.head)
        curve = json.loads((self.directory / self.FINISHED / "curve.json").read_text())
        model.curve = [tuple(point) for point in curve]
        return model

    def epoch_state(self) -> dict | None:
        saved = self.directory / self.EPOCH
        return torch.load(saved, weights_only=True) if saved.exists() else None

    def save_epoch(self, state: dict) -> None:
        partial = self.directory / f"{self.EPOCH}.partial"
        torch.save(state, partial)
        os.replace(partial, self.directory / self.EPOCH)       # a run killed while saving keeps the last epoch

    def save_finished(self, model: UnitEncoder) -> None:
        partial = self.directory / f"{self.FINISHED}.partial"
        shutil.rmtree(partial, ignore_errors=True)
        model.save(partial)
        (partial / "curve.json").write_text(json.dumps(model.curve))
        os.replace(partial, self.directory / self.FINISHED)
        (self.directory / self.EPOCH).unlink(missing_ok=True)


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
