"""The configuration's rules have one home (configs/rules.py): they decide from the config alone, before
anything loads, and no other module raises their messages."""
import ast

import pytest
from hydra import compose, initialize_config_dir

from configs.rules import ConfigError, check_evaluation, check_training
from configs.schema import typed
from tests.conftest import REPO

FLOORS = ["slurm", "train", "eval", "models", "data_builders", "configs"]


def _cfg(*overrides: str):
    with initialize_config_dir(config_dir=str(REPO / "configs"), version_base="1.3"):
        return typed(compose("sft", overrides=["+exp=longnovel_curriculum_demo", *overrides]))


@pytest.mark.parametrize("overrides, facts, message", [
    (["task=spans", "task.evidence_sentences=3"], {}, "task.kind=spans labels the response's own tokens"),
    (["task.kind=discriminative", "task.head=binary", "task.response_lm=true"], {}, "task.response_lm=true"),
    (["task.kind=generative"], {"encoder": True}, "is an encoder: it trains a binary head"),
    (["parallel.sp_size=3"], {}, r"parallel.sp_size=3 must be >= 1 and divide the number of ranks 2"),
    (["parallel.ring_kernel=flash_attn"], {}, "runs on CUDA only"),
    (["data.packing=true", "task.kind=discriminative", "task.head=binary"], {}, "data.packing=true packs"),
    (["trainer.early_stopping_patience=2"], {}, "counts validation points"),
    (["data.folds=2"], {}, "deals a records directory into folds"),
    (["data.mixture=[]", "data.source=mixture"], {}, "needs data.mixture"),
])
def test_a_training_config_is_refused_from_the_config_alone(overrides, facts, message):
    """No model, file or device is read: the facts of the machine come in as arguments."""
    cfg = _cfg("model.name_or_path=/nowhere/a-model", "data.root=/nowhere/data", *overrides)
    with pytest.raises(ConfigError, match=message):
        check_training(cfg, 2, encoder=facts.get("encoder", False), cuda=False)


def test_an_evaluation_config_is_refused_from_the_config_alone():
    def check(*overrides: str) -> None:
        cfg = _cfg(*overrides)
        check_evaluation(cfg.eval, cfg.data, cfg.task)

    with pytest.raises(ConfigError, match="eval.method=nli needs eval.nli.model"):
        check("eval.method=nli")
    with pytest.raises(ConfigError, match="eval.export=.* writes a fitted grounding annotator"):
        check("eval.export=/tmp/x")
    check("eval.method=grounding", "data.source=records", "eval.grounding.encoder=embedded:minilm",
          "eval.grounding.choose_among=[plain,stem]")      # the encoders are fitted once, before the choice
    check("eval.method=grounding", "data.source=records", "eval.grounding.encoder=embedded:minilm",
          "eval.grounding.cross_fit_by=meta.domain")
    for key in ("encoder_twins=1", "encoder_head=token", "encoder_edited_spans=true", "encoder_patience=2"):
        with pytest.raises(ConfigError, match=f"{key.split('=')[0]}=.* shapes how the unit encoder learns: it needs "
                                              "eval.grounding.encoder"):
            check("eval.method=grounding", "data.source=records", f"eval.grounding.{key}")
    with pytest.raises(ConfigError, match="encoder_fitted=elsewhere reads the unit encoders fitted there, and "
                                          "eval.grounding.encoder=embedded:minilm fine-tunes new ones"):
        check("eval.method=grounding", "data.source=records", "eval.grounding.encoder=embedded:minilm",
              "eval.grounding.encoder_fitted=elsewhere")
    with pytest.raises(ConfigError, match="encoder_from=elsewhere goes on fine-tuning .* and "
                                          "eval.grounding.encoder=embedded:minilm fine-tunes new ones"):
        check("eval.method=grounding", "data.source=records", "eval.grounding.encoder=embedded:minilm",
              "eval.grounding.encoder_from=elsewhere")
    with pytest.raises(ConfigError, match="encoder_fitted=there reads .*encoder_from=elsewhere fine-tunes those"):
        check("eval.method=grounding", "data.source=records", "eval.grounding.encoder_fitted=there",
              "eval.grounding.encoder_from=elsewhere")
    check("eval.method=grounding", "data.source=records", "eval.grounding.encoder_from=elsewhere",
          "eval.grounding.choose_among=[plain,stem]")
    check("eval.method=grounding", "data.source=records", "eval.grounding.encoder_from=elsewhere",
          "eval.grounding.encoder_patience=1", "eval.grounding.encoder_twins=1",
          "eval.grounding.encoder_token_spans=anywhere")       # how they go on learning; the head is theirs
    with pytest.raises(ConfigError, match="encoder_patience=1 shapes how a unit encoder learns, and "
                                          "eval.grounding.encoder_fitted=elsewhere reads encoders already fitted"):
        check("eval.method=grounding", "data.source=records", "eval.grounding.encoder_fitted=elsewhere",
              "eval.grounding.encoder_patience=1")
    check("eval.method=grounding", "data.source=records", "eval.grounding.encoder_fitted=elsewhere",
          "eval.grounding.encoder_token_spans=anywhere")        # the head is the fitted model's, checked on reading it
    with pytest.raises(ConfigError, match="encoder_token_spans=anywhere marks .* needs eval.grounding.encoder_head="
                                          "token, found unit"):
        check("eval.method=grounding", "data.source=records", "eval.grounding.encoder=embedded:minilm",
              "eval.grounding.encoder_token_spans=anywhere")
    # cross-fitted, a token threshold is chosen on responses the encoders trained on, each read by its unseen one
    check("eval.method=grounding", "data.source=records", "eval.grounding.cross_fit_by=meta.domain",
          "eval.grounding.encoder=embedded:minilm", "eval.grounding.encoder_head=token",
          "eval.grounding.encoder_token_spans=in_marked_units", "eval.grounding.encoder_token_threshold=null")
    with pytest.raises(ConfigError, match="encoder_patience: expected the epochs without a better .* found 0"):
        check("eval.method=grounding", "data.source=records", "eval.grounding.encoder=embedded:minilm",
              "eval.grounding.encoder_patience=0")
    with pytest.raises(ConfigError, match="encoder_token_threshold: expected a probability .* found 1.5"):
        check("eval.method=grounding", "data.source=records", "eval.grounding.encoder_token_threshold=1.5")
    for overrides in (["data.folds=3"], ["data.folds=0", "eval.export=/tmp/x"]):
        with pytest.raises(ConfigError, match="eval.export_only=true fits a cross-validated recipe .* needs "
                                              "eval.export and data.folds > 0"):
            check("eval.method=grounding", "data.source=records", "eval.export_only=true", *overrides)
    check("eval.method=grounding", "data.source=records", "eval.export_only=true", "data.folds=3", "eval.export=/x")
    with pytest.raises(ConfigError, match=r"data.only_folds=\[0\] picks the folds train/sft.py trains; eval/run.py"):
        check("eval.method=grounding", "data.source=records", "data.folds=3", "data.only_folds=[0]")
    check_training(_cfg(), 2, encoder=False, cuda=False)      # the demo itself passes


def _messages(text: str) -> list[str]:
    """The literal text of each `ConfigError(...)` raised in a module (each literal part of 30+ characters)."""
    out = []
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "ConfigError":
            out += [c.value for c in ast.walk(node) if isinstance(c, ast.Constant) and isinstance(c.value, str)
                    and len(c.value) >= 30]
    return out


def restated_rules(rules: str, files: list[tuple[str, str]]) -> list[str]:
    """Modules that raise a rule's message themselves instead of leaving it to configs/rules.py."""
    return sorted({f"{path}: {m!r}" for m in _messages(rules) for path, text in files
                   if path != "configs/rules.py" and m in text})


def test_no_other_module_restates_a_rule():
    rules = (REPO / "configs" / "rules.py").read_text(encoding="utf-8")
    assert len(_messages(rules)) > 20
    files = [(str(p.relative_to(REPO)), p.read_text(encoding="utf-8"))
             for floor in FLOORS for p in sorted((REPO / floor).rglob("*.py"))]
    assert not restated_rules(rules, files)
    planted = [("eval/predictors.py", 'raise ValueError("eval.method=nli needs eval.nli.model=<a local Hugging Face '
                                      'NLI model directory>")')]
    assert restated_rules(rules, planted) == [
        "eval/predictors.py: 'eval.method=nli needs eval.nli.model=<a local Hugging Face NLI model directory>'"]
