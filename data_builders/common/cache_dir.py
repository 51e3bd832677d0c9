"""Where the toolkit keeps what it builds once: the embedded models and the tokenised samples."""
from __future__ import annotations

import os
from pathlib import Path


def cache_root() -> Path:
    return Path(os.environ.get("HALLU_CACHE", Path.home() / ".cache" / "hallu-annotators"))
