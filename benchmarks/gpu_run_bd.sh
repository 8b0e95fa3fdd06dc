#!/usr/bin/env bash
# GPU run BD: the cross-entropy forward rewrites at vocabulary-sized rows (longer than the
# persistent scheduler's 8192: reduced in a loop, one pass over the row per reduction step),
# with and without them, and those rows' norm table against eager and Inductor.
source "$(dirname "$0")/gpu_lib.sh"
timeout 200 python3 benchmarks/sweep_picks.py --shapes 4096x50257,8192x32000,2048x128256 \
  --json "$out/sweep_picks.json" > "$out/sweep_picks.log" 2>&1
timeout 240 python3 benchmarks/norms.py --ops cross_entropy --dtypes bfloat16,float32 --shapes 4096x50257,8192x32000 \
  --per-kernel --time-budget 200 --out "$out/norms" > "$out/norms.log" 2>&1
gpu_pack norms
