"""Launch-configuration sweep of ``reduction.inner_outer`` (a row reduction and the column
sums over the same rows in one kernel): LayerNorm and RMSNorm backward.

For each case the backward graph is compiled with the pairing off (input gradient and the
weight/bias gradients' split column sums as separate kernels, the configuration before the
inner-outer scheduler), with the scheduler's own choice, and with ``--all`` once per
candidate (programs per multiprocessor or as many as fit, warps, elements per block of rows,
software-pipelining stages of the loop over blocks); each kernel's device time per call comes from ``torch.profiler`` (``norms.device_ms``).

Usage (on a GPU): ``PYTHONPATH=src python benchmarks/sweep_inner_outer.py [--all] [--json out.json]``
"""
from __future__ import annotations

import argparse
import json
import sys

import torch

sys.path.insert(0, "benchmarks")
from norms import cases, device_ms  # noqa: E402

#: run AJ's candidates (``--all``): (programs per SM, 0: as many as fit; warps; elements per
#: block of rows; pipelining stages); by default only the scheduler's own choice (None)
CANDIDATES = [(2, 8, 4096, 2), (0, 8, 4096, 2), (0, 8, 4096, 0), (0, 16, 4096, 0), (0, 16, 4096, 2), (0, 4, 2048, 2)]
WANTED = {("layer_norm", (16384, 4096)), ("rms_norm", (16384, 4096)), ("layer_norm", (32768, 1024)),
          ("rms_norm", (32768, 1024)), ("layer_norm", (4096, 3072)), ("rms_norm", (4096, 3072))}


def main(argv=None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--json", default=None)
    p.add_argument("--dtype", default="bfloat16")
    p.add_argument("--all", action="store_true", help="every candidate, not only the scheduler's choice")
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
        defaults = {k: getattr(reduction, k) for k in dir(reduction) if k.startswith("INNER_OUTER_")}
        for cand in ["separate", None] + (CANDIDATES if args.all else []):
            for k, v in defaults.items():
                setattr(reduction, k, v)
            if cand not in ("separate", None):
                per_sm, warps, tile, stages = cand
                reduction.INNER_OUTER_TILE = reduction.INNER_OUTER_SHORT_TILE = tile
                reduction.INNER_OUTER_WARPS, reduction.INNER_OUTER_STAGES = warps, stages
                reduction.INNER_OUTER_ELEMENTS_PER_THREAD = max(1, tile // (32 * warps))
                reduction.INNER_OUTER_FIT = per_sm == 0
                reduction.INNER_OUTER_PROGRAMS_PER_SM = per_sm or 2
            torch._dynamo.reset()
            f = torchfuse.compile(fn, dynamic=False, inner_outer=cand != "separate")
            ins = [t.detach().clone().requires_grad_(i in grad_idx) for i, t in enumerate(inputs)]
            out = f(*ins)
            dy = torch.randn_like(out)
            wrt = [ins[i] for i in grad_idx]
            ms, _, per = device_ms(lambda: torch.autograd.grad(out, wrt, dy, retain_graph=True))
            row = {"op": op, "shape": list(shape), "dtype": args.dtype, "bytes": bwd_bytes,
                   "config": {"separate": "separate kernels", None: "chosen"}.get(cand) or
                   f"{cand[0] or 'fit'}/SM, {cand[1]} warps, tile {cand[2]}, stages {cand[3]}",
                   "bwd_us": round(ms * 1e3, 1), "kernels_us": per}
            from torchfuse import backend
            row["plans"] = [p.config.reason for g in backend.RECENT[-1:] for st in g.steps if hasattr(st, "plans")
                            for p in st.plans.values() if p.config.scheduler == "reduction.inner_outer"]
            results.append(row)
            print(f"{op} {'x'.join(map(str, shape))} {row['config']}: bwd {row['bwd_us']:.1f} us, "
                  f"{bwd_bytes / (ms * 1e-3) / 1e9:.0f} GB/s; " + ", ".join(f"{k[:40]} {v}" for k, v in per.items())
                  + "".join(f"; {r}" for r in row["plans"]),
                  flush=True)
            del out
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(results, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
