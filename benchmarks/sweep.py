"""Launch-configuration sweep: times the kernels torchfuse generates under other block sizes
and warp counts, to set the schedulers' heuristics from measurements.

For each case the script compiles the function once with torchfuse, takes the generated
kernel of its (single) fusion group, and times it under every candidate configuration
(CUDA events, median). It prints, per case, the heuristic's choice and the best candidates
with their bandwidth as a fraction of a device copy measured in the same run.

Usage (on a GPU): ``PYTHONPATH=src python benchmarks/sweep.py [--json out.json]``
"""
from __future__ import annotations

import argparse
import itertools
import json
import sys

import torch

sys.path.insert(0, "benchmarks")
from smoke import copy_bandwidth, time_ms  # noqa: E402


def cases():
    bf = torch.bfloat16
    d = "cuda"
    for n in (2**27,):
        x, y = torch.randn(n, device=d, dtype=bf), torch.randn(n, device=d, dtype=bf)
        yield f"pointwise mul-add n={n}", lambda a, b: a * b + 1.0, (x, y), 3 * n * 2
    for rows, cols in ((16384, 4096), (8192, 8192), (32768, 1024), (65536, 768), (4096, 32768), (512, 262144)):
        x = torch.randn(rows, cols, device=d, dtype=bf)
        w = torch.randn(cols, device=d, dtype=bf)
        yield f"row sum {rows}x{cols}", lambda a: a.float().sum(-1), (x,), rows * cols * 2 + rows * 4
        yield f"softmax {rows}x{cols}", lambda a: torch.softmax(a, -1), (x,), 2 * rows * cols * 2
        yield f"layernorm {rows}x{cols}", lambda a, w: torch.nn.functional.layer_norm(a, (a.shape[-1],), w, w), (x, w), \
            2 * rows * cols * 2
    for rows, cols in ((65536, 768), (16384, 4096), (1048576, 64)):
        x = torch.randn(rows, cols, device=d, dtype=bf)
        yield f"col sum {rows}x{cols}", lambda a: a.float().sum(0), (x,), rows * cols * 2 + cols * 4


CANDIDATES = {
    "pointwise": [(xb, 1, w) for xb, w in itertools.product((512, 1024, 2048, 4096), (2, 4, 8))],
    "reduction.persistent": None,  # built from RBLOCK below
    "reduction.loop": None,
}


def candidates(config):
    if config.scheduler == "pointwise":
        return CANDIDATES["pointwise"]
    rb = config.RBLOCK
    if config.scheduler == "reduction.persistent":
        if config.XBLOCK >= 16 and rb <= 64:  # outer
            return [(xb, rb, w) for xb in (16, 32, 64, 128) for w in (2, 4, 8)]
        return [(xb, rb, w) for xb in (1, 2, 4, 8) for w in (1, 2, 4, 8, 16, 32) if xb * rb // (32 * w) >= 1
                and xb * rb // (32 * w) <= 128]
    if config.XBLOCK > 1:  # outer loop
        return [(xb, r, w) for xb in (32, 64, 128) for r in (8, 16, 32, 64) for w in (2, 4, 8)]
    return [(1, r, w) for r in (1024, 2048, 4096, 8192) for w in (4, 8, 16)]


def single_group(fn, inputs):
    """Compile ``fn`` with torchfuse and call it once on ``inputs``.

    Returns:
        ``(compiled, plan, tensors)``: the compiled function, the launch plan of its only
        fusion group and the tensors that group read (the kernel's leading arguments), or
        ``(compiled, None, None)`` when the graph has no fusion group or more than one.
    """
    import torchfuse
    import torchfuse.backend as backend
    from torchfuse.runtime.executor import GroupRunner

    backend.RECENT.clear()
    compiled = torchfuse.compile(fn)
    seen = {}
    original = GroupRunner.__call__

    def spy(self, env, sym_key, sym_values):
        seen["ins"] = [env[s] for s in self.in_slots]
        return original(self, env, sym_key, sym_values)

    GroupRunner.__call__ = spy
    try:
        compiled(*inputs)
    finally:
        GroupRunner.__call__ = original
    runners = [s for s in backend.RECENT[-1].steps if isinstance(s, GroupRunner)]
    if len(runners) != 1:
        return compiled, None, None
    return compiled, next(iter(runners[0].plans.values())), seen["ins"]


def main(argv=None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--iters", type=int, default=15)
    p.add_argument("--json", default=None)
    p.add_argument("--only", default=None, help="substring of the case names to run")
    args = p.parse_args(argv)
    copy = copy_bandwidth(2**30, args.iters)
    print(f"{torch.cuda.get_device_name()} copy {copy:.0f} GB/s")
    results = []
    for name, fn, inputs, nbytes in cases():
        if args.only and args.only not in name:
            continue
        compiled, plan, tensors = single_group(fn, inputs)
        if plan is None:
            print(f"{name}: not one fusion group, skipped")
            continue
        t_default = time_ms(lambda: compiled(*inputs), args.iters)
        outs = [torch.empty_strided(s, st, dtype=dt, device=dev) for s, st, dt, dev in plan.out_specs]
        kernel_args = tensors + outs + plan.scalars
        rows = []
        c = plan.config
        if c.scheduler == "reduction.split":
            print(f"\n{name}: split {c.split} x {c.rchunk}: {c.stages} -> "
                  f"{t_default:.3f} ms end-to-end ({nbytes / t_default / 1e6 / copy:.0%} of copy)")
            results.append({"case": name, "heuristic": [c.scheduler, c.split, c.rchunk], "default_ms": t_default,
                            "bytes": nbytes, "copy_GBps": copy})
            continue
        for xb, rb, w in candidates(c):
            grid = (-(-plan.xnumel // xb),)
            try:
                ms = time_ms(lambda: plan.kernel.launch(0, grid, kernel_args, xb, rb, w), args.iters)
            except Exception as e:  # some configurations do not compile (too many registers)
                rows.append((xb, rb, w, None, str(e)[:80]))
                continue
            rows.append((xb, rb, w, ms, ""))
        ok = sorted([r for r in rows if r[3] is not None], key=lambda r: r[3])
        print(f"\n{name}: heuristic {c.scheduler} X{c.XBLOCK} R{c.RBLOCK} w{c.num_warps} -> "
              f"{t_default:.3f} ms end-to-end ({nbytes / t_default / 1e6 / copy:.0%} of copy)")
        for xb, rb, w, ms, _ in ok[:5]:
            print(f"    X{xb:<5d} R{rb:<6d} w{w:<3d} {ms:.3f} ms  {nbytes / ms / 1e6 / copy:.0%}")
        results.append({"case": name, "heuristic": [c.scheduler, c.XBLOCK, c.RBLOCK, c.num_warps],
                        "default_ms": t_default, "bytes": nbytes, "copy_GBps": copy,
                        "candidates": [r[:4] for r in rows]})
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
