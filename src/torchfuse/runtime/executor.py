"""Running a segmented graph: ATen calls and generated kernels, with per-shape launch plans.

Takes a :class:`~torchfuse.segment.Segmentation`; returns a :class:`CompiledGraph`, the
callable AOTAutograd (or the user) invokes on every call.

Per call, the graph reads its size symbols from the inputs (a tuple of ints; empty for
static shapes). The first call with a new tuple builds a *launch plan* for every fusion group
(domain sizes, loop layout, launch configuration, kernel, argument list: everything that does
not depend on data pointers) and compiles the plan's kernels in parallel; later calls only
check that the input strides are the planned ones, allocate outputs and launch. A group whose
code cannot be generated or compiled runs its ops through ATen, with one warning.

The first call with a size tuple interprets the steps one by one (``_interpret``); from the
second on, the graph runs one generated straight-line function per size tuple
(:mod:`.graph_function`) that does the same steps without interpreting them.
"""
from __future__ import annotations

import functools
import logging
import time
from typing import Any

import torch

from ..config import Options
from ..ir.graph import Node, Value, as_int, map_values, values_in
from ..ir.ops import REGISTRY, Unsupported
from ..segment import BATCHED_CAST, BATCHED_CAST_LATE, FusionGroup, Segmentation
from .cache import SourceStore
from .calls import (VIEW_OPS, CastBatch, InputWriteBatch, ViewCall, _flat_output_slots,  # noqa: F401
                    _no_view, _nothing, _registry_runner, _step_reads, input_write_batch, merge_view_chains)
from .calls import call_runner as _call_runner
from .compile import compile_all
from .fallback import first_call, writes_input
from .graph_function import build_graph_function
from .group import GroupRunner
from .launch import draw_seeds
from .pad import pad_runner
from .pool import pool_runner
from .progress import CompileProgress
from .recompiles import compile_label, compiling_id

log = logging.getLogger("torchfuse.schedule")
recompile_log = logging.getLogger("torchfuse.recompile")


#: ``stats["graph_function"]`` of a graph not yet called twice with any set of sizes
NOT_GENERATED = ("not generated yet (each set of sizes gets one at its second call; until then the "
                 "graph runs step by step)")


class CompiledGraph:
    """The compiled form of one captured graph. Called with a list of inputs (boxed).

    Fall back, never fail, at run time: the first call is guarded (:mod:`.fallback`): when it
    raises before any step wrote to a graph input, it runs again as the traced graph through
    ATen, as every later call does, with a warning naming a reproducer.

    Attributes:
        segmentation: the groups and calls it runs.
        stats: counters (kernels compiled and cached, fallbacks, compile seconds).
        fx_graph: the ATen graph it was compiled from (``None`` when built without one).
        write_reproducer: failure message -> path of a reproducer script, or ``None``.
        traced: after a run-time failure on the first call, the boxed traced graph that runs
            every call since; else ``None``.
        generated: size tuple -> the generated function its calls run (``False``: none could
            be written, the steps are interpreted); ``generated_sources`` holds their text and
            ``stats["graph_function"]`` says which is used.
        program: the state shared by the graphs compiled from one TorchDynamo capture (the
            backend's ``CaptureState``; ``None`` outside a forward and backward pair), by which
            reports attribute a backward compiled at the first backward to its capture.
    """

    _boxed_call = True

    def __init__(self, seg: Segmentation, options: Options, name: str = "graph"):
        self._boxed_call = True  # in the instance dict, so that wrappers copying __dict__ keep it
        self.segmentation = seg
        self.options = options
        self.name = name
        self.program = None
        #: TorchDynamo's (frame, compile) id of the capture this graph was compiled for, named
        #: in the recompile log (None outside a TorchDynamo compile)
        self.compile_id = compiling_id()
        graph = seg.graph
        self.slots: dict[Value, int] = {}
        for v in graph.inputs:
            self.slots[v] = len(self.slots)
        for n in graph.nodes:
            for o in n.outputs:
                self.slots[o] = len(self.slots)
        self.n_inputs = len(graph.inputs)
        self.n_slots = len(self.slots)
        self.symbols = list(graph.symbols.items())
        self.store = SourceStore(options.cache_dir)
        #: counters and timings (seconds) of this graph; "events" lists plans made after the
        #: first (new sizes or layouts: the recompilations) with their reasons
        self.stats = {"kernels_compiled": 0, "kernels_cached": 0, "fallbacks": 0, "plan_seconds": 0.0,
                      "codegen_seconds": 0.0, "compile_seconds": 0.0, "events": []}
        self.steps: list = []
        self.runners: list = []  # per step: a callable (env, sym_key, sym_values) -> None
        # batched casts run all at once at the first (graph inputs) or last (returned values)
        # one's place; the others' places run nothing, so positions and liveness stay as they are
        # one CUDA device: every call makes it current (as Inductor's wrappers do), so that
        # kernels' outputs can be allocated with the current-device entry point
        cuda = {v.meta.device.index or 0 for n in graph.nodes for v in n.outputs
                if v.meta is not None and v.meta.device.type == "cuda"}
        self.cuda_index = cuda.pop() if len(cuda) == 1 and torch.cuda.is_available() else None
        guarded = self.cuda_index is not None
        batches = {}
        reads_at: dict[int, int] = {}  # step index -> where its reads really happen
        for reason, at in ((BATCHED_CAST, 0), (BATCHED_CAST_LATE, -1)):
            nodes = [st for st in seg.steps if isinstance(st, Node) and st.reason == reason]
            if nodes:
                batches[id(nodes[at])] = CastBatch(nodes, self.slots, guarded)
                place = seg.steps.index(nodes[at])
                for n in nodes:
                    reads_at[seg.steps.index(n)] = place
        writes = input_write_batch(graph, list(seg.steps))
        if writes:
            place = seg.steps.index(writes[-1])
            batches[id(writes[-1])] = InputWriteBatch(writes, self.slots)
            for n in writes:
                reads_at[seg.steps.index(n)] = place
                batches.setdefault(id(n), _nothing)
        #: how many of the graph's input writes run batched (InputWriteBatch)
        self.input_writes_batched = len(writes)
        graph_outputs = set(values_in(graph.outputs))
        for step in seg.steps:
            if isinstance(step, FusionGroup):
                runner = GroupRunner(step, self.slots, graph.symbols, options, self.store, self.stats)
                runner.device_guarded = guarded
                self.steps.append(runner)
                self.runners.append(runner)
            elif step.reason in (BATCHED_CAST, BATCHED_CAST_LATE) or id(step) in batches:
                self.steps.append(step)
                self.runners.append(batches.get(id(step), _nothing))
            elif step.is_call and (kernel := (pad_runner(step, self.slots, options, self.store, self.stats)
                                              or pool_runner(step, seg.steps, graph_outputs, self.slots, options, self.store,
                                                             self.stats))) is not None:
                self.steps.append(step)
                self.runners.append(kernel)
            elif not step.is_call and REGISTRY[step.op].kind in ("constant", "random"):
                # a registry node outside any group: rebuilt from its metadata, as in a group's
                # fallback (its ATen arguments name tensors read for metadata only, which
                # liveness does not keep)
                self.steps.append(step)
                self.runners.append(functools.partial(_registry_runner, step, self.slots))
            else:
                self.steps.append(step)
                self.runners.append(_call_runner(step, self.slots))
        self.random_runners = [r for r in self.runners if isinstance(r, GroupRunner) and r.random]
        self.has_random = bool(self.random_runners)
        #: the device whose generator draws the random groups' seeds
        self.random_device = self.random_runners[0].group.outputs[0].meta.device if self.random_runners else None
        self.view_chains_merged = merge_view_chains(self.runners, list(seg.steps), reads_at,
                                                    set(values_in(graph.outputs)))
        written = {o for st in seg.steps if isinstance(st, FusionGroup) for o in st.outputs}
        for r in self.runners:
            if isinstance(r, GroupRunner):
                tensors = [r.group.inputs[i] for i in r.tensor_in]
                r.checked = [k for k, v in enumerate(tensors) if v not in written]
        self.release = self._liveness(seg, reads_at)
        self.output_spec = graph.outputs
        self.output_slots = _flat_output_slots(graph.outputs, self.slots)
        # returned values an ATen call computed from an intermediate: they may be views (see
        # _no_view); those computed by kernels, and graph inputs, never are
        inputs = set(graph.inputs)
        self.call_outputs = {self.slots[v] for v in values_in(graph.outputs)
                             if v not in inputs and v.producer is not None and v.producer.is_call}
        self.prepared: set = set()
        #: size signature -> its generated straight-line function (``runtime.graph_function``),
        #: or False where one could not be generated; and the functions' Python text
        self.graph_function = options.tuning.runtime.graph_function
        self.generated: dict = {}
        self.generated_sources: dict = {}
        self.stats["graph_function"] = (NOT_GENERATED if self.graph_function
                                        else "interpreted: Tuning runtime.graph_function=False")
        for r in self.runners:
            if isinstance(r, GroupRunner):
                r.on_fail = self._drop_generated
        self.fx_graph = None
        #: where ``dump_dir`` holds this graph's stages (``<dump_dir>/<nnn>_<name>``), or None
        self.dump_stem: str | None = None
        self.write_reproducer = None
        self.plan_cache = None  # the graph cache (runtime.plan_cache), set by compile_graph
        self.traced = None
        self.called = False
        #: where the first write to a graph input happens (a batched write at its batch's place)
        graph_inputs = set(graph.inputs)
        writes = [max(i, reads_at.get(i, i)) for i, st in enumerate(seg.steps) if writes_input(st, graph_inputs)]
        self.first_input_write = min(writes, default=len(seg.steps))

    def _liveness(self, seg: Segmentation, reads_at: dict[int, int]) -> list[list[int]]:
        """Per step, the slots to free after it: those it is the last reader of (a batched
        cast reads where its batch runs, ``reads_at``)."""
        last: dict[int, int] = {}
        for i, step in enumerate(seg.steps):
            at = max(i, reads_at.get(i, i))
            for v in _step_reads(step):
                last[self.slots[v]] = max(last.get(self.slots[v], -1), at)
        keep = {self.slots[v] for v in values_in(seg.graph.outputs)}
        release: list[list[int]] = [[] for _ in seg.steps]
        for slot, i in last.items():
            if slot not in keep:
                release[i].append(slot)
        return release

    def sym_key(self, env: list) -> tuple:
        key = []
        for _, (i, d) in self.symbols:
            x = env[i]
            if d is None and isinstance(x, torch.SymInt) and x.node.is_nested_int():
                # a jagged tensor's ragged size (an NJT's inner graph takes it as an argument):
                # no integer value, and no kernel reads it
                key.append(None)
                continue
            key.append(int(x.shape[d]) if d is not None else int(x))
        return tuple(key)

    def __call__(self, args: list) -> Any:
        if self.traced is not None:
            return self.traced(args)
        if not self.called:
            return self._first_call(args)
        if self.cuda_index is None:
            return self._run(args)
        previous = torch.cuda._exchange_device(self.cuda_index)
        try:
            return self._run(args)
        finally:
            torch.cuda._maybe_exchange_device(previous)

    def _first_call(self, args: list) -> Any:
        self.called = True
        previous = torch.cuda._exchange_device(self.cuda_index) if self.cuda_index is not None else None
        try:
            return first_call(self, args)
        finally:
            if self.cuda_index is not None:
                torch.cuda._maybe_exchange_device(previous)

    def _run(self, args: list, progress: list | None = None) -> Any:
        env: list = [None] * self.n_slots
        env[: self.n_inputs] = args
        if isinstance(args, list):
            args.clear()  # boxed convention: let inputs be freed as soon as they are dead
        if self.symbols:
            sym_key = self.sym_key(env)
            sym_values = {s: v for (s, _), v in zip(self.symbols, sym_key) if v is not None}
        else:
            sym_key, sym_values = (), {}
        if sym_key not in self.prepared:
            self._prepare(env, sym_key, sym_values)
        elif progress is None and self.graph_function:
            # these sizes ran once: their plans, launch functions and view replays exist
            run = self.generated.get(sym_key)
            if run is None:
                run = self._generate(sym_key, sym_values)
            if run:
                return run(env)
        return self._interpret(env, sym_key, sym_values, progress)

    def _generate(self, sym_key: tuple, sym_values: dict):
        """Build (and keep) the generated function for ``sym_key``; ``False`` when a step
        cannot be generated (then every call with these sizes is interpreted)."""
        try:
            run, source = build_graph_function(self, sym_key, sym_values)
        except Exception as e:  # an optimization only: the interpreted loop stays
            log.info("%s: no generated graph function (%s: %s)", self.name, type(e).__name__, e)
            self.stats["graph_function"] = f"interpreted: {type(e).__name__}: {e}"
            self.generated[sym_key] = False
            return False
        self.generated[sym_key] = run
        self.generated_sources[sym_key] = source
        n = sum(1 for r in self.generated.values() if r)
        if self.dump_stem:  # beside the graph's other stages (backend._dump_stage)
            with open(f"{self.dump_stem}.function_{n}.py", "w") as f:
                f.write(source)
        self.stats["graph_function"] = f"one generated straight-line function per set of sizes ({n} so far)"
        return run

    def _drop_generated(self) -> None:
        """A group failed: the generated functions bound its launch function; build them again."""
        self.generated.clear()
        self.generated_sources.clear()

    def _interpret(self, env: list, sym_key: tuple, sym_values: dict, progress: list | None = None) -> Any:
        """Run the steps one by one (the first call with new sizes, and the reference the
        generated function follows)."""
        if self.random_runners:
            # one draw from the device's generator per call, a seed for each random group
            seeds, address = draw_seeds(len(self.random_runners), self.random_device)
            for k, r in enumerate(self.random_runners):
                r.seed = (seeds[2 * k: 2 * k + 1], address + 16 * k)
        if progress is None:
            for run, dead in zip(self.runners, self.release):
                run(env, sym_key, sym_values)
                for s in dead:
                    env[s] = None
        else:  # the first call: which step it is at (see _first_call)
            for k, (run, dead) in enumerate(zip(self.runners, self.release)):
                progress[0] = k
                run(env, sym_key, sym_values)
                for s in dead:
                    env[s] = None
            progress[0] = len(self.runners)
        for r in self.random_runners:  # the seeds die with the call (a CUDA graph pool holds no strays)
            r.seed = None
        for s in self.call_outputs:
            env[s] = _no_view(env[s])
        if self.output_slots is not None:
            return [env[s] if s >= 0 else c for s, c in self.output_slots]
        slots = self.slots
        return map_values(self.output_spec, lambda v: env[slots[v]])

    def _compile(self, work: list, on_done) -> None:
        """Compile the first ``stages`` stages of each ``(step, plan, pointer args, stages)`` at
        once (:func:`compile_all`); a step whose kernel fails to compile falls back to ATen."""
        jobs, runners = [], []
        fp_fusion = not self.options.exact_rounding
        for step, plan, args, stages in work:
            seed = [torch.zeros(2, dtype=torch.int64, device=plan.out_specs[0][3])] if step.random else []
            for i, st in enumerate(plan.config.stages[:stages]):
                jobs.append((plan.kernel, i, st.grid, args + plan.scalars + seed, st.XBLOCK, st.RBLOCK,
                             st.num_warps, fp_fusion))
                runners.append(step)
        errors = compile_all(jobs, self.options.compile_threads, on_done=on_done)
        for step, err in zip(runners, errors):
            if err is not None and step.failed is None:
                step.fail(err)

    def _prepare(self, env: list, sym_key, sym_values) -> None:
        """Plan every group for these sizes from the traced metadata and compile in parallel."""
        t0 = time.perf_counter()
        if self.prepared:
            if recompile_log.isEnabledFor(logging.INFO):  # which input dims the symbols are
                where = {s: f"input {i} dim {d}" if d is not None else f"size argument {i}" for s, (i, d) in self.symbols}
                sizes = ", ".join(f"{s} ({where.get(s, '?')}) = {v}" for s, v in sym_values.items())
                recompile_log.info("%s%s: new sizes %s; planning every group again", self.name,
                                   compile_label(self.compile_id), sizes)
            self.stats["events"].append({"group": "*", "reason": f"new sizes {sym_values}"})
        todo = [step for step in self.steps if isinstance(step, GroupRunner) and not step.failed]
        progress = CompileProgress(self.name, len(todo), self.options.progress,
                                   delay=self.options.tuning.runtime.progress_delay_seconds)
        ready, fit = [], []  # (step, plan, pointer args) whose launch configuration is final / is to be fitted
        for step in todo:
            g = step.group
            try:
                metas = [g.inputs[i].meta for i in step.tensor_in]
                shapes = tuple(torch.Size([as_int(s, sym_values) for s in m.shape]) for m in metas)
                strides = tuple(tuple(as_int(s, sym_values) for s in m.stride) for m in metas)
                # graph inputs: use their actual layout
                for k, i in enumerate(step.tensor_in):
                    slot = step.in_slots[i]
                    if slot < self.n_inputs and isinstance(env[slot], torch.Tensor):
                        shapes = shapes[:k] + (env[slot].shape,) + shapes[k + 1:]
                        strides = strides[:k] + (env[slot].stride(),) + strides[k + 1:]
                plan = step.make_plan(sym_values, shapes, strides)
            except (Unsupported, ValueError, SyntaxError, NameError, ImportError, AssertionError) as e:
                step.fail(e)
                progress.generated()
                continue
            step.plans[sym_key] = plan
            progress.generated()
            if plan.kernel is not None and not self.options.interpret:
                dummies = [_dummy(g.inputs[i].meta) if g.inputs[i].meta is not None else env_scalar(env, step, i)
                           for i in range(len(g.inputs))]
                outs = [_dummy_spec(s) for s in plan.out_specs]
                ws = []
                if plan.workspaces:
                    ws = [torch.empty(1, dtype=dt, device=plan.out_specs[0][3]) for dt in step.workspace_dtypes]
                fitted = plan.config.scheduler == "reduction.inner_outer" and self.options.tuning.inner_outer.fit
                (fit if fitted else ready).append((step, plan, dummies + outs + ws))
        t1 = time.perf_counter()
        # Fitting an inner-outer grid reads its first kernel's compiled resource use: those
        # first kernels compile together with every other kernel, then the fitted plans' stages.
        # (a first stage compiled before fitting is found in Triton's cache after it, unless the
        # fitted split changed what the kernel specializes on)
        progress.compiling(len(fit) + sum(len(p.config.stages) for _, p, _ in ready + fit))
        try:
            self._compile([(s, p, a, 1) for s, p, a in fit] + [(s, p, a, None) for s, p, a in ready],
                          progress.compiled)
            for step, plan, args in fit:
                if step.failed is None:
                    step.fit_inner_outer(plan, args, not self.options.exact_rounding)
            self._compile([(s, p, a, None) for s, p, a in fit if s.failed is None], progress.compiled)
        finally:
            progress.close()
        self.stats["compile_seconds"] += time.perf_counter() - t1
        self.prepared.add(sym_key)
        if self.plan_cache is not None:  # graph cache hook: store the sources generated now
            self.plan_cache.flush()
        self.stats["plan_seconds"] += time.perf_counter() - t0


def env_scalar(env, step: GroupRunner, i: int):
    v = env[step.in_slots[i]]
    return v if v is not None else 1


def _dummy(meta) -> torch.Tensor:
    return torch.empty(1, dtype=meta.dtype, device=meta.device)


def _dummy_spec(spec) -> torch.Tensor:
    return torch.empty(1, dtype=spec[2], device=spec[3])
