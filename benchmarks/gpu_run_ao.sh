#!/usr/bin/env bash
# GPU run AO: sibling row sums reduced as one tuple (codegen.BATCH_ROW_SUMS; LayerNorm's
# backward has two, cross-entropy's forward two). The whole test suite; the sums alone against
# together on LayerNorm, RMSNorm (a control: one row sum) and cross-entropy; the LayerNorm,
# RMSNorm and cross-entropy rows of the norm table.
source "$(dirname "$0")/gpu_lib.sh"
gpu_suite 175
gpu_sweep_rows 130 110 sweep_rows --sweep batch --shapes 16384x4096,32768x1024,8192x8192
gpu_norms 110 100 layer_norm,rms_norm,cross_entropy
gpu_pack norms
