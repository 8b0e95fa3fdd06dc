#!/usr/bin/env bash
# GPU run AG: the inner-outer reduction (LayerNorm/RMSNorm backward as one kernel plus a
# partial-sum kernel). The reduction and inner-outer tests on the GPU; a sweep of its
# programs per multiprocessor and warps against the separate kernels; the normalization table
# (LayerNorm, RMSNorm; bf16, fp32) against eager, Inductor and a device copy.
set -uo pipefail
export PYTHONPATH=src PYTHONUNBUFFERED=1
out=${OUT:-/tmp/out}
mkdir -p "$out"
timeout 150 python3 -m pytest -q -n 15 -p no:cacheprovider -rfE tests/test_inner_outer.py tests/test_reductions.py \
  tests/test_schedulers.py > "$out/tests-full.log" 2>&1
grep -E "passed|failed|FAILED|ERROR" "$out/tests-full.log" | tail -30 > "$out/tests.log"
timeout 200 python3 benchmarks/sweep_inner_outer.py --json "$out/sweep_inner_outer.json" > "$out/sweep_inner_outer.log" 2>&1
timeout 200 python3 benchmarks/norms.py --ops layer_norm,rms_norm --dtypes bfloat16,float32 --per-kernel \
  --time-budget 180 --out "$out/norms" > "$out/norms.log" 2>&1
tar czf "$out/results.tgz" -C "$out" $(cd "$out" && ls -d norms 2>/dev/null) sweep_inner_outer.json
rm -rf "$out"/norms
