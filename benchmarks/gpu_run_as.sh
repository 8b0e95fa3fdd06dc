#!/usr/bin/env bash
# GPU run AS: the whole test suite with one-element inputs of pointwise kernels loaded once a
# thread (codegen.SCALAR_LOADS); cross-entropy's backward with its row sum, rewritten to
# per-row arithmetic (one pointwise kernel), and rewritten with 0-d inputs loaded as blocks.
set -uo pipefail
export PYTHONPATH=src PYTHONUNBUFFERED=1
out=${OUT:-/tmp/out}
mkdir -p "$out"
timeout 250 python3 -m pytest -q -n 15 -p no:cacheprovider -rfE --maxfail=40 tests > "$out/tests-full.log" 2>&1
grep -E "passed|failed|FAILED|ERROR|xpassed" "$out/tests-full.log" | tail -45 > "$out/tests.log"
timeout 90 python3 benchmarks/sweep_rows.py --sweep onehot --shapes 16384x4096,32768x1024,8192x8192 \
  --time-budget 80 --json "$out/sweep_onehot.json" > "$out/sweep_onehot.log" 2>&1
