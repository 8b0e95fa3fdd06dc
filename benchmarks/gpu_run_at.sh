#!/usr/bin/env bash
# GPU run AT: the shipped state of the round (one warp a row for rows of 1024, one-element
# pointwise inputs loaded once a thread, the one-hot rewrite off): the cross-entropy rows of the
# norm table with per-kernel times, and HuggingFace training (BERT-base, GPT-2; AMP bf16).
set -uo pipefail
export PYTHONPATH=src PYTHONUNBUFFERED=1
out=${OUT:-/tmp/out}
mkdir -p "$out"
timeout 80 python3 benchmarks/norms.py --ops cross_entropy --dtypes bfloat16,float32 \
  --per-kernel --time-budget 70 --out "$out/norms" > "$out/norms.log" 2>&1
timeout 250 python3 -m torchfuse.bench --suite hf --mode train-amp-bf16 --only 'hf/bert/64x128,hf/gpt2/8x512' \
  --backends eager,torch.compile,torchfuse --time-budget 230 --out "$out/train-hf" --no-progress 2>&1 \
  | grep -v Warn | tail -8 > "$out/train.log"
tar czf "$out/results.tgz" -C "$out" $(cd "$out" && ls -d norms train-hf 2>/dev/null)
rm -rf "$out"/norms "$out"/train-hf
