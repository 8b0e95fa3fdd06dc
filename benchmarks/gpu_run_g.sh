#!/usr/bin/env bash
# GPU run G: the test suite on CUDA; frozen inference (BatchNorm shift added in the fused
# epilogue) against torchfuse's CUDA graphs, channels-first and channels-last; GPT-2 training.
set -uo pipefail
export PYTHONPATH=src PYTHONUNBUFFERED=1
out=${OUT:-/tmp/out}
mkdir -p "$out"
timeout 200 python3 -m pytest -q -n 14 -p no:cacheprovider --maxfail=40 tests 2>&1 | grep -E "passed|failed|FAILED|ERROR|xpassed" | tail -45 > "$out/tests.log"
for layout in "" "--channels-last"; do
  timeout 85 python3 -m torchfuse.bench --suite timm --mode infer-fp16 --only 'timm/resnet50/1,timm/mobilenetv3_large_100/1' \
    --backends eager,eager-cudagraphs,torchfuse-cudagraphs,torchfuse-cudagraphs-frozen $layout --no-accuracy \
    --time-budget 70 --out "$out/infer${layout:+-cl}" --no-progress 2>&1 | grep -v Warn | tail -12 >> "$out/infer.log"
done
timeout 150 python3 -m torchfuse.bench --suite hf --mode train-amp-bf16 --only 'hf/gpt2/8x512' \
  --backends eager,torch.compile,torchfuse --no-accuracy --time-budget 140 --out "$out/train" --no-progress 2>&1 | grep -v Warn | tail -10 > "$out/train.log"
tar czf "$out/results.tgz" -C "$out" $(cd "$out" && ls -d infer* train 2>/dev/null | grep -v '\.log$')
rm -rf "$out/infer" "$out/infer-cl" "$out/train"
