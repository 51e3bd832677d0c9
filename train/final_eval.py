"""Evaluation of an exported model after a stage: the ranks share the records through the same
predictor as `eval/run.py`, rank 0 scores with the same scorer as `eval/score.py`."""
from __future__ import annotations

from pathlib import Path

from transformers import AutoConfig

from configs.schema import EvalConfig, ModelConfig, TaskConfig
from data_builders.records import write_jsonl
from eval.backends.in_process import Shard, select_eval_records
from eval.predictors import AnnotatorPredictor, Inference
from eval.reports.writer import write_eval
from eval.scorers.scoring import scorer
from models.export_spec import SPEC_FILE, AnnotatorSpec, write_model_card
from train.distributed import DistInfo, all_gather_objects


def _store_threshold(hf_dir: str, predictor: AnnotatorPredictor) -> None:
    """Write a threshold chosen on validation into the export's config.json and annotator.json, so
    that every later use of this model (eval/run.py, eval.annotate, vLLM, a user's own code)
    applies the same one."""
    config = AutoConfig.from_pretrained(hf_dir)
    config.decision_threshold = predictor.threshold
    config.decision_threshold_source = predictor.threshold_source
    if predictor.thresholds_by:
        config.decision_thresholds_by = predictor.thresholds_by
    config.save_pretrained(hf_dir)
    if (Path(hf_dir) / SPEC_FILE).exists():
        spec = AnnotatorSpec.load(hf_dir)
        spec.threshold, spec.threshold_source = predictor.threshold, predictor.threshold_source
        spec.thresholds_by = predictor.thresholds_by
        spec.save(hf_dir)


def _card_with_scores(hf_dir: str, markdown: list[str], scores: dict[str, float]) -> None:
    """The export's model card, now with its held-out table (the run's own test split)."""
    if (Path(hf_dir) / SPEC_FILE).exists():
        write_model_card(hf_dir, AnnotatorSpec.load(hf_dir), "\n".join(markdown), scores)


def evaluate_export(task: TaskConfig, model: ModelConfig, evaluation: EvalConfig, hf_dir: str,
                    records_by_split: dict[str, list[dict]], out_dir: Path, info: DistInfo,
                    progress: bool = True) -> dict | None:
    """Score an exported model on the test split into `out_dir` (metrics.json, report.md, plots);
    the metrics on rank 0, None on the other ranks."""
    records = select_eval_records(records_by_split["test"], list(evaluation.buckets), evaluation.max_per_bucket)
    if not records:
        raise ValueError(f"eval.buckets={list(evaluation.buckets)}: no test records in these buckets")
    predictor = AnnotatorPredictor(task, Inference.of(model, evaluation), hf_dir,
                                   Shard(info.rank, info.world_size, all_gather_objects),
                                   progress=progress and info.is_main)
    predictor.prepare(records_by_split)
    if info.is_main and predictor.threshold_source and predictor.threshold_source.startswith("validation"):
        _store_threshold(hf_dir, predictor)
    rows = predictor.rows(records)
    if not info.is_main:
        return None
    s = scorer(task.scorer)
    metrics, scored = s.score(records, {r["id"]: r for r in rows}, evaluation.bertscore)
    if predictor.threshold is not None:
        metrics["decision_threshold"] = predictor.threshold
    if predictor.thresholds_by:
        metrics["decision_thresholds_by"] = predictor.thresholds_by
    write_eval(out_dir, s, metrics, scored)
    write_jsonl(out_dir / "predictions.jsonl", rows)       # as eval/run.py writes them: re-scorable, poolable
    summary = s.summary(metrics)
    _card_with_scores(hf_dir, s.markdown(metrics),
                      {k: v for k, v in (("accuracy", summary.acc), ("mcc", summary.mcc)) if v is not None})
    return metrics


def validation_scores(task: TaskConfig, model: ModelConfig, evaluation: EvalConfig, hf_dir: str,
                      val_records: list[dict], info: DistInfo) -> dict | None:
    """An export scored on the validation split as the final evaluation scores the test split (a
    head's threshold chosen on that split): {"mcc", "acc", "n"} on rank 0, None elsewhere."""
    predictor = AnnotatorPredictor(task, Inference.of(model, evaluation), hf_dir,
                                   Shard(info.rank, info.world_size, all_gather_objects), progress=False)
    predictor.prepare({"val": val_records})
    records = predictor.inference.validation({"val": val_records})
    rows = predictor.rows(records)
    if not info.is_main:
        return None
    s = scorer(task.scorer)
    metrics, _ = s.score(records, {r["id"]: r for r in rows}, evaluation.bertscore)
    summary = s.summary(metrics)
    return {"mcc": summary.mcc, "acc": summary.acc, "n": len(records)}
