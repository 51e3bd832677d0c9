"""The run directory contract: one `output_dir` for all ranks, `config.yaml`,
`train_log.jsonl`, `checkpoints/`, `eval/`."""
from __future__ import annotations

import json
import os
import shlex
import sys
import time
from pathlib import Path

from configs.schema import SFTConfig, to_yaml, with_changes
from data_builders.records import read_jsonl, read_jsonl_to_append
from train.distributed import DistInfo, broadcast_object

LOG_FIELDS = ("stage", "step", "seq_len", "loss", "grad_norm", "lr", "tokens", "elapsed_s")


def agree_on_output_dir(cfg: SFTConfig, info: DistInfo) -> tuple[SFTConfig, Path]:
    """Rank 0 resolves `output_dir` (its `${now:}` differs per process) and tells the others: the
    run's config with that directory (a new config; `cfg` is left as it was), and the directory."""
    chosen = broadcast_object(str(cfg.output_dir) if info.is_main else None)
    cfg = with_changes(cfg, {"output_dir": chosen})
    path = Path(chosen)
    if info.is_main:
        path.mkdir(parents=True, exist_ok=True)
        (path / "config.yaml").write_text(to_yaml(cfg), encoding="utf-8")
    return cfg, path


def continue_command(run_dir: Path) -> str:
    """The command line of this process, pointed at `run_dir` with resume=auto (and no stop step)."""
    dropped = ("output_dir=", "resume=", "trainer.stop_at_step=")
    args = [a for a in sys.argv[1:] if not a.lstrip("+").startswith(dropped)]
    nproc = os.environ.get("LOCAL_WORLD_SIZE")
    launcher = f"torchrun --nproc_per_node={nproc}" if nproc else "python"
    return shlex.join([*launcher.split(), sys.argv[0], *args, f"output_dir={run_dir}", "resume=auto"])


class TrainLog:
    """Append-only `train_log.jsonl` on rank 0, one object per optimizer step."""

    def __init__(self, run_dir: Path, enabled: bool, resume_from_step: int | None = None):
        self.path = run_dir / "train_log.jsonl"
        self.enabled = enabled
        self.start = time.time()
        if enabled and resume_from_step is not None:
            self._truncate_after(resume_from_step)
        elif enabled and self.path.exists():
            self.path.unlink()

    def _truncate_after(self, step: int) -> None:
        if not self.path.exists():
            return
        rows = read_jsonl_to_append(self.path)
        kept = [r for r in rows if r["step"] <= step]
        if kept:
            self.start -= kept[-1]["elapsed_s"]
        self.path.write_text("".join(json.dumps(r) + "\n" for r in kept), encoding="utf-8")

    def elapsed(self) -> float:
        return time.time() - self.start

    def write(self, row: dict) -> None:
        missing = [k for k in LOG_FIELDS if k not in row]
        if missing:
            raise KeyError(f"train_log row lacks {missing}")
        if self.enabled:
            with open(self.path, "a", encoding="utf-8") as f:
                f.write(json.dumps(row) + "\n")


def read_train_log(run_dir: str | Path) -> list[dict]:
    return read_jsonl(Path(run_dir) / "train_log.jsonl")
