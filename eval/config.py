"""Structured schema of `eval/score.py`'s config (registered as `score_schema`)."""
from __future__ import annotations

from dataclasses import dataclass

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING


@dataclass
class ScoreConfig:
    task: str = MISSING            # longnovel | anah | binary
    gold: str = MISSING            # JSONL records of the shared schema
    predictions: str = MISSING     # JSONL {"id", "output"} or {"id", "label"} / {"id", "probs"}
    output_dir: str = MISSING
    plots: bool = True


ConfigStore.instance().store(name="score_schema", node=ScoreConfig)
