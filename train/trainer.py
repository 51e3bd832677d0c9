"""Curriculum SFT: each stage starts from the previous stage's exported weights with a
fresh optimizer and scheduler; checkpoints, resume, logging, and a final evaluation."""
from __future__ import annotations

import gc
import json
from pathlib import Path

import torch
from omegaconf import DictConfig

from data_builders.sources import DataError
from eval.report import read_rows
from models.builders import load_tokenizer, resolve_model_path
from train.checkpoint import ResumePoint, find_resume_point, mark_stage_done, stage_dir, stage_weights
from train.config import to_container
from train.data import plan_stage, prepare_records, stage_grad_accum, stage_samples
from train.distributed import DistInfo, barrier, broadcast_object
from train.engine import build_engine, export_hf, release_engine
from train.final_eval import evaluate_export
from train.loop import StageContext, run_stage
from train.parallel_dims import stage_sp_size
from train.preemption import mark_preempted, stop_requested
from train.run_dir import TrainLog, agree_on_output_dir
from train.tracking import Tracker


def resume_point(cfg: DictConfig, run_dir: Path, names: list[str]) -> ResumePoint | None:
    if cfg.resume == "none":
        return None
    if cfg.resume != "auto":
        raise ValueError(f"resume: expected none | auto, found {cfg.resume!r} "
                         "(to resume a run, pass its output_dir=... with resume=auto)")
    point = find_resume_point(run_dir, names)
    return point if (point.stage_index, point.step) != (0, 0) else None


def train(cfg: DictConfig, info: DistInfo) -> dict | None:
    torch.manual_seed(cfg.trainer.seed)
    run_dir = agree_on_output_dir(cfg, info)
    base = resolve_model_path(cfg.model.name_or_path)
    tokenizer = load_tokenizer(base)
    records = prepare_records(cfg, tokenizer, run_dir, info)
    stages = list(cfg.curriculum.stages)
    names = [s.name for s in stages]
    point = resume_point(cfg, run_dir, names)
    log = TrainLog(run_dir, info.is_main, point.global_step if point else None)
    tracker = Tracker(cfg, to_container(cfg), run_dir, info.is_main)
    if point and info.is_main:
        print(f"resuming at stage {point.stage_index} step {point.step} (global step {point.global_step})",
              flush=True)
    global_step = point.global_step if point else 0
    try:
        for i, stage in enumerate(stages):
            if point and i < point.stage_index:
                continue
            start = point.step if point and i == point.stage_index else 0
            global_step, stopped = _run_one_stage(cfg, info, run_dir, i, stage, names, base, tokenizer,
                                                  records["train"], log, tracker, start, global_step,
                                                  point.state_dir if point and i == point.stage_index else None)
            if stopped:
                return None
            if cfg.eval.enabled and cfg.eval.every_stage and i + 1 < len(stages):
                _evaluate(cfg, info, run_dir / "eval" / "stages" / f"{i}-{stage.name}", stage_weights(
                    run_dir, i + 1, names, base), records, tracker, f"eval_stage/{stage.name}", global_step)
        metrics = None
        if cfg.eval.enabled:
            final = stage_weights(run_dir, len(stages), names, base)
            metrics = _evaluate(cfg, info, run_dir / "eval", final, records, tracker, "eval", global_step)
        barrier()       # rank 0 scores after the last collective: no rank leaves while a peer may need it
        return metrics
    finally:
        tracker.finish()


def _evaluate(cfg, info, out_dir: Path, weights: str, records, tracker, prefix: str, step: int) -> dict | None:
    metrics = evaluate_export(cfg, weights, records, out_dir, info)
    if metrics is not None:
        tracker.log_eval(cfg.task.scorer, metrics, read_rows(out_dir / "predictions.parsed.jsonl"), prefix, step)
        print(f"== {prefix}\n" + (out_dir / "report.md").read_text(encoding="utf-8"), flush=True)
    return metrics


def _stage_samples(cfg, info, stage, tokenizer, train_records):
    """The main rank tokenises (in data.num_proc processes) and fills the sample cache; the other
    ranks then read it instead of tokenising the same records at once. A data error of the main
    rank is raised on every rank."""
    def encode():
        return stage_samples(train_records, stage, tokenizer, cfg.task, cfg.data.max_skip_fraction,
                             cfg.data.packing, cfg.data.num_proc)

    out, error = None, None
    if info.is_main:
        try:
            out = encode()
        except DataError as e:
            error = str(e)
    error = broadcast_object(error)
    if error is not None:
        raise DataError(error)
    return out if info.is_main else encode()


def _run_one_stage(cfg, info, run_dir, index, stage, names, base, tokenizer, train_records, log,
                   tracker, start_step, global_step, state_dir):
    info = info.with_sp(stage_sp_size(cfg, stage))     # the stage's own SP x DP layout
    samples, skipped = _stage_samples(cfg, info, stage, tokenizer, train_records)
    grad_accum, _ = stage_grad_accum(cfg, stage)
    plan = plan_stage(stage, len(samples), info.dp_size, cfg.optim.micro_batch_size,
                      grad_accum, cfg.trainer.seed + 1000 * index, cfg.trainer.max_steps)
    if info.is_main:
        unit = "packed rows" if cfg.data.packing else "samples"
        print(f"stage {index} {stage.name}: bucket {stage.bucket}, {len(samples)} {unit} "
              f"({skipped} skipped as longer than {stage.max_seq_len}), {plan.total_steps} steps, "
              f"sequence-parallel {info.sp_size} x data-parallel {info.dp_size}, global batch "
              f"{plan.per_step}", flush=True)
    lr = stage.lr if stage.lr is not None else cfg.optim.lr
    start_weights = stage_weights(run_dir, index, names, base)
    engine = build_engine(cfg, start_weights, info.world_size, lr, plan.total_steps, info.sp_size, grad_accum)
    if state_dir is not None:
        engine.load_checkpoint(str(state_dir), tag="state")
    ctx = StageContext(index, stage.name, stage.max_seq_len, run_dir, info, log, tracker,
                       tokenizer.pad_token_id, cfg.trainer.save_every, cfg.trainer.stop_at_step,
                       cfg.trainer.progress, cfg.parallel.sp_mode, cfg.task, cfg.deepspeed.zero_stage,
                       cfg.data.packing)
    global_step, stopped = run_stage(engine, samples, plan, ctx, start_step, global_step)
    if not stopped:
        export_hf(engine, cfg, start_weights, tokenizer, stage_dir(run_dir, index, stage.name) / "hf", info.is_main)
        barrier()
        if info.is_main:
            mark_stage_done(run_dir, index, stage.name, global_step)
            _write_stage_summary(run_dir, index, stage.name, skipped, plan.total_steps)
        barrier()
        stopped = cfg.trainer.stop_at_step is not None and global_step >= cfg.trainer.stop_at_step
        if stop_requested(run_dir) and index + 1 < len(names):    # between stages: the stage export is the checkpoint
            mark_preempted(run_dir, stage.name, global_step, info.is_main)
            stopped = True
    release_engine(engine)
    del engine
    gc.collect()
    return global_step, stopped


def _write_stage_summary(run_dir: Path, index: int, name: str, skipped: int, steps: int) -> None:
    path = stage_dir(run_dir, index, name) / "stage_summary.json"
    path.write_text(json.dumps({"stage": name, "steps": steps, "skipped_too_long": skipped}), encoding="utf-8")
