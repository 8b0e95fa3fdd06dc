#!/usr/bin/env bash
# GPU run BG: looped kernels fold the sums over x - max into the max's loop (codegen.ONLINE_SUMS):
# cross-entropy forward with and without at vocabulary-sized rows; softmax, log-softmax and
# cross-entropy there against eager and Inductor; then the whole test suite.
source "$(dirname "$0")/gpu_lib.sh"
timeout 110 python3 benchmarks/sweep_picks.py --toggle online --shapes 4096x50257,2048x128256 \
  --json "$out/sweep_online.json" > "$out/sweep_online.log" 2>&1
timeout 170 python3 benchmarks/norms.py --ops softmax,log_softmax,cross_entropy --dtypes bfloat16,float32 \
  --shapes 4096x50257 --per-kernel --time-budget 150 --out "$out/norms" > "$out/norms.log" 2>&1
gpu_suite 230
gpu_pack norms
