#!/usr/bin/env bash
# GPU run Q: split column reductions inside normalization graphs after the per-row statistics
# load change (a sweep of the partial stage); GPT-2 training after padded vocabulary products;
# a BERT step profiled against Inductor.
set -uo pipefail
export PYTHONPATH=src PYTHONUNBUFFERED=1
out=${OUT:-/tmp/out}
mkdir -p "$out"
timeout 200 python3 benchmarks/sweep_norms.py --json "$out/sweep_norms.json" > "$out/sweep_norms.log" 2>&1
timeout 200 python3 -m torchfuse.bench --suite hf --mode train-amp-bf16 --only 'hf/gpt2/8x512' \
  --backends eager,torch.compile,torchfuse --time-budget 190 --out "$out/train-hf" --no-progress 2>&1 | grep -v Warn | tail -10 > "$out/train.log"
timeout 130 python3 benchmarks/profile_step.py --model bert --batch 64 --seq 128 --backends torchfuse,inductor --top 25 > "$out/profile_bert.log" 2>&1
tar czf "$out/results.tgz" -C "$out" $(cd "$out" && ls -d train-hf 2>/dev/null)
rm -rf "$out"/train-hf
