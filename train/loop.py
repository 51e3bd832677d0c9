"""The optimizer-step loop of one curriculum stage."""
from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from configs.schema import StageConfig, TaskConfig, TrainerConfig
from data_builders.common.progress import progress
from eval.reports.tracking import Tracker
from models.kinds import Kind, kind_of
from train.checkpoint import save_state
from train.curve import Curve
from train.data import StagePlan
from train.distributed import DistInfo, all_reduce_sum
from train.loss_reduction import backward_scale
from train.preemption import mark_preempted, stop_after
from train.run_dir import TrainLog
from train.sequence_parallel import shard_batch

logger = logging.getLogger(__name__)


class NonFiniteError(RuntimeError):
    pass


@dataclass(frozen=True)
class Validation:
    """`trainer.eval_every`: a stage's learning curve, how the current weights become an export, and how an
    export is scored on the validation split (rank 0's scores)."""
    curve: Curve
    export: Callable[[object, Path], None]          # (engine, directory)
    score: Callable[[Path], dict | None]            # export directory -> scores


@dataclass(frozen=True)
class StageContext:
    """What the step loop of one stage reads, fixed before its first step."""
    index: int
    name: str
    max_seq_len: int
    run_dir: Path
    info: DistInfo
    log: TrainLog
    tracker: Tracker
    pad_id: int
    save_every: int
    stop_at_step: int | None
    progress: bool
    sp_mode: str = "zigzag"
    task: TaskConfig | None = None       # what is trained (the loss reads its head, weights)
    kind: Kind | None = None             # the task's kind, looked up once
    zero_stage: int = 3
    packed: bool = False                 # rows of packed samples: the ring backend keeps documents apart
    keep_checkpoints: int | None = None  # mid-stage checkpoints the run keeps (None: all)
    checkpoint_bytes: float = 0.0        # the planned size of one, until one is measured on disk
    global_batch: int | None = None      # samples per optimizer step (recorded in each checkpoint)
    validation: Validation | None = None

    @classmethod
    def of_stage(cls, t: TrainerConfig, task: TaskConfig, index: int, stage: StageConfig, run_dir: Path,
                 info: DistInfo, pad_id: int, log: TrainLog | None = None, tracker: Tracker | None = None, *,
                 sp_mode: str, zero_stage: int, packed: bool, checkpoint_bytes: float = 0.0,
                 global_batch: int | None = None, validation: Validation | None = None) -> StageContext:
        """The context of curriculum stage `index`, from the trainer's and the task's sections."""
        return cls(index, stage.name, stage.max_seq_len, run_dir, info, log, tracker, pad_id, t.save_every,
                   t.stop_at_step, t.progress, sp_mode, task, kind_of(task), zero_stage, packed, t.keep_checkpoints,
                   checkpoint_bytes, global_batch, validation)


def _micro_batch(samples: list[dict], ctx: StageContext) -> tuple[dict, dict, int, int]:
    """This rank's tensors of one micro-batch, extra model kwargs, target and real-token counts.

    With sequence parallelism the ranks of a group take the same samples and each
    keeps its zigzag slice, so counting on the slice counts every token once.
    """
    kind = ctx.kind
    batch = kind.collate(samples, ctx.pad_id)
    if ctx.info.sp_size == 1 and not ctx.packed:
        kwargs, real = {}, sum(len(s["input_ids"]) for s in samples)
    else:
        mode = "zigzag_varlen" if ctx.packed else ctx.sp_mode
        batch = shard_batch(batch, ctx.info.sp_size, ctx.info.sp_rank, ctx.pad_id, mode)
        kwargs = {"sp_group": ctx.info.sp_group, "sp_doc_lens": batch.pop("sp_doc_lens")}
        real = batch.pop("n_real_tokens")
    targets = kind.targets(batch, len(samples), ctx.info.sp_rank)
    return {k: v.to(ctx.info.device) for k, v in batch.items()}, kwargs, targets, real


def _grad_norm(module) -> float:
    """L2 norm of the (already averaged) gradients, before clipping."""
    grads = [p.grad for p in module.parameters() if p.grad is not None]
    return float(torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g.float()) for g in grads])))


def train_step(engine, samples: list[dict], plan: StagePlan, step: int, ctx: StageContext) -> dict:
    """One optimizer step; the loss is the mean over every target token (or, for a head,
    every sample) of the global batch."""
    micro = [_micro_batch([samples[i] for i in idx], ctx)
             for idx in plan.rank_indices(step, ctx.info.dp_rank)]
    global_targets, global_tokens = all_reduce_sum([sum(m[2] for m in micro), sum(m[3] for m in micro)])
    scale = backward_scale(ctx.info.world_size, plan.grad_accum, global_targets)
    lr = engine.get_lr()[0]
    loss_sum, own_norm = 0.0, None
    for i, (batch, kwargs, _, _) in enumerate(micro):
        loss = ctx.kind.loss_sum(engine, batch, ctx.task, ctx.info.sp_rank, **kwargs)
        engine.backward(loss * scale)
        if ctx.zero_stage == 0 and i == len(micro) - 1:   # DeepSpeed reports no norm without ZeRO
            own_norm = _grad_norm(engine.module)
        engine.step()
        loss_sum += loss.item()
    loss = all_reduce_sum([loss_sum])[0] / global_targets
    grad_norm = own_norm if own_norm is not None else engine.get_global_grad_norm()
    grad_norm = float(grad_norm) if grad_norm is not None else float("nan")
    return {"loss": loss, "grad_norm": grad_norm, "lr": lr, "tokens": int(global_tokens),
            "target_tokens": int(global_targets)}


def run_stage(engine, samples: list[dict], plan: StagePlan, ctx: StageContext,
              start_step: int, global_step: int) -> tuple[int, bool]:
    """Train steps [start_step, plan.total_steps); returns (global step, stopped early)."""
    bar = progress(total=plan.total_steps, initial=start_step, desc=f"stage {ctx.index} {ctx.name}",
                   unit="step", disable=not (ctx.progress and ctx.info.is_main))
    try:
        for step in range(start_step, plan.total_steps):
            t0 = time.time()
            out = train_step(engine, samples, plan, step, ctx)
            global_step += 1
            if not (math.isfinite(out["loss"]) and math.isfinite(out["grad_norm"])):
                raise NonFiniteError(f"stage {ctx.name!r} step {step + 1}: non-finite loss {out['loss']} "
                                     f"or grad norm {out['grad_norm']}; the last good checkpoint is kept")
            dt = time.time() - t0
            row = {"stage": ctx.name, "step": global_step, "stage_step": step + 1,
                   "seq_len": ctx.max_seq_len, **out, "step_s": round(dt, 4),
                   "tokens_per_s": round(out["tokens"] / dt, 1), "elapsed_s": round(ctx.log.elapsed(), 3)}
            ctx.log.write(row)
            ctx.tracker.log({f"train/{k}": v for k, v in row.items() if k != "stage"}, step=global_step)
            bar.update(1)
            bar.set_postfix(loss=f"{out['loss']:.4f}", tok_s=f"{row['tokens_per_s']:.0f}")
            early = _validation_point(engine, ctx, step + 1, plan.total_steps, global_step)
            last = step + 1 == plan.total_steps or early
            stop = stop_after(ctx.run_dir, ctx.stop_at_step, global_step)
            if not last and (stop or (ctx.save_every and (step + 1) % ctx.save_every == 0)):
                save_state(engine, ctx.run_dir, ctx.index, ctx.name, step + 1, global_step, ctx.info.is_main,
                           ctx.keep_checkpoints, ctx.checkpoint_bytes, ctx.global_batch)
            if stop and not last:
                if stop.preempted:
                    mark_preempted(ctx.run_dir, ctx.name, global_step, ctx.info.is_main)
                return global_step, True
            if early:
                break
    finally:
        bar.close()
    return global_step, False


def _validation_point(engine, ctx: StageContext, stage_step: int, total_steps: int, global_step: int) -> bool:
    """Score the validation split when the curve is due; True when early stopping ends the stage."""
    v = ctx.validation
    if v is None or not v.curve.due(stage_step, total_steps):
        return False
    early = v.curve.point(lambda d: v.export(engine, d), v.score, stage_step, global_step)
    if early and ctx.info.is_main:
        logger.info(f"stage {ctx.name!r}: no better validation MCC in {v.curve.patience} points: stopping at its "
                    f"step {stage_step} of {total_steps}, keeping the weights of its best point")
    return early
