#!/usr/bin/env bash
# GPU run BO: the whole test suite (division by a number as PyTorch's CUDA kernels compute it;
# one row a program at 1024 a row); the bf16 row kernels at 32768x1024 with two rows a
# program (schedulers.reduction.WRITING_ROWS_XBLOCK=2, the earlier choice) as 'alt'; then
# HuggingFace training (BERT-base, GPT-2; AMP bf16) against eager and Inductor.
source "$(dirname "$0")/gpu_lib.sh"
gpu_suite 220
timeout 60 python3 benchmarks/norms.py --ops layer_norm,rms_norm,softmax,log_softmax,cross_entropy --shapes 32768x1024 \
  --dtypes bfloat16 --per-kernel --time-budget 45 --alt schedulers.reduction.WRITING_ROWS_XBLOCK=2 \
  --out "$out/norms" > "$out/norms.log" 2>&1
gpu_train_hf 290 260
gpu_pack norms train-hf
