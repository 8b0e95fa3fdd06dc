"""Normalization, softmax and loss kernels, forward and backward, against a device copy.

Each case runs one op at one shape and dtype in eager PyTorch, ``torch.compile`` (Inductor)
and torchfuse, one after the other on the same inputs, and prints (and writes as JSON and
markdown) the median time, the fewest bytes the op must move, torchfuse's achieved GB/s and
its fraction of a device-to-device copy measured first in the same process.

Fewest bytes (``es`` = element size): forward reads the input once and writes the output once
(``2 * N * D * es``; cross-entropy reads the logits once and writes a scalar); backward reads
the output gradient and the input (or, for softmax, the saved output) and writes the input
gradient (``3 * N * D * es``; cross-entropy reads the logits and writes their gradient,
``2 * N * D * es``, since its output gradient is a scalar). Per-row statistics, weights and
their gradients (``O(N + D)``) are added; they are below 0.1% at these shapes. Forward cases
run under ``torch.no_grad()`` (inference graphs); backward cases time
``torch.autograd.grad`` of the compiled training graph with ``retain_graph=True``, so only the
backward kernels are timed.

Usage (on a GPU)::

    PYTHONPATH=src python benchmarks/norms.py --dtypes bfloat16,float32 --out DIR
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
import types

import torch
import torch.nn.functional as F

from smoke import copy_bandwidth, time_ms  # same directory: the shared CUDA-event timing

SHAPES = [(16384, 4096), (8192, 8192), (4096, 768 * 4), (32768, 1024)]
BN_SHAPE = (64, 256, 56, 56)


def device_ms(fn, iters: int = 10) -> tuple[float, float, dict[str, float]]:
    """(milliseconds of GPU work per call, device activities per call, microseconds per call of
    each kernel name): the durations of the kernels, copies and fills one call runs, from
    ``torch.profiler`` (host time excluded)."""
    from torch.autograd import DeviceType

    fn()
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(iters):
            fn()
        torch.cuda.synchronize()
    events = [e for e in prof.events() if e.device_type == DeviceType.CUDA]
    per_name: dict[str, float] = {}
    for e in events:
        us = getattr(e, "device_time", None) or e.cuda_time
        per_name[e.name[:80]] = per_name.get(e.name[:80], 0.0) + us / iters
    return sum(per_name.values()) / 1e3, len(events) / iters, {k: round(v, 1) for k, v in per_name.items()}


def _rms_norm(x, w):
    return F.rms_norm(x, (x.shape[-1],), w, eps=1e-6)


def _layer_norm(x, w, b):
    return F.layer_norm(x, (x.shape[-1],), w, b, eps=1e-5)


def _softmax(x):
    return torch.softmax(x, -1)


def _log_softmax(x):
    return torch.log_softmax(x, -1)


def _cross_entropy(x, t):
    return F.cross_entropy(x, t, ignore_index=-100, label_smoothing=0.1)


def _batch_norm(x, w, b, rm, rv):
    return F.batch_norm(x, rm, rv, w, b, training=True, momentum=0.1, eps=1e-5)


def cases(dtypes, ops, shapes=None, device="cuda"):
    """Yields ``(op, shape, dtype, fn, make_inputs, grad_inputs_idx, fwd_bytes, bwd_bytes)``
    for the row shapes ``shapes`` (default ``SHAPES``), inputs made on ``device``."""
    for dtype in dtypes:
        es = dtype.itemsize
        for n, d in shapes or SHAPES:
            nd = n * d
            small = 2 * d * es + 8 * n
            dev = device

            def rows(n=n, d=d, dtype=dtype):
                return torch.randn(n, d, device=dev, dtype=dtype)

            def vec(d=d, dtype=dtype):
                return torch.randn(d, device=dev, dtype=dtype)

            yield ("layer_norm", (n, d), dtype, _layer_norm, lambda r=rows, v=vec: [r(), v(), v()], [0, 1, 2],
                   2 * nd * es + small, 3 * nd * es + 2 * small)
            yield ("rms_norm", (n, d), dtype, _rms_norm, lambda r=rows, v=vec: [r(), v()], [0, 1],
                   2 * nd * es + small, 3 * nd * es + 2 * small)
            yield ("softmax", (n, d), dtype, _softmax, lambda r=rows: [r()], [0], 2 * nd * es, 3 * nd * es)
            yield ("log_softmax", (n, d), dtype, _log_softmax, lambda r=rows: [r()], [0], 2 * nd * es, 3 * nd * es)

            def ce_inputs(r=rows, n=n, d=d):
                t = torch.randint(0, d, (n,), device=dev)
                t[::7] = -100
                return [r(), t]

            yield ("cross_entropy", (n, d), dtype, _cross_entropy, ce_inputs, [0], nd * es + 8 * n, 2 * nd * es + 8 * n)
        c = BN_SHAPE[1]
        numel = math.prod(BN_SHAPE)

        def bn_inputs(dtype=dtype):
            x = torch.randn(BN_SHAPE, device=device, dtype=dtype).to(memory_format=torch.channels_last)
            return [x, torch.randn(c, device=device, dtype=dtype), torch.randn(c, device=device, dtype=dtype),
                    torch.zeros(c, device=device, dtype=dtype), torch.ones(c, device=device, dtype=dtype)]

        yield ("batch_norm_cl", BN_SHAPE, dtype, _batch_norm, bn_inputs, [0, 1, 2],
               2 * numel * es + 6 * c * es, 3 * numel * es + 6 * c * es)


def _schedulers() -> list[str]:
    """The launch configurations torchfuse chose in the graphs it compiled last."""
    from torchfuse import backend
    from torchfuse.runtime.executor import GroupRunner

    out = []
    for g in backend.RECENT:
        for step in g.steps:
            if isinstance(step, GroupRunner):
                for plan in step.plans.values():
                    if plan.kernel is not None:
                        st = plan.config.stages[0]
                        out.append(f"{g.name}:{plan.config.scheduler}(X{st.XBLOCK},R{st.RBLOCK},w{st.num_warps})")
    return sorted(set(out))


def parse_settings(parser: argparse.ArgumentParser, assignments: list[str]) -> dict:
    """``{(module, name): value}`` from ``MODULE.NAME=VALUE`` assignments (a module of
    ``torchfuse``, a Python literal); a module without the constant, or a value that is not a
    literal, ends the program through ``parser.error``."""
    import ast
    import importlib

    out = {}
    for assignment in assignments:
        target, _, value = assignment.partition("=")
        module, _, name = target.rpartition(".")
        if not module or not hasattr(importlib.import_module(f"torchfuse.{module}"), name):
            parser.error(f"{assignment}: torchfuse.{module} has no {name}")
        try:
            out[(module, name)] = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            parser.error(f"{assignment}: the value must be a Python literal (True, 3, 'x')")
    return out


class _Settings:
    """A context that sets torchfuse module constants (``{(module, name): value}``) and
    restores them on exit."""

    def __init__(self, settings: dict):
        self.settings = settings

    def __enter__(self):
        import importlib

        self.saved = []
        for (module, name), value in self.settings.items():
            mod = importlib.import_module(f"torchfuse.{module}")
            self.saved.append((mod, name, getattr(mod, name)))
            setattr(mod, name, value)

    def __exit__(self, *exc):
        for mod, name, value in reversed(self.saved):
            setattr(mod, name, value)


def run_case(case, iters: int, alt: dict | None = None):
    """One case in eager, Inductor and torchfuse (and, with ``alt`` settings
    ``{(module, name): value}``, torchfuse compiled and run with those as ``torchfuse_alt``)."""
    import torchfuse

    op, shape, dtype, fn, make_inputs, grad_idx, fwd_bytes, bwd_bytes = case
    torch.manual_seed(0)
    inputs = make_inputs()
    results = {"op": op, "shape": list(shape), "dtype": str(dtype).replace("torch.", "")}
    torch._dynamo.reset()
    from torchfuse import backend

    backend.RECENT.clear()
    compiled = {"eager": fn, "inductor": torch.compile(fn, dynamic=False),
                "torchfuse": torchfuse.compile(fn, dynamic=False)}
    if alt:
        # a copy with its own code object: TorchDynamo caches compiled frames per code object
        # and backend, so compiling ``fn`` itself again would reuse the first compilation
        code = fn.__code__.replace(co_name=fn.__code__.co_name + "_alt")
        copy = types.FunctionType(code, fn.__globals__, fn.__name__ + "_alt", fn.__defaults__, fn.__closure__)
        compiled["torchfuse_alt"] = torchfuse.compile(copy, dynamic=False)
    settings = lambda name: _Settings(alt if name == "torchfuse_alt" else {})
    # forward (inference)
    with torch.no_grad():
        ref = fn(*inputs)
        for name, f in compiled.items():
            try:
                with settings(name):
                    out = f(*inputs)
                    torch.testing.assert_close(out, ref, atol=3e-2, rtol=3e-2)
                    results[f"fwd_{name}_ms"] = time_ms(lambda: f(*inputs), iters)
                    (results[f"fwd_{name}_gpu_ms"], results[f"fwd_{name}_kernels"],
                     results[f"fwd_{name}_per_kernel_us"]) = device_ms(lambda: f(*inputs))
            except Exception as e:  # recorded, the run goes on
                results[f"fwd_{name}_ms"] = f"failed: {type(e).__name__}: {str(e)[:160]}"
    # backward (training graph; only the backward is timed)
    ref_grads = None
    for name, f in compiled.items():
        ctx = settings(name)
        ctx.__enter__()
        try:
            ins = [t.detach().clone().requires_grad_(i in grad_idx) for i, t in enumerate(inputs)]
            out = f(*ins)
            torch.manual_seed(1)  # the same output gradient for every backend
            dy = torch.ones_like(out) if out.dim() == 0 else torch.randn_like(out)
            dy = dy.to(out.dtype)
            wrt = [ins[i] for i in grad_idx]
            grads = torch.autograd.grad(out, wrt, dy, retain_graph=True)
            if ref_grads is None:
                ref_grads = grads
            else:
                torch.testing.assert_close(grads, ref_grads, atol=5e-2, rtol=5e-2)
            bwd = lambda: torch.autograd.grad(out, wrt, dy, retain_graph=True)
            results[f"bwd_{name}_ms"] = time_ms(bwd, iters)
            (results[f"bwd_{name}_gpu_ms"], results[f"bwd_{name}_kernels"],
             results[f"bwd_{name}_per_kernel_us"]) = device_ms(bwd)
            del out, grads
        except Exception as e:
            results[f"bwd_{name}_ms"] = f"failed: {type(e).__name__}: {str(e)[:160]}"
        finally:
            ctx.__exit__(None, None, None)
    results["fwd_bytes"], results["bwd_bytes"] = fwd_bytes, bwd_bytes
    results["torchfuse_schedule"] = _schedulers()
    return results


def table(rows, copy_gbs) -> str:
    """Markdown: per case and direction, call times (host included, back to back) of the three
    backends, then torchfuse's GPU time (kernels only), kernels per call, and the bandwidth
    that GPU time achieves for the case's fewest bytes; with ``--alt``, the alternative
    torchfuse's GPU time and fraction of copy."""
    head = ("| case | dir | MiB | eager ms | Inductor ms | torchfuse ms | vs eager | vs Inductor | "
            "GPU ms eager / Ind. / tf | kernels eager / Ind. / tf | tf GB/s (GPU) | of copy |\n"
            "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
    alt = any("fwd_torchfuse_alt_ms" in r for r in rows)
    if alt:
        head = head.replace(" | of copy |\n", " | of copy | alt GPU ms | alt of copy |\n").replace(
            "|---:|\n", "|---:|---:|---:|\n", 1)
    lines = []
    fmt = lambda v: f"{v:.3f}" if isinstance(v, float) else "failed"
    for r in rows:
        for d in ("fwd", "bwd"):
            e, i, t = (r[f"{d}_{b}_ms"] for b in ("eager", "inductor", "torchfuse"))
            ok = isinstance(t, float)
            ratio = lambda a: f"{a / t:.2f}x" if ok and isinstance(a, float) else "-"
            gpu = [r.get(f"{d}_{b}_gpu_ms") for b in ("eager", "inductor", "torchfuse")]
            ker = [r.get(f"{d}_{b}_kernels") for b in ("eager", "inductor", "torchfuse")]
            tg = gpu[2]
            gbs = r[f"{d}_bytes"] / tg / 1e6 if isinstance(tg, float) and tg > 0 else math.nan
            shape = "x".join(map(str, r["shape"]))
            lines.append(f"| {r['op']} {shape} {r['dtype']} | {d} | {r[f'{d}_bytes'] / 2**20:.0f} | {fmt(e)} | "
                         f"{fmt(i)} | {fmt(t)} | {ratio(e)} | {ratio(i)} | {' / '.join(fmt(g) for g in gpu)} | "
                         f"{' / '.join(f'{k:.0f}' if isinstance(k, float) else '-' for k in ker)} | "
                         f"{gbs:.0f} | {100 * gbs / copy_gbs:.0f}% |")
            if alt:
                ag = r.get(f"{d}_torchfuse_alt_gpu_ms")
                agbs = r[f"{d}_bytes"] / ag / 1e6 if isinstance(ag, float) and ag > 0 else math.nan
                lines[-1] += f" {fmt(ag)} | {100 * agbs / copy_gbs:.0f}% |"
    return head + "\n".join(lines) + "\n"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dtypes", default="bfloat16,float32")
    p.add_argument("--ops", default="layer_norm,rms_norm,softmax,log_softmax,cross_entropy,batch_norm_cl")
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--time-budget", type=float, default=540, help="seconds; cases left are skipped")
    p.add_argument("--out", default=None, help="directory for norms.json and norms.md")
    p.add_argument("--outer-tile", default=None, metavar="XxR",
                   help="outer-reduction tile of the reduction scheduler (a heuristic experiment), e.g. 32x64")
    p.add_argument("--shapes", default=None, metavar="NxD[,NxD]",
                   help="row shapes to run (default: SHAPES); others than SHAPES may be given")
    p.add_argument("--per-kernel", action="store_true", help="print each kernel's device time per call")
    p.add_argument("--set", action="append", default=[], metavar="MODULE.NAME=VALUE",
                   help="set a torchfuse module constant first (a heuristic experiment), e.g. "
                        "graph_passes.ONE_HOT_SUMS=True; VALUE is a Python literal")
    p.add_argument("--alt", action="append", default=[], metavar="MODULE.NAME=VALUE",
                   help="also run torchfuse compiled with these constants (column 'alt'), the same inputs "
                        "in the same process: a before/after of one change")
    args = p.parse_args(argv)
    _Settings(parse_settings(p, args.set)).__enter__()
    alt = parse_settings(p, args.alt)
    if not torch.cuda.is_available():
        print("the normalization benchmark needs a CUDA device")
        return 1
    if args.outer_tile:
        from torchfuse.schedulers import reduction

        reduction.OUTER_XBLOCK, reduction.OUTER_RBLOCK = (int(v) for v in args.outer_tile.split("x"))
    dtypes = [getattr(torch, d) for d in args.dtypes.split(",")]
    ops = set(args.ops.split(","))
    copy_gbs = copy_bandwidth(1024 * 2**20, args.iters)
    print(f"device: {torch.cuda.get_device_name()}  torch {torch.__version__}  device copy: {copy_gbs:.0f} GB/s",
          flush=True)
    t0, rows, skipped = time.time(), [], []
    shapes = {tuple(int(v) for v in s.split("x")) for s in args.shapes.split(",")} if args.shapes else None
    for case in cases(dtypes, ops, sorted(shapes) if shapes else None):
        if case[0] not in ops:
            continue
        if time.time() - t0 > args.time_budget:
            skipped.append(f"{case[0]} {case[1]} {case[2]}")
            continue
        r = run_case(case, args.iters, alt)
        rows.append(r)
        print(table([r], copy_gbs).splitlines()[-2], flush=True)
        print(table([r], copy_gbs).splitlines()[-1], "  ", " ".join(r["torchfuse_schedule"]), flush=True)
        if args.per_kernel:
            for key in ("fwd_torchfuse", "bwd_torchfuse", "bwd_inductor") + (("fwd_torchfuse_alt", "bwd_torchfuse_alt")
                                                                             if alt else ()):
                kernels = r.get(f"{key}_per_kernel_us") or {}
                print(f"   {key} us/call: " + "; ".join(f"{n} {us}" for n, us in sorted(kernels.items(),
                                                                                      key=lambda kv: -kv[1])))
        torch.cuda.empty_cache()
    md = (f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}, device copy {copy_gbs:.0f} GB/s\n\n"
          f"command: `PYTHONPATH=src python benchmarks/norms.py {' '.join(argv if argv is not None else sys.argv[1:])}`\n\n"
          + table(rows, copy_gbs) + ("\nnot run (time budget): " + ", ".join(skipped) + "\n" if skipped else ""))
    print(md)
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "norms.json"), "w") as fh:
            json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__, "copy_GBps": copy_gbs,
                       "rows": rows, "skipped": skipped}, fh, indent=1)
        with open(os.path.join(args.out, "norms.md"), "w") as fh:
            fh.write(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
