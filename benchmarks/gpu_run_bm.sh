#!/usr/bin/env bash
# GPU run BM: the whole test suite; then the row kernels at 32768x1024 and 16384x4096 with
# ops on per-row selects computed per row and the per-row prelude (codegen.triton.SINK_SELECTS,
# codegen.triton.ROW_PRELUDE) both off as 'alt'; the same rows of 1024 with one row a program
# for kernels that write 16-bit rows (schedulers.reduction.WRITING_ROWS_XBLOCK=1) as 'alt';
# channels-last BatchNorm with its split partial loop pipelined in two stages, then with
# 32-row steps, as 'alt'.
source "$(dirname "$0")/gpu_lib.sh"
ops=layer_norm,rms_norm,softmax,log_softmax,cross_entropy
gpu_suite 230
timeout 130 python3 benchmarks/norms.py --ops $ops --shapes 32768x1024,16384x4096 --per-kernel --time-budget 110 \
  --alt codegen.triton.SINK_SELECTS=False --alt codegen.triton.ROW_PRELUDE=False --out "$out/norms" > "$out/norms.log" 2>&1
timeout 80 python3 benchmarks/norms.py --ops $ops --shapes 32768x1024 --per-kernel --time-budget 60 \
  --alt schedulers.reduction.WRITING_ROWS_XBLOCK=1 --out "$out/norms-x1" > "$out/norms-x1.log" 2>&1
timeout 60 python3 benchmarks/norms.py --ops batch_norm_cl --per-kernel --time-budget 45 \
  --alt codegen.triton.SPLIT_PARTIAL_STAGES=2 --out "$out/norms-bn-stages" > "$out/norms-bn-stages.log" 2>&1
timeout 60 python3 benchmarks/norms.py --ops batch_norm_cl --per-kernel --time-budget 45 \
  --alt schedulers.reduction.SPLIT_OUTER_RBLOCK=32 --out "$out/norms-bn-r32" > "$out/norms-bn-r32.log" 2>&1
gpu_pack norms norms-x1 norms-bn-stages norms-bn-r32
