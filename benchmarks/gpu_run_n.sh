#!/usr/bin/env bash
# GPU run N: training after the host-path work (view chains, allocation, direct launches with
# integer pointers, one seed draw per call), channels-last training convolutions, the split
# column-reduction retune and BatchNorm backward rematerialization. HuggingFace and TIMM
# training steps (AMP bf16, fused AdamW) against eager and Inductor.
set -uo pipefail
export PYTHONPATH=src PYTHONUNBUFFERED=1
out=${OUT:-/tmp/out}
mkdir -p "$out"
timeout 70 python3 -m pytest -q -n 8 -p no:cacheprovider -rfE tests/test_host_paths.py tests/test_random.py \
  tests/test_freezing.py tests/test_reductions.py > "$out/tests.log" 2>&1
timeout 215 python3 -m torchfuse.bench --suite hf --mode train-amp-bf16 --only 'hf/bert/64x128,hf/gpt2/8x512' \
  --backends eager,torch.compile,torchfuse --time-budget 200 --out "$out/train-hf" --no-progress 2>&1 | grep -v Warn | tail -10 > "$out/train.log"
timeout 235 python3 -m torchfuse.bench --suite timm --mode train-amp-bf16 \
  --only 'timm/resnet50/128,timm/convnext_tiny/128' \
  --backends eager,torch.compile,torchfuse --time-budget 220 --out "$out/train-timm" --no-progress 2>&1 | grep -v Warn | tail -10 >> "$out/train.log"
tar czf "$out/results.tgz" -C "$out" $(cd "$out" && ls -d train-* 2>/dev/null)
rm -rf "$out"/train-hf "$out"/train-timm
