"""Run an annotator or baseline with an experiment's config, then score it.

    python eval/run.py +exp=longnovel_curriculum_demo checkpoint=PATH output_dir=DIR
    python eval/run.py +exp=longnovel_curriculum model.name_or_path=/models/Qwen3-8B task.template=cot ...

Predictions go to DIR/predictions.jsonl as they are made; running again with the same
output_dir continues where it stopped. Scores go to DIR/scores/.
"""
from pathlib import Path

import hydra
from omegaconf import DictConfig

from configs.schema import to_container, typed  # (importing it registers the structured schemas)
from data_builders.common.progress import quiet_libraries
from data_builders.common.user_errors import reports_user_errors
from eval.reports.tracking import Tracker, run_identity
from eval.reports.writer import read_rows


@hydra.main(config_path="../configs", config_name="sft", version_base="1.3")
@reports_user_errors("eval/run.py")
def main(composed: DictConfig) -> None:
    from eval.harness import run_eval

    cfg = typed(composed)
    quiet_libraries(cfg.trainer.verbose)
    metrics = run_eval(cfg)
    if cfg.eval.export_only:     # fitted and exported; nothing was scored
        return
    tracker = Tracker(cfg.logger, run_identity(cfg, cfg.output_dir, "eval"), to_container(cfg), cfg.output_dir,
                      enabled=True)
    scores = Path(cfg.output_dir) / ("eval" if cfg.data.folds else "scores")     # folds: pooled in <output_dir>/eval
    tracker.log_eval(cfg.task.scorer, metrics, read_rows(scores / "predictions.parsed.jsonl"))
    tracker.finish()


if __name__ == "__main__":
    main()
