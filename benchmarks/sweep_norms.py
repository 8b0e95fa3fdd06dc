"""Launch-configuration sweep of the split column reductions inside normalization graphs:
LayerNorm and RMSNorm backward (weight and bias gradients: column sums of ``dy * xhat`` and
``dy`` over the rows) and channels-last BatchNorm forward and backward (statistics per channel
over N*H*W).

``benchmarks/sweep_split.py`` tunes the partial stage on a plain ``x.sum(0)``; these graphs
read two tensors and per-row or per-channel statistics, and run Welford's update in the
BatchNorm forward. For each candidate partial stage (columns per program, rows per step,
warps, programs per multiprocessor) the graph is recompiled with torchfuse alone and each
kernel's device time is taken from ``torch.profiler`` (``norms.device_ms``).

Usage (on a GPU): ``PYTHONPATH=src python benchmarks/sweep_norms.py [--json out.json]``
"""
from __future__ import annotations

import argparse
import json
import sys

import torch

sys.path.insert(0, "benchmarks")
from norms import cases, device_ms  # noqa: E402

CANDIDATES = [  # (XBLOCK, RBLOCK, warps, programs per multiprocessor)
    (64, 8, 4, 8), (128, 8, 4, 8), (64, 16, 4, 8), (32, 16, 4, 8), (128, 16, 8, 8),
    (64, 32, 8, 8), (64, 8, 4, 4), (64, 8, 4, 16), (256, 8, 8, 8), (32, 32, 4, 8),
]
WANTED = {("layer_norm", (16384, 4096)), ("rms_norm", (16384, 4096)), ("layer_norm", (32768, 1024)),
          ("batch_norm_cl", (64, 256, 56, 56))}


def main(argv=None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--json", default=None)
    p.add_argument("--dtype", default="bfloat16")
    args = p.parse_args(argv)
    import torchfuse
    from torchfuse.schedulers import reduction

    dtype = getattr(torch, args.dtype)
    results = []
    for case in cases([dtype], ["layer_norm", "rms_norm", "batch_norm_cl"]):
        op, shape, _, fn, make_inputs, grad_idx, fwd_bytes, bwd_bytes = case
        if (op, tuple(shape)) not in WANTED:
            continue
        torch.manual_seed(0)
        inputs = make_inputs()
        for xb, rb, w, per_sm in CANDIDATES:
            reduction.SPLIT_OUTER_XBLOCK, reduction.SPLIT_OUTER_RBLOCK = xb, rb
            reduction.SPLIT_OUTER_WARPS, reduction.OUTER_SPLIT_PROGRAMS = w, per_sm
            torch._dynamo.reset()
            f = torchfuse.compile(fn, dynamic=False)
            row = {"op": op, "shape": list(shape), "XBLOCK": xb, "RBLOCK": rb, "warps": w, "per_sm": per_sm}
            if op == "batch_norm_cl":
                with torch.no_grad():
                    ms, _, per = device_ms(lambda: f(*inputs))
                row["fwd_us"], row["fwd_partial_us"] = ms * 1e3, sum(v for k, v in per.items() if "_partial" in k)
            ins = [t.detach().clone().requires_grad_(i in grad_idx) for i, t in enumerate(inputs)]
            out = f(*ins)
            dy = torch.randn_like(out)
            wrt = [ins[i] for i in grad_idx]
            ms, _, per = device_ms(lambda: torch.autograd.grad(out, wrt, dy, retain_graph=True))
            row["bwd_us"], row["bwd_partial_us"] = ms * 1e3, sum(v for k, v in per.items() if "_partial" in k)
            results.append(row)
            print(f"{op} {'x'.join(map(str, shape))} X{xb} R{rb} w{w} {per_sm}/SM: "
                  + (f"fwd {row['fwd_us']:.1f} us (partial {row['fwd_partial_us']:.1f}), " if "fwd_us" in row else "")
                  + f"bwd {row['bwd_us']:.1f} us (partial {row['bwd_partial_us']:.1f})", flush=True)
            del out
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(results, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
