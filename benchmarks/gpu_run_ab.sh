#!/usr/bin/env bash
# GPU run AB: where batch-1 inference loses device time to Inductor. Every kernel of one call
# (no CUDA graphs), in launch order, for MobileNetV3-Large (Inductor, torchfuse frozen and
# unfrozen) and frozen ResNet-50 with channels-first and channels-last inputs; the generated
# kernels' source.
set -uo pipefail
export PYTHONPATH=src PYTHONUNBUFFERED=1
out=${OUT:-/tmp/out}
mkdir -p "$out"
TORCHFUSE_DUMP_DIR=$out/dump-mnv3 timeout 150 python3 benchmarks/profile_infer.py --model mobilenetv3_large_100 \
  --backends inductor,torchfuse-frozen,torchfuse --top 40 --dump "$out/mnv3.json" > "$out/mnv3.log" 2>&1
timeout 120 python3 benchmarks/profile_infer.py --model resnet50 --backends inductor,torchfuse-frozen --top 25 \
  --dump "$out/r50-cf.json" > "$out/r50.log" 2>&1
timeout 120 python3 benchmarks/profile_infer.py --model resnet50 --channels-last --backends inductor,torchfuse-frozen \
  --top 25 --dump "$out/r50-cl.json" >> "$out/r50.log" 2>&1
tar czf "$out/dump.tgz" -C "$out" $(cd "$out" && ls -d dump-mnv3 2>/dev/null)
rm -rf "$out"/dump-mnv3
