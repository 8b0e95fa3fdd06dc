"""Profile one training step of a HuggingFace model under torchfuse and eager: fallbacks,
kernels per step, and the kernels that take the most device time.

Usage (on a GPU): ``PYTHONPATH=src python benchmarks/profile_step.py [--model bert] [--batch 64] [--seq 128]``
"""
from __future__ import annotations

import argparse
import sys
import time

import torch


def main(argv=None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--model", default="bert")
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--top", type=int, default=18)
    args = p.parse_args(argv)
    import transformers
    import torchfuse
    import torchfuse.backend as backend

    torch.manual_seed(0)
    cfg = transformers.AutoConfig.for_model(args.model)
    model = transformers.AutoModelForMaskedLM.from_config(cfg).cuda() if args.model != "gpt2" else \
        transformers.GPT2LMHeadModel(cfg).cuda()
    ids = torch.randint(0, cfg.vocab_size, (args.batch, args.seq), device="cuda")
    opt = torch.optim.AdamW(model.parameters(), fused=True)

    def step(m):
        with torch.autocast("cuda", torch.bfloat16):
            loss = m(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    from torch.profiler import ProfilerActivity, profile
    for name, m in [("eager", model), ("torchfuse", torchfuse.compile(model))]:
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
        cuda_total = sum(e.self_device_time_total for e in events) / 1e3
        n = sum(e.count for e in events if e.device_type == torch.autograd.DeviceType.CUDA)
        print(f"\n== {name}: {wall:.1f} ms/step wall, device time {cuda_total:.1f} ms, {n} kernels")
        if name == "torchfuse":
            for g in backend.RECENT:
                print(f"   graph {g.name}: {len(g.segmentation.groups)} groups, {len(g.segmentation.calls)} calls, "
                      f"fallbacks {g.stats['fallbacks']}, cudagraph {g.stats.get('cudagraph')}")
        rows = sorted([e for e in events if e.self_device_time_total > 0], key=lambda e: -e.self_device_time_total)
        for e in rows[: args.top]:
            print(f"   {e.self_device_time_total / 1e3:8.2f} ms {e.count:5d}x  {e.key[:110]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
