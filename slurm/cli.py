"""`hallu`: one console script for every command a user runs. Each subcommand runs the module or
script it names with the arguments as given (Hydra overrides or the module's own flags), so
`hallu eval +exp=...` is `python eval/run.py +exp=...`; `hallu train -n 8 +exp=...` launches
`torchrun --nproc_per_node=8 train/sft.py +exp=...`. It lives on the top floor (slurm/): it may start
anything below it."""
from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

# name: (how it runs: "-m module" or a script path under the repository, what it does)
COMMANDS: dict[str, tuple[str, str]] = {
    "train": ("train/sft.py", "train (torchrun over -n processes; Hydra overrides: +exp=... key=value)"),
    "eval": ("eval/run.py", "evaluate a checkpoint, a base model, a judge or a baseline and score it"),
    "annotate": ("-m eval.annotate", "label anyone's outputs with an export or a served model"),
    "serve": ("-m eval.serve", "serve an export over HTTP: POST /v1/annotate, as `annotate` labels rows"),
    "score": ("eval/score.py", "score any system's predictions against gold records"),
    "compare": ("eval/compare.py", "compare finished runs: metrics, differing config keys, plots"),
    "convert": ("-m data_builders.convert", "convert a released benchmark into records"),
    "folds": ("-m data_builders.folds", "deal records into folds grouped by source"),
    "twins": ("-m data_builders.synthetic.twins", "hallucinated twins of faithful records, with exact spans"),
    "plan": ("-m train.tools.plan", "GPU memory, host memory and disk a run needs, per stage"),
    "submit": ("slurm/submit.py", "check a run as its ranks would, render and submit it to SLURM"),
    "check": ("-m train.tools.check_run", "check a finished run directory (contract and floors)"),
    "gpu-check": ("-m train.tools.gpu_check", "kernels, the ring and a 32k step on this machine's GPU"),
    "bench": ("-m train.tools.bench", "throughput, padding and memory figures on this machine"),
}


def command_line(name: str, args: list[str], nproc: int = 1) -> list[str]:
    """The process `hallu NAME ARGS` becomes."""
    target, _ = COMMANDS[name]
    run = target.split() if target.startswith("-m ") else [str(REPO / target)]
    if name == "train" and nproc > 1:
        torchrun = shutil.which("torchrun") or str(Path(sys.executable).parent / "torchrun")
        return [torchrun, f"--nproc_per_node={nproc}", *run, *args]
    return [sys.executable, *run, *args]


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="hallu", description="Train and evaluate hallucination annotators.",
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="Each command takes what its module takes: `hallu COMMAND --help`.")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, (_, what) in COMMANDS.items():
        cmd = sub.add_parser(name, help=what, add_help=False)
        if name == "train":
            cmd.add_argument("-n", "--nproc", type=int, default=1, help="processes (GPUs, or CPU ranks)")
    return p


def main(argv: list[str] | None = None) -> None:
    args, rest = parser().parse_known_args(argv)
    line = command_line(args.command, rest, getattr(args, "nproc", 1))
    sys.stdout.flush()
    os.execv(line[0], line)


if __name__ == "__main__":
    main()
