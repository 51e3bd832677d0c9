#!/usr/bin/env bash
# The GPU acceptance sequence in one command, everything written under OUT_DIR (default gpu_acceptance/):
# the machine's facts, `python -m train.tools.gpu_check` (its JSON and log) and `pytest -m gpu` (its log).
#   bash train/tools/gpu_acceptance.sh OUT_DIR [gpu_check arguments...]
set -uo pipefail
out=${1:-gpu_acceptance}; shift || true
mkdir -p "$out"
export PYTHONUNBUFFERED=1
{ nvidia-smi; python -c "import torch, transformers; print('torch', torch.__version__, 'cuda', torch.version.cuda,
'transformers', transformers.__version__)"; } 2>&1 | tee "$out/machine.txt"
python -m train.tools.gpu_check --out "$out/gpu_check.json" "$@" 2>&1 | tee "$out/gpu_check.log"
check=${PIPESTATUS[0]}
python -m pytest -m gpu -q -p no:cacheprovider tests/test_gpu_kernels.py tests/test_vllm_backend.py 2>&1 | tee "$out/pytest_gpu.log"
tests=${PIPESTATUS[0]}
echo "gpu_check exit $check, pytest -m gpu exit $tests"
exit $(( check || tests ))
