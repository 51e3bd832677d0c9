"""Records for a run, and the samples and batch order of each curriculum stage."""
from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path

import torch
from omegaconf import DictConfig

from data_builders.collate import encode_classification, encode_sample
from data_builders.schema import read_records, write_jsonl
from models.sequence_parallel import SP_MODES, SPMesh
from train.distributed import DistInfo, barrier

ALL = "all"   # a stage or evaluation bucket that takes every record, whatever its length bucket


class DataError(ValueError):
    pass


def in_bucket(records: list[dict], bucket: str) -> list[dict]:
    return list(records) if bucket == ALL else [r for r in records if r.get("length_bucket") == bucket]


def needed_buckets(cfg: DictConfig) -> list[str]:
    names = [s.bucket for s in cfg.curriculum.stages] + (list(cfg.eval.buckets) if cfg.eval.enabled else [])
    return [n for n in sorted(set(names), key=names.index) if n != ALL]


def check_run_config(cfg: DictConfig) -> None:
    """Errors a user can fix, raised before any process group exists."""
    if not cfg.curriculum.stages:
        raise DataError("curriculum.stages is empty: at least one stage is needed")
    check_parallel_config(cfg)
    known = set(cfg.data.bucket_budgets)
    for name in needed_buckets(cfg):
        if name not in known:
            raise DataError(f"bucket {name!r} (curriculum.stages / eval.buckets) is not in "
                            f"data.bucket_budgets {sorted(known)}")
    if cfg.data.source in ("records", "longnovel_released"):
        if not cfg.data.root or not Path(cfg.data.root).is_dir():
            raise DataError(f"data.source={cfg.data.source} needs data.root=<a directory>, found {cfg.data.root!r}")
    elif cfg.data.source not in ("embedded", "anah_embedded"):
        raise DataError("data.source: expected embedded | anah_embedded | records | longnovel_released, "
                        f"found {cfg.data.source!r}")


def check_parallel_config(cfg: DictConfig) -> None:
    SPMesh(int(os.environ.get("WORLD_SIZE", "1")), cfg.parallel.sp_size)   # divisibility, before any group
    if cfg.parallel.sp_mode not in SP_MODES:
        raise ValueError(f"parallel.sp_mode: expected one of {list(SP_MODES)}, found {cfg.parallel.sp_mode!r}")
    if cfg.parallel.sp_size > 1 and cfg.optim.micro_batch_size != 1:
        raise ValueError(f"parallel.sp_size={cfg.parallel.sp_size} needs optim.micro_batch_size=1 "
                         f"(found {cfg.optim.micro_batch_size}); raise optim.grad_accum instead")


def _released_file(root: Path, split: str) -> Path:
    for suffix in (".jsonl", ".json"):
        if (root / f"{split}{suffix}").exists():
            return root / f"{split}{suffix}"
    raise DataError(f"data.root={root}: expected {split}.jsonl or {split}.json")


def build_records(cfg: DictConfig, tokenizer) -> tuple[dict[str, list[dict]], str]:
    """Records per split, and a short text report of what was built."""
    template = cfg.task.template
    if cfg.data.source == "anah_embedded":
        from data_builders.anah_sample import build_anah_sample
        from data_builders.novel_corpus import generate_corpus

        c = cfg.data.corpus
        units = generate_corpus(c.n_books, c.units_per_book, (c.unit_chars_min, c.unit_chars_max), c.seed)
        out = build_anah_sample(units, c.test_books, c.seed)
        return out, ", ".join(f"{len(v)} {k}" for k, v in out.items()) + " ANAH-style sentence records"
    if cfg.data.source == "embedded":
        from data_builders.longnovel import BuildReport, build_longnovel
        from data_builders.novel_corpus import generate_corpus

        c = cfg.data.corpus
        units = generate_corpus(c.n_books, c.units_per_book, (c.unit_chars_min, c.unit_chars_max), c.seed)
        budgets = {b: cfg.data.bucket_budgets[b] for b in needed_buckets(cfg)}
        report = BuildReport()
        out = build_longnovel(units, tokenizer, budgets, c.test_books, template, cfg.data.min_fill, report,
                              val_books=c.val_books)
        return out, report.table() + f"\nunits left unused at book ends: {report.unfilled_tail_units}"
    from data_builders.longnovel_released import import_released

    root = Path(cfg.data.root)
    count = lambda rec: len(encode_sample(rec, tokenizer, template)["input_ids"])  # noqa: E731
    out = {s: import_released(_released_file(root, s), count) for s in ("train", "test")}
    if any((root / f"val{suffix}").exists() for suffix in (".jsonl", ".json")):
        out["val"] = import_released(_released_file(root, "val"), count)
    return out, ", ".join(f"{len(v)} {k}" for k, v in out.items()) + f" records imported from {root}"


def _read_splits(root: Path) -> dict[str, list[dict]]:
    """train and test (required) and val (optional) records of a directory."""
    out = {s: read_records(root / f"{s}.jsonl") for s in ("train", "test")}
    if (root / "val.jsonl").exists():
        out["val"] = read_records(root / "val.jsonl")
    return out


def prepare_records(cfg: DictConfig, tokenizer, run_dir: Path, info: DistInfo) -> dict[str, list[dict]]:
    """Rank 0 builds (or imports) the records into <run_dir>/data once; every rank reads them."""
    if cfg.data.source == "records":
        return _read_splits(Path(cfg.data.root))
    data_dir = run_dir / "data"
    if info.is_main and not (data_dir / "test.jsonl").exists():
        records, report = build_records(cfg, tokenizer)
        records = {k: v for k, v in records.items() if v}
        for split, rows in records.items():
            write_jsonl(data_dir / f"{split}.jsonl.tmp", rows)
        (data_dir / "build_report.txt").write_text(report + "\n", encoding="utf-8")
        for split in sorted(records, key=lambda s: s == "test"):   # test.jsonl last marks a complete build
            (data_dir / f"{split}.jsonl.tmp").rename(data_dir / f"{split}.jsonl")
        print(report, flush=True)
    barrier()
    return _read_splits(data_dir)


def encoder(task: DictConfig):
    """record -> training sample, for the task's kind."""
    if task.kind == "generative":
        return lambda rec, tok: encode_sample(rec, tok, task.template)
    if task.kind == "discriminative":
        return lambda rec, tok: encode_classification(rec, tok, task.template, task.head)
    raise DataError(f"task.kind: expected generative | discriminative, found {task.kind!r}")


def stage_samples(records: list[dict], stage: DictConfig, tokenizer, task: DictConfig,
                  max_skip_fraction: float) -> tuple[list[dict], int]:
    """Encoded samples of the stage's bucket; longer ones are skipped and counted, never truncated."""
    pool = in_bucket(records, stage.bucket)
    if not pool:
        raise DataError(f"curriculum stage {stage.name!r}: no training records in bucket {stage.bucket!r}")
    encode = encoder(task)
    samples = [s for s in (encode(r, tokenizer) for r in pool) if len(s["input_ids"]) <= stage.max_seq_len]
    skipped = len(pool) - len(samples)
    if skipped / len(pool) > max_skip_fraction:
        raise DataError(
            f"curriculum stage {stage.name!r}: {skipped} of {len(pool)} samples in bucket {stage.bucket!r} "
            f"are longer than max_seq_len={stage.max_seq_len}, above data.max_skip_fraction="
            f"{max_skip_fraction}. Raise the stage's max_seq_len or rebuild the data; samples are never truncated.")
    return samples, skipped


@dataclass(frozen=True)
class StagePlan:
    """Which samples each rank takes at each optimizer step of a stage."""
    n_samples: int
    dp_size: int
    micro_batch: int
    grad_accum: int
    total_steps: int
    seed: int

    @property
    def per_step(self) -> int:
        return self.dp_size * self.micro_batch * self.grad_accum

    @property
    def steps_per_epoch(self) -> int:
        return self.n_samples // self.per_step

    def rank_indices(self, step: int, dp_rank: int) -> list[list[int]]:
        """Sample indices of the `grad_accum` micro-batches of `dp_rank` at `step`."""
        epoch, within = divmod(step, self.steps_per_epoch)
        order = torch.randperm(self.n_samples, generator=torch.Generator().manual_seed(self.seed + epoch))
        chunk = order[within * self.per_step:(within + 1) * self.per_step].tolist()
        mb = self.micro_batch
        return [chunk[(a * self.dp_size + dp_rank) * mb:(a * self.dp_size + dp_rank + 1) * mb]
                for a in range(self.grad_accum)]


def plan_stage(stage: DictConfig, n_samples: int, dp_size: int, micro_batch: int, grad_accum: int,
               seed: int, cap: int | None) -> StagePlan:
    per_step = dp_size * micro_batch * grad_accum
    if n_samples < per_step:
        raise DataError(f"curriculum stage {stage.name!r}: {n_samples} usable samples, fewer than one "
                        f"optimizer step takes (data-parallel {dp_size} x micro-batch {micro_batch} x "
                        f"grad_accum {grad_accum} = {per_step})")
    total = stage.max_steps if stage.max_steps is not None else math.ceil(stage.epochs * (n_samples // per_step))
    if cap is not None:
        total = min(total, cap)
    if total < 1:
        raise DataError(f"curriculum stage {stage.name!r}: plans {total} optimizer steps")
    return StagePlan(n_samples, dp_size, micro_batch, grad_accum, total, seed)
