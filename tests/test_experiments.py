"""Every experiment through its real checks, as litgpt's config-hub test does: each
`configs/exp/*.yaml` composed with the embedded tiny model (and a data directory of one valid row
per split where it reads one), then the trainer's run-config check at the job's world size, the memory plan and the
SLURM render of its job."""
import pytest
from hydra import compose, initialize_config_dir

import configs.schema  # noqa: F401
from configs.schema import typed
from data_builders.importers.longnovel_released import released_row
from data_builders.records import write_jsonl
from slurm.render import train_script
from tests.conftest import REPO
from train.data import check_run_config
from train.memory_plan import RunPlan, make_plan, planned_world_size

EXPERIMENTS = sorted(p.stem for p in (REPO / "configs" / "exp").glob("*.yaml"))
RECORD = {"id": "r1", "task": "summarization", "language": "zh", "source": "原文。", "response": "摘要。", "label": 0}


def _write_data(root, source: str, folds: int) -> None:
    if folds:                  # a converted benchmark: one test file, a source per fold at least
        write_jsonl(root / "test.jsonl", [dict(RECORD, id=f"r{i}", source=f"原文{i}。", meta={"domain": f"d{i}"})
                                          for i in range(folds)])
        return
    row = released_row(RECORD) if source == "longnovel_released" else RECORD
    for split in ("train", "test"):
        write_jsonl(root / f"{split}.jsonl", [row])


def _cfg(name: str, data_root) -> object:
    ov = [f"+exp={name}", "model.name_or_path=embedded:qwen3-tiny", f"data.root={data_root}", "plan.gpu=h100",
          f"output_dir={data_root}/run"]
    with initialize_config_dir(config_dir=str(REPO / "configs"), version_base="1.3"):
        return typed(compose("sft", overrides=ov)), ov


def test_there_are_experiments_of_every_kind():
    assert {"longnovel_curriculum", "anah_generative", "anah_discriminative", "longnovel_discriminative"} <= set(
        EXPERIMENTS)


@pytest.mark.parametrize("name", EXPERIMENTS)
def test_experiment_passes_the_run_check_the_plan_and_the_slurm_render(name, tmp_path):
    cfg, ov = _cfg(name, tmp_path)
    _write_data(tmp_path, cfg.data.source, cfg.data.folds)
    world = planned_world_size(cfg.plan, cfg.slurm)
    check_run_config(cfg, world)
    rows, text = make_plan(RunPlan.of_run(cfg, world))
    assert [r.name for r in rows] == [s.name for s in cfg.curriculum.stages]
    assert all(r.total > 0 for r in rows) and "host memory for offload" in text
    script = train_script(cfg, ov, REPO, tmp_path / "logs")
    assert f"+exp={name}" in script and "resume=auto" in script
