#!/usr/bin/env bash
# GPU run C: HF training (AMP bf16) after keeping attention and embedding backward whole,
# and TIMM inference (fp16, batch 1 and 8) with CUDA graphs.
set -uo pipefail
export PYTHONPATH=src PYTHONUNBUFFERED=1
out=${OUT:-/tmp/out}
timeout 210 python3 -m torchfuse.bench --suite hf --mode train-amp-bf16 --only 'hf/bert/64x128,hf/gpt2/8x512' --backends eager,torch.compile,torchfuse --no-accuracy --time-budget 150 --out /tmp/bench --no-progress 2>&1 | grep -v Warn | tail -9
timeout 230 python3 -m torchfuse.bench --suite timm --mode infer-fp16 --only 'timm/resnet50*' --backends eager,eager-cudagraphs,torch.compile-reduce-overhead,torchfuse,torchfuse-cudagraphs --time-budget 170 --out /tmp/bench --no-progress 2>&1 | grep -v Warn | tail -12
tar czf $out/bench_c.tgz -C /tmp bench
