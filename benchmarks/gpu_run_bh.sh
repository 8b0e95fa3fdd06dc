#!/usr/bin/env bash
# GPU run BH: the online sums with one running max a row (run BG's per-lane form lost 3x): the
# whole test suite, cross-entropy forward with and without at vocabulary-sized rows, and
# softmax, log-softmax and cross-entropy at 4096x50257 against eager and Inductor.
source "$(dirname "$0")/gpu_lib.sh"
gpu_suite 190
timeout 70 python3 benchmarks/sweep_picks.py --toggle online --shapes 4096x50257,8192x32000 \
  --json "$out/sweep_online.json" > "$out/sweep_online.log" 2>&1
timeout 100 python3 benchmarks/norms.py --ops softmax,log_softmax,cross_entropy --dtypes bfloat16,float32 \
  --shapes 4096x50257 --per-kernel --time-budget 85 --out "$out/norms" > "$out/norms.log" 2>&1
gpu_pack norms
