"""Write an embedded tiny model (config, weights, tokenizer) as a plain local model directory, the
kind `model.name_or_path` takes: dry-run a real recipe on a laptop before pointing it at real weights.

    python -m models.save_embedded qwen3-tiny local/qwen3-tiny
"""
from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

from data_builders.common.user_errors import reports_user_errors
from models.builders import EMBEDDED_BUILDERS, materialize_embedded


def save_embedded(name: str, out: Path) -> bool:
    """Copy the built model into `out` (absent or empty); False when `out` already holds this very
    model. Anything else in `out` is an error: nothing is overwritten."""
    built = materialize_embedded(name)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        if _same_files(built, out):
            return False
        raise FileExistsError(f"{out}: exists and holds something other than {name}; choose another path")
    shutil.copytree(built, out, dirs_exist_ok=True)
    return True


def _same_files(a: Path, b: Path) -> bool:
    names = sorted(f.name for f in a.iterdir())
    return names == sorted(f.name for f in b.iterdir()) and all(
        (a / n).read_bytes() == (b / n).read_bytes() for n in names)


@reports_user_errors("models.save_embedded")
def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("name", choices=sorted(EMBEDDED_BUILDERS))
    p.add_argument("out", type=Path, help="the directory to write (absent or empty)")
    args = p.parse_args(argv)
    wrote = save_embedded(args.name, args.out)
    files = ", ".join(sorted(f.name for f in args.out.iterdir()))
    print(f"{'wrote' if wrote else 'already there:'} {args.name} in {args.out} ({files}); "
          f"use it as model.name_or_path={args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
