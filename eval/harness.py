"""Evaluate an annotator or a baseline with an experiment's config: build or read the test
records, write predictions as they come (resuming from those already written), then score
them with the same code as `eval/score.py`.

`eval.method`: `annotator` (the checkpoint's generations or head probabilities), `rag` (the
annotator on aligned article windows, Appendix D), `nli` (SummaC zero-shot / HaluMap with
a threshold chosen on the validation split), or `grounding` (eval/baselines/grounding.py: fitted on the train
split). With `data.folds=k` the last three are cross-validated in one launch (`run_eval_folds`).
"""
from __future__ import annotations

import json
import logging
import time
from pathlib import Path

from configs.rules import check_evaluation
from configs.schema import SFTConfig, TaskConfig, with_changes
from data_builders.folds import deal_all
from data_builders.records import read_jsonl_to_append, write_jsonl
from data_builders.sources import DataRequest, build_records, check_data_files
from eval.backends.in_process import select_eval_records
from eval.fold_pooling import deal_once, fold_config, pool_folds
from eval.predictors import PREDICTORS, PredictorConfig
from eval.reports.writer import report_text
from eval.scorers.scoring import score_files

logger = logging.getLogger(__name__)


def _done(path: Path) -> set[str]:
    """Ids already predicted: a torn last line (the run was killed mid-row) is dropped, and redone."""
    return {row["id"] for row in read_jsonl_to_append(path)}


def run_eval(cfg: SFTConfig) -> dict:
    check_evaluation(cfg.eval, cfg.data, cfg.task)
    if cfg.data.folds:
        return run_eval_folds(cfg)
    check_data_files(cfg.data)
    predictor = PREDICTORS[cfg.eval.method].from_config(PredictorConfig.of_run(cfg))
    request = DataRequest.of_run(cfg.task, cfg.curriculum, cfg.eval, cfg.trainer.seed)
    splits = build_records(cfg.data, request, predictor.tokenizer)[0]
    records = select_eval_records(splits["test"], list(cfg.eval.buckets), cfg.eval.max_per_bucket)
    if not records:
        raise ValueError(f"eval.buckets={list(cfg.eval.buckets)}: no test records in these buckets")
    out = Path(cfg.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    write_jsonl(out / "gold.jsonl", records)
    preds_path = out / "predictions.jsonl"
    done = _done(preds_path)
    todo = [r for r in records if r["id"] not in done]
    logger.info(f"{len(records)} records, {len(done)} predicted already, {len(todo)} to go")
    if todo:
        predictor.prepare(splits, out)
        started, sitting = time.perf_counter(), []
        with open(preds_path, "a", encoding="utf-8") as f:
            def write(row: dict) -> None:
                f.write(json.dumps(row, ensure_ascii=False) + "\n")
                f.flush()
                sitting.append(row)

            predictor.predict(todo, write)
        if getattr(predictor, "judge", None) is not None:
            _record_judge(predictor.judge, out)
        elif any("completion_tokens" in row for row in sitting):
            _record_generation(sitting, time.perf_counter() - started, preds_path, out)
    metrics = score_files(cfg.task.scorer, out / "gold.jsonl", preds_path, out / "scores", bertscore=cfg.eval.bertscore)
    print(report_text(out / "scores"), end="")
    if cfg.eval.export:
        _export(cfg.eval.export, cfg.task, out / "grounding.json", splits.get("train") or [],
                f"the train split of the run that wrote it ({cfg.output_dir}), its thresholds chosen as grounding.json "
                "says", report_text(out / "scores"))
    return metrics


def run_eval_folds(cfg: SFTConfig) -> dict:
    """A method prepared on each fold's train and val parts (grounding, nli, rag), cross-validated in
    one launch: the folds dealt as training deals them (train/cross_validation.py), each fold's test part
    predicted in <output_dir>/fold_<i>/eval, then the k test parts pooled into <output_dir>/eval."""
    check_data_files(cfg.data)
    run_dir = Path(cfg.output_dir)
    if cfg.eval.export_only:
        _export_fitted_on_every_record(cfg, run_dir, _measured_report(run_dir))
        return {}
    deal_once(cfg.data, run_dir / "folds")
    for i in range(cfg.data.folds):
        logger.info(f"== fold {i} of {cfg.data.folds}")
        fold = fold_config(cfg, run_dir, i)
        run_eval(with_changes(fold, {"output_dir": str(Path(fold.output_dir) / "eval")}))
    metrics = pool_folds(cfg.task.scorer, cfg.data.folds, cfg.eval.bertscore, run_dir,
                         metrics_file="scores/metrics.json")
    _add_encoder_curves(run_dir, cfg.data.folds)
    report = (run_dir / "eval" / "report.md").read_text(encoding="utf-8")
    print(f"== cross-validation, {cfg.data.folds} folds pooled\n{report}", flush=True)
    if cfg.eval.export:
        _export_fitted_on_every_record(cfg, run_dir, report)
    return metrics


def _add_encoder_curves(run_dir: Path, folds: int) -> None:
    """The pooled report of a grounding run whose unit encoders stopped early ends with their curves, fold by fold."""
    from eval.baselines.grounding import encoder_curve_lines

    saved = {i: run_dir / f"fold_{i}" / "eval" / "grounding.json" for i in range(folds)}
    lines = encoder_curve_lines({i: json.loads(p.read_text(encoding="utf-8")) for i, p in saved.items() if p.is_file()})
    if lines:
        report = run_dir / "eval" / "report.md"
        report.write_text(report.read_text(encoding="utf-8") + "\n" + "\n".join(lines) + "\n", encoding="utf-8")


def _measured_report(run_dir: Path) -> str:
    """`eval.export_only`: the pooled report of the launch that measured the recipe in this output_dir, or what
    the card says in its place."""
    report = run_dir / "eval" / "report.md"
    if report.is_file():
        return report.read_text(encoding="utf-8")
    logger.warning(f"eval.export_only: no cross-validated report at {report}; the export's card will say so")
    return (f"Not measured by the launch that fitted it (eval.export_only=true, and {run_dir.name}/eval/report.md "
            "was not there): the recipe's cross-validated figures are where it was measured.")


def _export_fitted_on_every_record(cfg: SFTConfig, run_dir: Path, report: str) -> None:
    """The method the folds measured (`cfg.data` dealt them), fitted once more on every record (train and val
    dealt as a fold's), and written as an export (`eval.export`)."""
    method = PredictorConfig.of_run(with_changes(cfg, {"data": {"folds": 0}}))
    export, folded = cfg.eval.export, cfg.data
    logger.info(f"== fitting on every record for {export}")
    whole = deal_all(folded, run_dir / "folds" / "all")
    fitted = run_dir / "all"
    fitted.mkdir(parents=True, exist_ok=True)
    predictor = PREDICTORS[method.evaluation.method].from_config(method)
    predictor.prepare({"train": whole["train"], "val": whole["val"]}, fitted)
    by = method.evaluation.grounding.cross_fit_by
    how = (f"every record of {folded.root}, its thresholds chosen on their scores cross-fitted by {by}" if by else
           f"every record of {folded.root} but the {len(whole['val'])} held out to choose its thresholds")
    _export(export, method.task, fitted / "grounding.json", whole["train"] + (whole["val"] if by else []),
            f"{how} ({folded.folds} folds measured the recipe)", report)
    predictor.discard_checkpoints()


def _export(export: str, task: TaskConfig, fitted: Path, records: list[dict], how: str, held_out: str) -> None:
    """`eval.export`: the fitted grounding model and what it was fitted on, as an export `hallu annotate` applies."""
    from eval.baselines.grounding_export import write_grounding_export

    if not fitted.is_file():
        raise ValueError(f"eval.export={export}: no fitted model at {fitted} (a run whose predictions were "
                         "all written before fits nothing: use a new output_dir)")
    write_grounding_export(Path(export), fitted, task, records, how, held_out)
    logger.info(f"export written to {export}: python -m eval.annotate model={export} input=IN.jsonl "
                "output=OUT.jsonl")


def _record_judge(judge, out: Path) -> None:
    """The judge's requests, tokens and speed (and cost, with prices) beside the predictions."""
    from eval.backends.served import usage_record

    record = usage_record(judge.usage, judge.config)
    (out / "judge_usage.json").write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    logger.info(record["line"])


def _tokens(rows: list[dict]) -> tuple[int, int, int]:
    """(rows, prompt tokens, completion tokens) of the rows an in-process decoder generated."""
    counted = [r for r in rows if "completion_tokens" in r]
    return len(counted), sum(r["prompt_tokens"] for r in counted), sum(r["completion_tokens"] for r in counted)


def _record_generation(sitting: list[dict], seconds: float, preds_path: Path, out: Path) -> None:
    """An in-process decoder's tokens and speed, as `_record_judge` writes a served judge's
    (`generation_usage.json`): this sitting's rows and the whole predictions file's, a resumed run included."""
    rows, prompt, completion = _tokens(sitting)
    all_rows, all_prompt, all_completion = _tokens(list(read_jsonl_to_append(preds_path)))
    line = (f"generated in process: {rows} rows this sitting ({all_rows} in all), {prompt} prompt + {completion} "
            f"completion tokens ({all_prompt} + {all_completion} in all), {rows / seconds:.2f} rows/s, "
            f"{(prompt + completion) / seconds:.0f} tokens/s, {seconds:.1f} s")
    record = {"rows": rows, "prompt_tokens": prompt, "completion_tokens": completion, "seconds": round(seconds, 3),
              "all_rows": all_rows, "all_prompt_tokens": all_prompt, "all_completion_tokens": all_completion,
              "line": line}
    (out / "generation_usage.json").write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    logger.info(line)
