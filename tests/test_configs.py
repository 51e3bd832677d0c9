"""Every YAML under configs/ composes; misspelt keys and wrong types fail at composition."""
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from hydra.errors import ConfigCompositionException
from omegaconf import OmegaConf
from omegaconf.errors import ConfigKeyError, ValidationError

import configs.schema  # noqa: F401
from tests.conftest import REPO

CONFIGS = REPO / "configs"

YAMLS = sorted(p.relative_to(CONFIGS) for p in CONFIGS.rglob("*.yaml"))
SCORE_ARGS = ["task=binary", "gold=g.jsonl", "predictions=p.jsonl", "output_dir=o"]
ANNOTATE_ARGS = ["model=m", "input=i.jsonl", "output=o.jsonl"]
OWN_DIRECTORY = {"score": SCORE_ARGS, "annotate": ANNOTATE_ARGS}     # primary configs of their own commands


def _compose(overrides, primary="sft", config_dir=CONFIGS):
    with initialize_config_dir(config_dir=str(config_dir), version_base="1.3"):
        return compose(primary, overrides=overrides)


def _overrides_for(rel: Path) -> list[str]:
    group, name = rel.parent.as_posix(), rel.stem
    return [f"+exp={name}"] if group == "exp" else [f"{group}={name}"]


def test_there_are_configs_to_check():
    assert Path("sft.yaml") in YAMLS and len(YAMLS) > 15


@pytest.mark.parametrize("rel", YAMLS, ids=str)
def test_every_yaml_composes(rel):
    if rel.parts[0] in OWN_DIRECTORY:      # eval/score.py's and eval.annotate's own config directories
        OmegaConf.to_container(_compose(OWN_DIRECTORY[rel.parts[0]], rel.stem, CONFIGS / rel.parts[0]), resolve=True)
        return
    cfg = _compose([] if rel == Path("sft.yaml") else _overrides_for(rel))
    OmegaConf.to_container(cfg, resolve=True)   # every interpolation resolves
    assert cfg.curriculum.stages, "a composed config must have at least one stage"


def test_score_config_rejects_unknown_keys():
    with pytest.raises((ConfigCompositionException, ConfigKeyError)):
        _compose(SCORE_ARGS + ["thresold=0.3"], "score", CONFIGS / "score")


@pytest.mark.parametrize("rel", [p for p in YAMLS if p.parts[0] == "exp"], ids=str)
def test_experiments_are_global_and_carry_their_command(rel):
    text = (CONFIGS / rel).read_text(encoding="utf-8")
    assert text.startswith("# @package _global_")
    assert "train/sft.py" in text or "eval/run.py" in text, "an experiment names its launch command in its header"


@pytest.mark.parametrize("override", ["optim.lrr=1e-5", "trainer.sead=1", "parallel.sp_sizee=2"])
def test_misspelt_key_fails(override):
    with pytest.raises((ConfigCompositionException, ConfigKeyError)):
        _compose([override])


@pytest.mark.parametrize("override", ["trainer.seed=abc", "optim.lr=fast", "parallel.sp_size=two"])
def test_wrong_type_fails(override):
    with pytest.raises((ConfigCompositionException, ValidationError)):
        _compose([override])


def test_misspelt_stage_field_fails():
    with pytest.raises((ConfigCompositionException, ConfigKeyError, ValidationError)):
        _compose(["curriculum.stages=[{name: a, bucket: S, max_seq_len: 64, epoch: 2}]"])


def test_paper_recipe_matches_appendix_e2():
    cfg = _compose(["+exp=longnovel_curriculum"])
    stages = [(s.name, s.bucket, s.max_steps, s.epochs) for s in cfg.curriculum.stages]
    assert stages == [("bridge_2k", "S", 100, 2.0), ("sft_16k", "M", None, 2.0),
                      ("bridge_16k", "M", 100, 2.0), ("sft_32k", "L", None, 2.0)]
    assert (cfg.optim.lr, cfg.optim.scheduler, cfg.optim.warmup_ratio, cfg.trainer.seed) == (5e-6, "cosine", 0.0, 42)
    assert (cfg.deepspeed.zero_stage, cfg.deepspeed.offload_param, cfg.deepspeed.offload_optimizer) == (3, True, True)


def test_whole_source_demo_keeps_the_real_lengths():
    cfg = _compose(["+exp=longnovel_whole_source_demo"])
    assert [s.max_seq_len for s in cfg.curriculum.stages] == [2048, 16384, 16384, 32768]
    assert cfg.parallel.sp_size == 2 and cfg.task.template == "prompt_e" and not cfg.task.evidence_sentences
    assert cfg.model.name_or_path.startswith("embedded:")


def test_demo_adds_longer_sources_stage_by_stage_sentence_by_sentence():
    cfg = _compose(["+exp=longnovel_curriculum_demo"])
    assert [s.bucket for s in cfg.curriculum.stages] == ["S", "S+M", "S+M+L"]
    assert (cfg.task.kind, cfg.task.template, cfg.task.evidence_sentences) == ("generative", "sentence_check", 3)
    assert cfg.model.name_or_path.startswith("embedded:")


def test_mixture_override_is_typed():
    cfg = _compose(["data=mixture", "data.mixture=[{name: a, root: /x}, {name: b, root: /y, weight: 0.5, "
                    "template: prompt_e, evaluate: false}]"])
    assert [(s.name, s.weight, s.template, s.evaluate) for s in cfg.data.mixture] == [
        ("a", 1.0, None, True), ("b", 0.5, "prompt_e", False)]
    with pytest.raises(ConfigCompositionException):
        _compose(["data=mixture", "data.mixture=[{name: a, root: /x, wieght: 2}]"])
