#!/usr/bin/env bash
# GPU run BA: the whole test suite at the round's last code, and the host time per call of
# MobileNetV3-Large inference (fp16, batch 1, CUDA graphs) in both layouts: Inductor
# reduce-overhead, torchfuse, torchfuse frozen with and without the fused convolution epilogues.
source "$(dirname "$0")/gpu_lib.sh"
gpu_suite 230
for layout in "" --channels-last; do
  timeout 75 python3 benchmarks/replay_host.py --model mobilenetv3_large_100 $layout > "$out/host${layout:---channels-first}.log" 2>&1
done
