#!/usr/bin/env bash
# GPU run AQ: the whole test suite (pairing by parts, one-hot row sums, scalar copies); the
# cross-entropy backward with its one-hot row sum kept against replaced; warps per row program
# (softmax, cross-entropy, LayerNorm, RMSNorm; rows of 1024 and 4096).
set -uo pipefail
export PYTHONPATH=src PYTHONUNBUFFERED=1
out=${OUT:-/tmp/out}
mkdir -p "$out"
timeout 175 python3 -m pytest -q -n 15 -p no:cacheprovider -rfE --maxfail=40 tests > "$out/tests-full.log" 2>&1
grep -E "passed|failed|FAILED|ERROR|xpassed" "$out/tests-full.log" | tail -45 > "$out/tests.log"
timeout 60 python3 benchmarks/sweep_rows.py --sweep onehot --shapes 16384x4096,32768x1024,4096x3072 \
  --time-budget 50 --json "$out/sweep_onehot.json" > "$out/sweep_onehot.log" 2>&1
timeout 250 python3 benchmarks/sweep_rows.py --sweep warps --shapes 16384x4096,32768x1024 \
  --time-budget 235 --json "$out/sweep_warps.json" > "$out/sweep_warps.log" 2>&1
