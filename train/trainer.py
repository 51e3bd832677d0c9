"""Curriculum SFT: each stage starts from the previous stage's exported weights with a
fresh optimizer and scheduler; checkpoints, resume, logging, and a final evaluation."""
from __future__ import annotations

import gc
import json
import logging
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import torch

from configs.rules import stage_grad_accum
from configs.schema import DataConfig, SFTConfig, StageConfig, TaskConfig, stage_sp_size, to_container
from data_builders.sources import DataError, DataRequest, in_bucket, train_split
from eval.reports.tracking import Tracker
from eval.reports.writer import read_rows
from models.builders import dtype_choice, load_tokenizer, resolve_model_path
from models.export_spec import AnnotatorSpec
from models.kinds import kind_of
from train.checkpoint import (
    UNIVERSAL,
    ResumePoint,
    check_global_batch,
    checkpoint_tag,
    find_resume_point,
    mark_stage_done,
    stage_dir,
    stage_weights,
)
from train.curve import Curve, curve_markdown, truncate_curve
from train.data import plan_stage, prepare_records, stage_samples
from train.disk import module_checkpoint_bytes
from train.distributed import DistInfo, barrier, on_main_rank
from train.engine import build_engine, export_hf, release_engine
from train.final_eval import evaluate_export, validation_scores
from train.loop import StageContext, run_stage
from train.preemption import mark_preempted, stop_after
from train.run_dir import TrainLog, agree_on_output_dir, continue_command

logger = logging.getLogger(__name__)


def resume_point(resume: str, run_dir: Path, names: list[str]) -> ResumePoint | None:
    if resume == "none":
        return None
    point = find_resume_point(run_dir, names)
    return point if (point.stage_index, point.step) != (0, 0) else None


def resume_message(point: ResumePoint, names: list[str], run_dir: Path, evaluate: bool) -> str:
    if point.stage_index == len(names):
        rerun = "re-running its final evaluation only" if evaluate else "nothing to re-run (eval.enabled=false)"
        return (f"{run_dir} has finished all {len(names)} stages (global step {point.global_step}): "
                f"{rerun}")
    return (f"resuming at stage {point.stage_index} {names[point.stage_index]!r} step {point.step} "
            f"(global step {point.global_step})")


def stop_message(stop_at_step: int | None, run_dir: Path, global_step: int) -> str:
    at = stop_at_step
    why = f"trainer.stop_at_step={at}" if at is not None and global_step >= at else "a stop request"
    return (f"stopped after global step {global_step} ({why}); the run is not finished. Continue it with:\n"
            f"  {continue_command(run_dir)}")


@dataclass(frozen=True)
class Run:
    """What every stage of one run shares."""
    cfg: SFTConfig
    info: DistInfo
    run_dir: Path
    names: list[str]            # the curriculum's stage names
    base: str                   # the model the first stage starts from
    tokenizer: object
    train_records: list[dict]
    val_records: list[dict]
    log: TrainLog
    tracker: Tracker


def train(cfg: SFTConfig, info: DistInfo, continue_dir: Path | None = None) -> dict | None:
    """Every stage, then the final evaluation; the metrics on rank 0. `continue_dir`: the directory
    the stop message's command continues (a cross-validation run's, not its fold's)."""
    torch.manual_seed(cfg.trainer.seed)
    cfg, run_dir = agree_on_output_dir(cfg, info)
    base = resolve_model_path(cfg.model.name_or_path)
    tokenizer = load_tokenizer(base)
    records = prepare_records(cfg.data, DataRequest.of_run(cfg), tokenizer, run_dir, info)
    stages = list(cfg.curriculum.stages)
    names = [s.name for s in stages]
    if cfg.trainer.eval_every and not records.get("val"):
        raise DataError(f"trainer.eval_every={cfg.trainer.eval_every} scores the validation split, and this run has "
                        "none: give data.root a val.jsonl, or use data.folds (each fold holds a validation part)")
    point = resume_point(cfg.resume, run_dir, names)
    log = TrainLog(run_dir, info.is_main, point.global_step if point else None)
    truncate_curve(run_dir, point.global_step if point else 0, info.is_main)
    tracker = Tracker(cfg, to_container(cfg), run_dir, info.is_main)
    if info.is_main:
        logger.info(dtype_choice(cfg.model.dtype))
    if point and info.is_main:
        logger.info(resume_message(point, names, run_dir, cfg.eval.enabled))
    global_step = point.global_step if point else 0
    train_records = train_split(records, cfg.data.root, "training")
    run = Run(cfg, info, run_dir, names, base, tokenizer, train_records, records.get("val") or [], log, tracker)
    try:
        for i, stage in enumerate(stages):
            if point and i < point.stage_index:
                continue
            resumed = point is not None and i == point.stage_index
            global_step, stopped = _run_one_stage(run, i, stage, point.step if resumed else 0, global_step,
                                                  point.state_dir if resumed else None)
            if stopped:
                if info.is_main:
                    logger.info(stop_message(cfg.trainer.stop_at_step, continue_dir or run_dir, global_step))
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


def _evaluate(cfg: SFTConfig, info: DistInfo, out_dir: Path, weights: str, records: dict[str, list[dict]],
              tracker: Tracker, prefix: str, step: int) -> dict | None:
    metrics = evaluate_export(cfg, weights, records, out_dir, info)
    if metrics is not None:
        curve = curve_markdown(Path(cfg.output_dir), out_dir)
        if curve:
            with open(out_dir / "report.md", "a", encoding="utf-8") as f:
                f.write("\n".join(curve))
        tracker.log_eval(cfg.task.scorer, metrics, read_rows(out_dir / "predictions.parsed.jsonl"), prefix, step)
        print(f"== {prefix}\n" + (out_dir / "report.md").read_text(encoding="utf-8"), flush=True)
    return metrics


def _stage_samples(task: TaskConfig, data: DataConfig, info: DistInfo, stage: StageConfig, tokenizer,
                   train_records: list[dict]) -> tuple[list[dict], int]:
    """The main rank tokenises (in data.num_proc processes) and fills the sample cache; the other
    ranks then read it instead of tokenising the same records at once."""
    def encode():
        return stage_samples(train_records, stage, tokenizer, task, data.max_skip_fraction, data.packing,
                             data.num_proc)

    out = on_main_rank(encode, info.is_main)
    return out if info.is_main else encode()


def _run_one_stage(run: Run, index: int, stage: StageConfig, start_step: int, global_step: int,
                   state_dir: Path | None) -> tuple[int, bool]:
    """Train one stage from `start_step` (from `state_dir` when resuming inside it) and export it;
    returns (global step, stopped early)."""
    cfg, run_dir, names = run.cfg, run.run_dir, run.names
    info = run.info.with_sp(stage_sp_size(cfg.parallel, stage))     # the stage's own SP x DP layout
    samples, skipped = _stage_samples(cfg.task, cfg.data, info, stage, run.tokenizer, run.train_records)
    grad_accum, _ = stage_grad_accum(cfg.optim, stage)
    plan = plan_stage(stage, len(samples), info.dp_size, cfg.optim.micro_batch_size,
                      grad_accum, cfg.trainer.seed + 1000 * index, cfg.trainer.max_steps)
    if info.is_main:
        unit = "packed rows" if cfg.data.packing else "samples"
        logger.info(f"stage {index} {stage.name}: bucket {stage.bucket}, {len(samples)} {unit} "
                    f"({skipped} skipped as longer than {stage.max_seq_len}), {plan.total_steps} steps, "
                    f"sequence-parallel {info.sp_size} x data-parallel {info.dp_size}, global batch "
                    f"{plan.per_step}")
    lr = stage.lr if stage.lr is not None else cfg.optim.lr
    start_weights = stage_weights(run_dir, index, names, run.base)
    tag = checkpoint_tag(state_dir, info.world_size, cfg.deepspeed.zero_stage, info.is_main) if state_dir else None
    engine = build_engine(cfg, start_weights, info.world_size, lr, plan.total_steps, info.sp_size, grad_accum,
                          load_universal=tag == UNIVERSAL)
    if state_dir is not None:
        check_global_batch(state_dir, plan.per_step, info.is_main)
        engine.load_checkpoint(str(state_dir), tag=tag)
    ctx = StageContext.of_stage(cfg, index, stage, run_dir, info, run.tokenizer.pad_token_id, run.log, run.tracker)
    ctx.checkpoint_bytes = module_checkpoint_bytes(engine.module, cfg.deepspeed.zero_stage)
    ctx.global_batch = plan.per_step
    spec = annotator_spec(cfg, stage, run.train_records)
    if cfg.trainer.eval_every:
        ctx.curve = Curve.resumed(run_dir, index, stage.name, cfg.trainer.eval_every,
                                  cfg.trainer.early_stopping_patience, info.is_main)
        ctx.export = lambda eng, d: export_hf(eng, cfg, start_weights, run.tokenizer, d, info.is_main, spec)
        ctx.score = lambda d: validation_scores(cfg, str(d), in_bucket(run.val_records, stage.bucket), info)
    global_step, stopped = run_stage(engine, samples, plan, ctx, start_step, global_step)
    if not stopped:
        export_dir = stage_dir(run_dir, index, stage.name) / "hf"
        export_hf(engine, cfg, start_weights, run.tokenizer, export_dir, info.is_main, spec)
        barrier()
        if ctx.curve is not None:
            ctx.curve.keep_best(export_dir)
        barrier()
        if info.is_main:
            mark_stage_done(run_dir, index, stage.name, global_step)
            _write_stage_summary(run_dir, index, stage.name, skipped, plan.total_steps)
        barrier()
        stop = stop_after(run_dir, cfg.trainer.stop_at_step, global_step)
        stopped = stop.step_reached
        if stop.preempted and index + 1 < len(names):    # between stages: the stage export is the checkpoint
            mark_preempted(run_dir, stage.name, global_step, info.is_main)
            stopped = True
    release_engine(engine)
    del engine
    gc.collect()
    return global_step, stopped


def annotator_spec(cfg: SFTConfig, stage: StageConfig, train_records: list[dict]) -> AnnotatorSpec:
    """What a stage's export needs for inference (`annotator.json`); the final evaluation adds
    the decision threshold."""
    languages = Counter(r.get("language") or "zh" for r in train_records)
    t = cfg.task
    return AnnotatorSpec(
        kind=str(t.kind), head=str(t.head), template=t.template, evidence_sentences=t.evidence_sentences,
        scorer=str(t.scorer), language=languages.most_common(1)[0][0] if languages else "zh",
        max_seq_len=stage.max_seq_len, max_new_tokens=cfg.eval.max_new_tokens,
        labels=list(kind_of(t).labels(t)), base_model=str(cfg.model.name_or_path), stage=stage.name,
        training={"source": str(cfg.data.source), "records": len(train_records)}, evidence_unit=str(t.evidence_unit))


def _write_stage_summary(run_dir: Path, index: int, name: str, skipped: int, steps: int) -> None:
    path = stage_dir(run_dir, index, name) / "stage_summary.json"
    path.write_text(json.dumps({"stage": name, "steps": steps, "skipped_too_long": skipped}), encoding="utf-8")
