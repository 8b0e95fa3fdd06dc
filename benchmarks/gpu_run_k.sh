#!/usr/bin/env bash
# GPU run K: where a HuggingFace training step spends its host and device time (BERT-base and
# GPT-2, eager, torchfuse and Inductor, after the batched casts and the scatter-free loss
# gradient); frozen inference after the halved address checks, both layouts.
set -uo pipefail
export PYTHONPATH=src PYTHONUNBUFFERED=1
out=${OUT:-/tmp/out}
mkdir -p "$out"
timeout 190 python3 benchmarks/profile_step.py --model bert --batch 64 --seq 128 --backends eager,torchfuse,inductor \
  --top 15 --host-top 30 > "$out/profile-bert.log" 2>&1
timeout 150 python3 benchmarks/profile_step.py --model gpt2 --batch 8 --seq 512 --backends eager,torchfuse,inductor \
  --top 12 --host-top 20 > "$out/profile-gpt2.log" 2>&1
backends=eager,eager-cudagraphs,torch.compile-reduce-overhead,torchfuse-cudagraphs,torchfuse-cudagraphs-frozen
for layout in "" "--channels-last"; do
  timeout 110 python3 -m torchfuse.bench --suite timm --mode infer-fp16 $layout \
    --only 'timm/resnet50/1,timm/mobilenetv3_large_100/1' --backends $backends --no-accuracy \
    --time-budget 95 --out "$out/infer${layout:+-cl}" --no-progress 2>&1 | grep -v Warn | tail -12 >> "$out/infer.log"
done
tar czf "$out/results.tgz" -C "$out" $(cd "$out" && ls -d infer infer-cl 2>/dev/null)
rm -rf "$out/infer" "$out/infer-cl"
