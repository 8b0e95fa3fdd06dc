#!/usr/bin/env bash
# GPU run AT: the shipped state of the round (one warp a row for rows of 1024, one-element
# pointwise inputs loaded once a thread, the one-hot rewrite off): the cross-entropy rows of the
# norm table with per-kernel times, and HuggingFace training (BERT-base, GPT-2; AMP bf16).
source "$(dirname "$0")/gpu_lib.sh"
gpu_norms 80 70 cross_entropy
gpu_train_hf 250 230
gpu_pack norms train-hf
