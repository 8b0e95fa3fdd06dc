#!/usr/bin/env bash
# GPU run AM: the row max as one reduction with a NaN-aware combine (tf_row_max) and Welford's
# count taken from the loop bounds rather than kept per element. The whole test suite; the
# persistent-row sweep (tile, elements a thread, row max form) on softmax, log-softmax and
# cross-entropy; the softmax, cross-entropy and BatchNorm rows of the norm table.
set -uo pipefail
export PYTHONPATH=src PYTHONUNBUFFERED=1
out=${OUT:-/tmp/out}
mkdir -p "$out"
timeout 175 python3 -m pytest -q -n 15 -p no:cacheprovider -rfE --maxfail=40 tests > "$out/tests-full.log" 2>&1
grep -E "passed|failed|FAILED|ERROR|xpassed" "$out/tests-full.log" | tail -45 > "$out/tests.log"
timeout 170 python3 benchmarks/sweep_rows.py --time-budget 150 --json "$out/sweep_rows.json" > "$out/sweep_rows.log" 2>&1
timeout 110 python3 benchmarks/norms.py --ops softmax,log_softmax,cross_entropy,batch_norm_cl --dtypes bfloat16,float32 \
  --per-kernel --time-budget 100 --out "$out/norms" > "$out/norms.log" 2>&1
tar czf "$out/results.tgz" -C "$out" $(cd "$out" && ls -d norms 2>/dev/null)
rm -rf "$out"/norms
