#!/usr/bin/env bash
# The compiler-core GPU check: the test suite on CUDA tensors (compiled kernels, not the
# interpreter), then the smoke benchmark (bandwidth next to a device copy measured in the same
# run). Run from the repository root on a GPU machine; results go to ${OUT:-/tmp/torchfuse-gpu}.
set -uo pipefail
out=${OUT:-/tmp/torchfuse-gpu}
mkdir -p "$out"
export PYTHONPATH=src PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$out/device.txt"
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" | tee -a "$out/device.txt"
timeout "${TEST_SECONDS:-300}" python3 -m pytest -q -n "${TEST_WORKERS:-8}" -p no:cacheprovider \
    --junitxml="$out/tests.xml" ${TESTS:-tests} 2>&1 | tail -25 | tee "$out/tests.log"
timeout "${SMOKE_SECONDS:-150}" python3 benchmarks/smoke.py --json "$out/smoke.json" 2>&1 | tail -12 | tee "$out/smoke.log"
