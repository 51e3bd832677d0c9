"""Curriculum SFT: each stage starts from the previous stage's exported weights with a
fresh optimizer and scheduler; checkpoints, resume, logging, and a final evaluation."""
from __future__ import annotations

import gc
import json
import logging
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from configs.rules import stage_grad_accum
from configs.schema import ModelConfig, SFTConfig, StageConfig, TaskConfig, stage_sp_size, to_container
from data_builders.sources import DataError, DataRequest, in_bucket, train_split
from eval.reports.tracking import Tracker, run_identity
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
from train.data import StagePlan, plan_stage, prepare_records, stage_samples
from train.disk import module_checkpoint_bytes
from train.distributed import DistInfo, barrier, on_main_rank
from train.engine import build_engine, export_hf, release_engine
from train.final_eval import evaluate_export, validation_scores
from train.loop import StageContext, Validation, run_stage
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
class Stage:
    """One curriculum stage as this run trains it: from its first step, or from a checkpoint inside it."""
    index: int
    config: StageConfig
    start_step: int = 0
    state_dir: Path | None = None

    @property
    def name(self) -> str:
        return self.config.name


class Trainer:
    """One training run. It builds what every stage shares once (the records, the tokenizer, the resume
    point, the train log, the tracker), then trains the curriculum's stages, each from the previous
    stage's export with a fresh optimizer and scheduler, then scores the final export."""

    def __init__(self, cfg: SFTConfig, info: DistInfo, continue_dir: Path | None = None):
        torch.manual_seed(cfg.trainer.seed)
        self.cfg, self.run_dir = agree_on_output_dir(cfg, info)
        self.info = info
        self.continue_dir = continue_dir or self.run_dir   # a cross-validation run's, not its fold's
        self.base = resolve_model_path(cfg.model.name_or_path)
        self.tokenizer = load_tokenizer(self.base)
        request = DataRequest.of_run(cfg.task, cfg.curriculum, cfg.eval, cfg.trainer.seed)
        self.records = prepare_records(cfg.data, request, self.tokenizer, self.run_dir, info)
        self.stages = list(cfg.curriculum.stages)
        self.names = [s.name for s in self.stages]
        if cfg.trainer.eval_every and not self.records.get("val"):
            raise DataError(f"trainer.eval_every={cfg.trainer.eval_every} scores the validation split, and this run "
                            "has none: give data.root a val.jsonl, or use data.folds (each fold holds a validation "
                            "part)")
        self.point = resume_point(cfg.resume, self.run_dir, self.names)
        self.log = TrainLog(self.run_dir, info.is_main, self.point.global_step if self.point else None)
        truncate_curve(self.run_dir, self.point.global_step if self.point else 0, info.is_main)
        self.tracker = Tracker(cfg.logger, run_identity(cfg, self.run_dir, "train"), to_container(cfg), self.run_dir,
                               info.is_main)
        self.train_records = train_split(self.records, cfg.data.root, "training")
        self.say(dtype_choice(cfg.model.dtype))
        if self.point:
            self.say(resume_message(self.point, self.names, self.run_dir, cfg.eval.enabled))

    def say(self, message: str) -> None:
        """A status line, once: the main rank speaks for the run."""
        if self.info.is_main:
            logger.info(message)

    def on_main(self, fn: Callable[[], object]) -> None:
        """A write to the run directory, by the main rank alone."""
        if self.info.is_main:
            fn()

    def run(self) -> dict | None:
        """Every stage, then the final evaluation; the metrics on rank 0 (None where a stop ended the run)."""
        global_step = self.point.global_step if self.point else 0
        try:
            for stage in self._stages_left():
                global_step, stopped = self._train(stage, global_step)
                if stopped:
                    self.say(stop_message(self.cfg.trainer.stop_at_step, self.continue_dir, global_step))
                    return None
                if self.cfg.eval.enabled and self.cfg.eval.every_stage and stage.index + 1 < len(self.stages):
                    self._evaluate(stage.index + 1, self.run_dir / "eval" / "stages" / f"{stage.index}-{stage.name}",
                                   f"eval_stage/{stage.name}", global_step)
            metrics = None
            if self.cfg.eval.enabled:
                metrics = self._evaluate(len(self.stages), self.run_dir / "eval", "eval", global_step)
            barrier()       # rank 0 scores after the last collective: no rank leaves while a peer may need it
            return metrics
        finally:
            self.tracker.finish()

    def _stages_left(self) -> list[Stage]:
        point = self.point
        if point is None:
            return [Stage(i, s) for i, s in enumerate(self.stages)]
        return [Stage(i, s, point.step, point.state_dir) if i == point.stage_index else Stage(i, s)
                for i, s in enumerate(self.stages) if i >= point.stage_index]

    def _evaluate(self, weights_after: int, out_dir: Path, prefix: str, step: int) -> dict | None:
        """Score the export that stage `weights_after` starts from (len(stages): the final one)."""
        weights = stage_weights(self.run_dir, weights_after, self.names, self.base)
        c = self.cfg
        metrics = evaluate_export(c.task, c.model, c.eval, weights, self.records, out_dir, self.info,
                                  progress=c.trainer.progress)
        if metrics is not None:
            curve = curve_markdown(Path(self.cfg.output_dir), out_dir)
            if curve:
                with open(out_dir / "report.md", "a", encoding="utf-8") as f:
                    f.write("\n".join(curve))
            self.tracker.log_eval(self.cfg.task.scorer, metrics, read_rows(out_dir / "predictions.parsed.jsonl"),
                                  prefix, step)
            print(f"== {prefix}\n" + (out_dir / "report.md").read_text(encoding="utf-8"), flush=True)
        return metrics

    def _samples(self, stage: Stage, info: DistInfo) -> tuple[list[dict], int]:
        """The main rank tokenises (in data.num_proc processes) and fills the sample cache; the other
        ranks then read it instead of tokenising the same records at once."""
        d = self.cfg.data

        def encode():
            return stage_samples(self.train_records, stage.config, self.tokenizer, self.cfg.task,
                                 d.max_skip_fraction, d.packing, d.num_proc)

        out = on_main_rank(encode, info.is_main)
        return out if info.is_main else encode()

    def _plan(self, stage: Stage, info: DistInfo) -> tuple[list[dict], StagePlan, int]:
        cfg = self.cfg
        samples, skipped = self._samples(stage, info)
        grad_accum, _ = stage_grad_accum(cfg.optim, stage.config)
        plan = plan_stage(stage.config, len(samples), info.dp_size, cfg.optim.micro_batch_size, grad_accum,
                          cfg.trainer.seed + 1000 * stage.index, cfg.trainer.max_steps)
        unit = "packed rows" if cfg.data.packing else "samples"
        self.say(f"stage {stage.index} {stage.name}: bucket {stage.config.bucket}, {len(samples)} {unit} "
                 f"({skipped} skipped as longer than {stage.config.max_seq_len}), {plan.total_steps} steps, "
                 f"sequence-parallel {info.sp_size} x data-parallel {info.dp_size}, global batch {plan.per_step}")
        return samples, plan, skipped

    def _engine(self, stage: Stage, info: DistInfo, plan: StagePlan, start_weights: str):
        """The stage's DeepSpeed engine from its start weights, or from its checkpoint when resuming inside it."""
        cfg, state_dir = self.cfg, stage.state_dir
        lr = stage.config.lr if stage.config.lr is not None else cfg.optim.lr
        tag = checkpoint_tag(state_dir, info.world_size, cfg.deepspeed.zero_stage, info.is_main) if state_dir else None
        engine = build_engine(cfg, start_weights, info.world_size, lr, plan.total_steps, info.sp_size,
                              plan.grad_accum, load_universal=tag == UNIVERSAL)
        if state_dir is not None:
            check_global_batch(state_dir, plan.per_step, info.is_main)
            engine.load_checkpoint(str(state_dir), tag=tag)
        return engine

    def _validation(self, stage: Stage, info: DistInfo, start_weights: str, spec: AnnotatorSpec) -> Validation | None:
        """trainer.eval_every: the stage's learning curve, how it exports its weights and scores them."""
        cfg = self.cfg
        if not cfg.trainer.eval_every:
            return None
        val = in_bucket(self.records.get("val") or [], stage.config.bucket)
        return Validation(
            Curve.resumed(self.run_dir, stage.index, stage.name, cfg.trainer.eval_every,
                          cfg.trainer.early_stopping_patience, info.is_main),
            lambda eng, d: export_hf(eng, cfg.model, cfg.task, cfg.deepspeed.zero_stage, start_weights,
                                     self.tokenizer, d, info.is_main, spec),
            lambda d: validation_scores(cfg.task, cfg.model, cfg.eval, str(d), val, info))

    def _train(self, stage: Stage, global_step: int) -> tuple[int, bool]:
        """Train one stage and export it; returns (global step, stopped early)."""
        cfg = self.cfg
        info = self.info.with_sp(stage_sp_size(cfg.parallel, stage.config))     # the stage's own SP x DP layout
        samples, plan, skipped = self._plan(stage, info)
        start_weights = stage_weights(self.run_dir, stage.index, self.names, self.base)
        engine = self._engine(stage, info, plan, start_weights)
        spec = annotator_spec(cfg.task, cfg.model, stage.config, self.train_records, data_source=str(cfg.data.source),
                              max_new_tokens=cfg.eval.max_new_tokens)
        validation = self._validation(stage, info, start_weights, spec)
        ctx = StageContext.of_stage(cfg.trainer, cfg.task, stage.index, stage.config, self.run_dir, info,
                                    self.tokenizer.pad_token_id, self.log, self.tracker, sp_mode=cfg.parallel.sp_mode,
                                    zero_stage=cfg.deepspeed.zero_stage, packed=cfg.data.packing,
                                    checkpoint_bytes=module_checkpoint_bytes(engine.module, cfg.deepspeed.zero_stage),
                                    global_batch=plan.per_step, validation=validation)
        global_step, stopped = run_stage(engine, samples, plan, ctx, stage.start_step, global_step)
        if not stopped:
            self._export(stage, engine, start_weights, spec, validation, info)
            self.on_main(lambda: mark_stage_done(self.run_dir, stage.index, stage.name, global_step))
            self.on_main(lambda: _write_stage_summary(self.run_dir, stage.index, stage.name, skipped,
                                                      plan.total_steps))
            barrier()
            stopped = self._stops_between_stages(stage, global_step)
        release_engine(engine)
        del engine
        gc.collect()
        return global_step, stopped

    def _export(self, stage: Stage, engine, start_weights: str, spec: AnnotatorSpec, validation: Validation | None,
                info: DistInfo) -> None:
        export_dir = stage_dir(self.run_dir, stage.index, stage.name) / "hf"
        c = self.cfg
        export_hf(engine, c.model, c.task, c.deepspeed.zero_stage, start_weights, self.tokenizer, export_dir,
                  info.is_main, spec)
        barrier()
        if validation is not None:
            validation.curve.keep_best(export_dir)
        barrier()

    def _stops_between_stages(self, stage: Stage, global_step: int) -> bool:
        stop = stop_after(self.run_dir, self.cfg.trainer.stop_at_step, global_step)
        if stop.preempted and stage.index + 1 < len(self.names):    # between stages: the export is the checkpoint
            mark_preempted(self.run_dir, stage.name, global_step, self.info.is_main)
            return True
        return bool(stop.step_reached)


def annotator_spec(t: TaskConfig, model: ModelConfig, stage: StageConfig, train_records: list[dict], *,
                   data_source: str, max_new_tokens: int) -> AnnotatorSpec:
    """What a stage's export needs for inference (`annotator.json`); the final evaluation adds
    the decision threshold."""
    languages = Counter(r.get("language") or "zh" for r in train_records)
    return AnnotatorSpec(
        kind=str(t.kind), head=str(t.head), template=t.template, evidence_sentences=t.evidence_sentences,
        scorer=str(t.scorer), language=languages.most_common(1)[0][0] if languages else "zh",
        max_seq_len=stage.max_seq_len, max_new_tokens=max_new_tokens,
        labels=list(kind_of(t).labels(t)), base_model=str(model.name_or_path), stage=stage.name,
        training={"source": data_source, "records": len(train_records)}, evidence_unit=str(t.evidence_unit))


def _write_stage_summary(run_dir: Path, index: int, name: str, skipped: int, steps: int) -> None:
    path = stage_dir(run_dir, index, name) / "stage_summary.json"
    path.write_text(json.dumps({"stage": name, "steps": steps, "skipped_too_long": skipped}), encoding="utf-8")
