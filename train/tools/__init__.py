"""The tools beside the trainer: the memory plan (`python -m train.tools.plan`), benchmarks
(`bench`, `bench_sp`, `bench_loss`), the GPU acceptance check (`gpu_check`), the run-directory
check (`check_run`) and the loopback ring (`ring_loopback`). The trainer's modules import none of
them; the entry points use the plan's pre-launch check."""
