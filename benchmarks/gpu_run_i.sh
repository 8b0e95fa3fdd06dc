#!/usr/bin/env bash
# GPU run I: the interpreter-patching fix on CUDA; where MobileNetV3 inference loses to Inductor
# (kernels and device time per call); which LayerNorm/RMSNorm/cross-entropy backward kernel
# holds the time; timm and more HuggingFace training (AMP bf16) for the benchmark deliverable.
set -uo pipefail
export PYTHONPATH=src PYTHONUNBUFFERED=1
out=${OUT:-/tmp/out}
mkdir -p "$out"
timeout 60 python3 -m pytest -q -p no:cacheprovider -rfE tests/test_cache.py 2>&1 | tail -5 > "$out/tests.log"
timeout 100 python3 benchmarks/profile_infer.py --model mobilenetv3_large_100 --batch 1 > "$out/profile-mnv3.log" 2>&1
timeout 70 python3 benchmarks/norms.py --dtypes bfloat16 --ops layer_norm,rms_norm,cross_entropy --shapes 16384x4096 \
  --per-kernel --time-budget 60 > "$out/norms.log" 2>&1
timeout 230 python3 -m torchfuse.bench --suite timm --mode train-amp-bf16 \
  --only 'timm/resnet50/128,timm/convnext_tiny/128,timm/vit_base_patch16_224/64' \
  --backends eager,torch.compile,torchfuse --time-budget 200 --out "$out/train-timm" --no-progress 2>&1 | grep -v Warn | tail -12 > "$out/train.log"
timeout 120 python3 -m torchfuse.bench --suite hf --mode train-amp-bf16 --only 'hf/distilbert/64x128,hf/roberta/64x128' \
  --backends eager,torch.compile,torchfuse --time-budget 100 --out "$out/train-hf" --no-progress 2>&1 | grep -v Warn | tail -10 >> "$out/train.log"
tar czf "$out/results.tgz" -C "$out" $(cd "$out" && ls -d train-* 2>/dev/null)
rm -rf "$out"/train-timm "$out"/train-hf
