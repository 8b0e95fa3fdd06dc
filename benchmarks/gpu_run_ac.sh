#!/usr/bin/env bash
# GPU run AC: launch configurations of small pointwise kernels (batch-1 inference shapes) with
# runtime and compiled-in sizes, against eager and Inductor; host time per call of frozen and
# unfrozen ResNet-50 under CUDA graphs, channels-last and channels-first.
set -uo pipefail
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
out=${OUT:-/tmp/out}
mkdir -p "$out"
timeout 240 python3 benchmarks/sweep_small.py --json "$out/sweep_small.json" > "$out/sweep_small.log" 2>&1
cd benchmarks
timeout 80 python3 replay_host.py --channels-last > "$out/replay-cl.log" 2>&1
timeout 80 python3 replay_host.py > "$out/replay-cf.log" 2>&1
