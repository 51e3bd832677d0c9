"""Curriculum SFT of hallucination annotators.

    torchrun --nproc_per_node=2 train/sft.py +exp=longnovel_curriculum_demo
"""
import hydra
from omegaconf import DictConfig

import train.config  # noqa: F401  (registers the structured schemas)
from data_builders.user_errors import reports_user_errors


@hydra.main(config_path="../configs", config_name="sft", version_base="1.3")
@reports_user_errors("train/sft.py")
def main(cfg: DictConfig) -> None:
    from models.builders import resolve_model_path
    from train.data import check_run_config, sp_sizes
    from train.distributed import init_distributed, teardown
    from train.trainer import train

    # before any process group: a missing path fails at once, and the embedded model is written by
    # every process on its own (under a process group, save_pretrained writes on rank 0 only)
    resolve_model_path(cfg.model.name_or_path)
    check_run_config(cfg)
    info = init_distributed(sp_sizes(cfg))
    try:
        train(cfg, info)
    finally:
        teardown()


if __name__ == "__main__":
    main()
