#!/usr/bin/env bash
# GPU run BN: the whole test suite, then the issue's whole normalization table
# (benchmarks/norms.py) against eager and Inductor, with this round's four changes off as
# 'alt' in the same process: ops on per-row selects computed per row
# (codegen.triton.SINK_SELECTS), the per-row prelude (codegen.triton.ROW_PRELUDE), fp32
# division by a literal power of two as a multiplication (ir.ops.EXACT_RECIPROCALS), and
# 32-row steps for split column reductions of one tensor
# (schedulers.reduction.SPLIT_OUTER_RBLOCK_ONE_INPUT; 16 is the earlier step).
source "$(dirname "$0")/gpu_lib.sh"
gpu_suite 230
timeout 340 python3 benchmarks/norms.py --alt codegen.triton.SINK_SELECTS=False --alt codegen.triton.ROW_PRELUDE=False \
  --alt ir.ops.EXACT_RECIPROCALS=False --alt schedulers.reduction.SPLIT_OUTER_RBLOCK_ONE_INPUT=16 \
  --per-kernel --time-budget 310 --out "$out/norms" > "$out/norms.log" 2>&1
gpu_pack norms
