#!/usr/bin/env bash
# GPU run F: BERT/GPT-2 training (attention masks made dense: fused attention instead of the
# math path) and TIMM inference with frozen weights (BatchNorm folding, channels-last, hoisting).
set -uo pipefail
export PYTHONPATH=src PYTHONUNBUFFERED=1
out=${OUT:-/tmp/out}
mkdir -p "$out"
timeout 190 python3 -m torchfuse.bench --suite hf --mode train-amp-bf16 --only 'hf/bert/64x128,hf/gpt2/8x512' \
  --backends eager,torch.compile,torchfuse --time-budget 150 --out "$out/train" --no-progress 2>&1 | grep -v Warn | tail -15 > "$out/train.log"
timeout 330 python3 -m torchfuse.bench --suite timm --mode infer-fp16 \
  --only 'timm/resnet50/*,timm/mobilenetv3_large_100/*,timm/convnext_tiny/*' \
  --backends eager,eager-cudagraphs,torch.compile-reduce-overhead,torchfuse-cudagraphs,torchfuse-cudagraphs-frozen \
  --time-budget 280 --out "$out/infer" --no-progress 2>&1 | grep -v Warn | tail -30 > "$out/infer.log"
tar czf "$out/results.tgz" -C "$out" train infer 2>/dev/null
rm -rf "$out/train" "$out/infer"
