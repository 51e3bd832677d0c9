"""GPU memory, host memory and disk a run needs, per curriculum stage (train/memory_plan.py), before
any GPU is rented.

    python -m train.tools.plan +exp=longnovel_curriculum model.name_or_path=DIR plan.gpu=h20
"""
import hydra
from omegaconf import DictConfig

import configs.schema  # noqa: F401  (registers the structured schemas)
from configs.schema import typed
from data_builders.common.user_errors import reports_user_errors
from train.memory_plan import RunPlan, disk_plan, make_plan, planned_world_size


@hydra.main(config_path="../../configs", config_name="sft", version_base="1.3")
@reports_user_errors("train/tools/plan.py")
def main(composed: DictConfig) -> None:
    cfg = typed(composed)
    run = RunPlan.of_run(cfg, planned_world_size(cfg.plan, cfg.slurm))
    print(make_plan(run)[1])
    print("\n" + disk_plan(run))


if __name__ == "__main__":
    main()
