"""Weights & Biases on rank 0: offline without an API key, and never fatal."""
from __future__ import annotations

import os
import warnings

from omegaconf import DictConfig


class Tracker:
    def __init__(self, cfg: DictConfig, config: dict, run_dir, enabled: bool):
        self.run = None
        if not (enabled and cfg.logger.wandb):
            return
        mode = cfg.logger.mode
        if mode == "auto":
            mode = "online" if os.environ.get("WANDB_API_KEY") else "offline"
        try:
            import wandb

            self.run = wandb.init(
                project=cfg.logger.project, entity=cfg.logger.entity, mode=mode,
                name=f"{cfg.exp_name}-{os.path.basename(str(run_dir))}",
                group=cfg.logger.group or cfg.exp_name, tags=list(cfg.logger.tags),
                config=config, dir=str(run_dir), settings=wandb.Settings(silent=True))
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
