"""Where records come from: the embedded builders, released LongNovel files, record files, or a
weighted mixture of record directories.

Functions take the `data` section (`configs.schema.DataConfig`), a `DataRequest` (what the run
wants of it: the prompt that measures lengths, the length buckets, the seed) and a tokenizer; the
data floor reads no training key.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from configs.choices import DataSource
from configs.rules import ALL, UNION, run_buckets
from configs.schema import CurriculumConfig, DataConfig, EvalConfig, TaskConfig
from data_builders.folds import check_fold_files
from data_builders.importers.longnovel_released import check_released, import_released, import_report
from data_builders.mixture import mix_records
from data_builders.model_inputs.collate import encode_sample
from data_builders.model_inputs.prompts import traits
from data_builders.records import read_records
from data_builders.sample_cache import encoded_samples
from data_builders.synthetic.anah_sample import build_anah_sample
from data_builders.synthetic.length_extension import BuildReport, build_longnovel
from data_builders.synthetic.novel_corpus import generate_corpus


class DataError(ValueError):
    pass


def bucket_parts(bucket: str) -> list[str]:
    """The parts of a stage's or evaluation's bucket: "S+M" -> ["S", "M"]; "all" stays whole."""
    return [ALL] if bucket == ALL else bucket.split(UNION)


def in_bucket(records: list[dict], bucket: str) -> list[dict]:
    """The records of `bucket`: one length bucket, several joined by "+", or "all"."""
    if bucket == ALL:
        return list(records)
    names = set(bucket_parts(bucket))
    return [r for r in records if r.get("length_bucket") in names]


@dataclass(frozen=True)
class DataRequest:
    """What a run wants of its data besides the `data` section."""
    template: str                 # the annotator's prompt (`length_template` of it puts records in buckets)
    buckets: tuple[str, ...]      # the length buckets to build (`configs.rules.needed_buckets`)
    seed: int = 0                 # a mixture's draw

    @classmethod
    def of_run(cls, task: TaskConfig, curriculum: CurriculumConfig, evaluation: EvalConfig, seed: int) -> DataRequest:
        """What a run (training, or `eval/run.py`) wants of its data: its template, the length buckets of
        its stages and evaluation, its seed."""
        return cls(task.template, tuple(run_buckets(curriculum, evaluation)), seed)


def _released_file(root: Path, split: str) -> Path:
    for suffix in (".jsonl", ".json"):
        if (root / f"{split}{suffix}").exists():
            return root / f"{split}{suffix}"
    raise DataError(f"data.root={root}: expected {split}.jsonl or {split}.json, found neither")


def length_template(template: str) -> str:
    """The prompt whose token count puts a record in its length bucket: a sentence-level task
    (`sentence_check`) counts the whole-document prompt, so that S / M / L hold the same records
    whichever annotator reads them."""
    return traits(template).length_template or template


def _embedded(data: DataConfig, want: DataRequest, tokenizer) -> tuple[dict[str, list[dict]], str]:
    c = data.corpus
    units = generate_corpus(c.n_books, c.units_per_book, (c.unit_chars_min, c.unit_chars_max), c.seed,
                            str(c.language))
    budgets = {b: data.bucket_budgets[b] for b in want.buckets}
    report = BuildReport()
    out = build_longnovel(units, tokenizer, budgets, c.test_books, length_template(want.template),
                          data.min_fill, report, val_books=c.val_books)
    return out, report.table() + f"\nunits left unused at book ends: {report.unfilled_tail_units}"


def _anah_embedded(data: DataConfig, want: DataRequest, tokenizer) -> tuple[dict[str, list[dict]], str]:
    c = data.corpus
    units = generate_corpus(c.n_books, c.units_per_book, (c.unit_chars_min, c.unit_chars_max), c.seed)
    out = build_anah_sample(units, c.test_books, c.seed)
    return out, _counts(out) + " ANAH-style sentence records"


def _records(data: DataConfig, want: DataRequest, tokenizer) -> tuple[dict[str, list[dict]], str]:
    out = read_splits(Path(data.root))
    return out, _counts(out) + f" records read from {data.root}"


def _released(data: DataConfig, want: DataRequest, tokenizer) -> tuple[dict[str, list[dict]], str]:
    root, template = Path(data.root), length_template(want.template)
    count = lambda records: rendered_lengths(records, tokenizer, template, data.num_proc)  # noqa: E731
    files = released_files(root)
    out = {split: import_released(path, count) for split, path in files.items()}
    reports = [import_report(path, out[split]) for split, path in files.items()]
    return out, "\n".join([_counts(out) + f" records imported from {root}", *reports])


def released_files(root: Path) -> dict[str, Path]:
    """The released files of `data.root`: train and test (required), val (optional)."""
    files = {split: _released_file(root, split) for split in ("train", "test")}
    if any((root / f"val{suffix}").exists() for suffix in (".jsonl", ".json")):
        files["val"] = _released_file(root, "val")
    return files


def _mixture(data: DataConfig, want: DataRequest, tokenizer) -> tuple[dict[str, list[dict]], str]:
    return mix_records(data.mixture, want.seed)


def _counts(splits: dict[str, list[dict]]) -> str:
    return ", ".join(f"{len(v)} {k}" for k, v in splits.items())


def records_files(root: Path) -> dict[str, Path]:
    """The record files of a `data.source=records` directory: test (required), train and val (what
    training, or an annotator fitted on the data, needs: `train_split`)."""
    files = {s: root / f"{s}.jsonl" for s in ("train", "test", "val")}
    if not files["test"].is_file():
        raise DataError(f"data.root={root}: expected test.jsonl, found no such file")
    return {s: p for s, p in files.items() if p.is_file()}


def train_split(splits: dict[str, list[dict]], root: str | None, what: str) -> list[dict]:
    """The train records, for `what` needs them; a directory of a benchmark's test file alone (all a
    zero-shot judge needs) has none."""
    if not splits.get("train"):
        raise DataError(f"data.root={root}: {what} needs train.jsonl and found none (only a zero-shot "
                        "judge or an exported annotator evaluates from test.jsonl alone; data.folds=k deals "
                        "train and test parts from it)")
    return splits["train"]


def _check_released_file(path: Path) -> None:
    check_released(path)


@dataclass(frozen=True)
class Source:
    """One value of `data.source`: how its records are made, and what it needs."""
    build: Callable[[DataConfig, DataRequest, object], tuple[dict[str, list[dict]], str]]
    files: Callable[[Path], dict[str, Path]] | None = None   # the split files of data.root (missing: DataError)
    check_file: Callable[[Path], object] | None = None      # reads every row of one file, raising on the first bad one
    read_in_place: bool = False       # records files used as they are (not copied into the run directory)

    @property
    def needs_root(self) -> bool:     # data.root: a directory of its files
        return self.files is not None


SOURCES: dict[str, Source] = {
    DataSource.embedded: Source(_embedded),
    DataSource.anah_embedded: Source(_anah_embedded),
    DataSource.records: Source(_records, records_files, read_records, read_in_place=True),
    DataSource.longnovel_released: Source(_released, released_files, _check_released_file),
    DataSource.mixture: Source(_mixture),
}


def check_data_files(data: DataConfig) -> None:
    """What `data.source` reads, checked before anything is loaded and before any process group (every
    command that reads data, after `configs.rules` has checked the keys): the directories, the split
    files, and every row of them."""
    if data.folds:
        return check_fold_files(data)    # each fold's directory is written by the run itself
    source = SOURCES[data.source]
    if source.needs_root:
        if not data.root or not Path(data.root).is_dir():
            raise DataError(f"data.source={data.source} needs data.root=<a directory>, found {data.root!r}")
        for path in source.files(Path(data.root)).values():
            source.check_file(path)
    if data.source == DataSource.mixture:
        for i, src in enumerate(data.mixture):
            if not Path(src.root).is_dir():
                raise DataError(f"data.mixture[{i}] ({src.name}): root {src.root!r} is not a directory")


def build_records(data: DataConfig, want: DataRequest, tokenizer) -> tuple[dict[str, list[dict]], str]:
    """Records per split, and a short text report of what was built."""
    return SOURCES[data.source].build(data, want, tokenizer)


def rendered_lengths(records: list[dict], tokenizer, template: str, num_proc: int = 1) -> list[int]:
    """Token count of every record rendered as a generative sample; tokenised once, then read
    from the sample cache (a later launch over the same files and tokenizer tokenises nothing)."""
    def length(rec: dict, tok) -> dict:
        return {"n_tokens": len(encode_sample(rec, tok, template)["input_ids"])}

    return [row["n_tokens"] for row in encoded_samples(records, length, tokenizer, f"length|{template}", num_proc)]


def read_splits(root: Path) -> dict[str, list[dict]]:
    """train and test (required) and val (optional) records of a directory."""
    return {split: read_records(path) for split, path in records_files(root).items()}
