#!/usr/bin/env bash
# GPU run AM: the row max as one reduction with a NaN-aware combine (tf_row_max) and Welford's
# count taken from the loop bounds rather than kept per element. The whole test suite; the
# persistent-row sweep (tile, elements a thread, row max form) on softmax, log-softmax and
# cross-entropy; the softmax, cross-entropy and BatchNorm rows of the norm table.
source "$(dirname "$0")/gpu_lib.sh"
gpu_suite 175
gpu_sweep_rows 170 150 sweep_rows
gpu_norms 110 100 softmax,log_softmax,cross_entropy,batch_norm_cl
gpu_pack norms
