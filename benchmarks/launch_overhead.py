"""Host cost per launched kernel, without CUDA graphs, next to ``torch.compile``'s.

The workload is a chain of 50 small pointwise ops, each separated from the next by an
operation no compiler fuses (``torch.cumsum`` over a 1-element dim: a real ATen kernel), so
that every backend launches 50 pointwise kernels plus the same 49 ATen calls. Tensors are tiny
(one 16x16 block), so the GPU work is negligible and the time per call is the host's. The
script reports, per backend, the wall time per call (CPU clock over many calls, synchronized
once at the end) and that time divided by the number of kernels the backend launched
(counted with the profiler), with eager PyTorch for reference.

Usage (on a GPU): ``PYTHONPATH=src python benchmarks/launch_overhead.py [--json out.json]``
"""
from __future__ import annotations

import argparse
import json
import sys
import time

import torch


def chain(x: torch.Tensor) -> torch.Tensor:
    for i in range(50):
        x = (x * 1.01 + 0.5).sin() if i % 2 else (x - 0.25).relu() * 0.9
        if i < 49:
            x = torch.cumsum(x.unsqueeze(-1), -1).squeeze(-1)
    return x


def kernels_per_call(fn, x) -> int:
    from torch.profiler import ProfilerActivity, profile

    fn(x)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn(x)
        torch.cuda.synchronize()
    return sum(1 for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA)


def host_us_per_call(fn, x, calls: int) -> float:
    for _ in range(20):
        fn(x)
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(calls):
        fn(x)
    torch.cuda.synchronize()
    return (time.perf_counter() - t) / calls * 1e6


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--calls", type=int, default=300)
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)
    if not torch.cuda.is_available():
        print("needs a CUDA device")
        return 1
    import torchfuse

    x = torch.randn(16, 16, device="cuda")
    backends = {"eager": chain, "torch.compile": torch.compile(chain), "torchfuse": torchfuse.compile(chain)}
    rows = []
    for name, fn in backends.items():
        torch.testing.assert_close(fn(x), chain(x), rtol=1e-4, atol=1e-4)
        n = kernels_per_call(fn, x)
        us = host_us_per_call(fn, x, args.calls)
        rows.append({"backend": name, "us_per_call": us, "kernels_per_call": n, "us_per_kernel": us / max(n, 1)})
    print(f"{'backend':14s} {'us/call':>9s} {'kernels':>8s} {'us/kernel':>10s}")
    for r in rows:
        print(f"{r['backend']:14s} {r['us_per_call']:9.1f} {r['kernels_per_call']:8d} {r['us_per_kernel']:10.2f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
