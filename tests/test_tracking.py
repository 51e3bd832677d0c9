"""W&B never stops training: a failing init or log disables tracking with a warning."""
import dataclasses

import pytest
from omegaconf import OmegaConf

from configs.schema import LoggerConfig
from eval.reports.tracking import Tracker


def _logger(**changes):
    return dataclasses.replace(LoggerConfig(), **changes)   # unvalidated: a mode W&B refuses reaches it


def test_failing_wandb_init_is_not_fatal(tmp_path):
    with pytest.warns(UserWarning, match="W&B disabled"):
        tracker = Tracker(_logger(wandb=True, mode="no-such-mode"), {}, {}, tmp_path, enabled=True)
    tracker.log({"loss": 1.0}, step=1)
    tracker.summary({"eval": {}})
    tracker.finish()
    assert tracker.run is None


def test_failing_log_disables_tracking(tmp_path):
    tracker = Tracker(_logger(wandb=False), {}, {}, tmp_path, enabled=True)

    class Broken:
        def log(self, *a, **k):
            raise OSError("disk full")

    tracker.run = Broken()
    with pytest.warns(UserWarning, match="disk full"):
        tracker.log({"loss": 1.0}, step=1)
    assert tracker.run is None


def test_only_rank_zero_tracks(tmp_path):
    assert Tracker(_logger(wandb=True), {}, {}, tmp_path, enabled=False).run is None


def _full_cfg(**logger):
    from configs.schema import SFTConfig, StageConfig

    cfg = OmegaConf.structured(SFTConfig)
    cfg.exp_name, cfg.model.name_or_path = "demo", "embedded:qwen3-tiny"
    cfg.curriculum.stages = [StageConfig("a", "S", 2048), StageConfig("b", "M", 16384)]
    cfg.logger.wandb = True
    for k, v in logger.items():
        cfg.logger[k] = v
    return cfg


def test_run_identity_is_deterministic():
    from eval.reports.tracking import run_identity

    cfg = _full_cfg(tags=["mine"])
    cfg.curriculum.stages[1].sp_size = 2                 # the 16k stage splits each sample over 2 ranks
    ident = run_identity(cfg, "/runs/2026-11-22_10-00-00", "train")
    assert ident["name"] == "demo/qwen3-tiny/2026-11-22_10-00-00" and ident["group"] == "demo/qwen3-tiny"
    assert ident["tags"] == ["mine", "sp-1-2", "zero3", "len-2048-16384", "task-longnovel_detection"]


def test_eval_tables_reach_offline_wandb(tmp_path, monkeypatch):
    import json

    monkeypatch.setenv("WANDB_SILENT", "true")
    from eval.reports.tracking import run_identity

    cfg = _full_cfg(mode="offline")
    tracker = Tracker(cfg.logger, run_identity(cfg, tmp_path, "eval"), {"a": 1}, tmp_path, enabled=True)
    assert tracker.run is not None
    metrics = {"overall": {"acc": 0.75, "mcc": 0.5, "n": 4, "hallu_acc": 1.0, "nonhallu_acc": 0.5,
                           "parse_failures": 0},
               "by_bucket": {"S": {"acc": 0.75, "mcc": 0.5, "n": 4, "hallu_acc": 1.0, "nonhallu_acc": 0.5,
                                   "parse_failures": 0}},
               "by_type": {"entity": {"recall": 1.0, "n": 2}}, "by_position": {}}
    rows = [{"id": "r0", "gold": 1, "pred": 1, "correct": True, "raw": "{...}"}]
    tracker.log_eval("longnovel", metrics, rows)
    assert tracker.run.summary["eval/by_bucket/S/acc"] == 0.75
    tracker.finish()
    run_dir = next((tmp_path / "wandb").glob("offline-run-*"))
    tables = {p.name.rsplit("_", 2)[0]: json.loads(p.read_text())
              for p in (run_dir / "files" / "media" / "table" / "eval").glob("*.table.json")}
    assert tables["buckets"]["columns"][:2] == ["bucket", "n"]
    assert tables["buckets"]["data"][0][:2] == ["S", 4] and tables["buckets"]["data"][1][0] == "overall"
    assert tables["predictions"]["data"] == [["r0", "1", "1", True, "{...}"]]
    assert tables["type_recall"]["data"] == [["entity", 2, 1.0]]
