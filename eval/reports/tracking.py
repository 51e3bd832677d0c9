"""Weights & Biases on rank 0: offline without an API key, and never fatal."""
from __future__ import annotations

import os
import warnings

from configs.schema import LoggerConfig, ModelConfig, SFTConfig, stage_sp_size
from eval.reports.tables import scalars, tables
from eval.scorers.scoring import scorer


def model_short_name(model: ModelConfig) -> str:
    """'qwen3-tiny' for embedded:qwen3-tiny, the last path component for a local model."""
    path = str(model.name_or_path or "model").rstrip("/")
    return path.split(":")[-1].split("/")[-1]


def run_identity(cfg: SFTConfig, run_dir, job_type: str) -> dict:
    """Deterministic W&B name, group and tags: experiment / model / run directory, grouped by
    experiment and model, tagged with each stage's SP degree and sequence length, and ZeRO."""
    model = model_short_name(cfg.model)
    tags = [*cfg.logger.tags, "sp-" + "-".join(str(stage_sp_size(cfg.parallel, s)) for s in cfg.curriculum.stages),
            f"zero{cfg.deepspeed.zero_stage}",
            "len-" + "-".join(str(s.max_seq_len) for s in cfg.curriculum.stages), f"task-{cfg.task.name}"]
    return {"name": f"{cfg.exp_name}/{model}/{os.path.basename(str(run_dir).rstrip('/'))}",
            "group": cfg.logger.group or f"{cfg.exp_name}/{model}", "tags": tags, "job_type": job_type}


class Tracker:
    """`logger`'s W&B run, on the rank that is `enabled`; `identity` is its name, group, tags and job type
    (`run_identity`), `config` the run's config as W&B records it."""

    def __init__(self, logger: LoggerConfig, identity: dict, config: dict, run_dir, enabled: bool):
        self.run = None
        if not (enabled and logger.wandb):
            return
        mode = logger.mode
        if mode == "auto":
            mode = "online" if os.environ.get("WANDB_API_KEY") else "offline"
        try:
            import wandb

            self.run = wandb.init(project=logger.project, entity=logger.entity, mode=mode, config=config,
                                  dir=str(run_dir), settings=wandb.Settings(silent=True), **identity)
        except Exception as e:  # noqa: BLE001 - tracking must never stop training
            self._disable(e)

    def _disable(self, error: Exception) -> None:
        warnings.warn(f"W&B disabled for this run: {type(error).__name__}: {error}", stacklevel=2)
        self.run = None

    def log(self, metrics: dict, step: int | None = None) -> None:
        if self.run is None:
            return
        try:
            self.run.log(metrics, step=step)
        except Exception as e:  # noqa: BLE001
            self._disable(e)

    def log_eval(self, task: str, metrics: dict, rows: list[dict], prefix: str = "eval",
                 step: int | None = None) -> None:
        """Scalar metrics, per-bucket / per-type tables and the predictions table of a scored run."""
        if self.run is None:
            return
        try:
            import wandb

            logged = {f"{prefix}/{name}": wandb.Table(columns=cols, data=data)
                      for name, (cols, data) in tables(scorer(task), metrics, rows).items()}
            self.run.log({**scalars(metrics, prefix), **logged}, step=step)
            self.run.summary.update(scalars(metrics, prefix))
        except Exception as e:  # noqa: BLE001
            self._disable(e)

    def summary(self, metrics: dict) -> None:
        if self.run is None:
            return
        try:
            self.run.summary.update(metrics)
        except Exception as e:  # noqa: BLE001
            self._disable(e)

    def finish(self) -> None:
        if self.run is None:
            return
        try:
            self.run.finish()
        except Exception as e:  # noqa: BLE001
            self._disable(e)
