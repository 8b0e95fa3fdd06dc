#!/usr/bin/env bash
# GPU run Z: the whole test suite with the generated launch functions (first time on a GPU); the
# ResNet-50 training step profile (GPU idle time) and benchmark against eager and Inductor; the
# per-launch host cost on 50 small pointwise ops.
set -uo pipefail
export PYTHONPATH=src PYTHONUNBUFFERED=1
out=${OUT:-/tmp/out}
mkdir -p "$out"
timeout 200 python3 -m pytest -q -n 15 -p no:cacheprovider -rfE --maxfail=40 tests > "$out/tests-full.log" 2>&1
grep -E "passed|failed|FAILED|ERROR|xpassed" "$out/tests-full.log" | tail -45 > "$out/tests.log"
timeout 70 python3 benchmarks/launch_overhead.py > "$out/launch.log" 2>&1
timeout 90 python3 benchmarks/profile_step.py --model timm:resnet50 --batch 128 --backends torchfuse --top 30 2>&1 \
  | grep -v Warn > "$out/profile-r50.log"
timeout 160 python3 -m torchfuse.bench --suite timm --mode train-amp-bf16 --only 'timm/resnet50/128' \
  --backends eager,torch.compile,torchfuse --time-budget 150 --out "$out/train-timm" --no-progress 2>&1 | grep -v Warn | tail -6 > "$out/train.log"
tar czf "$out/results.tgz" -C "$out" $(cd "$out" && ls -d train-timm 2>/dev/null)
rm -rf "$out"/train-timm
