"""Closed sets are Enum fields of the structured configs: a misspelt value fails when the config
is composed, naming the allowed values (every such field), and each registry keyed by a closed
set has exactly its members."""
import dataclasses
import typing
from enum import Enum

import pytest
from hydra import compose, initialize_config_dir
from hydra.errors import ConfigCompositionException

from configs import choices
from configs.schema import ScoreConfig, SFTConfig
from tests.conftest import REPO


def _enum_fields(cls, prefix: str = "") -> list[tuple[str, type[Enum]]]:
    out = []
    for f in dataclasses.fields(cls):
        hint = typing.get_type_hints(cls)[f.name]
        args = [a for a in typing.get_args(hint) if a is not type(None)] or [hint]
        typ = args[0]
        if isinstance(typ, type) and issubclass(typ, Enum):
            out.append((prefix + f.name, typ))
        elif dataclasses.is_dataclass(typ):
            out += _enum_fields(typ, f"{prefix}{f.name}.")
    return out


TRAIN_FIELDS = _enum_fields(SFTConfig)


def test_the_closed_sets_are_typed():
    keys = {k for k, _ in TRAIN_FIELDS}
    assert {"task.kind", "task.head", "task.scorer", "data.source", "parallel.sp_mode", "parallel.ring_impl",
            "parallel.ring_kernel", "optim.scheduler", "logger.mode", "eval.method", "eval.backend",
            "eval.nli.method", "eval.nli.score", "slurm.mode", "resume", "plan.gpu", "model.dtype"} <= keys


@pytest.mark.parametrize("key, enum", TRAIN_FIELDS, ids=[k for k, _ in TRAIN_FIELDS])
def test_a_misspelt_value_fails_at_compose_naming_the_allowed_ones(key, enum):
    with initialize_config_dir(config_dir=str(REPO / "configs"), version_base="1.3"):
        with pytest.raises(ConfigCompositionException) as err:
            compose("sft", overrides=["+exp=longnovel_curriculum_demo", f"{key}=misspelt"])
    message = str(err.value.__cause__)
    assert f"full_key: {key}" in message
    assert f"expected one of [{', '.join(m.value for m in enum)}]" in message


def test_the_score_command_rejects_an_unknown_task():
    with initialize_config_dir(config_dir=str(REPO / "configs" / "score"), version_base="1.3"):
        with pytest.raises(ConfigCompositionException) as err:
            compose("score", overrides=["task=longnovle", "gold=g", "predictions=p", "output_dir=o"])
    assert f"expected one of [{', '.join(choices.Scorer)}]" in str(err.value.__cause__)
    assert _enum_fields(ScoreConfig) == [("task", choices.Scorer)]


def test_members_read_as_their_values():
    kind = choices.TaskKind.generative
    assert kind == "generative" and f"{kind}|x" == "generative|x" and {"generative": 1}[kind] == 1


def test_registries_hold_exactly_the_members_of_their_set():
    from data_builders.model_inputs.head_targets import HEADS
    from data_builders.sources import SOURCES
    from eval.baselines.nli import METHODS
    from eval.predictors import PREDICTORS
    from eval.scorers.scoring import SCORERS
    from models.attention.hf_ring import IMPLEMENTATIONS
    from models.attention.kernels import KERNELS
    from train.memory_plan import GPU_MEMORY_GB
    from train.sequence_parallel import SP_MODES

    values = lambda enum: {m.value for m in enum}  # noqa: E731
    assert set(SOURCES) == values(choices.DataSource)
    assert set(SCORERS) == values(choices.Scorer)
    assert set(PREDICTORS) == values(choices.EvalMethod)
    assert set(HEADS) == values(choices.Head)
    assert set(METHODS) == values(choices.NliMethod)
    assert set(KERNELS) == values(choices.RingKernel)
    assert set(IMPLEMENTATIONS) == values(choices.RingImpl)
    assert set(SP_MODES) == values(choices.SpMode)
    assert set(GPU_MEMORY_GB) == values(choices.Gpu)
