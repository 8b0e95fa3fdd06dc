#!/usr/bin/env bash
# GPU run AN: the row max as one reduction whose combine is the device's NaN-propagating max
# (run AM's compare-and-select combine was slower than two reductions). The whole test suite;
# the three row max forms on softmax, log-softmax and cross-entropy; the softmax and
# cross-entropy rows of the norm table.
set -uo pipefail
export PYTHONPATH=src PYTHONUNBUFFERED=1
out=${OUT:-/tmp/out}
mkdir -p "$out"
timeout 175 python3 -m pytest -q -n 15 -p no:cacheprovider -rfE --maxfail=40 tests > "$out/tests-full.log" 2>&1
grep -E "passed|failed|FAILED|ERROR|xpassed" "$out/tests-full.log" | tail -45 > "$out/tests.log"
timeout 170 python3 benchmarks/sweep_rows.py --time-budget 120 --json "$out/sweep_rows.json" > "$out/sweep_rows.log" 2>&1
timeout 110 python3 benchmarks/norms.py --ops softmax,log_softmax,cross_entropy --dtypes bfloat16,float32 \
  --per-kernel --time-budget 100 --out "$out/norms" > "$out/norms.log" 2>&1
tar czf "$out/results.tgz" -C "$out" $(cd "$out" && ls -d norms 2>/dev/null)
rm -rf "$out"/norms
