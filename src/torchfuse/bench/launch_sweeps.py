"""``torchfuse bench sweep-launch large|small|split``: one fusion group's kernel under other
launch configurations, to set the schedulers' heuristics from measurements (CUDA only).

Each case is compiled once by torchfuse; its single fusion group's kernel is then launched
directly under every candidate configuration. Rows: the heuristic's own choice as variant
``""`` (end to end, through the compiled function), each candidate as variant
``"X<XBLOCK> R<RBLOCK> w<warps>"`` (``extra``: the configuration).

* ``large``: pointwise, row and column reductions over 256 MiB-scale bf16 tensors; median ms
  of back-to-back launches (CUDA events), bandwidth against a device copy of the same run.
* ``small``: the pointwise kernels and squeeze-excitation means of batch-1 inference (50K to
  400K fp16 elements, channels-last), whose cost is latency; device microseconds per launch
  from a CUDA graph of ``--launches`` launches (no host time), eager and Inductor timed the same
  way; pointwise kernels also with sizes compiled in (``tl.constexpr``; variant kind
  ``constexpr``). ``tests/test_schedulers.py`` checks the heuristics against the committed
  rows of this sweep (:func:`small_sweep_cases`).
* ``split``: split column reductions (``x.sum(0).float()``: bias gradients, BatchNorm
  statistics) under every candidate of the partial stage (columns per program, rows per step,
  warps, programs per multiprocessor) and its combine, each in a CUDA graph of 20 calls.
"""
from __future__ import annotations

import argparse
import hashlib
import itertools
import re
import sys
import tempfile
import time

import torch

from ..runtime.compile import triton_options
from . import timing
from .errors import describe
from .rows import Row, add_row_arguments, provenance, save_rows


def single_group(fn, inputs):
    """Compile ``fn`` with torchfuse and call it once on ``inputs``.

    Returns:
        ``(compiled, plan, tensors)``: the compiled function, the launch plan of its only
        fusion group and the tensors that group read (the kernel's leading arguments), or
        ``(compiled, None, None)`` when the graph has no fusion group or more than one.
    """
    import torchfuse
    import torchfuse.backend as backend
    from torchfuse.runtime.executor import GroupRunner

    backend.RECENT.clear()
    compiled = torchfuse.compile(fn)
    seen = {}
    original = GroupRunner.__call__

    def spy(self, env, sym_key, sym_values):
        seen["ins"] = [env[s] for s in self.in_slots]
        return original(self, env, sym_key, sym_values)

    GroupRunner.__call__ = spy
    try:
        compiled(*inputs)
    finally:
        GroupRunner.__call__ = original
    runners = [s for s in backend.RECENT[-1].steps if isinstance(s, GroupRunner)]
    if len(runners) != 1:
        return compiled, None, None
    return compiled, next(iter(runners[0].plans.values())), seen["ins"]


def _cfg(xb: int, rb: int, w: int, kind: str = "") -> dict:
    return {"variant": f"{kind + ' ' if kind else ''}X{xb} R{rb} w{w}",
            "extra": {"kind": kind or "runtime", "XBLOCK": xb, "RBLOCK": rb, "warps": w}}


# -- large ----------------------------------------------------------------------------------------

def large_cases():
    bf, d = torch.bfloat16, "cuda"
    n = 2**27
    x, y = torch.randn(n, device=d, dtype=bf), torch.randn(n, device=d, dtype=bf)
    yield f"pointwise mul-add n={n}", lambda a, b: a * b + 1.0, (x, y), 3 * n * 2
    for rows, cols in ((16384, 4096), (8192, 8192), (32768, 1024), (65536, 768), (4096, 32768), (512, 262144)):
        x = torch.randn(rows, cols, device=d, dtype=bf)
        w = torch.randn(cols, device=d, dtype=bf)
        yield f"row sum {rows}x{cols}", lambda a: a.float().sum(-1), (x,), rows * cols * 2 + rows * 4
        yield f"softmax {rows}x{cols}", lambda a: torch.softmax(a, -1), (x,), 2 * rows * cols * 2
        yield (f"layernorm {rows}x{cols}", lambda a, w: torch.nn.functional.layer_norm(a, (a.shape[-1],), w, w),
               (x, w), 2 * rows * cols * 2)
    for rows, cols in ((65536, 768), (16384, 4096), (1048576, 64)):
        x = torch.randn(rows, cols, device=d, dtype=bf)
        yield f"col sum {rows}x{cols}", lambda a: a.float().sum(0), (x,), rows * cols * 2 + cols * 4


def large_candidates(config) -> list[tuple[int, int, int]]:
    """(XBLOCK, RBLOCK, warps) candidates around the heuristic's ``config``."""
    if config.scheduler == "pointwise":
        return [(xb, 1, w) for xb, w in itertools.product((512, 1024, 2048, 4096), (2, 4, 8))]
    rb = config.RBLOCK
    if config.scheduler == "reduction.persistent":
        if config.XBLOCK >= 16 and rb <= 64:  # outer
            return [(xb, rb, w) for xb in (16, 32, 64, 128) for w in (2, 4, 8)]
        return [(xb, rb, w) for xb in (1, 2, 4, 8) for w in (1, 2, 4, 8, 16, 32) if 1 <= xb * rb // (32 * w) <= 128]
    if config.XBLOCK > 1:  # outer loop
        return [(xb, r, w) for xb in (32, 64, 128) for r in (8, 16, 32, 64) for w in (2, 4, 8)]
    return [(1, r, w) for r in (1024, 2048, 4096, 8192) for w in (4, 8, 16)]


def run_large(args, prov, copy: float, deadline: float) -> list[Row]:
    rows = []
    for name, fn, inputs, nbytes in large_cases():
        if args.only and args.only not in name:
            continue
        if time.monotonic() > deadline:
            print(f"{name}: not run (time budget)")
            continue
        compiled, plan, tensors = single_group(fn, inputs)
        if plan is None:
            print(f"{name}: not one fusion group, skipped")
            continue
        c = plan.config
        ms = timing.median_ms(lambda: compiled(*inputs), args.iters)
        common = dict(mode="fwd", precision="bf16", backend="torchfuse")
        frac = lambda t: nbytes / (t * 1e-3) / 1e9 / copy  # noqa: E731
        heuristic = {"scheduler": c.scheduler, "bytes": nbytes, "copy_gbps": copy}
        if c.scheduler != "reduction.split":
            heuristic.update(XBLOCK=c.XBLOCK, RBLOCK=c.RBLOCK, warps=c.num_warps)
        rows.append(prov.row("sweep-launch", f"large/{name}", median_ms=ms, copy_fraction=frac(ms), extra=heuristic,
                             **common))
        print(f"\n{name}: heuristic {heuristic} -> {ms:.3f} ms end to end ({frac(ms):.0%} of copy)")
        if c.scheduler == "reduction.split":
            continue
        outs = [torch.empty_strided(s, st, dtype=dt, device=dev) for s, st, dt, dev in plan.out_specs]
        kernel_args = tensors + outs + plan.scalars
        measured = []
        for xb, rb, w in large_candidates(c):
            grid = (-(-plan.xnumel // xb),)
            cfg = _cfg(xb, rb, w)
            try:
                t = timing.median_ms(lambda: plan.kernel.launch(0, grid, kernel_args, xb, rb, w), args.iters)
            except Exception as e:  # noqa: BLE001 - some configurations do not compile (too many registers)
                rows.append(prov.row("sweep-launch", f"large/{name}", variant=cfg["variant"], status="failed",
                                     error=describe(e), extra=cfg["extra"], **common))
                continue
            measured.append((t, cfg["variant"]))
            rows.append(prov.row("sweep-launch", f"large/{name}", variant=cfg["variant"], median_ms=t,
                                 copy_fraction=frac(t), extra=cfg["extra"], **common))
        for t, variant in sorted(measured)[:5]:
            print(f"    {variant:24s} {t:.3f} ms  {frac(t):.0%}")
    return rows


# -- small ----------------------------------------------------------------------------------------

def small_cases():
    h, d, cl = torch.float16, "cuda", torch.channels_last

    def t(*shape):
        return torch.randn(*shape, device=d, dtype=h).to(memory_format=cl)

    def hardswish_bias(x, b):
        return torch.nn.functional.hardswish(x + b)

    def se_gate(x, s, b):
        return x * torch.nn.functional.hardsigmoid(s + b)

    def relu_bias(x, b):
        return torch.relu(x + b)

    def hardswish_mean(x, b):  # a squeeze-excitation block's input and its mean over H, W
        y = torch.nn.functional.hardswish(x + b)
        return y, y.mean((2, 3), keepdim=True)

    for n, c, hw in ((1, 16, 112), (1, 120, 28), (1, 480, 14), (1, 960, 7), (8, 480, 14)):
        yield f"hardswish(x+b) {n}x{c}x{hw}x{hw}", hardswish_bias, (t(n, c, hw, hw), t(1, c, 1, 1))
    for n, c, hw in ((1, 672, 14), (1, 960, 7), (8, 672, 14)):
        yield f"x*hardsigmoid(s+b) {n}x{c}x{hw}x{hw}", se_gate, (t(n, c, hw, hw), t(n, c, 1, 1), t(1, c, 1, 1))
    for n, c, hw in ((1, 256, 56), (1, 2048, 7)):
        yield f"relu(x+b) {n}x{c}x{hw}x{hw}", relu_bias, (t(n, c, hw, hw), t(1, c, 1, 1))
    for n, c, hw in ((1, 960, 7), (1, 672, 14), (1, 120, 28), (1, 72, 28), (8, 960, 7), (8, 672, 14)):
        yield f"hardswish-mean {n}x{c}x{hw}x{hw}", hardswish_mean, (t(n, c, hw, hw), t(1, c, 1, 1))


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
    new = KernelSource(name=stage, text=text, key=hashlib.sha256(text.encode()).hexdigest(), params=src.params,
                       stages=(stage,))
    return load(new, SourceStore(tempfile.mkdtemp()), False).fns[0], scalars


def _graph_ms(fn, launches: int) -> tuple[float | None, str | None]:
    try:
        return timing.graph_us(fn, launches) / 1e3, None
    except Exception as e:  # noqa: BLE001 - a call that cannot be captured is recorded
        return None, describe(e)


def run_small(args, prov, deadline: float) -> list[Row]:
    rows = []
    for name, fn, inputs in small_cases():
        if args.only and args.only not in name:
            continue
        if time.monotonic() > deadline:
            print(f"{name}: not run (time budget)")
            continue
        case = f"small/{name}"
        common = dict(mode="fwd", precision="fp16", layout="channels-last")
        for backend, make in (("eager", lambda: fn), ("torch.compile", lambda: torch.compile(fn))):
            torch._dynamo.reset()
            f = make()
            ms, error = _graph_ms(lambda: f(*inputs), args.launches)
            rows.append(prov.row("sweep-launch", case, backend=backend, device_ms=ms, status="failed" if error else "ok",
                                 error=error, **common))
        torch._dynamo.reset()
        compiled, plan, ins = single_group(fn, inputs)
        if plan is None:
            print(f"{name}: not one fusion group, skipped")
            continue
        c = plan.config
        if c.scheduler == "pointwise":
            configs = [(xb, 1, w) for xb, w in itertools.product((128, 256, 512, 1024, 2048), (1, 2, 4, 8))
                       if xb >= 32 * w]
        elif c.scheduler == "reduction.persistent":
            configs = [(xb, c.RBLOCK, w) for xb, w in itertools.product((2, 4, 8, 16, 32, 64), (1, 2, 4, 8))
                       if 32 * w <= xb * c.RBLOCK <= 16384]
        else:
            print(f"{name}: scheduler {c.scheduler}, skipped")
            continue
        ms, error = _graph_ms(lambda: compiled(*inputs), args.launches)
        info = {"xnumel": plan.xnumel, "rnumel": plan.scalars[-1], "scheduler": c.scheduler,
                "XBLOCK": c.XBLOCK, "RBLOCK": c.RBLOCK, "warps": c.num_warps}
        rows.append(prov.row("sweep-launch", case, backend="torchfuse", device_ms=ms, status="failed" if error else "ok",
                             error=error, extra=info, **common))
        outs = [torch.empty_strided(s, st, dtype=dt, device=dev) for s, st, dt, dev in plan.out_specs]
        tensors = ins + outs
        kernel_args = tensors + list(plan.scalars)
        measured = []
        for xb, rb, w in configs:
            grid = (-(-plan.xnumel // xb),)
            t, _ = _graph_ms(lambda: plan.kernel.launch(0, grid, kernel_args, xb, rb, w), args.launches)
            measured.append((t, xb, rb, w, "runtime"))
        if c.scheduler == "pointwise":
            cfn, scalars = constexpr_variant(plan.kernel, len(tensors))
            kw = dict(zip(scalars, plan.scalars))
            best = sorted((m for m in measured if m[0] is not None))[:3]
            for _, xb, rb, w, _ in best + [(0, c.XBLOCK, 1, c.num_warps, "")]:
                grid = (-(-plan.xnumel // xb),)
                # the options of the runtime launches above (fp fusion on: launch's default)
                t, _ = _graph_ms(lambda: cfn[grid](*tensors, **kw, XBLOCK=xb, RBLOCK=1, num_warps=w,
                                                   **triton_options(True)), args.launches)
                measured.append((t, xb, rb, w, "constexpr"))
        for t, xb, rb, w, kind in measured:
            cfg = _cfg(xb, rb, w, kind)
            rows.append(prov.row("sweep-launch", case, backend="torchfuse", variant=cfg["variant"], device_ms=t,
                                 status="ok" if t is not None else "failed", extra=cfg["extra"], **common))
        print(f"\n{name}: {info}; torchfuse " + (f"{ms * 1e3:.2f} us" if ms is not None else f"not timed: {error}"))
        for t, xb, rb, w, kind in sorted(m for m in measured if m[0] is not None)[:8]:
            print(f"    {kind:9s} X{xb:<5d} R{rb:<5d} w{w:<2d} {t * 1e3:6.2f} us")
    return rows


def small_sweep_cases(rows: list[Row]) -> list[dict]:
    """The cases of a ``small`` sweep from its rows (one run's): ``case`` (name),
    ``xnumel``, ``rnumel``, ``scheduler``, ``heuristic`` ``[XBLOCK, RBLOCK, warps]`` and
    ``candidates`` ``[(kind, XBLOCK, RBLOCK, warps, device us), ...]``."""
    cases: dict[str, dict] = {}
    for r in rows:
        if r.suite != "sweep-launch" or not r.case.startswith("small/") or r.backend != "torchfuse":
            continue
        case = cases.setdefault(r.case, {"case": r.case.split("/", 1)[1], "candidates": []})
        e = r.extra
        if not r.variant:
            case.update(xnumel=e.get("xnumel"), rnumel=e.get("rnumel"), scheduler=e.get("scheduler"),
                        heuristic=[e.get("XBLOCK"), e.get("RBLOCK"), e.get("warps")])
        elif r.device_ms is not None:
            case["candidates"].append((e["kind"], e["XBLOCK"], e["RBLOCK"], e["warps"], r.device_ms * 1e3))
    return list(cases.values())


# -- split ----------------------------------------------------------------------------------------

SPLIT_SHAPES = ((8192, 768), (8192, 3072), (16384, 4096), (65536, 768), (1048576, 64))


def run_split(args, prov, copy: float, deadline: float) -> list[Row]:
    import torchfuse
    import torchfuse.backend as backend
    from torchfuse.runtime.executor import GroupRunner
    from torchfuse.schedulers import cdiv, next_power_of_2

    dtype = getattr(torch, args.dtype)
    sm = torch.cuda.get_device_properties(0).multi_processor_count
    rows = []
    for n_rows, cols in SPLIT_SHAPES:
        if time.monotonic() > deadline:
            print(f"{n_rows}x{cols}: not run (time budget)")
            continue
        case = f"split/col sum {n_rows}x{cols}"
        common = dict(mode="fwd", precision={torch.bfloat16: "bf16", torch.float16: "fp16"}.get(dtype, "fp32"))
        x = torch.randn(n_rows, cols, device="cuda", dtype=dtype)
        fn = lambda a: a.sum(0).float()  # noqa: E731
        nbytes = n_rows * cols * dtype.itemsize + cols * 4
        frac = lambda ms: nbytes / (ms * 1e-3) / 1e9 / copy  # noqa: E731
        for backend_name, make in (("eager", lambda: fn), ("torch.compile", lambda: torch.compile(fn, dynamic=False))):
            torch._dynamo.reset()
            f = make()
            ms = timing.graph_us(lambda: f(x)) / 1e3
            rows.append(prov.row("sweep-launch", case, backend=backend_name, device_ms=ms, copy_fraction=frac(ms),
                                 **common))
        torch._dynamo.reset()  # a new shape of the same function: no automatic dynamic shapes
        backend.RECENT.clear()
        compiled = torchfuse.compile(fn, dynamic=False)
        ms = timing.graph_us(lambda: compiled(x)) / 1e3
        runner = next(s for s in backend.RECENT[-1].steps if isinstance(s, GroupRunner))
        plan = next(iter(runner.plans.values()))
        c = plan.config
        stages = [(st.grid, st.XBLOCK, st.RBLOCK, st.num_warps) for st in c.stages]
        rows.append(prov.row("sweep-launch", case, backend="torchfuse", device_ms=ms, copy_fraction=frac(ms),
                             extra={"scheduler": c.scheduler, "split": getattr(c, "split", None), "stages": stages,
                                    "bytes": nbytes, "copy_gbps": copy}, **common))
        print(f"\n{case} {args.dtype}: torchfuse {ms * 1e3:.1f} us ({c.scheduler}, {stages})")
        if c.scheduler != "reduction.split":
            continue
        out = torch.empty(cols, device="cuda", dtype=torch.float32)
        base = list(plan.scalars[:-2])
        measured = []
        for xb, rb, w, per_sm in itertools.product((32, 64, 128, 256), (8, 16, 32, 64), (4, 8), (1, 2, 4, 8)):
            xp = cdiv(cols, xb)
            split = max(2, min(per_sm * sm // xp, cdiv(n_rows, rb), 1024))
            rchunk = cdiv(cdiv(n_rows, split), rb) * rb
            split = cdiv(n_rows, rchunk)
            sb = next_power_of_2(split)
            fx = max(1, min(next_power_of_2(cols), max(1, 2048 // sb)))
            fw = max(1, min(8, fx * sb // 256))
            ws = [torch.empty(split * cols, device="cuda", dtype=dt) for dt in runner.workspace_dtypes]
            kargs = [x, out] + ws + base + [split, rchunk]

            def run():
                plan.kernel.launch(0, (xp, split), kargs, xb, rb, w)
                plan.kernel.launch(1, (cdiv(cols, fx),), kargs, fx, sb, fw)

            variant = f"X{xb} R{rb} w{w} {per_sm}/SM"
            extra = {"XBLOCK": xb, "RBLOCK": rb, "warps": w, "per_sm": per_sm, "split": split}
            try:
                t = timing.graph_us(run) / 1e3
                torch.testing.assert_close(out, fn(x), rtol=2e-2, atol=1e-1)
            except Exception as e:  # noqa: BLE001 - a configuration that does not compile
                rows.append(prov.row("sweep-launch", case, backend="torchfuse", variant=variant, status="failed",
                                     error=describe(e), extra=extra, **common))
                continue
            measured.append((t, variant))
            rows.append(prov.row("sweep-launch", case, backend="torchfuse", variant=variant, device_ms=t,
                                 copy_fraction=frac(t), extra=extra, **common))
        for t, variant in sorted(measured)[:6]:
            print(f"    {variant:24s} {t * 1e3:7.1f} us  {frac(t):.0%} of copy")
    return rows


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    p = argparse.ArgumentParser(prog="torchfuse bench sweep-launch", description=__doc__.splitlines()[0])
    p.add_argument("cases", choices=("large", "small", "split"))
    p.add_argument("--only", default=None, help="a substring of the case names to run")
    p.add_argument("--iters", type=int, default=15, help="timed launches per candidate (large)")
    p.add_argument("--launches", type=int, default=20, help="launches per CUDA graph (small)")
    p.add_argument("--dtype", default="bfloat16", help="of the split cases")
    p.add_argument("--time-budget", type=float, default=540, help="seconds; cases left are not run")
    add_row_arguments(p)
    args = p.parse_args(argv)
    if not torch.cuda.is_available():
        print("torchfuse bench sweep-launch: needs a CUDA device (it launches compiled kernels directly)",
              file=sys.stderr)
        return 1
    prov = provenance(args.run_name, "cuda", argv, "sweep-launch")
    deadline = time.monotonic() + args.time_budget
    copy = timing.copy_bandwidth("cuda")
    print(f"{prov.device}: device copy {copy:.0f} GB/s")
    if args.cases == "large":
        rows = run_large(args, prov, copy, deadline)
    elif args.cases == "small":
        rows = run_small(args, prov, deadline)
    else:
        rows = run_split(args, prov, copy, deadline)
    save_rows(args, "cuda", rows)
    return 0
