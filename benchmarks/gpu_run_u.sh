#!/usr/bin/env bash
# GPU run U: ResNet-50 training (batch 128, AMP bf16) went from 26.0 to 33.1 ms per step in run T
# with 161 more kernels per step. Profile one step with outer reductions kept splittable from
# 2048 reduced elements (the current rule) and from 32768 (the rule of run N).
set -uo pipefail
export PYTHONPATH=src PYTHONUNBUFFERED=1
out=${OUT:-/tmp/out}
mkdir -p "$out"
for t in 2048 32768; do
  timeout 140 python3 -c "
import sys, runpy, torchfuse.segment as s
s.SPLIT_REDUCED_MIN_OUTER = $t
sys.argv = ['profile_step.py', '--model', 'timm:resnet50', '--batch', '128', '--backends', 'torchfuse', '--top', '40', '--host-top', '12']
runpy.run_path('benchmarks/profile_step.py', run_name='__main__')" > "$out/profile-r50-$t.log" 2>&1
done
