#!/usr/bin/env bash
# GPU run AF: inference, fp16, CUDA graphs, batch 1 and 8, channels-first and channels-last
# (ResNet-50, MobileNetV3-Large), against eager, eager + CUDA graphs and Inductor's
# reduce-overhead mode, after the latency-bound launch configurations (re-measured on one host, both layouts).
set -uo pipefail
export PYTHONPATH=src PYTHONUNBUFFERED=1
out=${OUT:-/tmp/out}
mkdir -p "$out"
backends=eager,eager-cudagraphs,torch.compile-reduce-overhead,torchfuse-cudagraphs,torchfuse-cudagraphs-frozen
cases='timm/resnet50/1,timm/resnet50/8,timm/mobilenetv3_large_100/1,timm/mobilenetv3_large_100/8'
timeout 250 python3 -m torchfuse.bench --suite timm --mode infer-fp16 --only "$cases" --backends $backends \
  --no-accuracy --time-budget 225 --out "$out/infer-cf" --no-progress 2>&1 | grep -v Warn | tail -12 > "$out/infer-cf.log"
timeout 250 python3 -m torchfuse.bench --suite timm --mode infer-fp16 --only "$cases" --backends $backends \
  --channels-last --no-accuracy --time-budget 225 --out "$out/infer-cl" --no-progress 2>&1 | grep -v Warn | tail -12 > "$out/infer-cl.log"
tar czf "$out/results.tgz" -C "$out" $(cd "$out" && ls -d infer-cf infer-cl 2>/dev/null)
rm -rf "$out"/infer-cf "$out"/infer-cl
