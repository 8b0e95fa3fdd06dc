"""Launch-configuration sweep of ``reduction.inner_outer`` (a row reduction and the column
sums over the same rows in one kernel): LayerNorm and RMSNorm backward.

For each case the backward graph is compiled with the pairing off (input gradient and the
weight/bias gradients' split column sums as separate kernels, the configuration before the
inner-outer scheduler) and then once per candidate (programs per multiprocessor, warps,
elements per block of rows, software-pipelining stages of the loop over blocks); each
kernel's device time per call comes from ``torch.profiler`` (``norms.device_ms``).

Usage (on a GPU): ``PYTHONPATH=src python benchmarks/sweep_inner_outer.py [--json out.json]``
"""
from __future__ import annotations

import argparse
import json
import sys

import torch

sys.path.insert(0, "benchmarks")
from norms import cases, device_ms  # noqa: E402

CANDIDATES = [  # (programs per SM, warps, elements per block of rows, pipelining stages)
    (2, 8, 4096, 0), (2, 16, 4096, 0), (2, 16, 8192, 0), (1, 16, 8192, 0), (2, 8, 4096, 2), (2, 16, 4096, 2),
    (2, 16, 8192, 2), (3, 8, 4096, 0), (3, 16, 4096, 0), (1, 32, 8192, 0), (2, 4, 2048, 0), (4, 4, 2048, 2),
    (4, 8, 4096, 2), (2, 32, 8192, 0)]
WANTED = {("layer_norm", (16384, 4096)), ("rms_norm", (16384, 4096)), ("layer_norm", (32768, 1024)),
          ("layer_norm", (4096, 3072)), ("layer_norm", (8192, 8192))}


def main(argv=None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--json", default=None)
    p.add_argument("--dtype", default="bfloat16")
    args = p.parse_args(argv)
    import torchfuse
    from torchfuse.schedulers import reduction

    dtype = getattr(torch, args.dtype)
    results = []
    for case in cases([dtype], ["layer_norm", "rms_norm"]):
        op, shape, _, fn, make_inputs, grad_idx, fwd_bytes, bwd_bytes = case
        if (op, tuple(shape)) not in WANTED:
            continue
        torch.manual_seed(0)
        inputs = make_inputs()
        for cand in [None] + CANDIDATES:
            if cand is not None:
                (reduction.INNER_OUTER_PROGRAMS_PER_SM, reduction.INNER_OUTER_WARPS, reduction.INNER_OUTER_TILE,
                 reduction.INNER_OUTER_STAGES) = cand
            torch._dynamo.reset()
            f = torchfuse.compile(fn, dynamic=False, inner_outer=cand is not None)
            ins = [t.detach().clone().requires_grad_(i in grad_idx) for i, t in enumerate(inputs)]
            out = f(*ins)
            dy = torch.randn_like(out)
            wrt = [ins[i] for i in grad_idx]
            ms, _, per = device_ms(lambda: torch.autograd.grad(out, wrt, dy, retain_graph=True))
            row = {"op": op, "shape": list(shape), "dtype": args.dtype, "bytes": bwd_bytes,
                   "config": "separate kernels" if cand is None else
                   f"{cand[0]}/SM, {cand[1]} warps, tile {cand[2]}, stages {cand[3]}",
                   "bwd_us": round(ms * 1e3, 1), "kernels_us": per}
            results.append(row)
            print(f"{op} {'x'.join(map(str, shape))} {row['config']}: bwd {row['bwd_us']:.1f} us, "
                  f"{bwd_bytes / (ms * 1e-3) / 1e9:.0f} GB/s; " + ", ".join(f"{k[:40]} {v}" for k, v in per.items()),
                  flush=True)
            del out
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(results, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
