"""Where the host time of one compiled call goes (GPU): eager, Inductor, torchfuse through
TorchDynamo and AOTAutograd, torchfuse's compiled graph called directly, and one kernel
launch alone; then a cProfile of the torchfuse calls.

Usage (on a GPU): ``PYTHONPATH=src python benchmarks/host_profile.py``
"""
from __future__ import annotations

import cProfile
import pstats
import time

import torch

import torchfuse
from torchfuse import backend
from torchfuse.runtime.executor import GroupRunner


def per_call_us(fn, n: int = 3000) -> float:
    for _ in range(50):
        fn()
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(n):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - t) / n * 1e6


def main() -> None:
    x = torch.randn(64, 128, device="cuda")
    w = torch.randn(128, device="cuda")
    fn = lambda x, w: torch.softmax(x * w, -1)
    with torch.no_grad():
        ind = torch.compile(fn, dynamic=False)
        tf = torchfuse.compile(fn, dynamic=False)
        ind(x, w)
        tf(x, w)
        graph = backend.RECENT[-1]
        runner = next(s for s in graph.steps if isinstance(s, GroupRunner))
        plan = next(iter(runner.plans.values()))
        import triton

        from torchfuse.runtime import compile as rc

        print("fast-launch binaries cached:", len(plan.binaries), list(plan.binaries)[:2], "| enabled:",
              rc._FAST_LAUNCH, "| hooks set:", rc.launch_hooks_set(), triton.knobs.runtime.launch_enter_hook,
              triton.knobs.runtime.launch_exit_hook)
        k = plan.kernel.fns[0]
        compiled = k[plan.config.stages[0].grid](x, w, torch.empty_like(x), *plan.scalars,
                                                  XBLOCK=plan.config.stages[0].XBLOCK,
                                                  RBLOCK=plan.config.stages[0].RBLOCK)
        print("compiled kernel:", type(compiled), [a for a in ("run", "function", "packed_metadata")
                                                   if hasattr(compiled, a)])
        print(f"eager              {per_call_us(lambda: fn(x, w)):8.1f} us/call")
        print(f"inductor           {per_call_us(lambda: ind(x, w)):8.1f} us/call")
        print(f"torchfuse          {per_call_us(lambda: tf(x, w)):8.1f} us/call")
        print(f"compiled graph     {per_call_us(lambda: graph([x, w])):8.1f} us/call (no Dynamo/AOT)")
        out = torch.empty_like(x)
        c = plan.config
        st = c.stages[0]
        args = [x, w, out] + plan.scalars
        spec = tuple(t.data_ptr() & 15 == 0 for t in (x, w))
        launch = lambda: plan.kernel.launch(0, st.grid, args, st.XBLOCK, st.RBLOCK, st.num_warps, plan.binaries,
                                            spec, plan.device_index, False)
        print(f"kernel launch      {per_call_us(launch):8.1f} us/launch")
        print(f"empty_like         {per_call_us(lambda: torch.empty_like(x)):8.1f} us")
        print(f"raw stream         {per_call_us(lambda: torch._C._cuda_getCurrentRawStream(0)):8.1f} us")
        prof = cProfile.Profile()
        prof.enable()
        for _ in range(2000):
            tf(x, w)
        prof.disable()
        pstats.Stats(prof).sort_stats("tottime").print_stats(22)


if __name__ == "__main__":
    main()
