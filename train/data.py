"""Records for a run, and the samples and batch order of each curriculum stage."""
from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from pathlib import Path

import torch

from configs.rules import check_training
from configs.schema import (
    DataConfig,
    SFTConfig,
    StageConfig,
    TaskConfig,
)
from data_builders.model_inputs.collate import pack_samples
from data_builders.model_inputs.evidence import EVIDENCE_VERSION
from data_builders.model_inputs.pairs import check_vocabulary, uses_pairs
from data_builders.records import write_jsonl
from data_builders.sample_cache import cached_json, encoded_samples
from data_builders.sources import (
    SOURCES,
    DataError,
    DataRequest,
    bucket_parts,
    build_records,
    check_data_files,
    in_bucket,
    read_splits,
)
from models.builders import is_encoder, resolve_model_path
from models.kinds import kind_of
from train.distributed import DistInfo, barrier, on_main_rank

logger = logging.getLogger(__name__)


def check_run_config(cfg: SFTConfig, world: int) -> None:
    """Errors a user can fix in a training run of `world` ranks, raised before any process group
    exists (train/sft.py) or any job is submitted (slurm/submit.py): the model path, the configuration
    (`configs.rules`), the data (every row of its files)."""
    path = resolve_model_path(cfg.model.name_or_path)
    check_training(cfg, world, encoder=is_encoder(path), cuda=torch.cuda.is_available())
    check_data_files(cfg.data)


def prepare_records(data: DataConfig, request: DataRequest, tokenizer, run_dir: Path,
                    info: DistInfo) -> dict[str, list[dict]]:
    """Rank 0 builds (or imports) the records into <run_dir>/data once; every rank reads them."""
    if SOURCES[data.source].read_in_place:
        return build_records(data, request, tokenizer)[0]
    data_dir = run_dir / "data"
    # every rank enters on_main_rank; only the main rank looks whether an earlier launch built them (a
    # rank that looked itself could find rank 0's fresh files and skip the collective it waits in)
    on_main_rank(lambda: (data_dir / "test.jsonl").exists() or _write_records(data, request, tokenizer, data_dir),
                 info.is_main)
    barrier()
    return read_splits(data_dir)


def _write_records(data: DataConfig, request: DataRequest, tokenizer, data_dir: Path) -> None:
    records, report = build_records(data, request, tokenizer)
    records = {k: v for k, v in records.items() if v}
    if "train" not in records or "test" not in records:
        counts = {s: len(records.get(s, [])) for s in ("train", "test")}
        raise DataError(f"data.source={data.source}: the build produced {counts} records for buckets "
                        f"{list(request.buckets)}; the corpus is too small for these buckets (see "
                        f"data.corpus, data.bucket_budgets)\n{report}")
    data_dir.mkdir(parents=True, exist_ok=True)
    for split, rows in records.items():
        write_jsonl(data_dir / f"{split}.jsonl.tmp", rows)
    (data_dir / "build_report.txt").write_text(report + "\n", encoding="utf-8")
    for split in sorted(records, key=lambda s: s == "test"):   # test.jsonl last marks a complete build
        (data_dir / f"{split}.jsonl.tmp").rename(data_dir / f"{split}.jsonl")
    print(report, flush=True)


def encoder(task: TaskConfig):
    """record -> training sample, for the task's kind."""
    encode = kind_of(task).encode
    return lambda rec, tok: encode(rec, tok, task)


def _evidence_pool(records: list[dict], k: int, unit: str) -> dict:
    from data_builders.model_inputs.evidence import evidence_records

    pool, skipped, first = [], 0, None
    for rec in records:
        try:
            pool += evidence_records(rec, k, unit=unit)
        except ValueError as err:
            skipped, first = skipped + 1, first or str(err)
    return {"pool": pool, "skipped": skipped, "first": first}


def sentence_pools(parts: list[list[dict]], k: int, stage: str, max_skip_fraction: float,
                   unit: str = "sentence") -> list[list[dict]]:
    """The evidence records of each part of a stage's records (one per response sentence); records
    whose hallucinated sentence cannot be found in their response are skipped and counted over all
    parts. BM25 over every record takes a while: each part's pool is cached on its own
    (`data_builders.sample_cache.cached_json`), built by the first rank that needs it and read by the
    others, by later launches and by a later stage that takes the same bucket again."""
    settings = f"{EVIDENCE_VERSION}|{k}|{unit}"
    built = [cached_json("evidence_pools", part, settings, lambda part=part: _evidence_pool(part, k, unit))
             for part in parts]
    n, skipped = sum(map(len, parts)), sum(b["skipped"] for b in built)
    first = next((b["first"] for b in built if b["first"]), None)
    if skipped:
        logger.warning(f"curriculum stage {stage!r}: {skipped} of {n} records skipped ({first})")
        if skipped == n or skipped / n > max_skip_fraction:
            why = "(none left to train on)" if skipped == n else f"above data.max_skip_fraction={max_skip_fraction}"
            raise DataError(f"curriculum stage {stage!r}: {skipped} of {n} records have no sentence that "
                            f"carries their label, {why}; first: {first}")
    return [b["pool"] for b in built]


def stage_samples(records: list[dict], stage: StageConfig, tokenizer, task: TaskConfig,
                  max_skip_fraction: float, packing: bool = False, num_proc: int = 1) -> tuple[list[dict], int]:
    """Encoded samples of the stage's buckets, bucket by bucket in the order the stage names them
    ("S+M": S's, then M's), each bucket's evidence and samples cached on their own: a curriculum's
    S -> S+M -> S+M+L encodes each bucket once. Longer samples are skipped and counted, never
    truncated. With `packing`, the samples come back packed into rows of up to max_seq_len tokens."""
    parts = [part for part in (in_bucket(records, b) for b in bucket_parts(stage.bucket)) if part]
    if not parts:
        raise DataError(f"curriculum stage {stage.name!r}: no training records in bucket {stage.bucket!r}")
    if task.evidence_sentences:
        parts = sentence_pools(parts, task.evidence_sentences, stage.name, max_skip_fraction, task.evidence_unit)
    if uses_pairs(tokenizer):
        for rec in (r for part in parts for r in part):
            check_vocabulary(rec, tokenizer)
    settings = (f"{task.kind}|{task.template}|{task.head}|{task.response_lm}|{task.evidence_sentences}"
                f"|{task.evidence_unit}")
    encode = encoder(task)
    encoded = [s for part in parts if part for s in encoded_samples(part, encode, tokenizer, settings, num_proc)]
    samples = [s for s in encoded if len(s["input_ids"]) <= stage.max_seq_len]
    n = sum(map(len, parts))
    skipped = n - len(samples)
    if skipped / n > max_skip_fraction:
        raise DataError(
            f"curriculum stage {stage.name!r}: {skipped} of {n} samples in bucket {stage.bucket!r} "
            f"are longer than max_seq_len={stage.max_seq_len}, above data.max_skip_fraction="
            f"{max_skip_fraction}. Raise the stage's max_seq_len or rebuild the data; samples are never truncated.")
    if packing:
        samples = pack_samples(samples, stage.max_seq_len)
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


def plan_stage(stage: StageConfig, n_samples: int, dp_size: int, micro_batch: int, grad_accum: int,
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
