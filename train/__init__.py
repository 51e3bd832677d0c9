"""Training: entry point, curriculum loop, distributed setup, checkpointing."""
