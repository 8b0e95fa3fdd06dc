#!/usr/bin/env bash
# GPU run BE: the whole test suite with the cross-entropy forward rewrites (row-length rule of
# run BD), and HuggingFace training (BERT-base, GPT-2; AMP bf16), whose losses are
# cross-entropy over 30522 and 50257 classes (looped rows: rewritten).
source "$(dirname "$0")/gpu_lib.sh"
gpu_suite 235
gpu_train_hf 250 225
gpu_pack train-hf
