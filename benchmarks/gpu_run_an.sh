#!/usr/bin/env bash
# GPU run AN: the row max as one reduction whose combine is the device's NaN-propagating max
# (run AM's compare-and-select combine was slower than two reductions). The whole test suite;
# the three row max forms on softmax, log-softmax and cross-entropy; the softmax and
# cross-entropy rows of the norm table.
source "$(dirname "$0")/gpu_lib.sh"
gpu_suite 175
gpu_sweep_rows 170 120 sweep_rows
gpu_norms 110 100 softmax,log_softmax,cross_entropy
gpu_pack norms
