"""sbatch scripts rendered from a composed experiment config (pure functions; no SLURM needed)."""
from __future__ import annotations

import re
import shlex
import sys
from collections.abc import Callable
from importlib import resources
from pathlib import Path

from configs.schema import DeepSpeedConfig, SFTConfig, SlurmConfig
from train.memory_plan import RunPlan, host_request_gb
from train.parallel_dims import job_world_size, procs_per_node, stage_dims


def _template(name: str) -> str:
    return resources.files("slurm.templates").joinpath(f"{name}.sbatch").read_text(encoding="utf-8")


def job_overrides(task_overrides: list[str], drop: tuple[str, ...] = ()) -> list[str]:
    """The user's command-line overrides without the `slurm.*` ones and without keys the script sets."""
    keep = []
    for o in task_overrides:
        key = o.lstrip("+~").split("=", 1)[0]
        if key == "slurm" or key.startswith("slurm.") or key in drop:
            continue
        keep.append(o)
    return keep


OFFLOAD_THREADS, DEFAULT_THREADS = 8, 2


def threads_per_rank(s: SlurmConfig, deepspeed: DeepSpeedConfig) -> int:
    """`slurm.threads_per_rank`; by default 8 where the optimizer is offloaded (each rank runs its
    share of the Adam step on the CPU in OpenMP threads), else 2; with `slurm.cpus_per_task` set,
    its share per process."""
    if s.threads_per_rank is not None:
        return s.threads_per_rank
    if s.cpus_per_task is not None:
        return max(1, s.cpus_per_task // procs_per_node(s))
    return OFFLOAD_THREADS if deepspeed.offload_optimizer else DEFAULT_THREADS


def cpus_per_task(s: SlurmConfig, deepspeed: DeepSpeedConfig) -> int:
    return s.cpus_per_task if s.cpus_per_task is not None else procs_per_node(s) * threads_per_rank(s, deepspeed)


def train_memory(run_plan: Callable[[], RunPlan]) -> str:
    """`slurm.mem`'s default: what the memory plan asks per node (it reads model.name_or_path's config.json)."""
    try:
        run = run_plan()
    except ValueError as e:
        raise ValueError(f"slurm.mem is not set, and its default comes from the memory plan, which could not read "
                         f"the model here ({e}); set slurm.mem=<GB per node>G") from None
    return f"{host_request_gb(run.shape, run.layout)}G"


def sbatch_lines(s: SlurmConfig, cpus: int, job_name: str, log_dir: Path, array: int | None = None,
                 mem: str | None = None) -> list[str]:
    lines = [f"--job-name={job_name}", f"--nodes={s.nodes}", "--ntasks-per-node=1",
             f"--cpus-per-task={cpus}", f"--time={s.time}", f"--output={log_dir}/%x-%A_%a.out"
             if array is not None else f"--output={log_dir}/%x-%j.out", "--open-mode=append"]
    if s.gpus_per_node > 0:
        lines.append(f"--gpus-per-node={s.gpus_per_node}")
    if mem:
        lines.append(f"--mem={mem}")
    for flag in ("partition", "account", "qos"):
        if getattr(s, flag):
            lines.append(f"--{flag}={getattr(s, flag)}")
    if array is None:
        lines += ["--requeue", f"--signal=B:USR1@{s.signal_seconds}"]
    else:
        lines.append(f"--array=0-{array - 1}")
    return [f"#SBATCH {line}" for line in lines]


def _fill(text: str, values: dict[str, str]) -> str:
    return re.sub(r"@@([A-Z_]+)@@", lambda m: values[m.group(1)], text)


def _common(s: SlurmConfig, deepspeed: DeepSpeedConfig, repo: Path) -> dict[str, str]:
    return {"REPO": shlex.quote(str(repo)), "PYTHON": shlex.quote(sys.executable), "SETUP": "\n".join(s.setup),
            "CPUS": str(cpus_per_task(s, deepspeed)), "THREADS": str(threads_per_rank(s, deepspeed))}


def train_script(cfg: SFTConfig, overrides: list[str], repo: Path, log_dir: Path) -> str:
    """The training job: fixed output_dir (so a requeued job finds its checkpoints) and resume=auto."""
    s = cfg.slurm
    for stage in [None, *cfg.curriculum.stages]:     # every degree divides the job's world size
        stage_dims(cfg.parallel, stage, job_world_size(s))
    run_dir = Path(cfg.output_dir).resolve()
    args = [*job_overrides(overrides, ("output_dir", "resume")), f"output_dir={run_dir}", "resume=auto"]
    return _fill(_template("train"), {
        **_common(s, cfg.deepspeed, repo),
        "SBATCH": "\n".join(sbatch_lines(s, cpus_per_task(s, cfg.deepspeed), cfg.exp_name, log_dir,
                                          mem=s.mem or train_memory(lambda: RunPlan.of_run(cfg, job_world_size(s))))),
        "RUN_DIR": shlex.quote(str(run_dir)), "PORT": str(s.rdzv_port), "PROCS": str(procs_per_node(s)),
        "RESTARTS": str(s.max_restarts), "OVERRIDES": " ".join(shlex.quote(a) for a in args)})


def checkpoint_name(path: str) -> str:
    """A directory name for a checkpoint: its last two path parts, e.g. 'sft_32k-hf' or 'qwen3-tiny'."""
    parts = [p for p in re.split(r"[/:]", path.rstrip("/")) if p]
    return "-".join(parts[-2:]) if len(parts) > 1 else parts[-1]


def eval_script(s: SlurmConfig, deepspeed: DeepSpeedConfig, buckets: list[str], job_name: str, sweep_dir: Path,
                overrides: list[str], repo: Path, log_dir: Path) -> tuple[str, int]:
    """The evaluation sweep into `sweep_dir`: an array over slurm.checkpoints x `buckets` (eval.buckets)."""
    if not s.checkpoints:
        raise ValueError("slurm.mode=eval needs slurm.checkpoints=[PATH, ...] (one array task per checkpoint x "
                         "eval.buckets)")
    names = [checkpoint_name(c) for c in s.checkpoints]
    if len(set(names)) != len(names):
        raise ValueError(f"slurm.checkpoints: names {names} collide; give checkpoints with distinct last path parts")
    n = len(s.checkpoints) * len(buckets)
    args = job_overrides(overrides, ("output_dir", "checkpoint", "eval.buckets"))
    script = _fill(_template("eval"), {
        **_common(s, deepspeed, repo),
        "SBATCH": "\n".join(sbatch_lines(s, cpus_per_task(s, deepspeed), job_name, log_dir, array=n, mem=s.mem)),
        "CHECKPOINTS": " ".join(shlex.quote(str(c)) for c in s.checkpoints),
        "NAMES": " ".join(shlex.quote(x) for x in names), "BUCKETS": " ".join(shlex.quote(b) for b in buckets),
        "SWEEP_DIR": shlex.quote(str(sweep_dir.resolve())),
        "OVERRIDES": " ".join(shlex.quote(a) for a in args)})
    return script, n
