#!/usr/bin/env bash
# GPU run AY: the channels-first inference table (fp16, CUDA graphs, batch 1 and 8; ResNet-50 and
# MobileNetV3-Large against eager, eager + CUDA graphs and Inductor's reduce-overhead mode) with
# ReLU-ended convolutions on cuDNN's fused epilogue, accuracy checked.
source "$(dirname "$0")/gpu_lib.sh"
backends=eager,eager-cudagraphs,torch.compile-reduce-overhead,torchfuse-cudagraphs,torchfuse-cudagraphs-frozen
cases='timm/resnet50/1,timm/resnet50/8,timm/mobilenetv3_large_100/1,timm/mobilenetv3_large_100/8'
timeout 230 python3 -m torchfuse.bench --suite timm --mode infer-fp16 --only "$cases" --backends $backends \
  --time-budget 200 --out "$out/infer-cf" --no-progress 2>&1 | grep -v Warn | tail -12 > "$out/infer-cf.log"
gpu_pack infer-cf
