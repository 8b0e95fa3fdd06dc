#!/usr/bin/env bash
# GPU run AR: the whole test suite; the cross-entropy, softmax, LayerNorm and RMSNorm rows of
# the norm table with per-kernel times, after row sums through a one-hot comparison became
# per-row arithmetic (cross-entropy's backward, label smoothing included) and rows of 1024 went
# to one warp a row.
set -uo pipefail
export PYTHONPATH=src PYTHONUNBUFFERED=1
out=${OUT:-/tmp/out}
mkdir -p "$out"
timeout 250 python3 -m pytest -q -n 15 -p no:cacheprovider -rfE --maxfail=40 tests > "$out/tests-full.log" 2>&1
grep -E "passed|failed|FAILED|ERROR|xpassed" "$out/tests-full.log" | tail -45 > "$out/tests.log"
timeout 200 python3 benchmarks/norms.py --ops cross_entropy,softmax,layer_norm,rms_norm --dtypes bfloat16,float32 \
  --per-kernel --time-budget 185 --out "$out/norms" > "$out/norms.log" 2>&1
tar czf "$out/results.tgz" -C "$out" $(cd "$out" && ls -d norms 2>/dev/null)
rm -rf "$out"/norms
