#!/usr/bin/env bash
# GPU run AI: the inner-outer reduction with the configuration chosen from run AH (2 programs
# per multiprocessor, 8 warps, 4096-element row blocks, 2 pipelining stages; rows up to 4096).
# The whole test suite; the LayerNorm/RMSNorm table against eager, Inductor and a device copy;
# HuggingFace training (BERT-base, GPT-2) against eager and Inductor.
set -uo pipefail
export PYTHONPATH=src PYTHONUNBUFFERED=1
out=${OUT:-/tmp/out}
mkdir -p "$out"
timeout 185 python3 -m pytest -q -n 15 -p no:cacheprovider -rfE --maxfail=40 tests > "$out/tests-full.log" 2>&1
grep -E "passed|failed|FAILED|ERROR|xpassed" "$out/tests-full.log" | tail -45 > "$out/tests.log"
timeout 60 python3 benchmarks/norms.py --ops layer_norm,rms_norm --dtypes bfloat16,float32 --per-kernel \
  --time-budget 50 --out "$out/norms" > "$out/norms.log" 2>&1
timeout 265 python3 -m torchfuse.bench --suite hf --mode train-amp-bf16 --only 'hf/bert/64x128,hf/gpt2/8x512' \
  --backends eager,torch.compile,torchfuse --time-budget 255 --out "$out/train-hf" --no-progress 2>&1 \
  | grep -v Warn | tail -8 > "$out/train.log"
tar czf "$out/results.tgz" -C "$out" $(cd "$out" && ls -d norms train-hf 2>/dev/null)
rm -rf "$out"/norms "$out"/train-hf
