"""Profile one training step of a HuggingFace model under torchfuse and eager: fallbacks,
kernels per step, and the kernels that take the most device time.

Usage (on a GPU): ``PYTHONPATH=src python benchmarks/profile_step.py [--model bert] [--batch 64] [--seq 128]``
(``--model timm:resnet50 --batch 128`` for an image classifier at 224 x 224).
"""
from __future__ import annotations

import argparse
import sys
import time

import torch


def main(argv=None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--model", default="bert", help="a HuggingFace model type, or timm:<name>")
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--top", type=int, default=18)
    p.add_argument("--backends", default="eager,torchfuse",
                   help="comma-separated: eager, torchfuse, inductor")
    p.add_argument("--host-top", type=int, default=0,
                   help="also list this many host-side events by self CPU time")
    args = p.parse_args(argv)
    import transformers
    import torchfuse
    import torchfuse.backend as backend

    torch.manual_seed(0)
    if args.model.startswith("timm:"):  # an image classifier, cross-entropy on random labels
        import timm

        model = timm.create_model(args.model[5:], pretrained=False).cuda().train()
        images = torch.randn(args.batch, 3, 224, 224, device="cuda")
        labels = torch.randint(0, 1000, (args.batch,), device="cuda")

        def loss_of(m):
            return torch.nn.functional.cross_entropy(m(images), labels)
    else:
        cfg = transformers.AutoConfig.for_model(args.model)
        model = transformers.AutoModelForMaskedLM.from_config(cfg).cuda() if args.model != "gpt2" else \
            transformers.GPT2LMHeadModel(cfg).cuda()
        ids = torch.randint(0, cfg.vocab_size, (args.batch, args.seq), device="cuda")

        def loss_of(m):
            return m(input_ids=ids, labels=ids).loss
    opt = torch.optim.AdamW(model.parameters(), fused=True)

    def step(m):
        with torch.autocast("cuda", torch.bfloat16):
            loss = loss_of(m)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    from torch.profiler import ProfilerActivity, profile
    makers = {"eager": lambda: model, "torchfuse": lambda: torchfuse.compile(model),
              "inductor": lambda: torch.compile(model)}
    for name in args.backends.split(","):
        m = makers[name]()
        for _ in range(3):
            step(m)
        torch.cuda.synchronize()
        t = time.perf_counter()
        for _ in range(5):
            step(m)
        torch.cuda.synchronize()
        wall = (time.perf_counter() - t) / 5 * 1e3
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            step(m)
            torch.cuda.synchronize()
        events = prof.key_averages()
        # kernels only: a CPU-side range (an ATen op, a compiled graph) reports the device time
        # of the kernels it launched too, and a ``record_function`` range (each fusion group's
        # launch is one, named after its kernel) also appears as a device-side annotation that
        # spans its kernels; either would count them twice
        kernels = [e for e in events if e.device_type == torch.autograd.DeviceType.CUDA
                   and not getattr(e, "is_user_annotation", False)]
        cuda_total = sum(e.self_device_time_total for e in kernels) / 1e3
        n = sum(e.count for e in kernels)
        print(f"\n== {name}: {wall:.1f} ms/step wall, device time {cuda_total:.1f} ms, {n} kernels")
        if name == "torchfuse":
            for g in backend.RECENT:
                print(f"   graph {g.name}: {len(g.segmentation.groups)} groups, {len(g.segmentation.calls)} calls, "
                      f"fallbacks {g.stats['fallbacks']}, cudagraph {g.stats.get('cudagraph')}")
        rows = sorted([e for e in kernels if e.self_device_time_total > 0], key=lambda e: -e.self_device_time_total)
        own = sum(e.self_device_time_total for e in kernels if e.key.startswith("tf_")) / 1e3
        print(f"   generated kernels (tf_*): {own:.2f} ms; the GPU is idle for {max(wall - cuda_total, 0):.1f} ms of the "
              "step's wall time (launch-bound when large)")
        for e in rows[: args.top]:
            print(f"   {e.self_device_time_total / 1e3:8.2f} ms {e.count:5d}x  {e.key[:110]}")
        if args.host_top:
            host = sum(e.self_cpu_time_total for e in events) / 1e3
            print(f"   host: {host:.1f} ms of self CPU time in the profiled step")
            for e in sorted(events, key=lambda e: -e.self_cpu_time_total)[: args.host_top]:
                print(f"   {e.self_cpu_time_total / 1e3:8.2f} ms host {e.count:5d}x  {e.key[:100]}")
            import cProfile
            import io
            import pstats
            prof_py = cProfile.Profile()
            prof_py.enable()
            for _ in range(3):
                step(m)
            torch.cuda.synchronize()
            prof_py.disable()
            buf = io.StringIO()
            pstats.Stats(prof_py, stream=buf).sort_stats("tottime").print_stats(args.host_top)
            print("   Python functions by own time over 3 steps:")
            print("\n".join("   " + line for line in buf.getvalue().splitlines()[-args.host_top - 3:]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
