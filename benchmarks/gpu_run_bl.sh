#!/usr/bin/env bash
# GPU run BL: cross-entropy with only the folding masks off as 'alt' (codegen.triton.ALL_TRUE_MASKS;
# run BK had the flush-to-zero exp off too), to see whether run BK's slower bf16 backward
# repeats; then HuggingFace training (BERT-base, GPT-2; AMP bf16) against eager and Inductor.
source "$(dirname "$0")/gpu_lib.sh"
timeout 100 python3 benchmarks/norms.py --ops cross_entropy --alt codegen.triton.ALL_TRUE_MASKS=False \
  --per-kernel --time-budget 80 --out "$out/norms" > "$out/norms.log" 2>&1
gpu_train_hf 330 300
gpu_pack norms train-hf
