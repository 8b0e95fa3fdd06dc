#!/usr/bin/env bash
# GPU run M: device pointers passed as ints on direct launches, the split column-reduction
# heuristic from run L's sweep; where ResNet-50's training step spends device time under
# torchfuse (channels-last training graphs) and Inductor.
set -uo pipefail
export PYTHONPATH=src PYTHONUNBUFFERED=1
out=${OUT:-/tmp/out}
mkdir -p "$out"
timeout 80 python3 -m pytest -q -n 8 -p no:cacheprovider -rfE tests/test_host_paths.py tests/test_cudagraphs.py \
  tests/test_reductions.py tests/test_random.py > "$out/tests.log" 2>&1
timeout 80 python3 benchmarks/sweep_split.py --json "$out/sweep-split.json" > "$out/sweep-split.log" 2>&1
timeout 230 python3 benchmarks/profile_step.py --model timm:resnet50 --batch 128 --backends torchfuse,inductor \
  --top 30 > "$out/profile-r50.log" 2>&1
