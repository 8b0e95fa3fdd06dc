#!/usr/bin/env bash
# GPU run BP: the whole test suite on CUDA tensors (eager's rules for Python numbers, rounding
# modes, NaN signs and -0.0 on a GPU; the run-time fallback), then 150 programs of the
# differential fuzzer on CUDA tensors (its classes of numbers, indexing, shared constants and
# buffers updated in training graphs).
source "$(dirname "$0")/gpu_lib.sh"
gpu_suite 330
timeout 200 python3 -m pytest -q -p no:cacheprovider tests/test_fuzz.py -k fuzz_programs --fuzz-examples 150 \
  --fuzz-seed 3 > "$out/fuzz-full.log" 2>&1
grep -E "passed|failed|Falsifying|Error|def program|    v[0-9]+ = |    x[0-9]\." "$out/fuzz-full.log" | tail -60 > "$out/fuzz.log"
