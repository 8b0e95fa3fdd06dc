"""``torchfuse bench host call|replay|launches|runtime``: where the host's time per call goes.

* ``call`` (CUDA): one small softmax graph's host time per call under eager, Inductor,
  torchfuse through TorchDynamo and AOTAutograd, torchfuse's compiled graph called directly,
  and one kernel launch alone; then a ``cProfile`` of the torchfuse calls.
* ``replay`` (CUDA): a TIMM model's inference (fp16, batch 1) under CUDA graphs: Inductor's
  ``reduce-overhead``, torchfuse's, torchfuse's frozen with and without the fused convolution
  epilogues (``conv_epilogues=False``): the time per call back to back (device-bound when the
  host keeps up), the host time to enqueue one call, and a ``cProfile`` of the host side. When
  the enqueue time approaches the per-call time, a slower or busier host makes the call
  host-bound (the harness then sees its min and median differ).
* ``launches`` (CUDA): a chain of 50 small pointwise ops separated by an op no compiler fuses
  (``cumsum`` over a 1-element dim), on one 16x16 block, so every backend launches about 50
  kernels plus the same 49 ATen calls and the time per call is the host's: microseconds per
  call and per launched kernel (counted with the profiler), eager for reference.
* ``runtime`` (any machine): the runtime's own Python time per fusion-group launch, with the
  compiled binary replaced by a stub that does nothing, through the general launch path and
  through the generated launch function (kernels compiled under Triton's interpreter).

Host times per call come from :func:`torchfuse.bench.timing.host_us_per_call` (wall clock,
synchronized once at each end).
"""
from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import sys
import time

import torch

from . import timing
from .rows import add_row_arguments, provenance, save_rows


def _cprofile(calls, n: int, top: int) -> str:
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(n):
        calls()
    prof.disable()
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    text = io.StringIO()
    pstats.Stats(prof, stream=text).sort_stats("tottime").print_stats(top)
    return "\n".join(line for line in text.getvalue().splitlines() if line.strip())


def host_call(args, prov) -> list:
    import torchfuse
    from torchfuse import backend
    from torchfuse.runtime.executor import GroupRunner

    x = torch.randn(64, 128, device="cuda")
    w = torch.randn(128, device="cuda")
    fn = lambda x, w: torch.softmax(x * w, -1)  # noqa: E731
    rows = []
    with torch.no_grad():
        ind = torch.compile(fn, dynamic=False)
        tf = torchfuse.compile(fn, dynamic=False)
        ind(x, w)
        tf(x, w)
        graph = backend.RECENT[-1]
        runner = next(s for s in graph.steps if isinstance(s, GroupRunner))
        plan = next(iter(runner.plans.values()))
        st = plan.config.stages[0]
        launch_args = [x, w, torch.empty_like(x)] + plan.scalars
        spec = tuple(t.data_ptr() & 15 == 0 for t in (x, w))
        calls = [("eager", "", lambda: fn(x, w)), ("torch.compile", "", lambda: ind(x, w)),
                 ("torchfuse", "", lambda: tf(x, w)),
                 ("torchfuse", "compiled graph called directly", lambda: graph([x, w])),
                 ("torchfuse", "one kernel launch", lambda: plan.kernel.launch(
                     0, st.grid, launch_args, st.XBLOCK, st.RBLOCK, st.num_warps, plan.binaries, spec,
                     plan.device_index, False)),
                 ("eager", "torch.empty_like", lambda: torch.empty_like(x))]
        for backend_name, variant, call in calls:
            us = timing.host_us_per_call(call, args.calls)
            print(f"{backend_name:14s} {variant:32s} {us:8.1f} us/call")
            rows.append(prov.row("host", "host/softmax(x*w)/64x128", mode="infer-fp32", precision="fp32",
                                 backend=backend_name, variant=variant, extra={"host_us_per_call": us}))
        print(_cprofile(lambda: tf(x, w), 2000, 22))
    return rows


def host_replay(args, prov) -> list:
    import timm

    import torchfuse

    from .variants import options_with

    torch.manual_seed(0)
    fmt = torch.channels_last if args.channels_last else torch.contiguous_format
    model = timm.create_model(args.model).cuda().eval().half().to(memory_format=fmt)
    x = torch.randn(1, 3, 224, 224, device="cuda", dtype=torch.half).to(memory_format=fmt)
    variants = [("torch.compile-reduce-overhead", "", None), ("torchfuse-reduce-overhead", "", []),
                ("torchfuse-reduce-overhead-frozen", "", []),
                ("torchfuse-reduce-overhead-frozen", "conv_epilogues=False", ["conv_epilogues=False"])]
    rows = []
    for backend_name, variant, overrides in variants:
        torch._dynamo.reset()
        if overrides is None:
            f = torch.compile(model, mode="reduce-overhead")
        else:
            f = torchfuse.compile(model, mode="reduce-overhead",
                                  options=options_with(overrides, freeze=backend_name.endswith("frozen")))
        with torch.no_grad():
            per_call = timing.host_us_per_call(lambda: f(x), 200, warmup=50) / 1e3
            t = time.perf_counter()
            for _ in range(50):
                f(x)
            enqueue = (time.perf_counter() - t) / 50 * 1e3
            torch.cuda.synchronize()
            profile_text = _cprofile(lambda: f(x), 100, 14)
        print(f"== {backend_name} {variant}: {per_call:.3f} ms/call, enqueue {enqueue:.3f} ms/call\n{profile_text}")
        rows.append(prov.row("host", f"host/replay/{args.model}/1", mode="infer-fp16", precision="fp16",
                             layout="channels-last" if args.channels_last else "", backend=backend_name,
                             variant=variant, extra={"per_call_ms": per_call, "enqueue_ms": enqueue,
                                                     **({"overrides": overrides} if overrides else {})}))
    return rows


def chain(x: torch.Tensor) -> torch.Tensor:
    for i in range(50):
        x = (x * 1.01 + 0.5).sin() if i % 2 else (x - 0.25).relu() * 0.9
        if i < 49:
            x = torch.cumsum(x.unsqueeze(-1), -1).squeeze(-1)
    return x


def _kernels_per_call(fn, x) -> int:
    from torch.profiler import ProfilerActivity, profile

    fn(x)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn(x)
        torch.cuda.synchronize()
    return sum(1 for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA)


def host_launches(args, prov) -> list:
    import torchfuse

    x = torch.randn(16, 16, device="cuda")
    rows = []
    for name, fn in (("eager", chain), ("torch.compile", torch.compile(chain)), ("torchfuse", torchfuse.compile(chain))):
        torch.testing.assert_close(fn(x), chain(x), rtol=1e-4, atol=1e-4)
        n = _kernels_per_call(fn, x)
        us = timing.host_us_per_call(lambda: fn(x), args.calls)
        print(f"{name:14s} {us:9.1f} us/call {n:8d} kernels {us / max(n, 1):10.2f} us/kernel")
        rows.append(prov.row("host", "host/launch-chain/50", mode="infer-fp32", precision="fp32", backend=name,
                             kernels=n, extra={"host_us_per_call": us, "host_us_per_kernel": us / max(n, 1)}))
    return rows


def _two_outputs(x, y, z):
    return (x * y + z).relu(), (x - z).sum(1)


def host_runtime(args, prov) -> list:
    """The ``runtime`` part: see the module docstring."""
    import torchfuse
    import torchfuse.runtime.executor as ex
    from torchfuse import backend

    inputs = [torch.randn(64, 32) for _ in range(3)]
    torchfuse.compile(_two_outputs, interpret=True, dynamic=False)(*inputs)
    g = backend.RECENT[-1]
    runner = next(r for r in g.runners if isinstance(r, ex.GroupRunner))
    plan = runner.plans[()]
    plan.device_index = -1  # no device: stream 0, which the stub ignores
    stub = lambda *a: None  # noqa: E731
    direct = [(stub, None, None, 1, 1, st.XBLOCK, st.RBLOCK) for st in plan.config.stages]
    env = [None] * g.n_slots
    env[: g.n_inputs] = inputs
    spec = tuple(env[runner.in_slots[i]].data_ptr() & 15 == 0 for i in runner.checked)
    plan.direct = {spec: direct}
    fast = runner._fast_launcher(plan, spec, direct)
    rows = []
    for name in ("general", "generated"):
        runner.fast = {(): fast} if name == "generated" else {}
        runner(env, (), {})
        best = min(timing.host_us_per_call(lambda: runner(env, (), {}), args.calls, "cpu", warmup=1)
                   for _ in range(args.repeats))
        print(f"{name:10s} {best:6.2f} us per launch (best of {args.repeats} x {args.calls} calls; "
              f"{len(runner.in_slots)} inputs, {len(runner.out_slots)} outputs)")
        rows.append(prov.row("host", "host/runtime-launch/64x32", mode="infer-fp32", precision="fp32",
                             backend="torchfuse", variant=f"{name} launch path",
                             extra={"host_us_per_launch": best, "inputs": len(runner.in_slots),
                                    "outputs": len(runner.out_slots)}))
    return rows


PARTS = {"call": host_call, "replay": host_replay, "launches": host_launches, "runtime": host_runtime}


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    p = argparse.ArgumentParser(prog="torchfuse bench host", description=__doc__.splitlines()[0])
    p.add_argument("what", choices=tuple(PARTS))
    p.add_argument("--calls", type=int, default=None,
                   help="calls per measurement (default: call 3000, launches 300, runtime 20000)")
    p.add_argument("--repeats", type=int, default=3, help="runtime: best of this many measurements")
    p.add_argument("--model", default="resnet50", help="replay: a TIMM model")
    p.add_argument("--channels-last", action="store_true", help="replay: model and input in channels-last")
    add_row_arguments(p)
    args = p.parse_args(argv)
    args.calls = args.calls or {"call": 3000, "launches": 300, "runtime": 20000}.get(args.what, 0)
    device = "cpu" if args.what == "runtime" else "cuda"
    if device == "cuda" and not torch.cuda.is_available():
        print(f"torchfuse bench host {args.what}: needs a CUDA device", file=sys.stderr)
        return 1
    prov = provenance(args.run_name, device, argv, "host")
    rows = PARTS[args.what](args, prov)
    save_rows(args, device, rows)
    return 0
