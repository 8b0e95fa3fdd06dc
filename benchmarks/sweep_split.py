"""Launch-configuration sweep of split column reductions (the bias gradients of linear layers,
``grad.sum(0)`` cast to fp32, and BatchNorm statistics).

For each shape the script compiles ``x.sum(0).float()`` with torchfuse (a split reduction:
a partial kernel over ``split`` chunks of rows, then a combine), and times both kernels under
every candidate of the partial stage: columns per program (XBLOCK), rows per loop step
(RBLOCK), warps, and programs launched (as multiples of the multiprocessor count). Each
timing replays a CUDA graph of 20 back-to-back calls, so host overhead is not counted;
eager and Inductor are timed the same way in the same run.

Usage (on a GPU): ``PYTHONPATH=src python benchmarks/sweep_split.py [--json out.json]``
"""
from __future__ import annotations

import argparse
import itertools
import json
import sys

import torch

sys.path.insert(0, "benchmarks")
from smoke import copy_bandwidth, graph_us  # noqa: E402

SHAPES = ((8192, 768), (8192, 3072), (16384, 4096), (65536, 768), (1048576, 64))




def main(argv=None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--json", default=None)
    p.add_argument("--dtype", default="bfloat16")
    args = p.parse_args(argv)
    import torchfuse
    import torchfuse.backend as backend
    from torchfuse.runtime.executor import GroupRunner
    from torchfuse.schedulers import cdiv, next_power_of_2

    dtype = getattr(torch, args.dtype)
    sm = torch.cuda.get_device_properties(0).multi_processor_count
    copy = copy_bandwidth(2**30, 15)
    print(f"{torch.cuda.get_device_name()} copy {copy:.0f} GB/s, {sm} multiprocessors")
    results = []
    for rows, cols in SHAPES:
        x = torch.randn(rows, cols, device="cuda", dtype=dtype)
        fn = lambda a: a.sum(0).float()  # noqa: E731
        nbytes = rows * cols * dtype.itemsize + cols * 4
        eager = graph_us(lambda: fn(x))
        torch._dynamo.reset()
        ind = torch.compile(fn, dynamic=False)
        inductor = graph_us(lambda: ind(x))
        torch._dynamo.reset()  # a new shape of the same function: no automatic dynamic shapes
        backend.RECENT.clear()
        compiled = torchfuse.compile(fn, dynamic=False)
        default = graph_us(lambda: compiled(x))
        graph = backend.RECENT[-1]
        runner = next(s for s in graph.steps if isinstance(s, GroupRunner))
        plan = next(iter(runner.plans.values()))
        c = plan.config
        print(f"\ncol sum {rows}x{cols} {args.dtype}: eager {eager:.1f} us, Inductor {inductor:.1f} us, "
              f"torchfuse {default:.1f} us ({c.scheduler}, split {getattr(c, 'split', '-')}, "
              f"{[(st.grid, st.XBLOCK, st.RBLOCK, st.num_warps) for st in c.stages]})")
        row = {"case": f"{rows}x{cols}", "bytes": nbytes, "copy_GBps": copy, "eager_us": eager,
               "inductor_us": inductor, "torchfuse_us": default, "candidates": []}
        if c.scheduler != "reduction.split":
            results.append(row)
            continue
        out = torch.empty(cols, device="cuda", dtype=torch.float32)
        base = list(plan.scalars[:-2])
        for xb, rb, w, per_sm in itertools.product((32, 64, 128, 256), (8, 16, 32, 64), (4, 8), (1, 2, 4, 8)):
            xp = cdiv(cols, xb)
            split = max(2, min(per_sm * sm // xp, cdiv(rows, rb), 1024))
            rchunk = cdiv(cdiv(rows, split), rb) * rb
            split = cdiv(rows, rchunk)
            sb = next_power_of_2(split)
            fx = max(1, min(next_power_of_2(cols), max(1, 2048 // sb)))
            fw = max(1, min(8, fx * sb // 256))
            ws = [torch.empty(split * cols, device="cuda", dtype=dt) for dt in runner.workspace_dtypes]
            kargs = [x, out] + ws + base + [split, rchunk]

            def run():
                plan.kernel.launch(0, (xp, split), kargs, xb, rb, w)
                plan.kernel.launch(1, (cdiv(cols, fx),), kargs, fx, sb, fw)

            try:
                us = graph_us(run)
            except Exception as e:  # a configuration that does not compile
                print(f"    X{xb} R{rb} w{w} {per_sm}/SM: {type(e).__name__}")
                continue
            torch.testing.assert_close(out, fn(x), rtol=2e-2, atol=1e-1)
            row["candidates"].append([xb, rb, w, per_sm, split, us])
        best = sorted(row["candidates"], key=lambda r: r[-1])[:6]
        for xb, rb, w, per_sm, split, us in best:
            print(f"    X{xb:<4d} R{rb:<3d} w{w} {per_sm}/SM split {split:<4d} {us:7.1f} us  "
                  f"{nbytes / us / 1e3 / copy:.0%} of copy")
        results.append(row)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
