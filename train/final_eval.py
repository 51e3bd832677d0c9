"""First evaluation after the last stage: greedy decoding of the exported model on the
held-out split, ranks sharing the records, rank 0 scoring."""
from __future__ import annotations

from pathlib import Path

from omegaconf import DictConfig
from transformers import AutoConfig

from eval.anah import score_anah
from eval.predict import predict_records, select_eval_records
from eval.report import write_eval
from eval.scoring import SCORERS
from eval.thresholds import choose_threshold
from models.builders import load_tokenizer
from train.distributed import DistInfo, all_gather_objects
from train.engine import load_model


class _Predictor:
    """The exported model, loaded once, predicting a rank's share of records and gathering all."""

    def __init__(self, cfg: DictConfig, hf_dir: str, info: DistInfo):
        self.cfg, self.info = cfg, info
        self.tokenizer = load_tokenizer(hf_dir)
        self.model = load_model(cfg, hf_dir, cfg.model.attn_implementation).to(info.device)

    def __call__(self, records: list[dict]) -> dict[str, dict]:
        cfg, info = self.cfg, self.info
        mine = predict_records(self.model, self.tokenizer, records[info.rank::info.world_size], cfg.task.kind,
                               cfg.task.template, cfg.eval.max_new_tokens,
                               progress=cfg.trainer.progress and info.is_main, batch_size=cfg.eval.batch_size)
        return {p["id"]: p for part in all_gather_objects(mine) for p in part}


def store_threshold(cfg: DictConfig, hf_dir: str, predict: _Predictor, val_records: list[dict],
                    info: DistInfo) -> float | None:
    """For a binary head: choose the decision threshold on the validation split and write it
    into the exported config.json (`decision_threshold`). None when there is no validation split."""
    if not (cfg.task.kind == "discriminative" and cfg.task.head == "binary" and val_records):
        return None
    records = select_eval_records(val_records, list(cfg.eval.buckets), cfg.eval.max_per_bucket)
    preds = predict(records)
    threshold = choose_threshold([r["label"] for r in records], [preds[r["id"]]["probs"][1] for r in records])
    if info.is_main:
        config = AutoConfig.from_pretrained(hf_dir)
        config.decision_threshold = threshold
        config.decision_threshold_source = f"validation split, {len(records)} records"
        config.save_pretrained(hf_dir)
    return threshold


def evaluate_export(cfg: DictConfig, hf_dir: str, records_by_split: dict[str, list[dict]], out_dir: Path,
                    info: DistInfo) -> dict | None:
    """Score an exported model on the test split into `out_dir` (metrics.json, report.md, plots)."""
    records = select_eval_records(records_by_split["test"], list(cfg.eval.buckets), cfg.eval.max_per_bucket)
    if not records:
        raise ValueError(f"eval.buckets={list(cfg.eval.buckets)}: no test records in these buckets")
    predict = _Predictor(cfg, hf_dir, info)
    threshold = store_threshold(cfg, hf_dir, predict, records_by_split.get("val", []), info)
    preds = predict(records)
    if not info.is_main:
        return None
    if threshold is not None:
        preds = {k: {**p, "threshold": threshold} for k, p in preds.items()}
    if cfg.task.scorer == "anah":
        metrics, rows = score_anah(records, preds, cfg.eval.bertscore)
    else:
        metrics, rows = SCORERS[cfg.task.scorer](records, preds)
    if threshold is not None:
        metrics["decision_threshold"] = threshold
    write_eval(out_dir, cfg.task.scorer, metrics, rows)
    return metrics
