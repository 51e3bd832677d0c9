"""Render an experiment into an sbatch script and submit it.

    python slurm/submit.py +exp=longnovel_curriculum model.name_or_path=/models/Qwen3-8B \
        slurm.nodes=2 slurm.gpus_per_node=8 slurm.partition=gpu [slurm.dry_run=true]
    python slurm/submit.py +exp=longnovel_curriculum slurm.mode=eval \
        'slurm.checkpoints=[RUN/checkpoints/3-sft_32k/hf,/models/Qwen3-8B]' 'eval.buckets=[S,M,L]'

The config is composed (and checked) here exactly as train/sft.py would compose it; the
job gets the same overrides, minus `slurm.*`, plus a fixed `output_dir` and `resume=auto`.
The script is written to <output_dir>/slurm/ and logs go to <output_dir>/slurm/logs/.
"""
import subprocess
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

from configs.schema import typed  # (importing it registers the structured schemas)
from data_builders.common.user_errors import reports_user_errors
from slurm.render import eval_script, train_script
from train.parallel_dims import job_world_size

REPO = Path(__file__).resolve().parents[1]


@hydra.main(config_path="../configs", config_name="sft", version_base="1.3")
@reports_user_errors("slurm/submit.py")
def main(composed: DictConfig) -> None:
    from train.data import check_run_config

    cfg = typed(composed)
    overrides = list(HydraConfig.get().overrides.task)
    out = Path(cfg.output_dir).resolve() / "slurm"
    log_dir = out / "logs"
    if cfg.slurm.mode == "train":
        check_run_config(cfg, job_world_size(cfg.slurm))     # what the job's ranks would check, checked now
        script, what = train_script(cfg, overrides, REPO, log_dir), "training job"
    else:
        script, n = eval_script(cfg.slurm, cfg.deepspeed, list(cfg.eval.buckets), f"{cfg.exp_name}-eval",
                                Path(cfg.output_dir), overrides, REPO, log_dir)
        what = f"evaluation array of {n} tasks"
    if cfg.slurm.dry_run:
        print(script, end="")
        return
    log_dir.mkdir(parents=True, exist_ok=True)
    path = out / f"{cfg.slurm.mode}.sbatch"
    path.write_text(script, encoding="utf-8")
    done = subprocess.run(["sbatch", "--parsable", str(path)], capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"sbatch {path} failed ({done.returncode}): {done.stderr.strip()}")
    job_id = done.stdout.strip().split(";")[0]
    print(f"submitted {what} {job_id}: script {path}, logs {log_dir}, run {Path(cfg.output_dir).resolve()}")


if __name__ == "__main__":
    main()
