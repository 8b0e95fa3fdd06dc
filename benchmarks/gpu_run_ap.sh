#!/usr/bin/env bash
# GPU run AP: HuggingFace training (BERT-base, GPT-2; AMP bf16) at the end of the round: the
# NaN-propagating row max, sibling row sums together, Welford's count from the loop bounds.
set -uo pipefail
export PYTHONPATH=src PYTHONUNBUFFERED=1
out=${OUT:-/tmp/out}
mkdir -p "$out"
timeout 235 python3 -m torchfuse.bench --suite hf --mode train-amp-bf16 --only 'hf/bert/64x128,hf/gpt2/8x512' \
  --backends eager,torch.compile,torchfuse --time-budget 215 --out "$out/train-hf" --no-progress 2>&1 \
  | grep -v Warn | tail -8 > "$out/train.log"
tar czf "$out/results.tgz" -C "$out" $(cd "$out" && ls -d train-hf 2>/dev/null)
rm -rf "$out"/train-hf
