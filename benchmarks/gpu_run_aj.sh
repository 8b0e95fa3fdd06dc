#!/usr/bin/env bash
# GPU run AJ: the inner-outer grid sized to the compiled kernel's occupancy (registers and
# shared memory per program). The inner-outer and reduction tests on the GPU; the sweep with
# fitted grids against run AH's fixed 2 programs per multiprocessor; the LayerNorm/RMSNorm table.
set -uo pipefail
export PYTHONPATH=src PYTHONUNBUFFERED=1
out=${OUT:-/tmp/out}
mkdir -p "$out"
timeout 120 python3 -m pytest -q -n 15 -p no:cacheprovider -rfE tests/test_inner_outer.py tests/test_reductions.py \
  tests/test_schedulers.py tests/test_host_paths.py > "$out/tests-full.log" 2>&1
grep -E "passed|failed|FAILED|ERROR" "$out/tests-full.log" | tail -30 > "$out/tests.log"
timeout 200 python3 benchmarks/sweep_inner_outer.py --json "$out/sweep_inner_outer.json" > "$out/sweep_inner_outer.log" 2>&1
timeout 70 python3 benchmarks/norms.py --ops layer_norm,rms_norm --dtypes bfloat16,float32 --per-kernel \
  --time-budget 60 --out "$out/norms" > "$out/norms.log" 2>&1
tar czf "$out/results.tgz" -C "$out" $(cd "$out" && ls -d norms 2>/dev/null)
rm -rf "$out"/norms
