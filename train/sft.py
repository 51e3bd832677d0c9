"""Curriculum SFT of hallucination annotators.

    torchrun --nproc_per_node=2 train/sft.py +exp=longnovel_curriculum_demo
"""
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import hydra
from omegaconf import DictConfig

from configs.schema import typed  # (importing it registers the structured schemas)
from data_builders.common.user_errors import reports_user_errors

if TYPE_CHECKING:
    from train.memory_plan import RunPlan


@hydra.main(config_path="../configs", config_name="sft", version_base="1.3")
@reports_user_errors("train/sft.py")
def main(composed: DictConfig) -> None:
    from data_builders.common.progress import quiet_libraries
    from train.cross_validation import train_folds
    from train.data import check_run_config
    from train.distributed import init_distributed, teardown
    from train.memory_plan import RunPlan
    from train.parallel_dims import launched_world_size, sp_sizes
    from train.trainer import Trainer

    cfg = typed(composed)
    # before any process group: a bad path or row fails at once on every rank alike, and the embedded
    # model is written by every process on its own (under a process group, save_pretrained writes on rank 0 only)
    check_run_config(cfg, launched_world_size())
    check_memory_plan(lambda: RunPlan.of_run(cfg, launched_world_size()))
    quiet_libraries(cfg.trainer.verbose)
    try:
        groups = sp_sizes(cfg.parallel, cfg.curriculum)
        info = init_distributed(groups, cfg.trainer.collective_timeout_s, verbose=cfg.trainer.verbose)
        if cfg.data.folds:
            train_folds(cfg, info)
        else:
            Trainer(cfg, info).run()
        del info                                # no reference to the process groups outlives the run
    finally:
        teardown()


def check_memory_plan(run_plan: Callable[[], RunPlan]) -> None:
    """On GPUs, the memory plan of `python -m train.tools.plan` before anything is loaded: a warning
    when a stage is predicted not to fit, an error when it is far over (plan.max_over)."""
    import os

    import torch

    if not torch.cuda.is_available():
        return
    from train.memory_plan import check_before_training

    over = check_before_training(run_plan(), torch.cuda.get_device_properties(0).total_memory)
    if over and os.environ.get("RANK", "0") == "0":
        print(f"WARNING: the memory plan predicts a stage will not fit this GPU:\n{over}", flush=True)


if __name__ == "__main__":
    main()
