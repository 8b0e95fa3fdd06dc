"""Smoke benchmark: achieved bandwidth of fused kernels next to a device copy, same run.

Cases (bf16 by default, every tensor at least 256 MiB): two pointwise chains and three row
reductions. Each case runs in eager PyTorch, ``torch.compile`` (Inductor) and torchfuse; the
table gives the median time over ``--iters`` timed calls (CUDA events, after warm-up), the
fewest bytes the case must move (inputs read once, outputs written once), the achieved GB/s
and its fraction of a device-to-device copy measured first in the same process.

Usage (on a GPU): ``PYTHONPATH=src python benchmarks/smoke.py [--json out.json]``
"""
from __future__ import annotations

import argparse
import json
import math
import statistics
import sys

import torch


def time_ms(fn, iters: int, warmup: int = 3) -> float:
    """Median milliseconds of ``fn()`` over ``iters`` back-to-back calls, each bracketed by CUDA
    events (no synchronization between calls, so host overhead shorter than the GPU work is
    hidden, as in a real program)."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
    for a, b in zip(starts, ends):
        a.record()
        fn()
        b.record()
    torch.cuda.synchronize()
    return statistics.median(a.elapsed_time(b) for a, b in zip(starts, ends))


def graph_us(fn, reps: int = 20, iters: int = 10) -> float:
    """Median device microseconds of one ``fn()``: a CUDA graph of ``reps`` back-to-back calls,
    replayed ``iters`` times (no host time: what a kernel costs inside a captured model)."""
    fn()
    torch.cuda.synchronize()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        fn()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(reps):
            fn()
    for _ in range(3):
        g.replay()
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        g.replay()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) * 1e3 / reps)
    return statistics.median(times)


def copy_bandwidth(nbytes: int, iters: int) -> float:
    """Device-to-device copy bandwidth in GB/s, counting bytes read plus bytes written."""
    x = torch.empty(nbytes // 2, dtype=torch.bfloat16, device="cuda").normal_()
    y = torch.empty_like(x)
    ms = time_ms(lambda: y.copy_(x), iters)
    return 2 * nbytes / ms / 1e6


def cases(dtype: torch.dtype, mib: int):
    n_elem = mib * 2**20 // dtype.itemsize
    rows, cols = n_elem // 4096, 4096

    def chain(x, y):
        return torch.nn.functional.gelu(x * y + 1.0) * 0.5

    def chain_bias(x, b):
        return torch.relu(x + b).to(torch.float32).sigmoid().to(x.dtype)

    def row_sum(x):
        return x.float().sum(-1)

    def softmax(x):
        return torch.softmax(x, dim=-1)

    def layer_norm(x, w, b):
        return torch.nn.functional.layer_norm(x, (x.shape[-1],), w, b)

    g = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(n_elem, device="cuda", dtype=dtype, generator=g)
    y = torch.randn(n_elem, device="cuda", dtype=dtype, generator=g)
    x2 = x.view(rows, cols)
    bias = torch.randn(cols, device="cuda", dtype=dtype, generator=g)
    w = torch.randn(cols, device="cuda", dtype=dtype, generator=g)
    es = dtype.itemsize
    yield "pointwise gelu(x*y+1)*0.5", chain, (x, y), 3 * n_elem * es
    yield "pointwise bias+relu+sigmoid", chain_bias, (x2, bias), 2 * n_elem * es + cols * es
    yield "row sum (fp32 out)", row_sum, (x2,), n_elem * es + rows * 4
    yield "softmax rows", softmax, (x2,), 2 * n_elem * es
    yield "layer_norm rows", layer_norm, (x2, w, bias), 2 * n_elem * es + 2 * cols * es


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--mib", type=int, default=256, help="MiB per input tensor")
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--dtype", default="bfloat16")
    p.add_argument("--json", default=None, help="write the results here")
    p.add_argument("--rows-loop", action="store_true",
                   help="persistent reductions loop over row blocks in fewer programs (a scheduler variant)")
    args = p.parse_args(argv)
    if not torch.cuda.is_available():
        print("smoke benchmark needs a CUDA device")
        return 1
    import torchfuse
    from torchfuse.schedulers import reduction

    reduction.ROWS_LOOP = args.rows_loop
    dtype = getattr(torch, args.dtype)
    copy_gbs = copy_bandwidth(args.mib * 2**20 * 4, args.iters)
    print(f"device: {torch.cuda.get_device_name()}  torch {torch.__version__}  device copy: {copy_gbs:.0f} GB/s")
    rows = []
    for name, fn, inputs, nbytes in cases(dtype, args.mib):
        results = {}
        ref = fn(*inputs)
        for backend, compiled in [("eager", fn), ("inductor", torch.compile(fn)),
                                  ("torchfuse", torchfuse.compile(fn))]:
            try:
                out = compiled(*inputs)
                torch.testing.assert_close(out, ref, atol=2e-2, rtol=2e-2)
                results[backend] = time_ms(lambda: compiled(*inputs), args.iters)
            except Exception as e:  # recorded, the run goes on
                results[backend] = f"failed: {type(e).__name__}: {str(e)[:200]}"
        tf = results["torchfuse"]
        gbs = nbytes / tf / 1e6 if isinstance(tf, float) else math.nan
        rows.append({"case": name, "bytes": nbytes, **{f"{k}_ms": v for k, v in results.items()},
                     "torchfuse_GBps": gbs, "fraction_of_copy": gbs / copy_gbs})
    print(f"{'case':32s} {'MiB':>7s} {'eager ms':>9s} {'inductor':>9s} {'torchfuse':>9s} {'GB/s':>7s} {'copy%':>6s} "
          f"{'vs eager':>8s} {'vs ind.':>8s}")
    for r in rows:
        e, i, t = r["eager_ms"], r["inductor_ms"], r["torchfuse_ms"]
        f = lambda v: f"{v:9.3f}" if isinstance(v, float) else "   failed"
        ratio = lambda a, b: f"{a / b:8.2f}" if isinstance(a, float) and isinstance(b, float) else "       -"
        print(f"{r['case']:32s} {r['bytes'] / 2**20:7.0f} {f(e)} {f(i)} {f(t)} {r['torchfuse_GBps']:7.0f} "
              f"{100 * r['fraction_of_copy']:5.0f}% {ratio(e, t)} {ratio(i, t)}")
        for k in ("eager_ms", "inductor_ms", "torchfuse_ms"):
            if isinstance(r[k], str):
                print(f"    {k}: {r[k]}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                       "copy_GBps": copy_gbs, "dtype": args.dtype, "rows": rows}, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
