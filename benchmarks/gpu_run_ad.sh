#!/usr/bin/env bash
# GPU run AD: latency-bound launch configurations (small pointwise kernels take one to eight
# elements a thread; narrowed outer persistent reductions two). The whole test suite; the
# small-kernel sweep again (now with squeeze-excitation means); MobileNetV3 device time per
# call; inference at batch 1 and 8 against eager, eager + CUDA graphs and Inductor.
set -uo pipefail
export PYTHONPATH=src PYTHONUNBUFFERED=1
out=${OUT:-/tmp/out}
mkdir -p "$out"
timeout 170 python3 -m pytest -q -n 15 -p no:cacheprovider -rfE --maxfail=40 tests > "$out/tests-full.log" 2>&1
grep -E "passed|failed|FAILED|ERROR|xpassed" "$out/tests-full.log" | tail -45 > "$out/tests.log"
timeout 130 python3 benchmarks/sweep_small.py --json "$out/sweep_small.json" > "$out/sweep_small.log" 2>&1
timeout 70 python3 benchmarks/profile_infer.py --model mobilenetv3_large_100 --backends inductor,torchfuse-frozen \
  --top 20 --dump "$out/mnv3.json" > "$out/mnv3.log" 2>&1
backends=eager,eager-cudagraphs,torch.compile-reduce-overhead,torchfuse-cudagraphs,torchfuse-cudagraphs-frozen
cases='timm/resnet50/1,timm/resnet50/8,timm/mobilenetv3_large_100/1,timm/mobilenetv3_large_100/8'
timeout 235 python3 -m torchfuse.bench --suite timm --mode infer-fp16 --only "$cases" --backends $backends \
  --no-accuracy --time-budget 215 --out "$out/infer-cf" --no-progress 2>&1 | grep -v Warn | tail -12 > "$out/infer-cf.log"
tar czf "$out/results.tgz" -C "$out" $(cd "$out" && ls -d infer-cf 2>/dev/null)
rm -rf "$out"/infer-cf
