#!/usr/bin/env bash
# GPU run AO: sibling row sums reduced as one tuple (codegen.BATCH_ROW_SUMS; LayerNorm's
# backward has two, cross-entropy's forward two). The whole test suite; the sums alone against
# together on LayerNorm, RMSNorm (a control: one row sum) and cross-entropy; the LayerNorm,
# RMSNorm and cross-entropy rows of the norm table.
set -uo pipefail
export PYTHONPATH=src PYTHONUNBUFFERED=1
out=${OUT:-/tmp/out}
mkdir -p "$out"
timeout 175 python3 -m pytest -q -n 15 -p no:cacheprovider -rfE --maxfail=40 tests > "$out/tests-full.log" 2>&1
grep -E "passed|failed|FAILED|ERROR|xpassed" "$out/tests-full.log" | tail -45 > "$out/tests.log"
timeout 130 python3 benchmarks/sweep_rows.py --sweep batch --shapes 16384x4096,32768x1024,8192x8192 \
  --time-budget 110 --json "$out/sweep_rows.json" > "$out/sweep_rows.log" 2>&1
timeout 110 python3 benchmarks/norms.py --ops layer_norm,rms_norm,cross_entropy --dtypes bfloat16,float32 \
  --per-kernel --time-budget 100 --out "$out/norms" > "$out/norms.log" 2>&1
tar czf "$out/results.tgz" -C "$out" $(cd "$out" && ls -d norms 2>/dev/null)
rm -rf "$out"/norms
