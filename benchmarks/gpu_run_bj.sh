#!/usr/bin/env bash
# GPU run BJ: masks that fold away when every block is full (codegen.ALL_TRUE_MASKS) and a
# flush-to-zero exp for max-shifted sums (codegen.FLUSH_SUMMED_EXP): the whole test suite; a
# check that Triton compiled xfull/rfull as constants; the row ops at 16384x4096 and
# 32768x1024 against eager and Inductor, with both changes off as the 'alt' column.
source "$(dirname "$0")/gpu_lib.sh"
gpu_suite 230
timeout 60 python3 - > "$out/constexpr_check.log" 2>&1 <<'PY'
import torch, torch.nn.functional as F, torchfuse
from torchfuse import backend
from torchfuse.runtime.executor import GroupRunner
x = torch.randn(512, 4096, device="cuda", dtype=torch.bfloat16)
f = torchfuse.compile(lambda x: torch.log_softmax(x, -1), dynamic=False)
f(x)
for g in backend.RECENT:
    for step in g.steps:
        for plan in (step.plans.values() if isinstance(step, GroupRunner) else ()):
            for fn in plan.kernel.fns:
                for cache in fn.device_caches.values():
                    for k in cache[0].values():
                        ttir = k.asm["ttir"]
                        print(k.name, "xfull argument left:", "%xfull" in ttir, "rfull argument left:", "%rfull" in ttir,
                              "select count:", ttir.count("arith.select"), "regs", k.n_regs)
PY
timeout 230 python3 benchmarks/norms.py --ops cross_entropy,log_softmax,softmax,layer_norm,rms_norm \
  --shapes 16384x4096,32768x1024 --alt codegen.ALL_TRUE_MASKS=False --alt codegen.FLUSH_SUMMED_EXP=False \
  --per-kernel --time-budget 210 --out "$out/norms" > "$out/norms.log" 2>&1
gpu_pack norms
