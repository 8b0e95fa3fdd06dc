#!/usr/bin/env bash
# GPU run H: the test suite with failure details; inference with the lighter CUDA-graph runner
# (frozen and not, both layouts); the micro suite after the launcher and batched-cast changes.
set -uo pipefail
export PYTHONPATH=src PYTHONUNBUFFERED=1
out=${OUT:-/tmp/out}
mkdir -p "$out"
timeout 185 python3 -m pytest -q -n 14 -p no:cacheprovider -rfE --maxfail=40 tests > "$out/tests-full.log" 2>&1
grep -E "passed|failed|FAILED|ERROR|xpassed" "$out/tests-full.log" | tail -45 > "$out/tests.log"
for layout in "" "--channels-last"; do
  timeout 110 python3 -m torchfuse.bench --suite timm --mode infer-fp16 --only 'timm/resnet50/*,timm/mobilenetv3_large_100/1' \
    --backends eager,eager-cudagraphs,torch.compile-reduce-overhead,torchfuse-cudagraphs,torchfuse-cudagraphs-frozen $layout \
    --time-budget 90 --out "$out/infer${layout:+-cl}" --no-progress 2>&1 | grep -v Warn | tail -12 >> "$out/infer.log"
done
timeout 160 python3 -m torchfuse.bench --suite micro --mode train-amp-bf16 --backends eager,torch.compile,torchfuse \
  --time-budget 140 --out "$out/micro" --no-progress 2>&1 | grep -v Warn | tail -40 > "$out/micro.log"
tar czf "$out/results.tgz" -C "$out" $(cd "$out" && ls -d infer* micro 2>/dev/null | grep -v '\.log$')
rm -rf "$out/infer" "$out/infer-cl" "$out/micro"
