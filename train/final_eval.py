"""First evaluation after the last stage: greedy decoding of the exported model on the
held-out split, ranks sharing the records, rank 0 scoring."""
from __future__ import annotations

from pathlib import Path

from omegaconf import DictConfig

from data_builders.collate import prompt_ids
from eval.generate import greedy_generate
from eval.longnovel import score_longnovel
from eval.report import write_eval
from models.builders import load_causal_lm, load_tokenizer
from train.distributed import DistInfo, all_gather_objects


def select_eval_records(records: list[dict], buckets: list[str], cap: int | None) -> list[dict]:
    """Records of the given buckets; with a cap, half hallucinated and half faithful per bucket."""
    chosen = []
    for b in buckets:
        pool = [r for r in records if r.get("length_bucket") == b]
        if cap is not None:
            pos = [r for r in pool if r["label"] == 1][: (cap + 1) // 2]
            neg = [r for r in pool if r["label"] == 0][: cap // 2]
            pool = pos + neg
        chosen += pool
    return chosen


def evaluate_export(cfg: DictConfig, hf_dir: str, test_records: list[dict], run_dir: Path,
                    info: DistInfo) -> dict | None:
    records = select_eval_records(test_records, list(cfg.eval.buckets), cfg.eval.max_per_bucket)
    if not records:
        raise ValueError(f"eval.buckets={list(cfg.eval.buckets)}: no test records in these buckets")
    tokenizer = load_tokenizer(hf_dir)
    model = load_causal_lm(hf_dir, cfg.model.dtype, cfg.model.attn_implementation).to(info.device)
    mine = records[info.rank::info.world_size]
    prompts = [prompt_ids(r, tokenizer, cfg.task.template) for r in mine]
    texts = greedy_generate(model, tokenizer, prompts, cfg.eval.max_new_tokens,
                            progress=cfg.trainer.progress and info.is_main, desc="eval")
    gathered = all_gather_objects(list(zip([r["id"] for r in mine], texts)))
    preds = {rid: {"id": rid, "output": text} for part in gathered for rid, text in part}
    if not info.is_main:
        return None
    metrics, rows = score_longnovel(records, preds)
    write_eval(run_dir / "eval", "longnovel", metrics, rows)
    return metrics
