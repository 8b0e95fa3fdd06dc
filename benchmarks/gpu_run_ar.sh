#!/usr/bin/env bash
# GPU run AR: the whole test suite; the cross-entropy, softmax, LayerNorm and RMSNorm rows of
# the norm table with per-kernel times, after row sums through a one-hot comparison became
# per-row arithmetic (cross-entropy's backward, label smoothing included) and rows of 1024 went
# to one warp a row.
source "$(dirname "$0")/gpu_lib.sh"
gpu_suite 250
gpu_norms 200 185 cross_entropy,softmax,layer_norm,rms_norm
gpu_pack norms
