"""Structured schema of `eval/score.py`'s config (registered as `score_schema`)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING


@dataclass
class BertScoreModel:
    model: Optional[str] = None    # a local path; None: no BERTScore for this language
    num_layers: int = 8            # the layer bert-score reads (8 for bert-base-chinese, 17 for roberta-large)


@dataclass
class BertScoreConfig:
    """ANAH's BERTScore models: bert-base-chinese (zh) and roberta-large (en), as local paths."""
    zh: BertScoreModel = field(default_factory=lambda: BertScoreModel(None, 8))
    en: BertScoreModel = field(default_factory=lambda: BertScoreModel(None, 17))


@dataclass
class ScoreConfig:
    task: str = MISSING            # longnovel | anah | binary
    gold: str = MISSING            # JSONL records of the shared schema
    predictions: str = MISSING     # JSONL {"id", "output"} or {"id", "label"} / {"id", "probs"}
    output_dir: str = MISSING
    plots: bool = True
    bertscore: BertScoreConfig = field(default_factory=BertScoreConfig)   # anah only


ConfigStore.instance().store(name="score_schema", node=ScoreConfig)
