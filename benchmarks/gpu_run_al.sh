#!/usr/bin/env bash
# GPU run AL: the whole test suite at the start of a round (the pairing choice and the review
# commits had not run on a GPU); the softmax, cross-entropy and BatchNorm rows of the norm table
# with per-kernel times; HuggingFace training (BERT-base, GPT-2) after the fitted grids.
set -uo pipefail
export PYTHONPATH=src PYTHONUNBUFFERED=1
out=${OUT:-/tmp/out}
mkdir -p "$out"
timeout 175 python3 -m pytest -q -n 15 -p no:cacheprovider -rfE --maxfail=40 tests > "$out/tests-full.log" 2>&1
grep -E "passed|failed|FAILED|ERROR|xpassed" "$out/tests-full.log" | tail -45 > "$out/tests.log"
timeout 110 python3 benchmarks/norms.py --ops softmax,log_softmax,cross_entropy,batch_norm_cl --dtypes bfloat16,float32 \
  --per-kernel --time-budget 100 --out "$out/norms" > "$out/norms.log" 2>&1
timeout 265 python3 -m torchfuse.bench --suite hf --mode train-amp-bf16 --only 'hf/bert/64x128,hf/gpt2/8x512' \
  --backends eager,torch.compile,torchfuse --time-budget 255 --out "$out/train-hf" --no-progress 2>&1 \
  | grep -v Warn | tail -8 > "$out/train.log"
tar czf "$out/results.tgz" -C "$out" $(cd "$out" && ls -d norms train-hf 2>/dev/null)
rm -rf "$out"/norms "$out"/train-hf
