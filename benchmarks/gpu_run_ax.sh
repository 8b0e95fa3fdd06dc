#!/usr/bin/env bash
# GPU run AX: ReLU-ended convolutions on cuDNN's fused epilogue (graph_passes.conv_relu_epilogues):
# the whole test suite; ResNet-50 frozen with and without the rewrite against Inductor; the
# per-convolution comparison in bf16 at batch 1 and in fp16 at batch 32; and the inference table
# (channels-last, CUDA graphs, batch 1 and 8) against eager, eager + CUDA graphs and Inductor.
source "$(dirname "$0")/gpu_lib.sh"
gpu_suite 240
timeout 60 python3 benchmarks/conv_epilogue.py --batches 1,8 --skip-per-conv --out "$out/model.json" > "$out/model.log" 2>&1
timeout 40 python3 benchmarks/conv_epilogue.py --batches 1 --dtype bf16 --skip-model --out "$out/bf16.json" > "$out/bf16.log" 2>&1
timeout 40 python3 benchmarks/conv_epilogue.py --batches 32 --skip-model --out "$out/b32.json" > "$out/b32.log" 2>&1
backends=eager,eager-cudagraphs,torch.compile-reduce-overhead,torchfuse-cudagraphs,torchfuse-cudagraphs-frozen
cases='timm/resnet50/1,timm/resnet50/8,timm/mobilenetv3_large_100/1,timm/mobilenetv3_large_100/8'
timeout 200 python3 -m torchfuse.bench --suite timm --mode infer-fp16 --only "$cases" --backends $backends \
  --channels-last --time-budget 180 --out "$out/infer-cl" --no-progress 2>&1 | grep -v Warn | tail -12 > "$out/infer-cl.log"
gpu_pack infer-cl
