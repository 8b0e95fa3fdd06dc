#!/usr/bin/env bash
# GPU run AZ: the whole test suite; the row kernels at 32768 x 1024 (two rows a program on two
# warps where a kernel writes whole rows), bf16 and fp32, against eager and Inductor; and run AY's
# noisy case again (MobileNetV3-Large, batch 1, channels-first, fp16 inference with CUDA graphs).
source "$(dirname "$0")/gpu_lib.sh"
gpu_suite 240
timeout 130 python3 benchmarks/norms.py --ops cross_entropy,softmax,log_softmax,layer_norm,rms_norm \
  --shapes 32768x1024 --per-kernel --time-budget 115 --out "$out/norms" > "$out/norms.log" 2>&1
backends=eager,eager-cudagraphs,torch.compile-reduce-overhead,torchfuse-cudagraphs,torchfuse-cudagraphs-frozen
timeout 110 python3 -m torchfuse.bench --suite timm --mode infer-fp16 --only timm/mobilenetv3_large_100/1 \
  --backends $backends --time-budget 90 --out "$out/infer-cf" --no-progress 2>&1 | grep -v Warn | tail -8 > "$out/infer-cf.log"
gpu_pack norms infer-cf
