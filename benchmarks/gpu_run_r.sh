#!/usr/bin/env bash
# GPU run R: a ResNet-50 training step profiled against Inductor (AMP bf16); the
# normalization table at 16384 x 4096 after the per-row statistics load and the retuned split.
set -uo pipefail
export PYTHONPATH=src PYTHONUNBUFFERED=1
out=${OUT:-/tmp/out}
mkdir -p "$out"
timeout 170 python3 benchmarks/profile_step.py --model timm:resnet50 --batch 128 --backends torchfuse,inductor --top 40 > "$out/profile_r50.log" 2>&1
timeout 100 python3 benchmarks/norms.py --dtypes bfloat16 --ops layer_norm,rms_norm,batch_norm_cl,cross_entropy \
  --shapes 16384x4096 --per-kernel --iters 15 --time-budget 85 --out "$out/norms" > "$out/norms.log" 2>&1
tar czf "$out/results.tgz" -C "$out" $(cd "$out" && ls -d norms 2>/dev/null)
rm -rf "$out"/norms
