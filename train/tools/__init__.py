"""The commands beside the trainer: the memory plan's (`python -m train.tools.plan`, over
train/memory_plan.py), benchmarks (`bench`, `bench_sp`, `bench_loss`, `bench_serve`), the GPU acceptance
check (`gpu_check`), the run-directory check (`check_run`) and the loopback ring (`ring_loopback`).
No module outside this folder imports them (tests/test_layering.py)."""
