#!/usr/bin/env bash
# GPU run T: training after the outer-reduction split threshold, Welford's per-step reciprocal,
# the single vocabulary-gradient pad and the loss cast moves (ResNet-50, BERT-base, GPT-2);
# unfrozen batch-1 inference with channels-last convolutions under CUDA graphs.
set -uo pipefail
export PYTHONPATH=src PYTHONUNBUFFERED=1
out=${OUT:-/tmp/out}
mkdir -p "$out"
timeout 150 python3 -m torchfuse.bench --suite timm --mode train-amp-bf16 --only 'timm/resnet50/128' \
  --backends eager,torch.compile,torchfuse --time-budget 140 --out "$out/train-timm" --no-progress 2>&1 | grep -v Warn | tail -6 > "$out/train.log"
timeout 270 python3 -m torchfuse.bench --suite hf --mode train-amp-bf16 --only 'hf/bert/64x128,hf/gpt2/8x512' \
  --backends eager,torch.compile,torchfuse --time-budget 260 --out "$out/train-hf" --no-progress 2>&1 | grep -v Warn | tail -8 >> "$out/train.log"
backends=eager,eager-cudagraphs,torch.compile-reduce-overhead,torchfuse-cudagraphs,torchfuse-cudagraphs-frozen
timeout 110 python3 -m torchfuse.bench --suite timm --mode infer-fp16 \
  --only 'timm/resnet50/1,timm/mobilenetv3_large_100/1' --backends $backends --no-accuracy \
  --time-budget 95 --out "$out/infer" --no-progress 2>&1 | grep -v Warn | tail -12 > "$out/infer.log"
tar czf "$out/results.tgz" -C "$out" $(cd "$out" && ls -d train-timm train-hf infer 2>/dev/null)
rm -rf "$out"/train-timm "$out"/train-hf "$out"/infer
