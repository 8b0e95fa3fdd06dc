"""Per-call time of ResNet-50 inference (fp16, batch 1) under torchfuse's CUDA graphs, frozen
and not: the time per call back to back (GPU-bound when the host keeps up), the host time to
enqueue one call, and a cProfile of the host side.

When the enqueue time approaches the per-call time, a slower or busier host makes the call
host-bound; the benchmark harness then sees a bimodal distribution (its min and median differ).

Usage (on a GPU): ``PYTHONPATH=src python benchmarks/replay_host.py``
"""
from __future__ import annotations

import cProfile
import io
import pstats
import time

import torch

from host_profile import per_call_us  # same directory: warm-up, then back-to-back calls


def main() -> int:
    import timm

    import torchfuse

    torch.manual_seed(0)
    model = timm.create_model("resnet50").cuda().eval().half()
    x = torch.randn(1, 3, 224, 224, device="cuda", dtype=torch.half)
    for name, kw in [("cudagraphs", {}), ("cudagraphs + freeze", {"freeze": True})]:
        torch._dynamo.reset()
        f = torchfuse.compile(model, mode="reduce-overhead", **kw)
        with torch.no_grad():
            per_call = per_call_us(lambda: f(x), 200) / 1e3
            t = time.perf_counter()
            for _ in range(50):
                f(x)
            enqueue = (time.perf_counter() - t) / 50 * 1e3
            torch.cuda.synchronize()
            prof = cProfile.Profile()
            prof.enable()
            for _ in range(100):
                f(x)
            prof.disable()
            torch.cuda.synchronize()
        text = io.StringIO()
        pstats.Stats(prof, stream=text).sort_stats("tottime").print_stats(14)
        print(f"== {name}: {per_call:.3f} ms/call, enqueue {enqueue:.3f} ms/call")
        print("\n".join(line for line in text.getvalue().splitlines() if line.strip()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
