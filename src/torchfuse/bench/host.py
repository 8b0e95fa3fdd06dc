"""``torchfuse bench host call|replay|launches|runtime|graph``: where the host's time per call goes.

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
* ``graph`` (any machine): the runtime's host time per training step for whole graphs: a tiny
  HuggingFace model (``--model gpt2`` or ``bert``, 2 layers, width 64, batch 2 x 16 tokens,
  bf16 autocast), its forward and backward graphs called directly with every kernel launch
  replaced by a stub (what remains is the runtime's Python, the ATen calls' dispatch and
  their small CPU work), each graph interpreted step by step and through its generated
  function (``Tuning`` ``runtime.graph_function``).

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


def _stub_direct(plan) -> list:
    """A plan's direct launches with every stage's binary replaced by a stub that does nothing
    (the plan then launches on no device: stream 0, which the stub ignores)."""
    from torchfuse.runtime.compile import TritonBinary

    plan.device_index = -1
    stub = lambda *a: None  # noqa: E731
    return [(TritonBinary(stub, None, None), 1, 1, st.XBLOCK, st.RBLOCK) for st in plan.config.stages]


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
    direct = _stub_direct(plan)
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


class _AnySpec(dict):
    """A plan's direct launches for every alignment specialization: the stub binaries."""

    def __init__(self, direct: list):
        super().__init__()
        self.direct = direct

    def get(self, spec, default=None):
        return self.direct


def _stub_launches(graph) -> int:
    """Replace every planned group's binaries by a stub that does nothing, with its generated
    launch function (the inputs assumed aligned); returns the number of groups stubbed. Each
    output is one zero-filled tensor returned on every call: the ATen calls then read valid
    indices (a kernel's labels, an index it computed) and no NaNs, and no allocation is timed."""
    from torchfuse.runtime.group import GroupRunner

    n = 0
    for runner in graph.runners:
        if not isinstance(runner, GroupRunner) or runner.failed is not None:
            continue
        for key, plan in runner.plans.items():
            plan.allocs = [(lambda sh, st, dt, t=alloc(sh, st, dt).zero_(): t, sh, st, dt)
                           for alloc, sh, st, dt in plan.allocs]
            direct = _stub_direct(plan) if plan.kernel is not None else []
            plan.device_index = -1
            plan.direct = _AnySpec(direct)
            if key == () and not runner.scalar_in:
                runner.fast[key] = runner._fast_launcher(plan, (True,) * len(runner.checked), direct)
            n += 1
    return n


def _train_step(model_name: str, graph_function: bool, autocast: bool):
    """A tiny HuggingFace model's training step (bf16 autocast, or fp32) under torchfuse with
    the interpreter; returns ``step()``."""
    import transformers

    import torchfuse
    from torchfuse.config import Options, Tuning

    torch.manual_seed(0)
    small = {"gpt2": dict(n_layer=2, n_embd=64, n_head=4, n_positions=64, vocab_size=512),
             "bert": dict(num_hidden_layers=2, hidden_size=64, num_attention_heads=4, intermediate_size=128,
                          max_position_embeddings=64, vocab_size=512)}[model_name]
    cfg = transformers.AutoConfig.for_model(model_name, **small)
    model = (transformers.GPT2LMHeadModel(cfg) if model_name == "gpt2"
             else transformers.AutoModelForMaskedLM.from_config(cfg))
    ids = torch.randint(0, cfg.vocab_size, (2, 16))
    tuning = Tuning().replace("runtime.graph_function", graph_function)
    compiled = torchfuse.compile(model, dynamic=False, options=Options(interpret=True, tuning=tuning))

    def step():
        with torch.autocast("cpu", torch.bfloat16, enabled=autocast):
            loss = compiled(input_ids=ids, labels=ids).loss
        loss.backward()

    return step


def graph_inputs(step, graphs: list) -> dict:
    """Run ``step()`` once and return ``{graph: its inputs}`` for those of ``graphs`` (compiled
    graphs that have run before) it called, so that each can be called again on its own."""
    from torchfuse.runtime.executor import CompiledGraph

    calls: dict = {}

    def recording(g, inputs, progress=None):
        calls[g] = list(inputs)
        return CompiledGraph._run(g, inputs, progress)

    for g in graphs:
        g._run = lambda inputs, progress=None, g=g: recording(g, inputs, progress)
    try:
        step()
    finally:
        for g in graphs:
            del g._run
    return calls


def graph_host_ms(step, graphs: list, calls: int = 10, repeats: int = 5, min_steps: int = 100) -> dict:
    """Host milliseconds per call of each compiled graph ``step()`` calls, called alone on
    the inputs of one step (without autograd): best of ``repeats`` x ``calls`` calls, the
    clock read before the device is synchronized, so that a GPU that keeps up does not count.
    Returns ``{"<graph name> <k>": ms}`` for graphs with at least ``min_steps`` steps (k: its
    position in ``graphs``; the small graphs around a graph break are left out)."""
    inputs = graph_inputs(step, graphs)
    out = {}
    with torch.no_grad():
        for k, g in enumerate(graphs):
            if g not in inputs or len(g.runners) < min_steps:
                continue
            best = []
            for _ in range(repeats):
                t0 = time.perf_counter()
                for _ in range(calls):
                    g(list(inputs[g]))
                best.append(1e3 * (time.perf_counter() - t0) / calls)
                if torch.cuda.is_available():
                    torch.cuda.synchronize()
            out[f"{g.name} {k}"] = min(best)
    return out


def host_graph(args, prov) -> list:
    """The ``graph`` part: see the module docstring."""
    from torchfuse import backend

    torch.set_num_threads(1)  # the ATen calls' small CPU work: no thread pool's wake-ups in the timings
    torch._dynamo.reset()
    backend.RECENT.clear()
    step = _train_step(args.model, True, args.precision == "bf16")
    step()  # compiles, plans, and runs the kernels under the interpreter
    graphs = list(backend.RECENT)
    calls = graph_inputs(step, graphs)  # graph -> its inputs of the last call
    for g in graphs:
        _stub_launches(g)
        g._drop_generated()  # generated again with the stubs' launch functions
    graphs = [g for g in graphs if g in calls]
    steps = sum(len(g.runners) for g in graphs)
    run_all = lambda: [g(list(calls[g])) for g in graphs]  # noqa: E731
    times: dict = {"interpreted": [], "generated": []}
    with torch.no_grad():
        for _ in range(args.repeats):  # the variants alternate, so that a busy moment hits both
            for variant in times:
                for g in graphs:  # the instance's copy of Tuning runtime.graph_function
                    g.graph_function = variant == "generated"
                times[variant].append(timing.host_us_per_call(run_all, args.calls, "cpu", warmup=2) / 1e3)
    state = "; ".join(f"{g.name}: {g.stats['graph_function']}" for g in graphs)
    print(f"{len(graphs)} graphs, {steps} steps ({state})")
    rows = []
    for variant, ms in times.items():
        print(f"{variant:12s} {min(ms):7.3f} ms per training step's graphs (best of {args.repeats} x {args.calls} "
              f"calls; all: {', '.join(f'{t:.3f}' for t in ms)})")
        mode = "train-amp-bf16" if args.precision == "bf16" else "train-fp32"
        rows.append(prov.row("host", f"host/graph/{args.model}-tiny/2x16", mode=mode, precision=args.precision,
                             backend="torchfuse", variant=f"{variant} graph",
                             extra={"host_ms_per_step": min(ms), "all_ms": ms, "graphs": len(graphs), "steps": steps}))
    return rows


PARTS = {"call": host_call, "replay": host_replay, "launches": host_launches, "runtime": host_runtime,
         "graph": host_graph}


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    p = argparse.ArgumentParser(prog="torchfuse bench host", description=__doc__.splitlines()[0])
    p.add_argument("what", choices=tuple(PARTS))
    p.add_argument("--calls", type=int, default=None,
                   help="calls per measurement (default: call 3000, launches 300, runtime 20000)")
    p.add_argument("--repeats", type=int, default=3, help="runtime: best of this many measurements")
    p.add_argument("--model", default=None, help="replay: a TIMM model (resnet50); graph: gpt2 or bert (gpt2)")
    p.add_argument("--precision", choices=("bf16", "fp32"), default="bf16",
                   help="graph: bf16 autocast (the ATen matrix products are slow on a CPU) or fp32")
    p.add_argument("--channels-last", action="store_true", help="replay: model and input in channels-last")
    add_row_arguments(p)
    args = p.parse_args(argv)
    args.calls = args.calls or {"call": 3000, "launches": 300, "runtime": 20000, "graph": 50}.get(args.what, 0)
    args.model = args.model or ("gpt2" if args.what == "graph" else "resnet50")
    device = "cpu" if args.what in ("runtime", "graph") else "cuda"
    if device == "cuda" and not torch.cuda.is_available():
        print(f"torchfuse bench host {args.what}: needs a CUDA device", file=sys.stderr)
        return 1
    prov = provenance(args.run_name, device, argv, "host")
    rows = PARTS[args.what](args, prov)
    save_rows(args, device, rows)
    return 0
