"""First evaluation after the last stage: greedy decoding of the exported model on the
held-out split, ranks sharing the records, rank 0 scoring."""
from __future__ import annotations

from pathlib import Path

from omegaconf import DictConfig
from transformers import AutoConfig

from eval.predict import predict_records, select_eval_records
from eval.report import write_eval
from eval.scoring import SCORERS
from eval.thresholds import choose_threshold
from models.builders import load_tokenizer
from train.distributed import DistInfo, all_gather_objects
from train.engine import load_model


def _predict(cfg: DictConfig, hf_dir: str, records: list[dict], info: DistInfo) -> list[dict]:
    """This rank's predictions: raw generations, or head probabilities."""
    tokenizer = load_tokenizer(hf_dir)
    model = load_model(cfg, hf_dir, cfg.model.attn_implementation).to(info.device)
    return predict_records(model, tokenizer, records, cfg.task.kind, cfg.task.template, cfg.eval.max_new_tokens,
                           progress=cfg.trainer.progress and info.is_main)


def _gathered(cfg: DictConfig, hf_dir: str, records: list[dict], info: DistInfo) -> dict[str, dict]:
    mine = _predict(cfg, hf_dir, records[info.rank::info.world_size], info)
    return {p["id"]: p for part in all_gather_objects(mine) for p in part}


def store_threshold(cfg: DictConfig, hf_dir: str, val_records: list[dict], info: DistInfo) -> float | None:
    """For a binary head: choose the decision threshold on the validation split and write it
    into the exported config.json (`decision_threshold`). None when there is no validation split."""
    if not (cfg.task.kind == "discriminative" and cfg.task.head == "binary" and val_records):
        return None
    records = select_eval_records(val_records, list(cfg.eval.buckets), cfg.eval.max_per_bucket)
    preds = _gathered(cfg, hf_dir, records, info)
    threshold = choose_threshold([r["label"] for r in records], [preds[r["id"]]["probs"][1] for r in records])
    if info.is_main:
        config = AutoConfig.from_pretrained(hf_dir)
        config.decision_threshold = threshold
        config.decision_threshold_source = f"validation split, {len(records)} records"
        config.save_pretrained(hf_dir)
    return threshold


def evaluate_export(cfg: DictConfig, hf_dir: str, records_by_split: dict[str, list[dict]], run_dir: Path,
                    info: DistInfo) -> dict | None:
    records = select_eval_records(records_by_split["test"], list(cfg.eval.buckets), cfg.eval.max_per_bucket)
    if not records:
        raise ValueError(f"eval.buckets={list(cfg.eval.buckets)}: no test records in these buckets")
    threshold = store_threshold(cfg, hf_dir, records_by_split.get("val", []), info)
    preds = _gathered(cfg, hf_dir, records, info)
    if not info.is_main:
        return None
    if threshold is not None:
        preds = {k: {**p, "threshold": threshold} for k, p in preds.items()}
    metrics, rows = SCORERS[cfg.task.scorer](records, preds)
    if threshold is not None:
        metrics["decision_threshold"] = threshold
    write_eval(run_dir / "eval", cfg.task.scorer, metrics, rows)
    return metrics
