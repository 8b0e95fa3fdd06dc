#!/usr/bin/env bash
# GPU run AS: the whole test suite with one-element inputs of pointwise kernels loaded once a
# thread (codegen.SCALAR_LOADS); cross-entropy's backward with its row sum, rewritten to
# per-row arithmetic (one pointwise kernel), and rewritten with 0-d inputs loaded as blocks.
source "$(dirname "$0")/gpu_lib.sh"
gpu_suite 250
gpu_sweep_rows 90 80 sweep_onehot --sweep onehot --shapes 16384x4096,32768x1024,8192x8192
