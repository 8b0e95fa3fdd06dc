#!/usr/bin/env bash
# GPU run AP: HuggingFace training (BERT-base, GPT-2; AMP bf16) at the end of the round: the
# NaN-propagating row max, sibling row sums together, Welford's count from the loop bounds.
source "$(dirname "$0")/gpu_lib.sh"
gpu_train_hf 235 215
gpu_pack train-hf
