#!/usr/bin/env bash
# GPU run Y: the launch path's pointer list built once, Options() environment defaults, explain's
# state-update category: the tests of the host paths, CUDA graphs, batched copies, reductions,
# models, explain, front end and freezing; the ResNet-50 training benchmark again.
set -uo pipefail
export PYTHONPATH=src PYTHONUNBUFFERED=1
out=${OUT:-/tmp/out}
mkdir -p "$out"
timeout 95 python3 -m pytest -q -n 15 -p no:cacheprovider -rfE tests/test_host_paths.py tests/test_cudagraphs.py \
  tests/test_cast_batch.py tests/test_reductions.py tests/test_models.py tests/test_explain.py tests/test_frontend.py \
  tests/test_freezing.py > "$out/tests-full.log" 2>&1
grep -E "passed|failed|FAILED|ERROR|xpassed" "$out/tests-full.log" | tail -30 > "$out/tests.log"
timeout 150 python3 -m torchfuse.bench --suite timm --mode train-amp-bf16 --only 'timm/resnet50/128' \
  --backends eager,torch.compile,torchfuse --time-budget 140 --out "$out/train-timm" --no-progress 2>&1 | grep -v Warn | tail -6 > "$out/train.log"
tar czf "$out/results.tgz" -C "$out" $(cd "$out" && ls -d train-timm 2>/dev/null)
rm -rf "$out"/train-timm
