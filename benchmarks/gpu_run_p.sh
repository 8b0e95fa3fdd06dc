#!/usr/bin/env bash
# GPU run P: the whole test suite; HuggingFace training after padded vocabulary products and
# casts moved above reshapes; the normalization table per kernel after the split retune and
# BatchNorm rematerialization.
set -uo pipefail
export PYTHONPATH=src PYTHONUNBUFFERED=1
out=${OUT:-/tmp/out}
mkdir -p "$out"
timeout 235 python3 -m pytest -q -n 14 -p no:cacheprovider -rfE --maxfail=40 tests > "$out/tests-full.log" 2>&1
grep -E "passed|failed|FAILED|ERROR|xpassed" "$out/tests-full.log" | tail -45 > "$out/tests.log"
timeout 215 python3 -m torchfuse.bench --suite hf --mode train-amp-bf16 --only 'hf/bert/64x128,hf/gpt2/8x512' \
  --backends eager,torch.compile,torchfuse --time-budget 200 --out "$out/train-hf" --no-progress 2>&1 | grep -v Warn | tail -10 > "$out/train.log"
timeout 100 python3 benchmarks/norms.py --dtypes bfloat16 --ops layer_norm,rms_norm,batch_norm_cl,cross_entropy \
  --shapes 16384x4096 --per-kernel --iters 15 --time-budget 85 --out "$out/norms" > "$out/norms.log" 2>&1
tar czf "$out/results.tgz" -C "$out" $(cd "$out" && ls -d train-hf norms 2>/dev/null)
rm -rf "$out"/train-hf "$out"/norms
