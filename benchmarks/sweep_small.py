"""Launch-configuration sweep for small pointwise kernels, the ones batch-1 inference runs.

At batch 1 a convolutional network's pointwise kernels touch 50K to 400K elements: a few
hundred KiB, less than a microsecond of memory traffic on an H200. What they cost is latency,
so the launch configuration (elements per program, warps) and the index arithmetic decide
their time; the same holds for the squeeze-excitation means (an outer reduction over H*W of a
channels-last image). For each case the script compiles the function with torchfuse, takes its single
fusion group's kernel, and times it under every candidate configuration, and again with the
sizes and strides compiled in as constants (``tl.constexpr``) instead of runtime arguments.
Times are device microseconds per launch, from a CUDA graph of ``--launches`` back-to-back
launches (no host time). Eager and Inductor (``torch.compile``, default mode) are timed the
same way in the same process.

Usage (on a GPU): ``PYTHONPATH=src python benchmarks/sweep_small.py [--json out.json]``
"""
from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import re
import sys
import tempfile

import torch

sys.path.insert(0, "benchmarks")
from smoke import graph_us  # noqa: E402
from sweep import single_group  # noqa: E402


def cases():
    h, d, cl = torch.float16, "cuda", torch.channels_last

    def t(*shape):
        return torch.randn(*shape, device=d, dtype=h).to(memory_format=cl)

    def hardswish_bias(x, b):
        return torch.nn.functional.hardswish(x + b)

    def se_gate(x, s, b):
        return x * torch.nn.functional.hardsigmoid(s + b)

    def relu_bias(x, b):
        return torch.relu(x + b)

    for n, c, hw in ((1, 16, 112), (1, 120, 28), (1, 480, 14), (1, 960, 7), (8, 480, 14)):
        yield f"hardswish(x+b) {n}x{c}x{hw}x{hw}", hardswish_bias, (t(n, c, hw, hw), t(1, c, 1, 1))
    for n, c, hw in ((1, 672, 14), (1, 960, 7), (8, 672, 14)):
        yield f"x*hardsigmoid(s+b) {n}x{c}x{hw}x{hw}", se_gate, (t(n, c, hw, hw), t(n, c, 1, 1), t(1, c, 1, 1))
    for n, c, hw in ((1, 256, 56), (1, 2048, 7)):
        yield f"relu(x+b) {n}x{c}x{hw}x{hw}", relu_bias, (t(n, c, hw, hw), t(1, c, 1, 1))

    def hardswish_mean(x, b):  # a squeeze-excitation block's input and its mean over H, W
        y = torch.nn.functional.hardswish(x + b)
        return y, y.mean((2, 3), keepdim=True)

    for n, c, hw in ((1, 960, 7), (1, 672, 14), (1, 120, 28), (1, 72, 28), (8, 960, 7), (8, 672, 14)):
        yield f"hardswish-mean {n}x{c}x{hw}x{hw}", hardswish_mean, (t(n, c, hw, hw), t(1, c, 1, 1))


def _or_none(fn):
    """``fn()``, or ``None`` where it raises (printed): a call that cannot be captured."""
    try:
        return fn()
    except Exception as e:  # noqa: BLE001 - reported, the sweep goes on
        print(f"    (not timed: {type(e).__name__}: {str(e)[:120]})")
        return None


def _fmt(us):
    return "-" if us is None else f"{us:.2f} us"


def constexpr_variant(kernel, n_tensors: int):
    """``kernel`` recompiled with every non-pointer parameter a ``tl.constexpr``."""
    from torchfuse.codegen.triton import KernelSource
    from torchfuse.runtime.cache import SourceStore
    from torchfuse.runtime.compile import load

    src = kernel.source
    scalars = src.params[n_tensors:]
    text = src.text
    for stage in src.stages:
        m = re.search(rf"def {stage}\((.*?)\):", text)
        params = [p.strip() for p in m.group(1).split(",")]
        params = [f"{p}: tl.constexpr" if p in scalars else p for p in params]
        text = text.replace(m.group(0), f"def {stage}({', '.join(params)}):")
    text = text.replace(f"def {src.stages[0]}(", f"def {src.stages[0]}_c(")
    stage = src.stages[0] + "_c"
    new = KernelSource(name=stage, text=text, key=hashlib.sha256(text.encode()).hexdigest(),
                       params=src.params, stages=(stage,))
    return load(new, SourceStore(tempfile.mkdtemp()), False).fns[0], scalars


def main(argv=None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--launches", type=int, default=20)
    p.add_argument("--json", default=None)
    p.add_argument("--only", default=None, help="substring of the case names to run")
    args = p.parse_args(argv)
    results = []
    for name, fn, inputs in cases():
        if args.only and args.only not in name:
            continue
        eager_us = graph_us(lambda: fn(*inputs), args.launches)
        torch._dynamo.reset()
        ind = torch.compile(fn)
        ind(*inputs)
        inductor_us = _or_none(lambda: graph_us(lambda: ind(*inputs), args.launches))
        torch._dynamo.reset()
        compiled, plan, ins = single_group(fn, inputs)
        if plan is None:
            print(f"{name}: not one fusion group, skipped")
            continue
        c = plan.config
        default_us = _or_none(lambda: graph_us(lambda: compiled(*inputs), args.launches))
        outs = [torch.empty_strided(s, st, dtype=dt, device=dev) for s, st, dt, dev in plan.out_specs]
        tensors = ins + outs
        kernel_args = tensors + list(plan.scalars)
        ref = fn(*inputs)
        rows = []
        if c.scheduler == "pointwise":
            configs = [(xb, 1, w) for xb, w in itertools.product((128, 256, 512, 1024, 2048), (1, 2, 4, 8))
                       if xb >= 32 * w]
        elif c.scheduler == "reduction.persistent":
            rb = c.RBLOCK
            configs = [(xb, rb, w) for xb, w in itertools.product((2, 4, 8, 16, 32, 64), (1, 2, 4, 8))
                       if xb * rb >= 32 * w and xb * rb <= 16384]
        else:
            print(f"{name}: scheduler {c.scheduler}, skipped")
            continue
        for xb, rb, w in configs:
            grid = (-(-plan.xnumel // xb),)
            us = graph_us(lambda: plan.kernel.launch(0, grid, kernel_args, xb, rb, w), args.launches)
            rows.append(("runtime", xb, rb, w, us))
        if c.scheduler == "pointwise":
            best = sorted(rows, key=lambda r: r[-1])[:3]
            cfn, scalars = constexpr_variant(plan.kernel, len(tensors))
            kw = dict(zip(scalars, plan.scalars))
            for _, xb, rb, w, _ in best + [("", c.XBLOCK, 1, c.num_warps, 0)]:
                grid = (-(-plan.xnumel // xb),)
                us = graph_us(lambda: cfn[grid](*tensors, **kw, XBLOCK=xb, RBLOCK=1, num_warps=w), args.launches)
                rows.append(("constexpr", xb, rb, w, us))
        refs = ref if isinstance(ref, tuple) else (ref,)
        err = max(min((o.float() - r.float()).abs().max().item() for r in refs if r.shape == o.shape)
                  for o in outs)
        print(f"\n{name}: {plan.xnumel} kept x {plan.scalars[-1]} reduced; {c.scheduler}; eager {eager_us:.2f} us, Inductor {_fmt(inductor_us)}, "
              f"torchfuse X{c.XBLOCK} R{c.RBLOCK} w{c.num_warps} {_fmt(default_us)} "
              f"(max |err| of the last launch {err:.3g})")
        for kind, xb, rb, w, us in sorted(rows, key=lambda r: r[-1])[:8]:
            print(f"    {kind:9s} X{xb:<5d} R{rb:<5d} w{w:<2d} {us:6.2f} us")
        results.append({"case": name, "xnumel": plan.xnumel, "rnumel": plan.scalars[-1], "scheduler": c.scheduler,
                        "heuristic": [c.XBLOCK, c.RBLOCK, c.num_warps],
                        "eager_us": eager_us, "inductor_us": inductor_us, "torchfuse_us": default_us,
                        "candidates": rows})
        if args.json:  # after every case: a time limit must not lose the cases already run
            with open(args.json, "w") as f:
                json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
