#!/usr/bin/env bash
# GPU run BK: the whole test suite (masks folded in inner-outer kernels too), then the issue's
# whole normalization table (benchmarks/norms.py: LayerNorm, RMSNorm, softmax, log-softmax,
# cross-entropy at its four row shapes, BatchNorm channels-last; bf16 and fp32) against eager
# and Inductor, with the folding masks (codegen.triton.ALL_TRUE_MASKS) and the flush-to-zero
# summed exp (codegen.triton.FLUSH_SUMMED_EXP) both off as 'alt', in the same process (run
# BJ's 'alt' column reused the first compilation: it measured nothing).
source "$(dirname "$0")/gpu_lib.sh"
gpu_suite 230
timeout 330 python3 benchmarks/norms.py --alt codegen.triton.ALL_TRUE_MASKS=False \
  --alt codegen.triton.FLUSH_SUMMED_EXP=False --per-kernel --time-budget 300 --out "$out/norms" > "$out/norms.log" 2>&1
gpu_pack norms
