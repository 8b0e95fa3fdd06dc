#!/usr/bin/env bash
# GPU run D: the test suite on CUDA, the demo, both fusion-API examples with --bench,
# explain(measure=True) with its HTML report, and the host cost per launch.
set -uo pipefail
export PYTHONPATH=src PYTHONUNBUFFERED=1
out=${OUT:-/tmp/out}
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$out/device.txt"
timeout 280 python3 -m pytest -q -n 12 -p no:cacheprovider -x --maxfail=40 tests 2>&1 | grep -E "passed|failed|FAILED|ERROR|xpassed" | tail -45 | tee "$out/tests.log"
{
timeout 60 python3 examples/transformer_block_fusion.py --device cuda --check --bench 2>&1 | grep -v Warn | tail -14
timeout 60 python3 examples/gated_rmsnorm.py --device cuda --check --bench 2>&1 | grep -v Warn | tail -14
} | tee "$out/examples.log"
timeout 60 python3 benchmarks/launch_overhead.py --json "$out/launch_overhead.json" 2>&1 | grep -v Warn | tail -8 | tee "$out/launch.log"
timeout 60 python3 - <<'PY' 2>&1 | grep -v Warn | tail -12 | tee "$out/explain.log"
import os, torch, torchfuse
m = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.GELU(), torch.nn.LayerNorm(4096), torch.nn.Dropout(0.1)).cuda()
x = torch.randn(4096, 1024, device="cuda")
r = torchfuse.explain(m, x, measure=True, html=os.path.join(os.environ.get("OUT", "/tmp"), "explain.html"))
print(r.timing.available, r.timing.note)
for g in r.groups:
    for p in g.plans:
        print(p.kernel, p.scheduler, p.bytes_moved, p.time_ms, p.bandwidth_gbps, p.copy_fraction)
PY
ls .gpu_carry/minilm-fp16 >/dev/null 2>&1 && timeout 120 python3 -m torchfuse.demo --model-dir .gpu_carry/minilm-fp16 2>&1 | grep -v Warn | tail -25 | tee "$out/demo.log"
