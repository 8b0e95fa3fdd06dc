#!/usr/bin/env bash
# GPU run E: the test suite on CUDA, then the normalization backward passes and cross-entropy
# again (after the rematerialization change), bf16.
set -uo pipefail
export PYTHONPATH=src PYTHONUNBUFFERED=1
out=${OUT:-/tmp/out}
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$out/device.txt"
timeout 290 python3 -m pytest -q -n 14 -p no:cacheprovider --maxfail=40 tests 2>&1 | grep -E "passed|failed|FAILED|ERROR|xpassed" | tail -45 | tee "$out/tests.log"
timeout 270 python3 benchmarks/norms.py --dtypes bfloat16 --ops layer_norm,rms_norm,batch_norm_cl,cross_entropy --iters 15 --time-budget 220 --out "$out/norms-bf16" 2>&1 | grep -v Warn | tail -40 > "$out/norms.log"
