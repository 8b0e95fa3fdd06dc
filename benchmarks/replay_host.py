"""Per-call time of ResNet-50 inference (fp16, batch 1) under torchfuse's CUDA graphs, frozen
(with and without the fused convolution epilogues) and not, and under Inductor's
``reduce-overhead``: the time per call back to back (GPU-bound when the host keeps up), the host time to
enqueue one call, and a cProfile of the host side.

When the enqueue time approaches the per-call time, a slower or busier host makes the call
host-bound; the benchmark harness then sees a bimodal distribution (its min and median differ).

Usage (on a GPU): ``PYTHONPATH=src python benchmarks/replay_host.py [--model resnet50] [--channels-last]``
(``--channels-last``: model and input in channels-last, as the harness's ``--channels-last``).
"""
from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import time

import torch

from host_profile import per_call_us  # same directory: warm-up, then back-to-back calls


def main(argv=None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--model", default="resnet50")
    p.add_argument("--channels-last", action="store_true")
    args = p.parse_args(argv)
    import timm

    import torchfuse

    torch.manual_seed(0)
    fmt = torch.channels_last if args.channels_last else torch.contiguous_format
    model = timm.create_model(args.model).cuda().eval().half().to(memory_format=fmt)
    x = torch.randn(1, 3, 224, 224, device="cuda", dtype=torch.half).to(memory_format=fmt)
    variants = [("Inductor reduce-overhead", None), ("cudagraphs", {}), ("cudagraphs + freeze", {"freeze": True}),
                ("cudagraphs + freeze, no conv epilogues", {"freeze": True, "conv_epilogues": False})]
    for name, kw in variants:
        torch._dynamo.reset()
        if kw is None:
            f = torch.compile(model, mode="reduce-overhead")
        else:
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
