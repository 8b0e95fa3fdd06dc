#!/usr/bin/env bash
# GPU run V: run U counted each fusion group's device-side annotation range as a kernel (fixed
# in profile_step.py). ResNet-50 training step profiles again, with BatchNorm's masked gradient
# recomputed by the input-gradient kernel when only it reads the value, at both outer split
# thresholds, and Inductor's for reference.
set -uo pipefail
export PYTHONPATH=src PYTHONUNBUFFERED=1
out=${OUT:-/tmp/out}
mkdir -p "$out"
for t in 2048 32768; do
  timeout 110 python3 -c "
import sys, runpy, torchfuse.segment as s
s.SPLIT_REDUCED_MIN_OUTER = $t
sys.argv = ['profile_step.py', '--model', 'timm:resnet50', '--batch', '128', '--backends', 'torchfuse', '--top', '45']
runpy.run_path('benchmarks/profile_step.py', run_name='__main__')" 2>&1 | grep -v Warn > "$out/profile-r50-$t.log"
done
timeout 120 python3 benchmarks/profile_step.py --model timm:resnet50 --batch 128 --backends inductor --top 45 2>&1 | grep -v Warn > "$out/profile-r50-inductor.log"
