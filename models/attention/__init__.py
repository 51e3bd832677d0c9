"""Attention backends: the ring (sequence-parallel) backend and its block kernels."""
