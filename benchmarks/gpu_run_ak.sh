#!/usr/bin/env bash
# GPU run AK: the inner-outer reduction as chosen from runs AH and AJ (grid fitted to the
# compiled kernel's residency; 2048-element blocks with 4 warps for rows up to 1024). The whole
# test suite; the scheduler's choice against the unpaired kernels; the LayerNorm/RMSNorm table.
set -uo pipefail
export PYTHONPATH=src PYTHONUNBUFFERED=1
out=${OUT:-/tmp/out}
mkdir -p "$out"
timeout 180 python3 -m pytest -q -n 15 -p no:cacheprovider -rfE --maxfail=40 tests > "$out/tests-full.log" 2>&1
grep -E "passed|failed|FAILED|ERROR|xpassed" "$out/tests-full.log" | tail -45 > "$out/tests.log"
timeout 60 python3 benchmarks/sweep_inner_outer.py --json "$out/sweep_inner_outer.json" > "$out/sweep_inner_outer.log" 2>&1
timeout 70 python3 benchmarks/norms.py --ops layer_norm,rms_norm --dtypes bfloat16,float32 --per-kernel \
  --time-budget 60 --out "$out/norms" > "$out/norms.log" 2>&1
tar czf "$out/results.tgz" -C "$out" $(cd "$out" && ls -d norms 2>/dev/null)
rm -rf "$out"/norms
