"""``torchfuse bench norms``: normalization, softmax and loss kernels, forward and backward,
against a device copy.

Each case runs one op at one shape and dtype in eager PyTorch, ``torch.compile`` (Inductor)
and torchfuse, one after the other on the same inputs (and, with ``--alt`` or ``--sweep``,
torchfuse compiled with other tunables: :mod:`torchfuse.bench.variants`), checks each against
eager, and records per backend and direction a row (:mod:`torchfuse.bench.rows`) with the
median call time (CUDA events, host included, back to back), the device time of one call and
its kernels (``torch.profiler``), the fewest bytes the op must move, the bandwidth that device
time achieves and its fraction of a device copy measured first in the same process. Speedups
are ratios of device times on a GPU (of call times on a CPU).

Fewest bytes (``es`` = element size): forward reads the input once and writes the output once
(``2 * N * D * es``; cross-entropy reads the logits once and writes a scalar); backward reads
the output gradient and the input (or, for softmax, the saved output) and writes the input
gradient (``3 * N * D * es``; cross-entropy reads the logits and writes their gradient,
``2 * N * D * es``, since its output gradient is a scalar). Per-row statistics, weights and
their gradients (``O(N + D)``) are added; they are below 0.1% at these shapes. Forward cases
run under ``torch.no_grad()`` (inference graphs); backward cases time
``torch.autograd.grad`` of the compiled training graph with ``retain_graph=True``, so only the
backward kernels are timed.
"""
from __future__ import annotations

import argparse
import dataclasses
import math
import sys
import time
import types
from pathlib import Path
from typing import Callable

import torch
import torch.nn.functional as F

from . import timing
from .errors import describe
from .rows import Row, add_row_arguments, provenance, save_rows

SHAPES = [(16384, 4096), (8192, 8192), (4096, 768 * 4), (32768, 1024)]
BN_SHAPE = (64, 256, 56, 56)
QUICK_SHAPES = [(64, 128)]
QUICK_BN_SHAPE = (2, 8, 4, 4)
DEFAULT_OPS = ("layer_norm", "rms_norm", "softmax", "log_softmax", "cross_entropy", "batch_norm_cl")
OPS = DEFAULT_OPS + ("cross_entropy_plain",)
BACKENDS = ("eager", "torch.compile", "torchfuse")
PRECISION = {torch.bfloat16: "bf16", torch.float16: "fp16", torch.float32: "fp32"}


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


def _cross_entropy_plain(x, t):
    return F.cross_entropy(x, t, ignore_index=-100)


def _batch_norm(x, w, b, rm, rv):
    return F.batch_norm(x, rm, rv, w, b, training=True, momentum=0.1, eps=1e-5)


@dataclasses.dataclass(frozen=True)
class NormCase:
    """One op at one shape and dtype.

    Attributes:
        fn: the op, called on ``make_inputs()``.
        grad_index: the inputs the backward differentiates.
        fwd_bytes, bwd_bytes: the fewest bytes each direction moves (module docstring).
    """

    op: str
    shape: tuple[int, ...]
    dtype: torch.dtype
    fn: Callable
    make_inputs: Callable[[], list]
    grad_index: tuple[int, ...]
    fwd_bytes: int
    bwd_bytes: int

    @property
    def id(self) -> str:
        return f"norms/{self.op}/{'x'.join(map(str, self.shape))}"


def cases(dtypes, ops, shapes=None, device: str = "cuda", quick: bool = False) -> list[NormCase]:
    """The cases of ``ops`` at the row shapes ``shapes`` (default :data:`SHAPES`, or
    :data:`QUICK_SHAPES` with ``quick``) for each dtype, inputs made on ``device``; BatchNorm
    (channels-last) runs at :data:`BN_SHAPE`."""
    out = []
    for dtype in dtypes:
        es = dtype.itemsize
        for n, d in shapes or (QUICK_SHAPES if quick else SHAPES):
            nd, small = n * d, 2 * d * es + 8 * n

            def rows(n=n, d=d, dtype=dtype):
                return torch.randn(n, d, device=device, dtype=dtype)

            def vec(d=d, dtype=dtype):
                return torch.randn(d, device=device, dtype=dtype)

            def ce_inputs(r=rows, n=n, d=d):
                t = torch.randint(0, d, (n,), device=device)
                t[::7] = -100
                return [r(), t]

            table = {
                "layer_norm": (_layer_norm, lambda r=rows, v=vec: [r(), v(), v()], (0, 1, 2),
                               2 * nd * es + small, 3 * nd * es + 2 * small),
                "rms_norm": (_rms_norm, lambda r=rows, v=vec: [r(), v()], (0, 1), 2 * nd * es + small,
                             3 * nd * es + 2 * small),
                "softmax": (_softmax, lambda r=rows: [r()], (0,), 2 * nd * es, 3 * nd * es),
                "log_softmax": (_log_softmax, lambda r=rows: [r()], (0,), 2 * nd * es, 3 * nd * es),
                "cross_entropy": (_cross_entropy, ce_inputs, (0,), nd * es + 8 * n, 2 * nd * es + 8 * n),
                "cross_entropy_plain": (_cross_entropy_plain, ce_inputs, (0,), nd * es + 8 * n, 2 * nd * es + 8 * n),
            }
            out += [NormCase(op, (n, d), dtype, *table[op]) for op in ops if op in table]
        if "batch_norm_cl" in ops:
            shape = QUICK_BN_SHAPE if quick else BN_SHAPE
            c, numel = shape[1], math.prod(shape)

            def bn_inputs(dtype=dtype, shape=shape, c=c):
                x = torch.randn(shape, device=device, dtype=dtype).to(memory_format=torch.channels_last)
                return [x, torch.randn(c, device=device, dtype=dtype), torch.randn(c, device=device, dtype=dtype),
                        torch.zeros(c, device=device, dtype=dtype), torch.ones(c, device=device, dtype=dtype)]

            out.append(NormCase("batch_norm_cl", shape, dtype, _batch_norm, bn_inputs, (0, 1, 2),
                                2 * numel * es + 6 * c * es, 3 * numel * es + 6 * c * es))
    return out


def launch_configurations() -> list[str]:
    """The launch configurations of the graphs torchfuse compiled last (``backend.RECENT``)."""
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


def registers() -> list[str]:
    """``kernel: registers a thread/spilled`` of the Triton kernels torchfuse compiled last, read
    from the compiled kernels Triton caches per device for each stage's JIT function; empty
    where that cache is not there (the interpreter)."""
    from torchfuse import backend
    from torchfuse.runtime.executor import GroupRunner

    out = []
    for g in backend.RECENT:
        for step in g.steps:
            for plan in (step.plans.values() if isinstance(step, GroupRunner) else ()):
                for fn in getattr(plan.kernel, "fns", ()) if plan.kernel is not None else ():
                    for cache in getattr(fn, "device_caches", {}).values():
                        for k in (cache[0].values() if isinstance(cache, tuple) and isinstance(cache[0], dict) else ()):
                            out.append(f"{getattr(k, 'name', '?')}: {getattr(k, 'n_regs', '?')}/"
                                       f"{getattr(k, 'n_spills', '?')}")
    return sorted(set(out))


def copy_function(fn: Callable, tag: str) -> Callable:
    """``fn`` with its own code object: TorchDynamo caches compiled frames per code object and
    backend, so compiling ``fn`` itself again with another variant would reuse the first
    compilation."""
    code = fn.__code__.replace(co_name=f"{fn.__code__.co_name}_{tag}")
    return types.FunctionType(code, fn.__globals__, code.co_name, fn.__defaults__, fn.__closure__)


@dataclasses.dataclass
class Entry:
    """One column of the table: a backend, or torchfuse under a variant's overrides."""

    backend: str
    variant: str = ""
    overrides: tuple[str, ...] = ()


def _compiled(entry: Entry, fn: Callable, base: list[str], device: str) -> Callable:
    import torchfuse

    from .variants import options_with

    if entry.backend == "eager":
        return fn
    if entry.backend == "torch.compile":
        return torch.compile(fn, dynamic=False)
    tag = "".join(ch if ch.isalnum() else "_" for ch in (entry.variant or "torchfuse"))
    # on a CPU the kernels run in Triton's interpreter (else nothing would be fused there)
    options = options_with(list(base) + list(entry.overrides), **({"interpret": True} if device == "cpu" else {}))
    return torchfuse.compile(copy_function(fn, tag), dynamic=False, options=options)


def _measure(f: Callable, iters: int, device: str) -> dict:
    figures = {"median_ms": timing.median_ms(f, iters, device, warmup=1 if device == "cpu" else 3)}
    if device == "cuda":
        figures["device_ms"], figures["kernels"], figures["per_kernel_us"] = timing.kernel_times(f)
    return figures


def run_case(case: NormCase, entries: list[Entry], base: list[str], iters: int, device: str,
             with_registers: bool = False) -> dict[tuple[str, str, str], dict]:
    """Every entry on ``case``, forward then backward, each checked against eager.

    Returns:
        ``(backend, variant, "fwd"|"bwd") -> figures``: ``median_ms``, and on a GPU
        ``device_ms``, ``kernels``, ``per_kernel_us``; torchfuse's ``schedule``; ``error``
        when it raised or its values differ from eager's.
    """
    from torchfuse import backend as tf_backend

    torch.manual_seed(0)
    inputs = case.make_inputs()
    torch._dynamo.reset()
    with torch.no_grad():
        ref = case.fn(*inputs)
    ref_ins = [t.detach().clone().requires_grad_(i in case.grad_index) for i, t in enumerate(inputs)]
    ref_out = case.fn(*ref_ins)
    torch.manual_seed(1)  # the same output gradient for every backend
    dy = (torch.ones_like(ref_out) if ref_out.dim() == 0 else torch.randn_like(ref_out)).to(ref_out.dtype)
    ref_grads = torch.autograd.grad(ref_out, [ref_ins[i] for i in case.grad_index], dy)
    del ref_out, ref_ins
    out: dict[tuple[str, str, str], dict] = {}
    for entry in entries:
        tf_backend.RECENT.clear()
        fwd = out.setdefault((entry.backend, entry.variant, "fwd"), {})
        bwd = out.setdefault((entry.backend, entry.variant, "bwd"), {})
        try:
            f = _compiled(entry, case.fn, base, device)
        except Exception as e:  # noqa: BLE001 - recorded, the run goes on
            fwd["error"] = bwd["error"] = describe(e)
            continue
        try:
            with torch.no_grad():
                torch.testing.assert_close(f(*inputs), ref, atol=3e-2, rtol=3e-2)
                fwd.update(_measure(lambda: f(*inputs), iters, device))
        except Exception as e:  # noqa: BLE001
            fwd["error"] = describe(e)
        try:
            ins = [t.detach().clone().requires_grad_(i in case.grad_index) for i, t in enumerate(inputs)]
            result = f(*ins)
            wrt = [ins[i] for i in case.grad_index]
            grads = torch.autograd.grad(result, wrt, dy, retain_graph=True)
            torch.testing.assert_close(grads, ref_grads, atol=5e-2, rtol=5e-2)
            bwd.update(_measure(lambda: torch.autograd.grad(result, wrt, dy, retain_graph=True), iters, device))
            del result, grads
        except Exception as e:  # noqa: BLE001
            bwd["error"] = describe(e)
        if entry.backend == "torchfuse":
            fwd["schedule"] = bwd["schedule"] = launch_configurations()
            if with_registers:
                fwd["registers"] = bwd["registers"] = registers()
    return out


def case_rows(case: NormCase, figures: dict, entries: list[Entry], copy_gbps: float | None, prov) -> list[Row]:
    """The rows of one measured case (:func:`run_case`'s ``figures``)."""
    rows = []
    for direction, nbytes in (("fwd", case.fwd_bytes), ("bwd", case.bwd_bytes)):
        def time_of(backend: str, variant: str = "") -> float | None:
            f = figures.get((backend, variant, direction), {})
            return f.get("device_ms", f.get("median_ms"))

        for entry in entries:
            f = figures.get((entry.backend, entry.variant, direction), {})
            t = time_of(entry.backend, entry.variant)
            eager, inductor = time_of("eager"), time_of("torch.compile")
            gbps = nbytes / (f["device_ms"] * 1e-3) / 1e9 if f.get("device_ms") else None
            extra = {"bytes": nbytes, "copy_gbps": copy_gbps}
            extra.update({k: f[k] for k in ("per_kernel_us", "schedule", "registers") if k in f})
            if entry.overrides:
                extra["overrides"] = list(entry.overrides)
            rows.append(prov.row(
                "norms", case.id, mode=direction, precision=PRECISION.get(case.dtype, str(case.dtype)),
                backend=entry.backend, variant=entry.variant, status="failed" if "error" in f else "ok",
                error=f.get("error"), median_ms=f.get("median_ms"), device_ms=f.get("device_ms"),
                kernels=f.get("kernels"), bandwidth_gbps=gbps,
                copy_fraction=gbps / copy_gbps if gbps and copy_gbps else None,
                speedup_vs_eager=eager / t if eager and t and "error" not in f else None,
                speedup_vs_torch_compile=inductor / t if inductor and t and "error" not in f else None, extra=extra))
    return rows


def markdown_table(rows: list[Row]) -> str:
    """The norm table of ``rows`` (one run's): per case and direction, the device (or, on a
    CPU, call) time of each backend, torchfuse's speedups and fraction of copy, and each
    variant's time and fraction of copy."""
    def fmt(v, spec=".1f"):
        return "-" if v is None else f"{v:{spec}}"

    def pct(r):
        return "-" if r is None or r.copy_fraction is None else f"{100 * r.copy_fraction:.0f}%"

    on_gpu = any(r.device_ms is not None for r in rows)
    backends = [b for b in BACKENDS if any(r.backend == b and not r.variant for r in rows)]
    variants = list(dict.fromkeys(r.variant for r in rows if r.variant))
    unit = "GPU us" if on_gpu else "call us"
    head = ["case", "dir", "MiB", f"{unit} " + " / ".join(backends), "vs eager", "vs torch.compile", "of copy",
            "kernels"] + [f"{v}: {unit}, of copy" for v in variants]
    lines = ["| " + " | ".join(head) + " |", "|---|---|" + "---:|" * (len(head) - 2)]
    by = {(r.case, r.precision, r.mode, r.backend, r.variant): r for r in rows}
    for case, precision, mode in dict.fromkeys((r.case, r.precision, r.mode) for r in rows):
        get = lambda b, v="": by.get((case, precision, mode, b, v))  # noqa: E731
        us = lambda r: None if r is None or r.status != "ok" else (r.device_ms if on_gpu else r.median_ms) * 1e3  # noqa: E731
        tf = get("torchfuse") or next((get("torchfuse", v) for v in variants if get("torchfuse", v)), None)
        first = next(r for r in rows if (r.case, r.precision, r.mode) == (case, precision, mode))
        cells = [f"{case.split('/', 1)[1].replace('/', ' ')} {precision}", mode,
                 f"{first.extra.get('bytes', 0) / 2**20:.0f}", " / ".join(fmt(us(get(b))) for b in backends),
                 fmt(tf and tf.speedup_vs_eager, ".2f"), fmt(tf and tf.speedup_vs_torch_compile, ".2f"),
                 pct(tf),
                 " / ".join(fmt(get(b) and get(b).kernels, ".0f") for b in backends)]
        for v in variants:
            r = get("torchfuse", v)
            cells.append(f"{fmt(us(r))}, {pct(r)}")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="torchfuse bench norms", description=__doc__.splitlines()[0])
    p.add_argument("--dtypes", default="bfloat16,float32")
    p.add_argument("--ops", default=",".join(DEFAULT_OPS), help=f"comma-separated of {', '.join(OPS)}")
    p.add_argument("--shapes", default=None, metavar="NxD[,NxD]", help="row shapes (default: the table's four)")
    p.add_argument("--backends", default=None,
                   help=f"comma-separated of {', '.join(BACKENDS)} (default all; none with --sweep)")
    p.add_argument("--iters", type=int, default=None, help="timed calls per measurement (default 20; quick 2)")
    p.add_argument("--time-budget", type=float, default=540, help="seconds; cases left are listed as not run")
    p.add_argument("--quick", action="store_true", help="tiny shapes and few calls (a CPU check of the suite)")
    p.add_argument("--device", choices=("cuda", "cpu"), default=None, help="default: cuda when available")
    p.add_argument("--per-kernel", action="store_true", help="print each kernel's device time per call")
    p.add_argument("--registers", action="store_true", help="record registers and spills of torchfuse's kernels")
    p.add_argument("--set", action="append", default=[], metavar="OVERRIDE",
                   help="compile every torchfuse column with this override (torchfuse.bench.variants): an Options "
                        "field or a Tuning field, e.g. outer.xblock=32")
    p.add_argument("--alt", action="append", default=[], metavar="OVERRIDE",
                   help="also run torchfuse with these overrides as the variant 'alt', the same inputs in the same "
                        "process: a before/after of one change")
    p.add_argument("--sweep", default=None, help="a named variant sweep (torchfuse.bench.norm_sweeps.SWEEPS); it "
                                                 "sets the default ops, shapes and dtypes")
    p.add_argument("--out", type=Path, default=None, help="write the table as norms.md here")
    add_row_arguments(p)
    return p


def main(argv: list[str] | None = None) -> int:
    from .norm_sweeps import SWEEPS
    from .variants import parse_overrides

    argv = list(sys.argv[1:] if argv is None else argv)
    p = parser()
    args = p.parse_args(argv)
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    if device == "cuda" and not torch.cuda.is_available():
        p.error("--device cuda but no CUDA device is available")
    sweep = None
    if args.sweep:
        if args.sweep not in SWEEPS:
            p.error(f"unknown sweep {args.sweep!r}; known: {', '.join(SWEEPS)}")
        sweep = SWEEPS[args.sweep]
    try:
        parse_overrides(args.set + args.alt + [o for v in (sweep.variants.values() if sweep else ()) for o in v])
    except ValueError as e:
        p.error(str(e))
    default_backends = "" if sweep else ",".join(BACKENDS)
    backends = [b.strip() for b in (args.backends if args.backends is not None else default_backends).split(",")
                if b.strip()]
    if any(b not in BACKENDS for b in backends):
        p.error(f"--backends takes {', '.join(BACKENDS)}")
    entries = [Entry(b) for b in backends] + ([Entry("torchfuse", "alt", tuple(args.alt))] if args.alt else [])
    entries += [Entry("torchfuse", name, tuple(o)) for name, o in (sweep.variants.items() if sweep else ())]
    if not entries:
        p.error("nothing to run: no backend and no variant")
    ops = args.ops.split(",") if args.ops != ",".join(DEFAULT_OPS) or not sweep else list(sweep.ops)
    if set(ops) - set(OPS):
        p.error(f"unknown --ops {sorted(set(ops) - set(OPS))}; known: {', '.join(OPS)}")
    dtypes = args.dtypes if args.dtypes != "bfloat16,float32" or not sweep else ",".join(sweep.dtypes)
    try:
        shapes = [tuple(int(v) for v in s.split("x")) for s in args.shapes.split(",")] if args.shapes else (
            list(sweep.shapes) if sweep and not args.quick else None)
    except ValueError:
        p.error(f"--shapes takes NxD[,NxD], not {args.shapes!r}")
    iters = args.iters or (2 if args.quick else 20)
    copy_gbps = timing.copy_bandwidth(device)
    prov = provenance(args.run_name, device, argv, "norms")
    print(f"device: {prov.device}  torch {prov.torch}  device copy: {copy_gbps:.0f} GB/s", flush=True)
    t0, rows, not_run = time.monotonic(), [], []
    for case in cases([getattr(torch, d) for d in dtypes.split(",")], ops, shapes, device, args.quick):
        label = f"{case.id} {PRECISION.get(case.dtype)}"
        if time.monotonic() - t0 > args.time_budget:
            not_run.append(label)
            continue
        figures = run_case(case, entries, args.set, iters, device, args.registers)
        new = case_rows(case, figures, entries, copy_gbps, prov)
        rows += new
        print(markdown_table(new).splitlines()[-2], flush=True)
        print(markdown_table(new).splitlines()[-1], flush=True)
        if args.per_kernel:
            for r in new:
                if r.backend != "eager" and r.extra.get("per_kernel_us"):
                    kernels = sorted(r.extra["per_kernel_us"].items(), key=lambda kv: -kv[1])
                    print(f"   {r.mode} {r.backend} {r.variant} us/call: " + "; ".join(f"{n} {us}" for n, us in kernels))
        if device == "cuda":
            torch.cuda.empty_cache()
    table = (f"device: {prov.device}, torch {prov.torch}, device copy {copy_gbps:.0f} GB/s\n\n"
             f"command: `{prov.command}`\n\n" + markdown_table(rows)
             + ("\nnot run (time budget): " + ", ".join(not_run) + "\n" if not_run else ""))
    print("\n" + table)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "norms.md").write_text(table)
    save_rows(args, device, rows, args.quick)
    return 0
