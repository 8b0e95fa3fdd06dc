#!/usr/bin/env bash
# GPU run AL: the whole test suite at the start of a round (the pairing choice and the review
# commits had not run on a GPU); the softmax, cross-entropy and BatchNorm rows of the norm table
# with per-kernel times; HuggingFace training (BERT-base, GPT-2) after the fitted grids.
source "$(dirname "$0")/gpu_lib.sh"
gpu_suite 175
gpu_norms 110 100 softmax,log_softmax,cross_entropy,batch_norm_cl
gpu_train_hf 265 255
gpu_pack norms train-hf
