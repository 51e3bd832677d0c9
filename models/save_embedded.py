"""Write an embedded tiny model (config, weights, tokenizer) as a plain local model directory, the
kind `model.name_or_path` takes: dry-run a real recipe on a laptop before pointing it at real weights.

    python -m models.save_embedded qwen3-tiny local/qwen3-tiny
"""
from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

from data_builders.user_errors import reports_user_errors
from models.builders import EMBEDDED_BUILDERS, materialize_embedded


def save_embedded(name: str, out: Path) -> Path:
    """Copy the built model into `out`, which must not exist or be empty (nothing is overwritten)."""
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise FileExistsError(f"{out}: exists and is not an empty directory; choose another path")
    shutil.copytree(materialize_embedded(name), out, dirs_exist_ok=True)
    return out


@reports_user_errors("models.save_embedded")
def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("name", choices=sorted(EMBEDDED_BUILDERS))
    p.add_argument("out", type=Path, help="the directory to write (absent or empty)")
    args = p.parse_args(argv)
    out = save_embedded(args.name, args.out)
    files = ", ".join(sorted(f.name for f in out.iterdir()))
    print(f"wrote {args.name} to {out} ({files}); use it as model.name_or_path={out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
