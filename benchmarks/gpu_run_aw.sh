#!/usr/bin/env bash
# GPU run AW: is cuDNN's fused convolution epilogue (bias, shortcut add and ReLU inside the
# convolution) worth using for frozen inference? Per-convolution times of ResNet-50's shapes and a
# hand-fused ResNet-50 against torchfuse frozen and Inductor reduce-overhead (fp16,
# channels-last, batch 1 and 8); and the kernels of frozen ResNet-50 at batch 1.
source "$(dirname "$0")/gpu_lib.sh"
timeout 200 python3 benchmarks/conv_epilogue.py --batches 1,8 --out "$out/conv_epilogue.json" > "$out/conv_epilogue.log" 2>&1
timeout 100 python3 benchmarks/profile_infer.py --model resnet50 --batch 1 --channels-last \
  --backends inductor,torchfuse-frozen --top 12 > "$out/profile.log" 2>&1
