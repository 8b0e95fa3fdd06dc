#!/usr/bin/env bash
# GPU run S: the whole test suite after this round's changes (reduction loads, Welford
# steps, outer-reduction split threshold, cast moves, merged pads, cross-entropy by mask with
# in-kernel class indices, channels-last unfrozen inference); the normalization table for
# LayerNorm, channels-last BatchNorm and cross-entropy at 16384 x 4096.
set -uo pipefail
export PYTHONPATH=src PYTHONUNBUFFERED=1
out=${OUT:-/tmp/out}
mkdir -p "$out"
timeout 165 python3 -m pytest -q -n 15 -p no:cacheprovider -rfE --maxfail=40 tests > "$out/tests-full.log" 2>&1
grep -E "passed|failed|FAILED|ERROR|xpassed" "$out/tests-full.log" | tail -45 > "$out/tests.log"
timeout 75 python3 benchmarks/norms.py --dtypes bfloat16 --ops layer_norm,batch_norm_cl,cross_entropy \
  --shapes 16384x4096 --per-kernel --iters 15 --time-budget 62 --out "$out/norms" > "$out/norms.log" 2>&1
tar czf "$out/results.tgz" -C "$out" $(cd "$out" && ls -d norms 2>/dev/null)
rm -rf "$out"/norms
