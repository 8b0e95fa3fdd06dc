"""One generated straight-line Python function per compiled graph and set of sizes.

Takes a :class:`~torchfuse.runtime.executor.CompiledGraph` whose steps have run once for a
size signature (plans made, view replays recorded, launch functions generated); returns
``run(env) -> outputs``, which does what the graph's interpreted loop
(``CompiledGraph._interpret``) does, step by step in the same order, without interpreting
anything per step:

* an ATen call is one direct call of its ``OpOverload``'s C++ entry point (a matrix
  product's Python binding: :func:`~torchfuse.runtime.calls.entry_point`), with its
  arguments written inline (environment slots, constants bound as names, symbolic sizes
  evaluated for the signature);
* a recorded view (:class:`~torchfuse.runtime.calls.ViewCall`) is one reinterpretation of
  its input, behind the same guard (the input's sizes and strides are the recorded ones and
  it does not require grad), else the ``ViewCall`` itself runs;
* a fusion group calls its generated launch function (:func:`~torchfuse.runtime.launch.build_launcher`),
  and its :class:`~torchfuse.runtime.group.GroupRunner` when that declines or does not exist
  (no binaries yet, a failed group, a changed input layout);
* layouts known when the function is written replace checks at run time: a group whose
  launch function ran returned its planned layouts (a local flag says so), a matrix product
  returns a new contiguous tensor (which, grad mode off, does not require grad); a view of
  such a tensor, and a launch function whose inputs are all such tensors, skip their checks
  of sizes and strides (each a few microseconds of host time, hundreds of times a training
  step), and a matrix product's result is returned without the check that it is not a view;
* the pad kernel's pads (:class:`~torchfuse.runtime.pad.PadRunner`), the max-pool kernels'
  poolings (:class:`~torchfuse.runtime.pool.PoolRunner`), batched copies and registry nodes
  call their runners; launch functions get the device's current stream, read (and launch
  hooks checked) once a call; dead slots are set to ``None`` where
  the loop frees them; random groups get the call's seeds as in the loop; outputs are returned
  as the loop returns them.

Why: the loop's own bookkeeping (iteration, a Python frame per step, argument lists built per
call, the liveness list) costs host time on every one of the ~1400 steps of a transformer's
training step, time during which the GPU may sit idle; Inductor's generated ``call()`` does
the same work as straight-line code.
"""
from __future__ import annotations

import logging
from typing import Any

import sympy
import torch

from ..ir.from_fx import getitem_path
from ..ir.graph import Node, Value, as_int, is_symbolic, map_values
from .calls import MATRIX_PRODUCTS, ViewCall, _no_view, _nothing, _with_sizes, entry_point
from .compile import launch_hooks_set, raw_stream
from .group import GroupRunner
from .launch import REINTERPRET, draw_seeds

log = logging.getLogger("torchfuse.schedule")


class _Source:
    """The lines of a generated function and the names bound for it."""

    def __init__(self):
        self.lines: list[str] = []
        self.ns: dict[str, Any] = {}
        self.names: dict[int, str] = {}  # id of a bound object -> its name (ns keeps it alive)

    def bind(self, value: Any, prefix: str) -> str:
        name = self.names.get(id(value))
        if name is None:
            name = self.names[id(value)] = f"{prefix}{len(self.ns)}"
            self.ns[name] = value
        return name

    def emit(self, line: str, indent: int = 1) -> None:
        self.lines.append("    " * indent + line)


def build_graph_function(graph, sym_key: tuple, sym_values: dict) -> tuple[Any, str]:
    """Generate the straight-line function of ``graph`` for the size signature ``sym_key``.

    Args:
        graph: a :class:`~torchfuse.runtime.executor.CompiledGraph` that has run once with
            these sizes (its plans are made and its view replays recorded).
        sym_key: the size symbols' values, in ``graph.symbols`` order (``()``: static shapes).
        sym_values: symbol -> value for the same sizes.

    Returns:
        ``(run, source)``: ``run(env)`` takes the call's environment (a list of
        ``graph.n_slots`` entries, the inputs in the first ``graph.n_inputs``) and returns the
        call's outputs; ``source`` is its Python text.

    Raises:
        NotImplementedError: a step this generator cannot write (the caller interprets then).
    """
    src = _Source()
    ns = src.ns
    ns.update({"_draw": draw_seeds, "_nv": _no_view, "_RT": REINTERPRET})
    sk, sv = src.bind(sym_key, "SK"), src.bind(sym_values, "SV")
    src.lines.append("def run(env):")
    randoms = graph.random_runners
    if randoms:  # one draw from the device's generator per call, a seed for each random group
        dev = src.bind(graph.random_device, "DEV")
        src.emit(f"_s, _a = _draw({len(randoms)}, {dev})")
        for k, r in enumerate(randoms):
            src.emit(f"{src.bind(r, 'R')}.seed = (_s[{2 * k}:{2 * k + 1}], _a + {16 * k})")
        src.emit("del _s")
    # slot -> (flag, sizes, strides): a tensor whose layout is known, and which does not require
    # grad, when the flag (a local of the function) is true: the output of a group its launch
    # function ran (fresh, never tracked by autograd), a matrix product's while grad mode is off
    # (so in every graph AOTAutograd calls), and views of those
    ns["_grad"] = torch.is_grad_enabled
    src.emit("_ng = not _grad()")
    known: dict[int, tuple] = {}
    fresh: set[int] = set()  # slots of ATen results that are never views
    # the launch functions' devices: their current streams are read, and launch hooks checked,
    # once a call (the streams are set at the top of the function, below)
    streams: dict[int, str] = {}  # device index -> the local holding its stream
    top = len(src.lines)
    for run, step, dead in zip(graph.runners, graph.steps, graph.release):
        if run is _nothing:
            pass
        elif isinstance(run, GroupRunner):
            g = src.bind(run, "G")
            fast = run.fast.get(sym_key)
            if fast is not None and run.failed is None:
                flag = f"f{len(src.lines)}"
                trusted = _trusted(run, sym_key, known)
                plan = run.plans.get(sym_key)
                device = int(plan.device_index) if plan is not None else None
                stream = "" if device is None else f", stream={streams.setdefault(device, f'_st{len(streams)}')}"
                src.emit(f"{flag} = {src.bind(fast, 'L')}(env, {'False' if trusted is None else trusted}{stream})")
                src.emit(f"if not {flag}:")
                src.emit(f"{g}(env, {sk}, {sv})", 2)
                for slot, (_, shape, stride, _) in zip(run.out_slots, plan.allocs if plan is not None else ()):
                    known[slot] = (flag, tuple(shape), tuple(stride))
            else:
                src.emit(f"{g}(env, {sk}, {sv})")
        elif isinstance(run, ViewCall):
            _view(src, run, known)
        elif getattr(run, "aten_call", None) is step and step.target is not None:  # a call_runner closure
            _call(src, step, graph.slots, sym_values)
            if step.target in FRESH_CONTIGUOUS and len(step.outputs) == 1:
                fresh.add(graph.slots[step.outputs[0]])
                layout = _static_layout(step)
                if layout is not None:
                    known[graph.slots[step.outputs[0]]] = ("_ng", *layout)
        else:  # batched copies, registry nodes, the pad and max-pool kernels' calls
            src.emit(f"{src.bind(run, 'B')}(env, {sk}, {sv})")
        for s in dead:
            src.emit(f"env[{s}] = None")
    if streams:  # with a launch hook set, no stream: each launch function declines
        ns["_hooks"], ns["_stream"] = launch_hooks_set, raw_stream
        head = ["    _hk = _hooks()"]
        head += [f"    {local} = None if _hk else _stream({d})" for d, local in streams.items()]
        src.lines[top:top] = head
    for r in randoms:  # the seeds die with the call (a CUDA graph pool holds no strays)
        src.emit(f"{src.bind(r, 'R')}.seed = None")
    for s in sorted(graph.call_outputs - fresh):
        src.emit(f"env[{s}] = _nv(env[{s}])")
    if graph.output_slots is not None:
        items = [f"env[{s}]" if s >= 0 else src.bind(c, "C") for s, c in graph.output_slots]
        src.emit(f"return [{', '.join(items)}]")
    else:
        ns["_map"], ns["_slots"] = map_values, graph.slots
        src.emit(f"return _map({src.bind(graph.output_spec, 'C')}, lambda v: env[_slots[v]])")
    text = "\n".join(src.lines) + "\n"
    exec(compile(text, f"<torchfuse graph {graph.name}>", "exec"), ns)
    return ns["run"], text


def _trusted(run: GroupRunner, sym_key: tuple, known: dict) -> str | None:
    """The condition under which every input the launch function of ``run`` checks has its
    planned layout, from ``known``; ``None`` when one input's is unknown."""
    plan = run.plans.get(sym_key)
    if plan is None or run.scalar_in or not run.checked:
        return None
    flags = []
    for i in run.checked:
        layout = known.get(run.in_slots[i])
        if layout is None or layout[1:] != (tuple(plan.in_shapes[i]), tuple(plan.in_strides[i])):
            return None
        if layout[0] not in flags:
            flags.append(layout[0])
    return " and ".join(flags)


def _view(src: _Source, run: ViewCall, known: dict) -> None:
    """A view chain: its recorded reinterpretation behind the ViewCall's guard, else the call.
    When its input's layout is known to be the recorded one (``known``: a group's output from
    its launch function, or a view of one), the guard is that flag alone: the checks of sizes,
    strides and ``requires_grad`` cost more host time than the reinterpretation itself."""
    call = src.bind(run, "V")
    if run.key is None or REINTERPRET is None:
        src.emit(f"{call}(env)")
        return
    shape, stride = src.bind(run.key[0], "KH"), src.bind(run.key[1], "KS")
    size, out_stride, delta = run.view
    x = f"env[{run.src}]"
    guard = f"{x}.stride() == {stride} and {x}.shape == {shape} and not {x}.requires_grad"
    layout = known.get(run.src)
    # the recorded view must be for these sizes: a view recorded on a call with other sizes
    # (graphs with symbolic sizes) keeps its checks
    if layout is not None and layout[1:] == (tuple(run.key[0]), tuple(run.key[1])):
        known[run.out] = (layout[0], tuple(size), tuple(out_stride))
        guard = f"{layout[0]} or ({guard})"
    src.emit(f"if {guard}:")
    src.emit(f"env[{run.out}] = _RT({x}, {src.bind(size, 'VH')}, {src.bind(out_stride, 'VS')}, {int(delta)})", 2)
    src.emit("else:")
    src.emit(f"{call}(env)", 2)


#: ATen ops whose result is always a new contiguous tensor: a view of one needs no layout
#: check, and while grad mode is off (AOTAutograd runs the graphs so) no check that it
#: requires grad
FRESH_CONTIGUOUS = MATRIX_PRODUCTS


def _static_layout(node: Node) -> tuple[tuple, tuple] | None:
    """The traced sizes and strides of ``node``'s only result when all are integers, else
    ``None``."""
    meta = node.outputs[0].meta if len(node.outputs) == 1 else None
    if meta is None or any(is_symbolic(d) for d in (*meta.shape, *meta.stride)):
        return None
    return tuple(int(d) for d in meta.shape), tuple(int(d) for d in meta.stride)


def _call(src: _Source, node: Node, slots: dict, sym_values: dict) -> None:
    """An ATen call as one direct call, as :func:`~torchfuse.runtime.calls.call_runner`'s
    closure runs it."""
    target = node.target
    outs = [slots[o] for o in node.outputs]
    if target is getitem_path and len(outs) == 1 and isinstance(node.args[0], Value):
        # a tuple element: indexing written inline, no call
        index = "".join(f"[{int(i)}]" for i in node.args[1])
        src.emit(f"env[{outs[0]}] = env[{slots[node.args[0]]}]{index}")
        return
    target = entry_point(target, node)  # as the closure calls it
    parts = [_argument(src, a, slots, sym_values) for a in node.args]
    parts += [f"{k}={_argument(src, v, slots, sym_values)}" for k, v in node.kwargs.items()]
    call = f"{src.bind(target, 'F')}({', '.join(parts)})"
    if len(outs) == 1:
        src.emit(f"env[{outs[0]}] = {call}")
        return
    src.emit(f"_r = {call}")
    for k, s in enumerate(outs):  # as the closure's zip: results beyond the outputs are dropped
        src.emit(f"env[{s}] = _r[{k}]")
    src.emit("del _r")


def _argument(src: _Source, a: Any, slots: dict, sym_values: dict) -> str:
    """Python text for one call argument: a slot read, an int, or a bound constant (one object
    for every call, as the closure passes its constants)."""
    if isinstance(a, Value):
        return f"env[{slots[a]}]"
    if isinstance(a, sympy.Expr):
        return str(int(a) if a.is_Integer else as_int(a, sym_values))
    if isinstance(a, (list, tuple)):
        if not any(_reads(x) for x in a):  # all constants: evaluated once, bound
            return src.bind(_with_sizes(a, sym_values), "C")
        items = ", ".join(_argument(src, x, slots, sym_values) for x in a)
        return f"[{items}]" if isinstance(a, list) else f"({items},)"
    if isinstance(a, dict):
        raise NotImplementedError("a dict argument")
    if a is None or isinstance(a, bool) or type(a) is int:
        return repr(a)
    return src.bind(a, "C")


def _reads(a: Any) -> bool:
    if isinstance(a, Value):
        return True
    if isinstance(a, (list, tuple)):
        return any(_reads(x) for x in a)
    return isinstance(a, dict)

