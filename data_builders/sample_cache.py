"""Tokenised training samples, cached on disk with 🤗 datasets.

Encoding a record renders its prompt and tokenises it; for a corpus of 100k-token novels that is
minutes at every launch. The encoded samples of a set of records are written once as an Arrow
dataset under `<HALLU_CACHE>/samples/`, named by a fingerprint of everything that decides them: the
records' content, the tokenizer (its vocabulary, merges and chat template) and the encoder's
settings (task kind, template, head, ...). A later launch with the same fingerprint memory-maps
the file instead of tokenising again; any change gives a new fingerprint. Other derived data that
every launch would rebuild from the same records (the evidence pool of a sentence-level task) is
cached the same way as one JSON file (`cached_json`).
"""
from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path

from data_builders.common.cache_dir import cache_root

ENCODER_VERSION = 1     # bump when data_builders.model_inputs.collate changes what a sample holds


def tokenizer_fingerprint(tokenizer) -> str:
    backend = getattr(tokenizer, "backend_tokenizer", None)
    text = (backend.to_str() if backend is not None else repr(sorted(tokenizer.get_vocab().items()))) + \
        str(tokenizer.chat_template)
    return hashlib.sha1(text.encode()).hexdigest()


def samples_fingerprint(records: list[dict], tokenizer, settings: str) -> str:
    return records_fingerprint(records, f"{ENCODER_VERSION}|{settings}|{tokenizer_fingerprint(tokenizer)}")


def encoded_samples(records: list[dict], encode: Callable[[dict, object], dict], tokenizer, settings: str,
                    num_proc: int = 1, root: Path | None = None) -> list[dict]:
    """`encode(record, tokenizer)` of every record, in order: from the cache when it holds them,
    else computed (in `num_proc` processes) and written to it."""
    # datasets is imported here, not at the top: a second of import for every command that never asks
    from datasets import load_from_disk

    path = (root or cache_root()) / "samples" / samples_fingerprint(records, tokenizer, settings)
    if not path.exists():
        _build(path, records, encode, tokenizer, num_proc)
    return load_from_disk(str(path)).to_list()


def _build(path: Path, records: list[dict], encode, tokenizer, num_proc: int) -> None:
    from datasets import Dataset, disable_progress_bars

    path.parent.mkdir(parents=True, exist_ok=True)
    disable_progress_bars()
    with tempfile.TemporaryDirectory(dir=path.parent, prefix=f".{path.name}.") as work:
        environ = os.environ    # map(num_proc > 1) leaves a copy of os.environ in its place (datasets PR 2119)
        try:
            encoded = Dataset.from_dict({"record": [json.dumps(r, ensure_ascii=False) for r in records]}).map(
                lambda row: encode(json.loads(row["record"]), tokenizer), remove_columns=["record"],
                num_proc=num_proc if num_proc > 1 else None, cache_file_name=str(Path(work) / "map.arrow"),
                new_fingerprint=path.name)
        finally:
            os.environ = environ  # noqa: B003  (the object itself back, not a new environment)
        encoded.save_to_disk(str(Path(work) / "done"))
        try:
            os.replace(Path(work) / "done", path)
        except OSError:             # another rank stored the same samples first
            if not path.exists():
                raise


def records_fingerprint(records: list[dict], settings: str) -> str:
    digest = hashlib.sha1(settings.encode())
    for rec in records:
        digest.update(json.dumps(rec, ensure_ascii=False, sort_keys=True).encode())
    return digest.hexdigest()[:20]


def cached_json(kind: str, records: list[dict], settings: str, build: Callable[[], object],
                root: Path | None = None):
    """`build()` (JSON-serialisable) for these records and settings: read from
    `<HALLU_CACHE>/<kind>/<fingerprint>.json` when there, else built and stored (atomically)."""
    path = (root or cache_root()) / kind / f"{records_fingerprint(records, settings)}.json"
    if path.exists():
        return json.loads(path.read_text(encoding="utf-8"))
    out = build()
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", dir=path.parent, prefix=f".{path.name}.", delete=False,
                                     encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False)
    os.replace(f.name, path)
    return out
