#!/usr/bin/env bash
# GPU run AQ: the whole test suite (pairing by parts, one-hot row sums, scalar copies); the
# cross-entropy backward with its one-hot row sum kept against replaced; warps per row program
# (softmax, cross-entropy, LayerNorm, RMSNorm; rows of 1024 and 4096).
source "$(dirname "$0")/gpu_lib.sh"
gpu_suite 175
gpu_sweep_rows 60 50 sweep_onehot --sweep onehot --shapes 16384x4096,32768x1024,4096x3072
gpu_sweep_rows 250 235 sweep_warps --sweep warps --shapes 16384x4096,32768x1024
