#!/usr/bin/env bash
# GPU run J: the test suite; TIMM inference (fp16, CUDA graphs) after narrow outer-reduction
# tiles and convolution biases moved into fusion groups, channels-first and channels-last;
# MobileNetV3's kernels under frozen torchfuse; cross-entropy after the scatter-free loss
# gradient.
set -uo pipefail
export PYTHONPATH=src PYTHONUNBUFFERED=1
out=${OUT:-/tmp/out}
mkdir -p "$out"
timeout 165 python3 -m pytest -q -n 14 -p no:cacheprovider -rfE --maxfail=40 tests > "$out/tests-full.log" 2>&1
grep -E "passed|failed|FAILED|ERROR|xpassed" "$out/tests-full.log" | tail -45 > "$out/tests.log"
backends=eager,eager-cudagraphs,torch.compile-reduce-overhead,torchfuse-cudagraphs,torchfuse-cudagraphs-frozen
timeout 205 python3 -m torchfuse.bench --suite timm --mode infer-fp16 \
  --only 'timm/resnet50/*,timm/mobilenetv3_large_100/*,timm/convnext_tiny/1' --backends $backends \
  --time-budget 185 --out "$out/infer" --no-progress 2>&1 | grep -v Warn | tail -14 >> "$out/infer.log"
timeout 115 python3 -m torchfuse.bench --suite timm --mode infer-fp16 --channels-last \
  --only 'timm/resnet50/1,timm/mobilenetv3_large_100/1' --backends $backends \
  --time-budget 95 --out "$out/infer-cl" --no-progress 2>&1 | grep -v Warn | tail -12 >> "$out/infer.log"
timeout 45 python3 benchmarks/profile_infer.py --model mobilenetv3_large_100 --batch 1 --backends torchfuse-frozen \
  --top 12 > "$out/profile-mnv3.log" 2>&1
timeout 50 python3 benchmarks/norms.py --dtypes bfloat16 --ops cross_entropy --shapes 16384x4096 \
  --per-kernel --time-budget 40 > "$out/norms.log" 2>&1
tar czf "$out/results.tgz" -C "$out" $(cd "$out" && ls -d infer infer-cl 2>/dev/null)
rm -rf "$out/infer" "$out/infer-cl"
