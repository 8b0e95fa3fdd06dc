"""Python time of one fusion group's launch, with the compiled binary replaced by a stub.

Compiles a small two-output group under Triton's interpreter (so it runs on any machine),
records the plan, then installs a stub as the group's "compiled binary" and times calls of
``GroupRunner`` through the general direct path and through the generated launch function
(``GroupRunner._fast_launcher``). The stub does nothing, so the times are the runtime's own
host work per launch (allocations included), without the driver's launch cost.

Usage: ``PYTHONPATH=src python benchmarks/host_launch.py [--calls 20000]``
"""
from __future__ import annotations

import argparse
import sys
import time

import torch


def _fn(x, y, z):
    return (x * y + z).relu(), (x - z).sum(1)


def main(argv=None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--calls", type=int, default=20000)
    p.add_argument("--repeats", type=int, default=3)
    args = p.parse_args(argv)
    import torchfuse
    import torchfuse.runtime.executor as ex
    from torchfuse import backend

    inputs = [torch.randn(64, 32) for _ in range(3)]
    torchfuse.compile(_fn, interpret=True, dynamic=False)(*inputs)
    g = backend.RECENT[-1]
    runner = next(r for r in g.runners if isinstance(r, ex.GroupRunner))
    plan = runner.plans[()]
    ex.raw_stream = lambda index: 0
    plan.device_index = 0
    stub = lambda *a: None
    direct = [(stub, None, None, 1, 1, st.XBLOCK, st.RBLOCK) for st in plan.config.stages]
    env = [None] * g.n_slots
    env[: g.n_inputs] = inputs
    spec = tuple(env[runner.in_slots[i]].data_ptr() & 15 == 0 for i in runner.checked)
    plan.direct = {spec: direct}
    fast = runner._fast_launcher(plan, spec, direct)
    for name in ("general", "generated"):
        runner.fast = {(): fast} if name == "generated" else {}
        runner(env, (), {})
        best = float("inf")
        for _ in range(args.repeats):
            t = time.perf_counter()
            for _ in range(args.calls):
                runner(env, (), {})
            best = min(best, (time.perf_counter() - t) / args.calls * 1e6)
        print(f"{name:10s} {best:6.2f} us per launch (best of {args.repeats} x {args.calls} calls; "
              f"{len(runner.in_slots)} inputs, {len(runner.out_slots)} outputs)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
