"""One fusion group at run time: its launch plans per size signature, its launches, its fallback.

Takes a :class:`~torchfuse.segment.FusionGroup` (and the graph's value slots); a
:class:`GroupRunner` is called with the graph's environment on every call. The first call
with a new size signature plans the group (:meth:`GroupRunner.make_plan`: domain sizes, loop
layout from :func:`~torchfuse.schedulers.layout.analyze`, the launch configuration the
registry's heuristics choose, the kernel from :func:`~torchfuse.codegen.triton.generate`, the
argument list: everything that does not depend on data pointers); later calls check the
inputs' layouts against the plan, allocate outputs and launch (through the generated launch
function of :mod:`.launch` once every stage is compiled). A group whose code cannot be
generated or compiled runs its ops through ATen, with one warning.
"""
from __future__ import annotations

import logging
import threading
import time
import warnings
from typing import Any

import torch

from .. import schedulers
from ..codegen.reductions import workspace_dtypes
from ..codegen.triton import generate, has_random, index_values
from ..config import Options
from ..ir.graph import Value, as_int
from ..ir.ops import Unsupported
from ..schedulers import GroupTraits, LaunchConfig, Target, inner_outer, layout as layout_mod
from ..segment import FusionGroup
from . import launch
from .cache import SourceStore
from .calls import run_registry_node_eagerly
from .compile import Kernel, int_spec, launch_hooks_set, load, registers_of
from .warn import user_stacklevel

log = logging.getLogger("torchfuse.schedule")
recompile_log = logging.getLogger("torchfuse.recompile")


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
        #: specialization -> per stage ``(binary, grid x, grid y, XBLOCK, RBLOCK)`` (a
        #: :class:`~torchfuse.runtime.compile.StaticBinary` or ``TritonBinary``), once every
        #: stage has its binary
        self.direct: dict = {}
        device = out_specs[0][3] if out_specs else None
        #: the CUDA device launched on; -1 on a CPU (no stream to read: :func:`raw_stream`)
        self.device_index = (device.index or 0) if device is not None and device.type == "cuda" else -1
        self.kernel = kernel
        self.config = config
        self.in_shapes = in_shapes
        self.in_strides = in_strides
        self.out_specs = out_specs
        self.scalars = scalars
        self.bytes_moved = bytes_moved
        #: per output ``(alloc, shape, stride, dtype)``; ``device_guarded``: the caller makes the
        #: outputs' CUDA device current (see ``_allocator``)
        self.allocs = [(launch.allocator(dev, device_guarded), sh, st, dt) for sh, st, dt, dev in out_specs]
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
        #: called when the group fails (CompiledGraph drops its generated functions, which
        #: bound the group's launch function)
        self.on_fail = None
        self.write_reproducer = None  # set by compile_graph: failure message -> script path (report hook)
        self.reproducer: str | None = None
        self.plan_cache = None  # set by compile_graph (runtime.plan_cache.attach), with plan_slot
        self.plan_slot = ""
        self.fallback_nodes = group.nodes
        self.slots = slots
        #: the schedulers whose structural check accepts the group, in the registry's order
        #: (their heuristics are asked in that order at every new plan), and what the
        #: heuristics read of the group
        self.schedulers = schedulers.candidates(group)
        self.traits = GroupTraits.of(group)
        self.random = has_random(group)
        # the calling thread's seed (see ``seed``): threads calling one compiled graph at once
        # each launch with the seeds their own call drew
        self._seeds = threading.local()
        two_stage = any(s.stages == 2 for s in self.schedulers)
        self.workspace_dtypes = workspace_dtypes(group) if two_stage else []
        #: set by CompiledGraph when it makes the group's device current around every call
        self.device_guarded = False
        #: multiprocessors the heuristics plan for (``Options.launch_configs_for_sm_count``, else
        #: the device's own) and whether they pick the interpreter's blocks
        self.sm_count = 0
        self.interpret_blocks = options.interpret and not options.launch_configs_for_sm_count
        if group.outputs and group.outputs[0].meta.device.type == "cuda" and torch.cuda.is_available():
            self.sm_count = torch.cuda.get_device_properties(group.outputs[0].meta.device).multi_processor_count

    @property
    def seed(self) -> tuple[torch.Tensor, int] | None:
        """The current call's seed, set by CompiledGraph around each call: ``(tensor, address)``
        of one int64 in device memory (None: draw one per launch). Kept per thread: a value on
        the runner itself let a concurrent call of the graph replace it mid-call (two calls
        then launched with one seed, the same dropout mask)."""
        return getattr(self._seeds, "value", None)

    @seed.setter
    def seed(self, value: tuple[torch.Tensor, int] | None) -> None:
        self._seeds.value = value

    @property
    def planned_sm_count(self) -> int:
        """The multiprocessors the heuristics plan for: ``Options.launch_configs_for_sm_count``,
        else the device's (0 when unknown)."""
        return self.options.launch_configs_for_sm_count or self.sm_count

    def target(self) -> Target:
        """What the heuristics plan this group's launches for."""
        return Target(sm_count=self.planned_sm_count, interpret=self.interpret_blocks,
                      persistent_max=self.options.persistent_max_elements)

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
        config = schedulers.choose(self.schedulers, rt, self.traits, self.options.tuning, self.target())
        nbytes = sum(_numel(s) * v.meta.dtype.itemsize for v, s in zip(tensors, in_shapes))
        nbytes += sum(_numel(spec[0]) * spec[2].itemsize for spec in out_specs)
        scalars = list(rt.x_sizes) + list(rt.r_sizes)
        for st in rt.strides:
            scalars += list(st)
        # xfull, rfull: 1 when every block of the first stage is full (``Tuning.codegen.all_true_masks``)
        st = config.stages[0]
        scalars += [rt.xnumel, rt.rnumel, int(rt.xnumel > 0 and rt.xnumel % st.XBLOCK == 0),
                    int(rt.rnumel > 0 and rt.rnumel % st.RBLOCK == 0)]
        two_stage = len(config.stages) == 2
        if two_stage:
            scalars += [config.split, config.rchunk]
        # no rows: nothing to launch, except column sums over no rows, which are written (the
        # sum of nothing, then the group's epilogue) by an inner-outer pair's kernels
        launch = rt.xnumel > 0 or (g.outer and rt.rnumel > 0)
        kernel = self._kernel(rt.layout, config) if launch else None
        plan = KernelPlan(kernel, config, tuple(in_shapes), tuple(in_strides), out_specs, scalars, nbytes,
                          self.device_guarded)
        plan.xnumel = rt.xnumel
        plan.rt = rt
        if two_stage and out_specs:
            alloc = plan.allocs[0][0]  # same device as the outputs
            n = schedulers.by_name(config.scheduler).workspace_elements(config, rt)
            plan.workspaces = [(alloc, (n,), (1,), dt) for dt in self.workspace_dtypes]
        if log.isEnabledFor(logging.INFO):
            extent = (f"{rt.xnumel} elements" if config.scheduler == "pointwise"
                      else f"{rt.xnumel} kept x {rt.rnumel} reduced elements")
            log.info("%s: %s over %s: %s (%s)", g.name, config.scheduler, extent,
                     "; then ".join(str(st) for st in config.stages), config.reason)
        return plan

    def fit_inner_outer(self, plan: KernelPlan, pointer_args: list, fp_fusion: bool) -> LaunchConfig:
        """Size a ``reduction.inner_outer`` plan's grid to the programs of its compiled first
        kernel that fit on a multiprocessor (:func:`torchfuse.schedulers.inner_outer.fitted`).
        Compiles the first kernel now (Triton caches it for the launches) with
        ``pointer_args`` (inputs, outputs and workspaces, or stand-ins of their dtypes) and
        the plan's scalars; keeps the plan when that fails. Returns the plan's configuration."""
        c = plan.config
        st = c.stages[0]
        try:
            compiled = plan.kernel.warmup(0, st.grid, pointer_args + plan.scalars, st.XBLOCK, st.RBLOCK,
                                          st.num_warps, fp_fusion)
            device = plan.out_specs[0][3]
            index = device.index if device.index is not None or device.type != "cuda" else torch.cuda.current_device()
            registers = registers_of(compiled, index or 0)
            props = torch.cuda.get_device_properties(device)
            new = inner_outer.fitted(plan.rt, compiled, registers, props, st.num_warps, self.options.tuning,
                                     self.target())
        except Exception as e:  # an optimization only: the heuristic's grid stays
            log.info("%s: inner-outer grid not fitted (%s: %s)", self.group.name, type(e).__name__, e)
            return c
        plan.config = new  # (its reason names the residency even when the grid stays)
        if new.split != c.split:
            plan.scalars[-2] = new.split
            n = inner_outer.SCHEDULER.workspace_elements(new, plan.rt)
            plan.workspaces = [(alloc, (n,), stride, dt) for alloc, _, stride, dt in plan.workspaces]
        log.info("%s: %s (%d registers a thread)", self.group.name, plan.config.reason, registers)
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
            src = stored or generate(self.group, layout, config.scheduler, self.options.exact_rounding,
                                     self.options.tuning)
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
        kernel = load(src, self.store, self.options.interpret, self.options.tuning.runtime.interpreter_gpu_helpers)
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
                spec += tuple(int_spec(ins[i]) for i in self.scalar_in)
            ws = [alloc(sh, st, dt) for alloc, sh, st, dt in plan.workspaces] if plan.workspaces else None
            direct = plan.direct.get(spec)
            if direct is not None and not launch_hooks_set():
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
                    args.append((self.seed or launch.draw_seeds(1, outs[0].device))[1])
                stream = launch.raw_stream(plan.device_index)
                with launch.profiler_range(plan.kernel.source.name):
                    for binary, gx, gy, xb, rb in direct:
                        binary(gx, gy, stream, [*args, xb, rb])
            else:
                args = ins + outs
                if ws:
                    args = args + ws
                args = args + plan.scalars
                if self.random:
                    args.append((self.seed or launch.draw_seeds(1, outs[0].device))[0])
                try:
                    # profiler hook: name the launch after its kernel in torch.profiler traces
                    with launch.profiler_range(plan.kernel.source.name):
                        for i, st in enumerate(c.stages):
                            plan.kernel.launch(i, st.grid, args, st.XBLOCK, st.RBLOCK, st.num_warps, plan.binaries,
                                               spec, plan.device_index, not self.options.exact_rounding)
                except Exception as e:  # e.g. a new specialization that fails to compile
                    self.fail(e)
                    return self.run_fallback(env, sym_values)
                binaries = [plan.binaries.get((i, spec)) for i in range(len(c.stages))]
                if all(b is not None for b in binaries):
                    plan.direct[spec] = [(b, st.grid[0], st.grid[1] if len(st.grid) > 1 else 1, st.XBLOCK, st.RBLOCK)
                                         for b, st in zip(binaries, c.stages)]
                    if (sym_key not in self.fast and not self.scalar_in
                            and self.plans.get(sym_key) is plan):
                        try:
                            self.fast[sym_key] = self._fast_launcher(plan, spec, plan.direct[spec])
                        except Exception as e:  # an optimization only: the general path stays
                            log.info("%s: no generated launch function (%s: %s)", self.group.name,
                                     type(e).__name__, e)
        for s, o in zip(self.out_slots, outs):
            env[s] = o

    def _fast_launcher(self, plan: KernelPlan, spec: tuple, direct: list):
        """The generated launch function of ``plan`` (:func:`torchfuse.runtime.launch.build_launcher`)."""
        return launch.build_launcher(self, plan, spec, direct)

    def fail(self, e: BaseException) -> None:
        self.failed = f"{type(e).__name__}: {e}"
        self.fast.clear()
        if self.on_fail is not None:
            self.on_fail()
        # reproducer hook (torchfuse.report.reproducer): a standalone script of the graph, named in the warning
        if self.write_reproducer is not None:
            self.reproducer = self.write_reproducer(f"fusion group {self.group.name}: {self.failed}")
        warnings.warn(f"torchfuse: fusion group {self.group.name} could not be compiled and runs through "
                      f"ATen instead ({self.failed.splitlines()[0][:300]})"
                      + (f"; reproducer: {self.reproducer}" if self.reproducer else ""), RuntimeWarning, stacklevel=user_stacklevel())
        self.stats["fallbacks"] += 1

    def run_fallback(self, env: list, sym_values: dict | None = None) -> None:
        for node in self.fallback_nodes:
            run_registry_node_eagerly(node, env, self.slots, sym_values or {})


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
    """Write a kernel's source under ``dump_dir``; a directory that cannot be written is
    logged, not raised (the graph's compile has warned of it: a debugging aid)."""
    import os

    try:
        os.makedirs(root, exist_ok=True)
        with open(os.path.join(root, name), "w") as f:
            f.write(text)
    except OSError as e:
        log.info("kernel %s not dumped: %s: %s", name, type(e).__name__, e)
