"""The sbatch templates slurm/render.py fills (package data)."""
