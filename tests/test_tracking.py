"""W&B never stops training: a failing init or log disables tracking with a warning."""
import pytest
from omegaconf import OmegaConf

from train.config import LoggerConfig
from train.tracking import Tracker


def _cfg(**logger):
    return OmegaConf.create({"exp_name": "t", "logger": {**OmegaConf.to_container(OmegaConf.structured(LoggerConfig)),
                                                          **logger}})


def test_failing_wandb_init_is_not_fatal(tmp_path):
    with pytest.warns(UserWarning, match="W&B disabled"):
        tracker = Tracker(_cfg(wandb=True, mode="no-such-mode"), {}, tmp_path, enabled=True)
    tracker.log({"loss": 1.0}, step=1)
    tracker.summary({"eval": {}})
    tracker.finish()
    assert tracker.run is None


def test_failing_log_disables_tracking(tmp_path):
    tracker = Tracker(_cfg(wandb=False), {}, tmp_path, enabled=True)

    class Broken:
        def log(self, *a, **k):
            raise OSError("disk full")

    tracker.run = Broken()
    with pytest.warns(UserWarning, match="disk full"):
        tracker.log({"loss": 1.0}, step=1)
    assert tracker.run is None


def test_only_rank_zero_tracks(tmp_path):
    assert Tracker(_cfg(wandb=True), {}, tmp_path, enabled=False).run is None
