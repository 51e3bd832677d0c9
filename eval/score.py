"""Score any system's outputs against gold records.

    python eval/score.py task=<longnovel|anah|binary> gold=GOLD.jsonl predictions=PRED.jsonl output_dir=DIR
"""
import hydra
from omegaconf import DictConfig

from configs.schema import typed  # (importing it registers the schema)
from data_builders.common.user_errors import reports_user_errors
from eval.reports.writer import report_text
from eval.scorers.scoring import score_files


@hydra.main(config_path="../configs/score", config_name="score", version_base="1.3")
@reports_user_errors("eval/score.py")
def main(composed: DictConfig) -> None:
    cfg = typed(composed)
    score_files(cfg.task, cfg.gold, cfg.predictions, cfg.output_dir, plots=cfg.plots, bertscore=cfg.bertscore)
    print(report_text(cfg.output_dir), end="")


if __name__ == "__main__":
    main()
