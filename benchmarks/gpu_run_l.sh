#!/usr/bin/env bash
# GPU run L: host paths (view ops as reinterpretations, allocation through the C++ entry
# points, direct launches of every stage) and channels-last convolutions in training graphs.
# Runtime tests on CUDA; BERT-base's training step profile; TIMM training; a sweep of split
# column reductions (bias gradients).
set -uo pipefail
export PYTHONPATH=src PYTHONUNBUFFERED=1
out=${OUT:-/tmp/out}
mkdir -p "$out"
timeout 100 python3 -m pytest -q -n 8 -p no:cacheprovider -rfE tests/test_host_paths.py tests/test_cudagraphs.py \
  tests/test_cast_batch.py tests/test_freezing.py tests/test_cache.py tests/test_random.py > "$out/tests.log" 2>&1
timeout 130 python3 benchmarks/profile_step.py --model bert --batch 64 --seq 128 --backends torchfuse,eager \
  --top 12 --host-top 25 > "$out/profile-bert.log" 2>&1
timeout 90 python3 benchmarks/sweep_split.py --json "$out/sweep-split.json" > "$out/sweep-split.log" 2>&1
timeout 200 python3 -m torchfuse.bench --suite timm --mode train-amp-bf16 \
  --only 'timm/resnet50/128,timm/convnext_tiny/128' \
  --backends eager,torch.compile,torchfuse --time-budget 185 --out "$out/train-timm" --no-progress 2>&1 | grep -v Warn | tail -12 > "$out/train.log"
tar czf "$out/results.tgz" -C "$out" $(cd "$out" && ls -d train-timm 2>/dev/null)
rm -rf "$out"/train-timm
