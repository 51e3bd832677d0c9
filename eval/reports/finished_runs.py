"""Reading finished runs for comparison: from run directories (offline), or from W&B run paths
(`wandb:entity/project/run_id`, online). A run is its label, resolved config, per-step training
log and final evaluation metrics."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from data_builders.records import read_jsonl


@dataclass
class Run:
    label: str
    config: dict
    steps: list[dict] = field(default_factory=list)      # train_log rows: step, stage, loss, ...
    metrics: dict | None = None                           # eval/metrics.json


def load_run_dir(path: str | Path) -> Run:
    path = Path(path)
    if not (path / "config.yaml").exists():
        raise FileNotFoundError(f"{path}: not a run directory (expected config.yaml, train_log.jsonl, eval/)")
    config = yaml.safe_load((path / "config.yaml").read_text(encoding="utf-8")) or {}
    steps = read_jsonl(path / "train_log.jsonl") if (path / "train_log.jsonl").exists() else []
    metrics_path = path / "eval" / "metrics.json"
    metrics = json.loads(metrics_path.read_text(encoding="utf-8")) if metrics_path.exists() else None
    return Run(f"{config.get('exp_name', 'run')}@{path.name}", config, steps, metrics)


def load_wandb_run(spec: str) -> Run:
    """`wandb:entity/project/run_id`: config, history and eval summary through the W&B API."""
    import wandb

    run = wandb.Api().run(spec.removeprefix("wandb:"))
    steps = [{"step": int(r["_step"]), "loss": r.get("train/loss"), "stage": r.get("train/stage_step")}
             for r in run.scan_history(keys=["_step", "train/loss"])]
    summary = dict(run.summary)
    metrics = {"by_bucket": {}, "overall": {}}
    for key, value in summary.items():
        parts = key.split("/")
        if parts[:2] == ["eval", "by_bucket"] and len(parts) == 4:
            metrics["by_bucket"].setdefault(parts[2], {})[parts[3]] = value
        elif parts[:2] == ["eval", "overall"] and len(parts) == 3:
            metrics["overall"][parts[2]] = value
    return Run(run.name, dict(run.config), steps, metrics if metrics["overall"] else None)


def load_run(spec: str) -> Run:
    return load_wandb_run(spec) if spec.startswith("wandb:") else load_run_dir(spec)


def flat(d: dict, prefix: str = "") -> dict[str, object]:
    out = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(flat(v, key + "."))
        else:
            out[key] = v
    return out


IGNORED = {"output_dir", "checkpoint", "resume"}


def config_differences(runs: list[Run]) -> dict[str, list]:
    """Config keys whose values differ between runs (run-directory keys ignored)."""
    flats = [flat(r.config) for r in runs]
    keys = sorted(set().union(*flats) - IGNORED)
    return {k: [f.get(k) for f in flats] for k in keys if len({json.dumps(f.get(k), default=str) for f in flats}) > 1}
