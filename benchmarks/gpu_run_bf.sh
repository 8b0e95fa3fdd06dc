#!/usr/bin/env bash
# GPU run BF: the cross-entropy rewrites forward and backward (the backward's one-hot row sum
# as per-row arithmetic on looped rows, graph_passes.LOOPED_ONE_HOT_SUMS), at vocabulary-sized
# rows and at 32768x1024; then the whole test suite.
source "$(dirname "$0")/gpu_lib.sh"
timeout 200 python3 benchmarks/sweep_picks.py --backward --shapes 4096x50257,2048x128256,32768x1024 \
  --json "$out/sweep_picks.json" > "$out/sweep_picks.log" 2>&1
gpu_suite 235
