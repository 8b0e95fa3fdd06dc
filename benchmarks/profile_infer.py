"""Profile the inference of a TIMM model under eager, Inductor and torchfuse (frozen weights):
kernels per call, device time per call, and the kernels that take the most device time.

CUDA graphs are off here so that the profiler sees every kernel; with CUDA graphs on, the
replayed call runs the same kernels back to back, so kernel count and device time are what
separates the backends at small batch.

Usage (on a GPU): ``PYTHONPATH=src python benchmarks/profile_infer.py [--model mobilenetv3_large_100]
[--batch 1] [--channels-last] [--dtype fp16]``
"""
from __future__ import annotations

import argparse
import collections
import json

import torch


def _kernels(prof) -> list[tuple[str, float]]:
    """(kernel name, device microseconds) of every CUDA kernel the profiler saw."""
    out = []
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA and e.device_time_total > 0:
            out.append((e.name, e.device_time_total))
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--model", default="mobilenetv3_large_100")
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--channels-last", action="store_true")
    p.add_argument("--dtype", default="fp16", choices=["fp16", "bf16"])
    p.add_argument("--top", type=int, default=25)
    p.add_argument("--backends", default="eager,inductor,torchfuse-frozen")
    p.add_argument("--dump", help="write every backend's kernels in launch order (name, device us) to this JSON file")
    args = p.parse_args(argv)
    import timm
    from torch.profiler import ProfilerActivity, profile

    import torchfuse
    import torchfuse.backend as backend

    dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}[args.dtype]
    fmt = torch.channels_last if args.channels_last else torch.contiguous_format
    torch.manual_seed(0)
    model = timm.create_model(args.model, pretrained=False).cuda().eval().to(dtype).to(memory_format=fmt)
    size = model.default_cfg.get("input_size", (3, 224, 224))
    x = torch.randn(args.batch, *size, device="cuda", dtype=dtype).to(memory_format=fmt)
    with torch.no_grad():
        ref = model(x).float()
    makers = {
        "eager": lambda: model,
        "inductor": lambda: torch.compile(model),
        "torchfuse": lambda: torchfuse.compile(model),
        "torchfuse-frozen": lambda: torchfuse.compile(model, freeze=True),
    }
    dumped: dict[str, list[tuple[str, float]]] = {}
    for name in args.backends.split(","):
        torch._dynamo.reset()
        m = makers[name]()
        with torch.no_grad():
            for _ in range(3):
                out = m(x)
            torch.cuda.synchronize()
            err = (out.float() - ref).abs().max().item()
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                m(x)
                torch.cuda.synchronize()
        ks = _kernels(prof)
        dumped[name] = ks
        total = sum(t for _, t in ks)
        print(f"\n== {name}: {len(ks)} kernels, {total:.0f} us device time, max |out - eager| {err:.3g}")
        by = collections.defaultdict(lambda: [0, 0.0])
        for n, t in ks:
            key = n if len(n) < 90 else n[:87] + "..."
            by[key][0] += 1
            by[key][1] += t
        for n, (c, t) in sorted(by.items(), key=lambda kv: -kv[1][1])[:args.top]:
            print(f"  {t:8.1f} us  {c:4d}x  {t / c:6.1f} us  {n}")
        if name.startswith("torchfuse"):
            for g in backend.RECENT[-3:]:
                seg = g.segmentation
                print(f"   graph {g.name}: {len(seg.groups)} groups, {len(seg.calls)} calls, "
                      f"fallbacks {g.stats['fallbacks']}")
    if args.dump:
        with open(args.dump, "w") as f:
            json.dump(dumped, f, indent=0)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
