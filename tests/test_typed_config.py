"""Each entry point converts the composed config once into the schema's dataclasses and hands on
those; a config is never changed after it is built (`with_changes` makes a new one)."""
import ast
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from configs.schema import SFTConfig, StageConfig, TaskConfig, to_container, typed, with_changes
from tests.conftest import REPO

PACKAGES = ("train", "eval", "models", "data_builders", "slurm", "configs")


def _composed(*overrides: str):
    with initialize_config_dir(config_dir=str(REPO / "configs"), version_base="1.3"):
        return compose("sft", overrides=["output_dir=/runs/x", *overrides])


@pytest.mark.parametrize("exp", sorted(p.stem for p in (REPO / "configs" / "exp").glob("*.yaml")))
def test_every_experiment_converts_to_the_schema_without_losing_a_value(exp):
    composed = _composed(f"+exp={exp}")
    cfg = typed(composed)
    assert isinstance(cfg, SFTConfig) and isinstance(cfg.task, TaskConfig)
    assert all(isinstance(s, StageConfig) for s in cfg.curriculum.stages)
    assert to_container(cfg) == OmegaConf.to_container(composed, resolve=True, enum_to_str=True)


def test_with_changes_builds_a_new_config_and_leaves_the_old_one():
    cfg = typed(_composed("+exp=ragtruth_minilm_binary"))
    fold = with_changes(cfg, {"data": {"folds": 0, "root": "/f/fold_0"}, "output_dir": "/runs/x/fold_0"})
    assert (fold.data.folds, fold.data.root, fold.output_dir) == (0, "/f/fold_0", "/runs/x/fold_0")
    assert (cfg.data.folds, cfg.output_dir) == (3, "/runs/x") and cfg.data.root is None
    assert fold.task is cfg.task and fold.data.synthetic is cfg.data.synthetic   # untouched sections are shared
    with pytest.raises(KeyError, match="'fodls'"):
        with_changes(cfg, {"data": {"fodls": 2}})


def _functions(path: Path):
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.FunctionDef):
            yield node


def _is_hydra_main(fn: ast.FunctionDef) -> bool:
    return any("hydra.main" in ast.unparse(d) for d in fn.decorator_list)


def test_only_hydra_entry_points_see_a_dictconfig_and_each_converts_it_first():
    offences, mains = [], 0
    for path in sorted(p for pkg in PACKAGES for p in (REPO / pkg).rglob("*.py")):
        for fn in _functions(path):
            where = f"{path.relative_to(REPO)}:{fn.lineno} {fn.name}"
            annotated = {a.arg: ast.unparse(a.annotation) for a in fn.args.args if a.annotation is not None}
            if _is_hydra_main(fn):
                mains += 1
                first = next(s for s in fn.body if not isinstance(s, (ast.ImportFrom, ast.Import, ast.Expr)))
                if annotated != {"composed": "DictConfig"} or ast.unparse(first) != "cfg = typed(composed)":
                    offences.append(f"{where}: expected main(composed: DictConfig) starting cfg = typed(composed)")
            elif "DictConfig" in annotated.values():
                offences.append(f"{where}: takes a DictConfig; take the schema's dataclass instead")
    assert mains >= 6 and not offences, "\n".join(offences)
