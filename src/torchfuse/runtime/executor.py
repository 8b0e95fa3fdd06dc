"""Running a segmented graph: ATen calls and generated kernels, with per-shape launch plans.

Takes a :class:`~torchfuse.segment.Segmentation`; returns a :class:`CompiledGraph`, the
callable AOTAutograd (or the user) invokes on every call.

Per call, the graph reads its size symbols from the inputs (a tuple of ints; empty for
static shapes). The first call with a new tuple builds a *launch plan* for every fusion group
(domain sizes, loop layout, launch configuration, kernel, argument list: everything that does
not depend on data pointers) and compiles the plan's kernels in parallel; later calls only
check that the input strides are the planned ones, allocate outputs and launch. A group whose
code cannot be generated or compiled runs its ops through ATen, with one warning.
"""
from __future__ import annotations

import contextlib
import functools
import logging
import time
import warnings
from typing import Any

import sympy
import torch

from ..codegen.triton import can_split, generate, has_random, index_values, split_workspaces
from ..config import Options
from ..ir.graph import Graph, Node, Value, _collect_values, as_int, map_values, values_in
from ..ir.ops import REGISTRY, Unsupported
from ..schedulers import TWO_STAGE, LaunchConfig, layout as layout_mod, pointwise, reduction
from ..segment import BATCHED_CAST, BATCHED_CAST_LATE, FusionGroup, Segmentation
from .cache import SourceStore
from .compile import Kernel, compile_all, launch_hooks_set, load, raw_stream
from .fallback import first_call, writes_input
from .progress import CompileProgress

log = logging.getLogger("torchfuse.schedule")
recompile_log = logging.getLogger("torchfuse.recompile")

# Allocation and aliasing through the C++ entry points of TorchDynamo's guard module (the ones
# Inductor's generated wrappers call): no Python argument parsing, a few microseconds less per
# tensor than ``torch.empty_strided`` and ATen's view ops. ``_empty_strided_cuda`` allocates on
# the current device, so it is used only inside CompiledGraph's device guard.
_GUARDS = getattr(getattr(torch._C, "_dynamo", None), "guards", None)
_REINTERPRET = getattr(_GUARDS, "_reinterpret_tensor", None)
_EMPTY_CUDA = getattr(_GUARDS, "_empty_strided_cuda", None)
_EMPTY_CPU = getattr(_GUARDS, "_empty_strided_cpu", None)


def _allocator(device: torch.device, guarded: bool):
    """``alloc(shape, stride, dtype) -> Tensor`` for ``device``; the fast entry points for the
    CPU, and for CUDA when the caller runs under a guard that makes ``device`` current."""
    if device.type == "cuda" and guarded and _EMPTY_CUDA is not None:
        return _EMPTY_CUDA
    if device.type == "cpu" and _EMPTY_CPU is not None:
        return _EMPTY_CPU
    return lambda shape, stride, dtype: torch.empty_strided(shape, stride, dtype=dtype, device=device)


class KernelPlan:
    """Everything needed to launch one group's kernel for one set of sizes and strides.

    Attributes:
        kernel: the loaded kernel (``None`` when the domain is empty: nothing to launch).
        config: its launch configuration.
        in_shapes, in_strides: the tensor inputs' sizes and strides the plan assumes.
        out_specs: ``(shape, stride, dtype, device)`` per output.
        scalars: the trailing integer arguments (sizes, strides, element counts).
        bytes_moved: fewest bytes the kernel must move (each input read once, each output
            written once), for bandwidth reports.
    """

    def __init__(self, kernel, config, in_shapes, in_strides, out_specs, scalars, bytes_moved,
                 device_guarded: bool = False):
        self.binaries: dict = {}  # compiled binaries per specialization, for direct launches
        #: specialization -> per stage ``(run, function, packed metadata, grid x, grid y, XBLOCK,
        #: RBLOCK)``, once every stage has its binary
        self.direct: dict = {}
        device = out_specs[0][3] if out_specs else None
        self.device_index = (device.index or 0) if device is not None and device.type == "cuda" else 0
        self.kernel = kernel
        self.config = config
        self.in_shapes = in_shapes
        self.in_strides = in_strides
        self.out_specs = out_specs
        self.scalars = scalars
        self.bytes_moved = bytes_moved
        #: per output ``(alloc, shape, stride, dtype)``; ``device_guarded``: the caller makes the
        #: outputs' CUDA device current (see ``_allocator``)
        self.allocs = [(_allocator(dev, device_guarded), sh, st, dt) for sh, st, dt, dev in out_specs]
        #: split reductions: ``(alloc, shape, stride, dtype)`` per workspace
        self.workspaces: list = []


class GroupRunner:
    """Runs one fusion group: plans per size/stride signature, launches, or falls back."""

    def __init__(self, group: FusionGroup, slots: dict[Value, int], graph_symbols, options: Options,
                 store: SourceStore, stats: dict):
        self.group = group
        self.options = options
        self.store = store
        self.stats = stats
        self.symbols = graph_symbols
        self.in_slots = [slots[v] for v in group.inputs]
        self.tensor_in = [i for i, v in enumerate(group.inputs) if v.meta is not None]
        self.scalar_in = [i for i, v in enumerate(group.inputs) if v.meta is None]
        #: positions (among the tensor inputs) whose layout and alignment each call checks;
        #: CompiledGraph drops those another fusion group of the graph writes
        self.checked = list(range(len(self.tensor_in)))
        self.out_slots = [slots[v] for v in group.outputs]
        self.plans: dict[Any, KernelPlan] = {}
        #: per size signature, a generated function that launches that signature's plan with
        #: everything but the tensors bound as constants (see :meth:`_fast_launcher`)
        self.fast: dict[Any, Any] = {}
        self.sources: dict[Any, Any] = {}
        self.failed: str | None = None
        self.write_reproducer = None  # set by compile_graph: failure message -> script path (report hook)
        self.reproducer: str | None = None
        self.plan_cache = None  # set by compile_graph (runtime.plan_cache.attach), with plan_slot
        self.plan_slot = ""
        self.fallback_nodes = group.nodes
        self.slots = slots
        self.splittable = bool(group.domain.reduced) and can_split(group)
        #: a reduction group that writes whole rows of 16-bit elements, not only per-row results
        #: (reduction.heuristic)
        self.writes_rows = bool(group.domain.reduced) and any(
            group.domain.varies_along_reduced(v) and v.meta.dtype.itemsize == 2 for v in group.outputs)
        #: tensors read along the reduced dims (reduction.heuristic: a split column reduction's
        #: rows a step)
        self.tile_inputs = sum(1 for v in group.inputs if v.meta is not None and group.domain.reduced
                               and group.domain.varies_along_reduced(v))
        self.random = has_random(group)
        #: the current call's seed, set by CompiledGraph: ``(tensor, address)`` of one int64 in
        #: device memory (None: draw one per launch)
        self.seed: tuple[torch.Tensor, int] | None = None
        self.workspace_dtypes = split_workspaces(group) if self.splittable or group.outer else []
        #: set by CompiledGraph when it makes the group's device current around every call
        self.device_guarded = False
        self.sm_count = 0
        if group.outputs and group.outputs[0].meta.device.type == "cuda" and torch.cuda.is_available():
            self.sm_count = torch.cuda.get_device_properties(group.outputs[0].meta.device).multi_processor_count

    # -- planning
    def make_plan(self, sym_values: dict, in_shapes, in_strides, compile_now: bool = True) -> KernelPlan:
        g = self.group
        dom = g.domain
        sizes = [as_int(s, sym_values) for s in dom.sizes]
        out_specs = []
        for v in g.outputs:
            m = v.meta
            out_specs.append((tuple(as_int(s, sym_values) for s in m.shape),
                              tuple(as_int(s, sym_values) for s in m.stride), m.dtype, m.device))
        tensor_strides = []
        tensors = [g.inputs[i] for i in self.tensor_in]
        for v, st in zip(tensors, in_strides):
            tensor_strides.append(_domain_strides(dom.dims[v], st, len(sizes)))
        for v, spec in zip(g.outputs, out_specs):
            tensor_strides.append(_domain_strides(dom.dims[v], spec[1], len(sizes)))
        for v in index_values(g):  # laid out as if contiguous: their loop dims stay their own
            tensor_strides.append(_domain_strides(dom.dims[v], [as_int(s, sym_values) for s in v.meta.stride],
                                                  len(sizes)))
        ref = self._reference(tensors, sizes)
        rt = layout_mod.analyze(sizes, dom.reduced, tensor_strides, ref)
        if g.outer:
            config = reduction.inner_outer(rt, self.options.interpret, self.sm_count)
        elif dom.reduced:
            config = reduction.heuristic(rt, self.options.persistent_max_elements, self.options.interpret,
                                         self.sm_count, self.splittable, self.writes_rows, self.tile_inputs)
        else:
            config = pointwise.heuristic(rt, self.options.interpret, self.sm_count)
        nbytes = sum(_numel(s) * v.meta.dtype.itemsize for v, s in zip(tensors, in_shapes))
        nbytes += sum(_numel(spec[0]) * spec[2].itemsize for spec in out_specs)
        scalars = list(rt.x_sizes) + list(rt.r_sizes)
        for st in rt.strides:
            scalars += list(st)
        # xfull, rfull: 1 when every block of the first stage is full (codegen ALL_TRUE_MASKS)
        st = config.stages[0]
        scalars += [rt.xnumel, rt.rnumel, int(rt.xnumel > 0 and rt.xnumel % st.XBLOCK == 0),
                    int(rt.rnumel > 0 and rt.rnumel % st.RBLOCK == 0)]
        if config.scheduler in TWO_STAGE:
            scalars += [config.split, config.rchunk]
        # no rows: nothing to launch, except column sums over no rows, which are written (the
        # sum of nothing, then the group's epilogue) by an inner-outer pair's kernels
        launch = rt.xnumel > 0 or (g.outer and rt.rnumel > 0)
        kernel = self._kernel(rt.layout, config) if launch else None
        plan = KernelPlan(kernel, config, tuple(in_shapes), tuple(in_strides), out_specs, scalars, nbytes,
                          self.device_guarded)
        plan.xnumel = rt.xnumel
        plan.rt = rt
        if config.scheduler in TWO_STAGE and out_specs:
            alloc = plan.allocs[0][0]  # same device as the outputs
            # one partial per chunk and kept element (split), or per program and column
            n = config.split * (rt.xnumel if config.scheduler == "reduction.split" else rt.rnumel)
            plan.workspaces = [(alloc, (n,), (1,), dt) for dt in self.workspace_dtypes]
        if log.isEnabledFor(logging.INFO):
            extent = (f"{rt.xnumel} elements" if config.scheduler == "pointwise"
                      else f"{rt.xnumel} kept x {rt.rnumel} reduced elements")
            log.info("%s: %s over %s: %s (%s)", g.name, config.scheduler, extent,
                     "; then ".join(str(st) for st in config.stages), config.reason)
        return plan

    def fit_inner_outer(self, plan: KernelPlan, pointer_args: list, fp_fusion: bool) -> LaunchConfig:
        """Size a ``reduction.inner_outer`` plan's grid to the programs of its compiled first
        kernel that fit on a multiprocessor (``reduction.resident_programs``): each program
        loops over row blocks, so a grid larger than what fits runs in two waves and one
        smaller leaves the multiprocessors part empty (on an H200, RMSNorm's kernel fits 3 a
        multiprocessor and LayerNorm's 2; benchmarks/NOTES.md, runs AJ and AK). Compiles the first
        kernel now (Triton caches it for the launches) with ``pointer_args`` (inputs, outputs
        and workspaces, or stand-ins of their dtypes) and the plan's scalars; keeps the plan
        when that fails. Returns the plan's configuration."""
        c = plan.config
        st = c.stages[0]
        try:
            compiled = plan.kernel.warmup(0, st.grid, pointer_args + plan.scalars, st.XBLOCK, st.RBLOCK,
                                          st.num_warps, fp_fusion)
            compiled._init_handles()
            props = torch.cuda.get_device_properties(plan.out_specs[0][3])
            resident = reduction.resident_programs(
                compiled.n_regs, compiled.metadata.shared, st.num_warps,
                getattr(props, "regs_per_multiprocessor", 65536),
                getattr(props, "shared_memory_per_multiprocessor", 233472),
                getattr(props, "max_threads_per_multi_processor", 2048))
        except Exception as e:  # an optimization only: the heuristic's grid stays
            log.info("%s: inner-outer grid not fitted (%s: %s)", self.group.name, type(e).__name__, e)
            return c
        new = reduction.inner_outer(plan.rt, False, self.sm_count, resident=resident)
        plan.config = new  # (its reason names the residency even when the grid stays)
        if new.split != c.split:
            plan.scalars[-2] = new.split
            n = new.split * plan.rt.rnumel
            plan.workspaces = [(alloc, (n,), stride, dt) for alloc, _, stride, dt in plan.workspaces]
        log.info("%s: %s (%d registers a thread)", self.group.name, plan.config.reason, compiled.n_regs)
        return plan.config

    def _reference(self, tensors: list[Value], sizes) -> int:
        dom = self.group.domain
        if dom.reduced:
            best, best_n = None, -1
            for i, v in enumerate(tensors):
                if dom.varies_along_reduced(v):
                    n = sum(1 for d in dom.dims[v] if d is not None)
                    if n > best_n:
                        best, best_n = i, n
            if best is not None:
                return best
        return len(tensors)  # the first output

    def _kernel(self, layout, config: LaunchConfig) -> Kernel:
        key = (layout, config.code_key)
        src = self.sources.get(key)
        if src is None:
            t0 = time.perf_counter()
            # graph cache hook (runtime.plan_cache): a source a previous process generated
            stored = self.plan_cache.source(self.plan_slot, layout, config.code_key) if self.plan_cache else None
            src = stored or generate(self.group, layout, config.scheduler, self.options.exact_rounding)
            if self.plan_cache and stored is None:
                self.plan_cache.record(self.plan_slot, layout, config.code_key, src)
            self.stats["codegen_seconds"] += time.perf_counter() - t0
            if self.sources:  # not this group's first kernel: the loops or the scheduler changed
                recompile_log.info("%s: new kernel %s (%s; %s)", self.group.name, src.name, config.scheduler,
                                   config.reason)
            self.sources[key] = src
            if self.options.dump_dir:
                _dump(self.options.dump_dir, f"{src.name}_{src.key[:12]}.py", src.text)
        before = self.store.misses
        kernel = load(src, self.store, self.options.interpret)
        self.stats["kernels_compiled" if self.store.misses > before else "kernels_cached"] += 1
        return kernel

    def plan_for(self, sym_key, sym_values, tensors) -> KernelPlan:
        plan = self.plans.get(sym_key)
        if plan is not None:
            # inputs written by this graph's own kernels have the planned layout by construction;
            # the others (graph inputs, ATen results) are checked against the plan
            for i in self.checked:
                t = tensors[i]
                if t.stride() != plan.in_strides[i] or t.shape != plan.in_shapes[i]:
                    break
            else:
                return plan
        shapes = tuple(t.shape for t in tensors)
        strides = tuple(t.stride() for t in tensors)
        if plan is not None and plan.in_strides == strides and plan.in_shapes == shapes:
            return plan
        alt = self.plans.get((sym_key, shapes, strides))
        if alt is not None:
            return alt
        if plan is not None:
            recompile_log.info("%s: input layout changed (%s); planning again", self.group.name, strides)
            self.stats["events"].append({"group": self.group.name, "reason": f"input layout changed to strides {strides}"})
        plan = self.make_plan(sym_values, shapes, strides)
        self.plans[sym_key if sym_key not in self.plans else (sym_key, shapes, strides)] = plan
        return plan

    # -- running
    def __call__(self, env: list, sym_key, sym_values) -> None:
        if self.fast:
            fast = self.fast.get(sym_key)
            if fast is not None and fast(env):
                return
        if self.failed is not None:
            return self.run_fallback(env, sym_values)
        ins = [env[s] for s in self.in_slots]
        tensors = [ins[i] for i in self.tensor_in] if self.scalar_in else ins
        try:
            plan = self.plan_for(sym_key, sym_values, tensors)
        except (Unsupported, ValueError, SyntaxError, NameError, ImportError, AssertionError) as e:
            self.fail(e)
            return self.run_fallback(env, sym_values)
        outs = [alloc(sh, st, dt) for alloc, sh, st, dt in plan.allocs]
        if plan.kernel is not None:
            c = plan.config
            # what Triton specializes on that may differ between calls of one plan (tensors this
            # graph's kernels wrote are fresh allocations, always aligned)
            ptrs = [t.data_ptr() for t in tensors]
            spec = tuple([ptrs[i] & 15 == 0 for i in self.checked])
            if self.scalar_in:
                spec += tuple(_int_spec(ins[i]) for i in self.scalar_in)
            ws = [alloc(sh, st, dt) for alloc, sh, st, dt in plan.workspaces] if plan.workspaces else None
            direct = plan.direct.get(spec)
            if direct is not None and not _PROFILER._is_profiler_enabled and not launch_hooks_set():
                # every stage compiled for this specialization: call the binaries themselves, with
                # device pointers as ints (Triton's launcher otherwise calls each tensor's data_ptr
                # through Python attribute lookup and checks it with a driver call); the pointer
                # list is built once, and only the launch-invariant scalars are appended
                args = [a.data_ptr() if isinstance(a, torch.Tensor) else a for a in ins] if self.scalar_in else ptrs
                args = args + [o.data_ptr() for o in outs]
                if ws:
                    args += [w.data_ptr() for w in ws]
                args += plan.scalars
                if self.random:
                    args.append((self.seed or draw_seeds(1, outs[0].device))[1])
                stream = raw_stream(plan.device_index)
                for run, function, packed, gx, gy, xb, rb in direct:
                    run(gx, gy, 1, stream, function, packed, None, None, None, *args, xb, rb)
            else:
                args = ins + outs
                if ws:
                    args = args + ws
                args = args + plan.scalars
                if self.random:
                    args.append((self.seed or draw_seeds(1, outs[0].device))[0])
                try:
                    # profiler hook: name the launch after its kernel in torch.profiler traces
                    with (torch.profiler.record_function(plan.kernel.source.name)
                          if torch.autograd.profiler._is_profiler_enabled else _NO_RANGE):
                        for i, st in enumerate(c.stages):
                            plan.kernel.launch(i, st.grid, args, st.XBLOCK, st.RBLOCK, st.num_warps, plan.binaries,
                                               spec, plan.device_index, not self.options.exact_rounding)
                except Exception as e:  # e.g. a new specialization that fails to compile
                    self.fail(e)
                    return self.run_fallback(env, sym_values)
                binaries = [plan.binaries.get((i, spec)) for i in range(len(c.stages))]
                if all(b is not None for b in binaries):
                    plan.direct[spec] = [(*b, st.grid[0], st.grid[1] if len(st.grid) > 1 else 1, st.XBLOCK, st.RBLOCK)
                                         for b, st in zip(binaries, c.stages)]
                    if (FAST_LAUNCH and sym_key not in self.fast and not self.scalar_in
                            and self.plans.get(sym_key) is plan):
                        try:
                            self.fast[sym_key] = self._fast_launcher(plan, spec, plan.direct[spec])
                        except Exception as e:  # an optimization only: the general path stays
                            log.info("%s: no generated launch function (%s: %s)", self.group.name,
                                     type(e).__name__, e)
        for s, o in zip(self.out_slots, outs):
            env[s] = o

    def _fast_launcher(self, plan: KernelPlan, spec: tuple, direct: list):
        """Generate ``fast(env) -> bool``: the direct launch of ``plan`` for the alignment
        specialization ``spec``, as straight-line Python with the environment slots, the
        planned layouts, the allocators, the launch scalars and the compiled binaries bound as
        constants. It returns ``False`` without side effects when a checked input's layout or
        alignment differs from the plan's, or a profiler or launch hook is active; then the
        general path runs. It passes the binaries exactly the arguments the general direct
        path passes (``tests/test_host_paths.py`` compares them).

        A compiled graph's kernels are launched from Python, once per fusion group per call,
        so the general path's per-call work (building lists, looking the plan up, checking
        each argument's type) is paid hundreds of times per training step; Inductor's
        generated wrapper code binds the same things at compile time."""
        ns: dict[str, Any] = {"_P": _PROFILER, "_hooks": launch_hooks_set, "_stream": raw_stream}
        lines = ["def fast(env):"]
        for k, slot in enumerate(self.in_slots):
            lines.append(f"    a{k} = env[{slot}]")
        for i in self.checked:
            ns[f"S{i}"], ns[f"H{i}"] = plan.in_strides[i], plan.in_shapes[i]
            lines.append(f"    if a{i}.stride() != S{i} or a{i}.shape != H{i}:")
            lines.append("        return False")
        for k in range(len(self.in_slots)):
            lines.append(f"    p{k} = a{k}.data_ptr()")
        for j, i in enumerate(self.checked):
            lines.append(f"    if (p{i} & 15 == 0) != {bool(spec[j])}:")
            lines.append("        return False")
        lines.append("    if _P._is_profiler_enabled or _hooks():")
        lines.append("        return False")
        ptrs = [f"p{k}" for k in range(len(self.in_slots))]
        for name, allocs in (("o", plan.allocs), ("w", plan.workspaces)):
            for k, (alloc, sh, st, dt) in enumerate(allocs):
                ns[f"A{name}{k}"], ns[f"SH{name}{k}"], ns[f"ST{name}{k}"], ns[f"DT{name}{k}"] = alloc, sh, st, dt
                lines.append(f"    {name}{k} = A{name}{k}(SH{name}{k}, ST{name}{k}, DT{name}{k})")
                ptrs.append(f"{name}{k}.data_ptr()")
        ns["SC"] = tuple(plan.scalars)
        ptrs.append("*SC")
        if self.random:  # the call's seed address, set by CompiledGraph, as the general path passes it
            ns["_runner"], ns["_draw"] = self, draw_seeds
            lines.append("    seed = _runner.seed")
            lines.append("    if seed is None:")
            lines.append("        seed = _draw(1, o0.device)")
            ptrs.append("seed[1]")
        lines.append(f"    stream = _stream({int(plan.device_index)})")
        for k, (run, function, packed, gx, gy, xb, rb) in enumerate(direct):
            ns[f"R{k}"], ns[f"F{k}"], ns[f"K{k}"] = run, function, packed
            lines.append(f"    R{k}({int(gx)}, {int(gy)}, 1, stream, F{k}, K{k}, None, None, None, "
                         f"{', '.join(ptrs)}, {int(xb)}, {int(rb)})")
        for k, slot in enumerate(self.out_slots):
            lines.append(f"    env[{slot}] = o{k}")
        lines.append("    return True")
        exec(compile("\n".join(lines), f"<torchfuse launch {self.group.name}>", "exec"), ns)
        return ns["fast"]

    def fail(self, e: BaseException) -> None:
        self.failed = f"{type(e).__name__}: {e}"
        self.fast.clear()
        # reproducer hook (torchfuse.report.reproducer): a standalone script of the graph, named in the warning
        if self.write_reproducer is not None:
            self.reproducer = self.write_reproducer(f"fusion group {self.group.name}: {self.failed}")
        warnings.warn(f"torchfuse: fusion group {self.group.name} could not be compiled and runs through "
                      f"ATen instead ({self.failed.splitlines()[0][:300]})"
                      + (f"; reproducer: {self.reproducer}" if self.reproducer else ""), RuntimeWarning, stacklevel=3)
        self.stats["fallbacks"] += 1

    def run_fallback(self, env: list, sym_values: dict | None = None) -> None:
        for node in self.fallback_nodes:
            run_registry_node_eagerly(node, env, self.slots, sym_values or {})


_NO_RANGE = contextlib.nullcontext()
#: generated per-group launch functions (``GroupRunner._fast_launcher``); off: every launch
#: goes through the general path
FAST_LAUNCH = True
#: ``torch.autograd.profiler``, whose ``_is_profiler_enabled`` each launch reads
_PROFILER = torch.autograd.profiler


#: Kernel seeds are drawn from [0, SEED_MODULUS): Philox keys of 31 bits, as Triton's own tests use
SEED_MODULUS = 2**31 - 1


def draw_seeds(count: int, device: torch.device) -> tuple[torch.Tensor, int]:
    """Draw ``count`` kernel seeds from PyTorch's generator of ``device`` (so
    ``torch.manual_seed`` fixes them), in device memory: under CUDA graph capture this is
    a captured kernel whose Philox offset the generator advances on every replay, so each replay
    draws new seeds (PyTorch's graph-safe generator state), where a seed passed as a kernel
    argument would be frozen into the graph.

    Returns:
        ``(seeds, address)``: an int64 tensor holding seed ``k`` at element ``2 * k`` (16 bytes
        apart, so every seed's address has the alignment Triton specializes pointers on) and
        the address of seed 0.
    """
    seeds = torch.randint(0, SEED_MODULUS, (2 * count,), dtype=torch.int64, device=device)
    return seeds, seeds.data_ptr()


def _int_spec(x) -> tuple:
    if isinstance(x, bool) or not isinstance(x, int):
        return (type(x).__name__,)
    return (x == 1, x % 16 == 0, -(2**31) <= x < 2**31)


def _numel(shape) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


def _domain_strides(dims, strides, n: int) -> list[int]:
    out = [0] * n
    for d, st in zip(dims, strides):
        if d is not None:
            out[d] = st
    return out


def _dump(root: str, name: str, text: str) -> None:
    import os

    os.makedirs(root, exist_ok=True)
    with open(os.path.join(root, name), "w") as f:
        f.write(text)


def run_registry_node_eagerly(node: Node, env: list, slots: dict[Value, int], sym_values: dict) -> None:
    """Run a registry node through ATen (a group's fallback).

    Constants and ``copy`` are rebuilt from their output metadata, since their original
    arguments name tensors they read for metadata only (which may be dead by then).
    """
    from ..ir.ops import REGISTRY

    kind = REGISTRY[node.op].kind
    if kind == "random":
        m = node.output.meta
        shape = [as_int(s, sym_values) for s in m.shape]
        if node.op == "rand":
            out = torch.rand(shape, dtype=m.dtype, device=m.device)
        elif node.op == "randn":
            out = torch.randn(shape, dtype=m.dtype, device=m.device)
        else:
            out = torch.empty(shape, dtype=m.dtype, device=m.device).bernoulli_(node.attrs["p"])
        env[slots[node.output]] = out
        return
    if kind == "constant" or node.op == "copy":
        m = node.output.meta
        out = torch.empty_strided([as_int(s, sym_values) for s in m.shape],
                                  [as_int(s, sym_values) for s in m.stride], dtype=m.dtype, device=m.device)
        if node.op == "arange":
            out.copy_(torch.arange(out.numel(), device=m.device) * node.attrs["step"] + node.attrs["start"])
        elif kind == "constant":
            out.fill_(node.attrs["value"])
        else:
            out.copy_(env[slots[node.inputs[0]]])
        env[slots[node.output]] = out
        return
    run_call(node, env, slots, sym_values)


def _with_sizes(obj: Any, sym_values: dict | None) -> Any:
    """``obj`` with every ``sympy`` size in it evaluated to an int."""
    if isinstance(obj, sympy.Expr):
        return as_int(obj, sym_values)
    if isinstance(obj, list):
        return [_with_sizes(o, sym_values) for o in obj]
    if isinstance(obj, tuple):
        return tuple(_with_sizes(o, sym_values) for o in obj)
    if isinstance(obj, dict):
        return {k: _with_sizes(o, sym_values) for k, o in obj.items()}
    return obj


def _flat_output_slots(outputs, slots) -> list | None:
    """``[(slot, None) or (-1, constant)]`` when the graph returns a flat list, else None."""
    if not isinstance(outputs, (list, tuple)):
        return None
    flat = []
    for o in outputs:
        if isinstance(o, Value):
            flat.append((slots[o], None))
        elif isinstance(o, (list, tuple, dict)):
            return None
        else:
            flat.append((-1, o))
    return flat


def _compile_argument(a: Any, slots: dict[Value, int]):
    """``(True, constant)`` or ``(False, fn(env, sym_values))`` for one call argument."""
    if isinstance(a, Value):
        s = slots[a]
        return False, lambda env, sv: env[s]
    if isinstance(a, sympy.Expr) and not a.is_Integer:
        return False, lambda env, sv: as_int(a, sv)
    if isinstance(a, (list, tuple)):
        parts = [_compile_argument(x, slots) for x in a]
        if all(c for c, _ in parts):
            return True, type(a)(v for _, v in parts)
        typ = type(a)
        return False, lambda env, sv: typ(v if c else v(env, sv) for c, v in parts)
    if isinstance(a, dict):
        parts = {k: _compile_argument(v, slots) for k, v in a.items()}
        if all(c for c, _ in parts.values()):
            return True, {k: v for k, (_, v) in parts.items()}
        return False, lambda env, sv: {k: (v if c else v(env, sv)) for k, (c, v) in parts.items()}
    return True, int(a) if isinstance(a, sympy.Integer) else a


_aten = torch.ops.aten
#: ATen ops whose result always aliases their first argument's storage, with sizes, strides
#: and offset that depend only on the argument's sizes and strides and the op's constants.
VIEW_OPS = frozenset([
    _aten.view.default, _aten._unsafe_view.default, _aten.permute.default, _aten.t.default,
    _aten.transpose.int, _aten.expand.default, _aten.squeeze.dim, _aten.squeeze.dims, _aten.squeeze.default,
    _aten.unsqueeze.default, _aten.slice.Tensor, _aten.select.int, _aten.alias.default,
    _aten.diagonal.default, _aten.detach.default,
])  # not as_strided: its storage offset argument is absolute, not relative to the input's


class ViewCall:
    """View ops of a static-shape graph, replayed as one reinterpretation of their input.

    ``ops`` is a chain: each op's result is the next one's input (the runtime merges a view
    whose only reader is another view into it, so ``view -> permute -> view`` costs one step).
    The first call runs the ATen ops and records the result's sizes, strides and
    storage-offset increment for the input's sizes and strides; later calls with an input of
    the same sizes and strides build the result directly (about 1.5 us against 5 us per op on
    the CPU measured here; a BERT-base training step runs about 1400 view ops). An input with
    other strides, or one that requires grad (the reinterpreted tensor would not be an
    autograd view), goes through the ops.

    Args:
        target: the ATen view op (an ``OpOverload`` in ``VIEW_OPS``).
        src: slot of the tensor argument (the first).
        rest: the other arguments, constants.
        out: slot of the result.
    """

    __slots__ = ("ops", "src", "out", "key", "view")

    def __init__(self, target, src: int, rest: list, out: int):
        self.ops = [(target._op, rest)]
        self.src = src
        self.out = out
        self.key = None  # (sizes, strides) of the input the recorded view is for
        self.view = None  # (sizes, strides, offset increment) of the result

    def absorb(self, later: "ViewCall") -> None:
        """Append ``later``'s ops, whose input is this chain's result (read by nothing else)."""
        self.ops += later.ops
        self.out = later.out
        self.key = self.view = None

    def __call__(self, env: list, sym_key=None, sym_values=None) -> None:
        x = env[self.src]
        if self.key is not None and x.stride() == self.key[1] and x.shape == self.key[0] and not x.requires_grad:
            size, stride, delta = self.view
            env[self.out] = _REINTERPRET(x, size, stride, delta)
            return
        r = x
        for op, rest in self.ops:
            r = op(r, *rest)
        env[self.out] = r
        if (_REINTERPRET is not None and isinstance(r, torch.Tensor) and r.dtype == x.dtype
                and r.device == x.device and r.untyped_storage().data_ptr() == x.untyped_storage().data_ptr()):
            self.key = (x.shape, x.stride())
            self.view = (tuple(r.shape), r.stride(), r.storage_offset() - x.storage_offset())


def _no_view(t):
    """``t`` as a tensor of its own when it is an autograd view (of an intermediate the graph
    does not return): the same storage, sizes, strides and offset, without the view relation.
    AOTAutograd returns a graph's outputs from an autograd Function, and PyTorch forbids
    in-place changes to a view returned from one ("a function that returns multiple views"),
    where eager's result (a fresh tensor) allows them; Inductor's outputs are never views
    either. Outputs that alias graph inputs are rebuilt by AOTAutograd from the inputs."""
    if isinstance(t, torch.Tensor) and t._base is not None and not t.requires_grad and _REINTERPRET is not None:
        return _REINTERPRET(t, t.size(), t.stride(), 0)
    return t


def merge_view_chains(runners: list, steps: list, reads_at: dict[int, int], keep: set) -> int:
    """Merge each ViewCall whose result only the next view of its chain reads into that one,
    in place: the earlier position runs nothing and its reads move to the later one
    (``reads_at``, for liveness).

    Args:
        runners: per step, its callable (ViewCall for view ops).
        steps: the segmentation's steps, parallel to ``runners``.
        reads_at: step index -> index where its reads really happen (updated).
        keep: values the graph returns (never merged away).

    Returns:
        The number of merges.
    """
    readers: dict = {}
    for st in steps:
        for v in _step_reads(st):
            readers[v] = readers.get(v, 0) + 1
    produced_at: dict[int, int] = {}  # slot -> index of the ViewCall that writes it
    merged = 0
    for j, r in enumerate(runners):
        if not isinstance(r, ViewCall):
            continue
        i = produced_at.get(r.src)
        if i is not None:
            value = steps[i].outputs[0]
            if readers.get(value, 0) == 1 and value not in keep:
                first = runners[i]
                first.absorb(r)
                runners[j], runners[i] = first, _nothing
                for k, at in list(reads_at.items()):
                    if at == i:
                        reads_at[k] = j
                reads_at[i] = j
                merged += 1
        produced_at[runners[j].out] = j
    return merged


def _call_runner(node: Node, slots: dict[Value, int]):
    """A closure running ``node``'s call with its arguments resolved ahead of time (slots of
    values, evaluation of symbolic sizes, constants as they are)."""
    target = node.target
    if (target in VIEW_OPS and not node.kwargs and len(node.outputs) == 1 and node.args
            and isinstance(node.args[0], Value) and node.args[0].meta is not None):
        rest = [_compile_argument(a, slots) for a in node.args[1:]]
        if all(c for c, _ in rest) and not any(isinstance(a, Value) for a in node.args[1:]):
            return ViewCall(target, slots[node.args[0]], [v for _, v in rest], slots[node.outputs[0]])
    if isinstance(target, torch._ops.OpOverload):
        target = target._op  # the C++ entry point, one Python frame less per call
    args = [_compile_argument(a, slots) for a in node.args]
    kwargs = {k: _compile_argument(v, slots) for k, v in node.kwargs.items()}
    outs = [slots[o] for o in node.outputs]
    single = outs[0] if len(outs) == 1 else None

    if not kwargs and all(c or isinstance(a, Value) for (c, _), a in zip(args, node.args)):
        spec = [(slots[a], None) if isinstance(a, Value) else (-1, v) for (c, v), a in zip(args, node.args)]
        if single is not None:
            def run(env, sym_key=None, sym_values=None):
                env[single] = target(*[env[s] if s >= 0 else c for s, c in spec])
            return run

    def run_general(env, sym_key=None, sym_values=None):
        a = [v if c else v(env, sym_values) for c, v in args]
        k = {n: (v if c else v(env, sym_values)) for n, (c, v) in kwargs.items()}
        result = target(*a, **k)
        if single is not None:
            env[single] = result
        else:
            for s, r in zip(outs, result):
                env[s] = r

    return run_general


def _nothing(env, sym_key=None, sym_values=None) -> None:
    pass


class CastBatch:
    """Stand-alone dtype conversions of one graph, run as one multi-tensor copy.

    Under autocast every weight is cast to half precision before its matrix product (and in
    the backward every weight gradient back to fp32); one kernel launch per tensor is what
    eager does, and in a Python runtime each launch costs host time. ``torch._foreach_copy_``
    converts them all in one call (PyTorch's multi-tensor kernels, the ones fused optimizers
    use), with ATen's own conversion rules.

    Args:
        nodes: call nodes of ``aten._to_copy`` the segmenter marked with one reason
            (``BATCHED_CAST`` or ``BATCHED_CAST_LATE``).
        slots: value -> slot of the graph's environment.
        device_guarded: the graph makes the tensors' CUDA device current around every call.
    """

    def __init__(self, nodes: list[Node], slots: dict[Value, int], device_guarded: bool = False):
        self.src = [slots[n.args[0]] for n in nodes]
        self.dst = [slots[n.output] for n in nodes]
        self.metas = [n.output.meta for n in nodes]
        self.static = all(isinstance(d, int) for m in self.metas for d in (*m.shape, *m.stride))
        self.allocs = [(_allocator(m.device, device_guarded), tuple(m.shape), tuple(m.stride), m.dtype)
                       for m in self.metas] if self.static else []

    def __call__(self, env: list, sym_key=None, sym_values=None) -> None:
        if self.static:
            outs = [alloc(sh, st, dt) for alloc, sh, st, dt in self.allocs]
        else:
            outs = [torch.empty_strided([as_int(d, sym_values) for d in m.shape], [as_int(d, sym_values) for d in m.stride],
                                        dtype=m.dtype, device=m.device) for m in self.metas]
        torch._foreach_copy_(outs, [env[s] for s in self.src])
        for s, o in zip(self.dst, outs):
            env[s] = o


class InputWriteBatch:
    """The graph's writes back to its inputs, run as one multi-tensor copy.

    AOTAutograd keeps the writes to inputs that need no gradient in the graph as
    ``aten.copy_(input, new_value)`` calls at its end (``keep_inference_input_mutations``):
    BatchNorm's running mean, running variance and batch counter, three per layer in
    training. Run one by one they are one device copy and its host-side dispatch each
    (ResNet-50 at batch 128 on an H200: 161 device copies per training step, about 9 us of
    host time each in the profile); ``torch._foreach_copy_`` writes them all in one call per
    dtype pair, with ``copy_``'s conversion rules.

    Args:
        nodes: the ``copy_`` call nodes (see :func:`input_write_batch`).
        slots: value -> slot of the graph's environment.
    """

    def __init__(self, nodes: list[Node], slots: dict[Value, int]):
        # one call per pair of dtypes (and device): PyTorch's multi-tensor kernels take lists of
        # one dtype (a mixed list falls back to a copy per tensor). Each input is written once
        # (``input_write_batch``), so the order between the calls does not matter
        by_dtypes: dict = {}
        for n in nodes:
            dst, src = n.args[0].meta, n.args[1].meta
            by_dtypes.setdefault((dst.dtype, src.dtype, dst.device), []).append(n)
        self.batches = [([slots[n.args[0]] for n in ns], [slots[n.args[1]] for n in ns]) for ns in by_dtypes.values()]
        self.out = [(slots[n.outputs[0]], slots[n.args[0]]) for n in nodes]

    def __call__(self, env: list, sym_key=None, sym_values=None) -> None:
        for dst, src in self.batches:
            torch._foreach_copy_([env[s] for s in dst], [env[s] for s in src])
        for s, d in self.out:
            env[s] = env[d]


def input_write_batch(graph: Graph, steps: list) -> list[Node]:
    """The ``copy_`` calls of ``steps`` that :class:`InputWriteBatch` can run at the last one's
    place: each writes a graph input from a value of the same shape and device, nothing reads
    its result, and no later step reads the input it writes (so delaying the write changes
    nothing). Fewer than two: none."""
    inputs = set(graph.inputs)
    returned = set(values_in(graph.outputs))
    last_read: dict[Value, int] = {}
    for i, st in enumerate(steps):
        for v in _step_reads(st):
            last_read[v] = i
    found: list[Node] = []
    for i, st in enumerate(steps):
        if not isinstance(st, Node) or not st.is_call or st.target is not torch.ops.aten.copy_.default:
            continue
        if st.kwargs or len(st.args) != 2 or len(st.outputs) != 1:
            continue
        dst, src = st.args
        if not (isinstance(dst, Value) and isinstance(src, Value) and dst in inputs) or st.outputs[0] in returned:
            continue
        if dst.meta is None or src.meta is None or tuple(dst.meta.shape) != tuple(src.meta.shape) \
                or dst.meta.device != src.meta.device:
            continue
        # a later read of the input (another write to it included) or of the call's result
        if last_read.get(dst, i) > i or last_read.get(st.outputs[0], i) > i:
            continue
        found.append(st)
    return found if len(found) >= 2 else []


def run_call(node: Node, env: list, slots: dict[Value, int], sym_values: dict | None = None) -> None:
    """Run a node as its ATen (or Python) call, reading and writing ``env``. Sizes left
    symbolic in its arguments (views built from metadata) are evaluated with ``sym_values``."""
    resolve = lambda v: env[slots[v]]
    args = _with_sizes(map_values(node.args, resolve), sym_values)
    kwargs = _with_sizes(map_values(node.kwargs, resolve), sym_values)
    result = node.target(*args, **kwargs)
    if len(node.outputs) == 1:
        env[slots[node.outputs[0]]] = result
    else:
        for o, r in zip(node.outputs, result):
            env[slots[o]] = r


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
    """

    _boxed_call = True

    def __init__(self, seg: Segmentation, options: Options, name: str = "graph"):
        self._boxed_call = True  # in the instance dict, so that wrappers copying __dict__ keep it
        self.segmentation = seg
        self.options = options
        self.name = name
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
        for step in seg.steps:
            if isinstance(step, FusionGroup):
                runner = GroupRunner(step, self.slots, graph.symbols, options, self.store, self.stats)
                runner.device_guarded = guarded
                self.steps.append(runner)
                self.runners.append(runner)
            elif step.reason in (BATCHED_CAST, BATCHED_CAST_LATE) or id(step) in batches:
                self.steps.append(step)
                self.runners.append(batches.get(id(step), _nothing))
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
        self.fx_graph = None
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
            sym_values = {s: v for (s, _), v in zip(self.symbols, sym_key)}
        else:
            sym_key, sym_values = (), {}
        if sym_key not in self.prepared:
            self._prepare(env, sym_key, sym_values)
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

    def _prepare(self, env: list, sym_key, sym_values) -> None:
        """Plan every group for these sizes from the traced metadata and compile in parallel."""
        t0 = time.perf_counter()
        if self.prepared:
            if recompile_log.isEnabledFor(logging.INFO):  # which input dims the symbols are
                where = {s: f"input {i} dim {d}" if d is not None else f"size argument {i}" for s, (i, d) in self.symbols}
                sizes = ", ".join(f"{s} ({where.get(s, '?')}) = {v}" for s, v in sym_values.items())
                recompile_log.info("%s: new sizes %s; planning every group again", self.name, sizes)
            self.stats["events"].append({"group": "*", "reason": f"new sizes {sym_values}"})
        jobs = []
        runners = []
        todo = [step for step in self.steps if isinstance(step, GroupRunner) and not step.failed]
        progress = CompileProgress(self.name, len(todo), self.options.progress)
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
                c = plan.config
                if c.scheduler == "reduction.inner_outer" and reduction.INNER_OUTER_FIT:
                    c = step.fit_inner_outer(plan, dummies + outs + ws, not self.options.exact_rounding)
                seed = [torch.zeros(2, dtype=torch.int64, device=outs[0].device)] if step.random else []
                for i, st in enumerate(c.stages):
                    jobs.append((plan.kernel, i, st.grid, dummies + outs + ws + plan.scalars + seed, st.XBLOCK,
                                 st.RBLOCK, st.num_warps, not self.options.exact_rounding))
                    runners.append(step)
        t1 = time.perf_counter()
        progress.compiling(len(jobs))
        try:
            errors = compile_all(jobs, self.options.compile_threads, on_done=progress.compiled,
                                 processes=self.options.compile_processes)
        finally:
            progress.close()
        self.stats["compile_seconds"] += time.perf_counter() - t1
        for step, err in zip(runners, errors):
            if err is not None and step.failed is None:
                step.fail(err)
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


def _registry_runner(node: Node, slots: dict[Value, int], env: list, sym_key=None, sym_values=None) -> None:
    run_registry_node_eagerly(node, env, slots, sym_values or {})


def _step_reads(step) -> list[Value]:
    """The values a step reads when it runs: a group's inputs; a call's arguments; a registry
    node outside any group runs as its ATen call (:func:`_call_runner`), whose arguments may
    name more tensors than its operands, except constants and random draws (rebuilt from their
    metadata)."""
    if isinstance(step, FusionGroup):
        return list(step.inputs)
    if step.is_call or REGISTRY[step.op].kind in ("constant", "random"):
        return step.input_values()
    found: list[Value] = []
    _collect_values((step.args, step.kwargs), found)
    return list(dict.fromkeys(step.input_values() + found))
