#!/usr/bin/env bash
# GPU run W: outer reductions kept splittable from 16384 reduced elements (ResNet-50 at batch
# 128: the 14 x 14 stage splits, 7 x 7 does not), with the rematerialized masked gradient:
# the step profile, then the training benchmark against eager and Inductor.
set -uo pipefail
export PYTHONPATH=src PYTHONUNBUFFERED=1
out=${OUT:-/tmp/out}
mkdir -p "$out"
timeout 100 python3 benchmarks/profile_step.py --model timm:resnet50 --batch 128 --backends torchfuse --top 30 2>&1 \
  | grep -v Warn > "$out/profile-r50-16384.log"
timeout 160 python3 -m torchfuse.bench --suite timm --mode train-amp-bf16 --only 'timm/resnet50/128' \
  --backends eager,torch.compile,torchfuse --time-budget 150 --out "$out/train-timm" --no-progress 2>&1 | grep -v Warn | tail -6 > "$out/train.log"
tar czf "$out/results.tgz" -C "$out" $(cd "$out" && ls -d train-timm 2>/dev/null)
rm -rf "$out"/train-timm
