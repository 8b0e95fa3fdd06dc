#!/usr/bin/env bash
# GPU run BI: pointwise groups with per-row work as row kernels (segment.row_tiled): the whole
# test suite; cross-entropy's backward with its one-hot row sum kept against rewritten into
# per-row terms (graph_passes.ONE_HOT_SUMS, a row kernel with no reduction); registers of the
# forward kernels at persistent rows with and without the cross-entropy rewrites; the
# cross-entropy table against eager and Inductor with the one-hot rewrite on.
source "$(dirname "$0")/gpu_lib.sh"
gpu_suite 230
timeout 110 python3 benchmarks/sweep_picks.py --toggle onehot --backward \
  --shapes 32768x1024,16384x4096,8192x8192,4096x3072 --json "$out/sweep_onehot.json" > "$out/sweep_onehot.log" 2>&1
timeout 45 python3 benchmarks/sweep_picks.py --dtypes bfloat16 --shapes 16384x4096,8192x8192 \
  --json "$out/sweep_registers.json" > "$out/sweep_registers.log" 2>&1
timeout 110 python3 benchmarks/norms.py --ops cross_entropy --set graph_passes.ONE_HOT_SUMS=True \
  --per-kernel --time-budget 95 --out "$out/norms" > "$out/norms.log" 2>&1
gpu_pack norms
