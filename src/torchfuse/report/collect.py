"""Collect: the compiler's own objects -> explain records.

Takes what the pipeline already produced (a :class:`~torchfuse.runtime.executor.CompiledGraph`
with its segmentation, group runners, launch plans and stats; the unfused graphs
``torchfuse.backend`` records; TorchDynamo's captured graphs and break reasons) and returns the
plain records of :mod:`torchfuse.report.result`. Nothing is recomputed: groups, plans, launch
configurations, kernel sources, reasons and timings are read as the compiler left them.
The only added knowledge is which ATen ops are vendor-library calls (:data:`LIBRARY_OPS`),
to tell "runs in cuBLAS/cuDNN by design" apart from "no fusion rule yet".
"""
from __future__ import annotations

import functools
import itertools
import linecache
import operator
import re
from pathlib import Path
from typing import Any, Iterable

import torch

from ..ir.from_fx import CPU_REASON, FUSE_OFF_REASON
from ..ir.graph import Node, Value
from ..ir.random_state import RNG_STATE_OPS
from ..segment import FusionGroup
from ..segment.rewrites import LAYOUT_STAND_IN
from .result import (NO_WORK, OWN_KERNELS, AtenCall, GraphBreak, GraphReport, GroupReport, KernelReport, LaunchStage,
                     PlanReport, Recompilation, SourceLocation, Step)

from ..ir.ops import LIBRARY_OPS, is_library_op  # noqa: F401  (re-exported for the report)

#: call reasons that are bookkeeping rather than work (not drawn, not listed)
_HIDDEN_REASONS = ("tuple element",)
_VIEW = "view (no data moves)"
#: calls listed in the tables but not drawn (they move no data): the drawing looks through them
_UNDRAWN_REASONS = (_VIEW, "module constant", LAYOUT_STAND_IN)

_DYNAMO_ROOT = re.compile(r"^L\['[^']*'\]\.?")  # Dynamo's name of the compiled module: L['self'], L['fn']
_FRAME = re.compile(r'File "([^"]+)", line (\d+), in ([^\n]+)\n(?:[ \t]*([^\n]*)\n?)?')


#: PyTorch's own Python (``torch/nn/functional.py``'s ``pad``...) and the fusion API's (a
#: ``@fused`` function's op is called from ``torchfuse/fusion``), whose lines are not the user's
_TORCH_DIR = str(Path(torch.__file__).resolve().parent)
_FUSION_DIR = str(Path(__file__).resolve().parent.parent / "fusion")


def location_from_stack(stack_trace: str | None) -> SourceLocation | None:
    """The innermost frame of an FX node's ``meta["stack_trace"]`` outside PyTorch's own
    package and torchfuse's fusion API (an op that ``F.pad``'s Python makes is the user's call
    of ``F.pad``, a ``@fused`` function's op the user's call of it), else the innermost frame;
    ``None`` without frames."""
    if not stack_trace:
        return None
    frames = _FRAME.findall(stack_trace)
    if not frames:
        return None
    outside = [f for f in frames if not _inside(f[0], _TORCH_DIR) and not _inside(f[0], _FUSION_DIR)]
    file, line, function, code = (outside or frames)[-1]
    return SourceLocation(file=file, line=int(line), function=function.strip(), code=code.strip())


@functools.lru_cache(maxsize=4096)
def _inside(file: str, directory: str) -> bool:
    """Whether ``file`` lies under ``directory`` (a resolved path), links resolved."""
    try:
        return str(Path(file).resolve()).startswith(directory + "/")
    except (OSError, ValueError):
        return False


def module_of(nn_module_stack: dict | None) -> str:
    """``path (Class)`` of the innermost module in an FX node's ``meta["nn_module_stack"]``."""
    if not nn_module_stack:
        return ""
    path, cls = list(nn_module_stack.values())[-1][:2]
    path = _python_path(_DYNAMO_ROOT.sub("", str(path))) or "(root)"
    return f"{path} ({getattr(cls, '__name__', str(cls).rsplit('.', 1)[-1])})"


def _python_path(path: str) -> str:
    """A module path as Python indexes it: ``layers.0.attn`` -> ``layers[0].attn``; a child of
    a compiled ``nn.Sequential`` itself (``0``) -> ``model[0]``, which a bare ``0`` would not
    say."""
    out = ""
    for part in path.split(".") if path else ():
        out += f"[{part}]" if part.isdigit() else (f".{part}" if out else part)
    return f"model{out}" if out.startswith("[") else out


def location_of_fx_node(fx_node) -> SourceLocation | None:
    """The user's line and module an FX node came from, or ``None`` when neither is known."""
    if fx_node is None:
        return None
    loc = location_from_stack(fx_node.meta.get("stack_trace"))
    module = module_of(fx_node.meta.get("nn_module_stack"))
    if loc is None and module:
        return SourceLocation(file="", line=0, module=module)
    if loc is not None:
        loc.module = module
    return loc


def op_name(target: Any) -> str:
    """``aten.addmm.default`` for an OpOverload, the function's name otherwise."""
    if target is None:
        return ""
    text = str(target)
    return text if text.startswith(("aten.", "prims.")) else getattr(target, "__name__", text)


def _returns_tensors(target: Any) -> bool:
    """Whether an ATen op's schema returns a tensor: a multi-output call (``convolution_backward``,
    ``max_pool2d_with_indices``) holds its tuple in a value without tensor metadata, which is
    not a size computation."""
    schema = getattr(target, "_schema", None)
    return schema is not None and any("Tensor" in str(r.type) for r in schema.returns)


def call_category(node: Node) -> str:
    """``library``, ``unsupported``, ``view``, ``shape`` (arithmetic on sizes, no tensor),
    ``constant``, ``allocation`` (an uninitialized tensor: a random draw's stand-in operand,
    :func:`torchfuse.segment.rewrites.draw_from_layout_stand_ins`), ``rng_state`` (a random
    draw of a checkpointed region, :mod:`torchfuse.ir.random_state`), ``disabled``,
    ``state`` (a write back to a graph input: BatchNorm's running statistics), ``pad`` (a zero
    pad that torchfuse's pad kernel writes, :mod:`torchfuse.runtime.pad`), ``pool`` (a max pooling
    that torchfuse's kernels write, :mod:`torchfuse.runtime.pool`), ``fusion`` (an op the
    user defined with :mod:`torchfuse.fusion`) or ``fusion_aten`` (such an op run op by op
    through ATen: CPU tensors without its ``interpret`` option) for a call node."""
    from ..decompose import INPUT_WRITE
    from ..runtime.calls import VIEW_OPS
    from ..runtime.pad import PAD_KERNEL
    from ..runtime.pool import POOL_KERNEL

    # a view moves no data whatever kept it out of a group (fusion off, CPU tensors)
    if node.reason == _VIEW or node.target in VIEW_OPS:
        return "view"
    if node.reason == LAYOUT_STAND_IN:
        return "allocation"
    if node.target in RNG_STATE_OPS:  # its result is a tuple (state, tensor) in the forward: not sizes
        return "rng_state"
    if node.outputs and all(o.meta is None for o in node.outputs) and not _returns_tensors(node.target):
        return "shape"  # arithmetic on sizes (a symbolic size's quotient): host work, no tensor
    if node.reason == INPUT_WRITE:
        return "state"
    if node.reason == "module constant":
        return "constant"
    if is_library_op(node.target):
        return "library"
    if getattr(node.target, "namespace", None) == "torchfuse":
        from ..fusion.autograd import runs_op_by_op

        # the user's own fused op (torchfuse.fusion): its kernels, not ATen's, unless on CPU
        # tensors without interpret, where it runs op by op
        devices = [v.meta.device for v in node.input_values() if v.meta is not None]
        return "fusion_aten" if devices and runs_op_by_op(node.target, devices[0]) else "fusion"
    if node.reason == PAD_KERNEL:
        return "pad"
    if node.reason == POOL_KERNEL:
        return "pool"
    if node.reason in (FUSE_OFF_REASON, CPU_REASON):
        return "disabled"
    return "unsupported"


def split_calls(nodes: Iterable[Node]) -> tuple[list[Node], list[Node], list[Node]]:
    """A segmentation's call nodes as every report counts them: ``(ATen calls, views and
    module constants, calls of torchfuse's own kernels)``; tuple elements (bookkeeping) are in
    none."""
    work: list[Node] = []
    idle: list[Node] = []
    own: list[Node] = []
    for n in nodes:
        if n.reason not in _HIDDEN_REASONS:
            category = call_category(n)
            (idle if category in NO_WORK else own if category in OWN_KERNELS else work).append(n)
    return work, idle, own


def _meta_text(v: Value) -> str:
    if v.meta is not None:
        return f"{v.name}: {v.meta}"
    return f"{v.name}: {type(v.example).__name__}"


def _sizes_text(symbols: list, sym_key: tuple) -> str:
    if not symbols:
        return "static"
    return ", ".join(f"{sym}={value}" for (sym, _), value in zip(symbols, sym_key))


def _plan_sym_key(key: Any) -> tuple:
    # plans are keyed by the size-symbol tuple, or (that tuple, shapes, strides) for extra layouts
    return key[0] if key and isinstance(key[0], tuple) else key


def _locations(nodes: Iterable[Node], fx_nodes: dict) -> list[SourceLocation]:
    seen, out = set(), []
    for n in nodes:
        loc = location_of_fx_node(fx_nodes.get(n.source))
        if loc is not None and (loc.file, loc.line, loc.module) not in seen:
            seen.add((loc.file, loc.line, loc.module))
            out.append(loc)
    return out


def plan_report(plan, sizes: str) -> PlanReport:
    """A :class:`PlanReport` from an executor ``KernelPlan``."""
    c = plan.config
    source = plan.kernel.source if plan.kernel is not None else None
    return PlanReport(
        sizes=sizes,
        input_shapes=[[int(s) for s in shape] for shape in plan.in_shapes],
        scheduler=c.scheduler,
        stages=[LaunchStage(grid=[int(g) for g in st.grid], XBLOCK=st.XBLOCK, RBLOCK=st.RBLOCK,
                            num_warps=st.num_warps) for st in c.stages],
        reason=c.reason,
        kernel=source.name if source is not None else "",
        kernel_key=source.key if source is not None else "",
        bytes_moved=int(plan.bytes_moved),
    )


def group_report(runner, symbols: list, fx_nodes: dict) -> GroupReport:
    """A :class:`GroupReport` from a ``GroupRunner`` (its group, plans and failure)."""
    g: FusionGroup = runner.group
    plans = [plan_report(p, _sizes_text(symbols, _plan_sym_key(k))) for k, p in runner.plans.items()]
    kernel = next((p.kernel for p in plans if p.kernel), "")
    if not kernel:
        kernel = next((s.name for s in runner.sources.values()), "")
    return GroupReport(
        id=g.id, name=g.name, kind=g.kind, kernel=kernel, ops=[n.op for n in g.nodes],
        nodes=[repr(n) for n in g.nodes], inputs=[_meta_text(v) for v in g.inputs],
        outputs=[_meta_text(v) for v in g.outputs], domain=str(g.domain), plans=plans,
        failed=runner.failed, reproducer=getattr(runner, "reproducer", None), locations=_locations(g.nodes, fx_nodes))


def kernel_reports(runners) -> list[KernelReport]:
    """Each generated kernel's source once, in first-use order."""
    from ..schedulers import tuning_sections

    found: dict[str, KernelReport] = {}
    for runner in runners:
        sources = [(s, code_key[0]) for (_, code_key), s in runner.sources.items()]
        sources += [(p.kernel.source, p.config.scheduler) for p in runner.plans.values() if p.kernel]
        for s, scheduler in sources:
            if s.key not in found:
                tuning = runner.options.tuning.describe(tuning_sections(scheduler))
                found[s.key] = KernelReport(name=s.name, key=s.key, stages=list(s.stages), text=s.text,
                                            scheduler=scheduler, tuning=tuning.splitlines())
    return list(found.values())


def _fx_nodes(gm) -> dict:
    return {n.name: n for n in gm.graph.nodes} if gm is not None else {}


def steps_from_segmentation(seg, groups_by_id: dict[int, int], calls_by_node: dict[int, int]) -> list[Step]:
    """Drawn steps (groups and listed calls) with their dependencies, views looked through."""
    producers: dict[Value, set[int]] = {}  # value -> drawn steps it comes from
    steps: list[Step] = []
    for s in seg.steps:
        if isinstance(s, FusionGroup):
            kind, index, reads, writes = "group", groups_by_id.get(s.id), s.inputs, s.outputs
        else:
            kind, index, reads, writes = "aten", calls_by_node.get(id(s)), s.input_values(), s.outputs
            if s.reason in _UNDRAWN_REASONS:
                index = None
        deps: set[int] = set()
        for v in reads:
            if isinstance(v, Value):
                deps |= producers.get(v, set())
        if index is None:  # not drawn: its results come from what it read
            for v in writes:
                producers[v] = deps
            continue
        steps.append(Step(kind=kind, index=index, after=sorted(deps)))
        for v in writes:
            producers[v] = {len(steps) - 1}
    for v in seg.graph.output_values():
        for i in producers.get(v, ()):
            steps[i].output = True
    return steps


def compiled_graph_report(compiled, index: int, capture: int) -> GraphReport:
    """A :class:`GraphReport` from a ``CompiledGraph`` (fused)."""
    from ..runtime.executor import GroupRunner

    fx_nodes = _fx_nodes(getattr(compiled, "fx_graph", None))
    runners = [s for s in compiled.steps if isinstance(s, GroupRunner)]
    groups = [group_report(r, compiled.symbols, fx_nodes) for r in runners]
    calls, calls_by_node = _call_reports(compiled.segmentation.calls, fx_nodes)
    for r in runners:
        if r.failed:
            first = r.failed.splitlines()[0][:300]
            for n in r.group.nodes:
                calls.append(AtenCall(op=op_name(n.target) or n.op, category="fallback",
                                      reason=f"group {r.group.name} failed: {first}", node=repr(n),
                                      location=location_of_fx_node(fx_nodes.get(n.source))))
    stats = compiled.stats
    report = GraphReport(
        index=index, name=compiled.name, capture=capture, status="fused" if groups else _unfused_status(calls),
        groups=groups, aten_calls=calls,
        steps=steps_from_segmentation(compiled.segmentation, {g.id: i for i, g in enumerate(groups)}, calls_by_node),
        stage_seconds={k: float(stats.get(f"{k}_seconds", 0.0)) for k in ("ir", "segment", "codegen", "compile", "plan")},
        kernels_compiled=int(stats.get("kernels_compiled", 0)), kernels_cached=int(stats.get("kernels_cached", 0)),
        fallbacks=int(stats.get("fallbacks", 0)), cudagraph=str(stats.get("cudagraph", "") or ""),
        graph_function=str(stats.get("graph_function", "") or ""), frozen=str(stats.get("frozen", "") or ""),
        recompilations=[Recompilation(source="torchfuse", where=f"{compiled.name} graph, group {e.get('group')}",
                                      reason=str(e.get("reason", ""))) for e in stats.get("events", [])],
    )
    return report


def _call_reports(nodes: list[Node], fx_nodes: dict) -> tuple[list[AtenCall], dict[int, int]]:
    calls: list[AtenCall] = []
    index: dict[int, int] = {}
    for n in nodes:
        if n.reason in _HIDDEN_REASONS:
            continue
        index[id(n)] = len(calls)
        calls.append(AtenCall(op=op_name(n.target), category=call_category(n), reason=n.reason, node=repr(n),
                              location=location_of_fx_node(fx_nodes.get(n.source))))
    return calls, index


def _unfused_status(calls: list) -> str:
    """The status of a graph without fusion groups: fusible ops left on ATen because fusion is
    off are not "nothing to fuse"."""
    reasons = {c.reason for c in calls if c.category == "disabled"}
    return ("not fused: fuse=False" if FUSE_OFF_REASON in reasons else
            "not fused: CPU tensors without interpret" if reasons else "nothing to fuse")


def unfused_graph_report(record: dict, index: int, capture: int) -> GraphReport:
    """A :class:`GraphReport` from one of ``torchfuse.backend.UNFUSED``'s records."""
    gm = record["fx_graph"]
    fx_nodes = _fx_nodes(gm)
    seg = record.get("segmentation")
    stage_seconds = {"ir": float(record.get("ir_seconds", 0.0)), "segment": float(record.get("segment_seconds", 0.0))}
    if seg is not None:
        calls, calls_by_node = _call_reports(seg.calls, fx_nodes)
        return GraphReport(index=index, name=record["name"], capture=capture, status=_unfused_status(calls),
                           aten_calls=calls, steps=steps_from_segmentation(seg, {}, calls_by_node),
                           stage_seconds=stage_seconds, cudagraph=str(record.get("cudagraph", "")))
    error = record.get("error") or "unknown error"
    calls, steps = _fx_fallback_calls(gm, error.splitlines()[0][:300])
    return GraphReport(index=index, name=record["name"], capture=capture, status="compile failed", error=error,
                       reproducer=record.get("reproducer"), aten_calls=calls, steps=steps,
                       stage_seconds=stage_seconds, cudagraph=str(record.get("cudagraph", "")))


def _fx_fallback_calls(gm, error: str) -> tuple[list[AtenCall], list[Step]]:
    """Every op of a graph the compiler failed on (it runs as traced), read from the FX graph."""
    calls: list[AtenCall] = []
    steps: list[Step] = []
    producers: dict = {}
    for n in gm.graph.nodes:
        if n.op != "call_function":
            continue
        deps: set[int] = set()
        for a in n.all_input_nodes:
            deps |= producers.get(a, set())
        if n.target is operator.getitem:
            producers[n] = deps
            continue
        calls.append(AtenCall(op=op_name(n.target), category="fallback", reason=f"graph failed to compile: {error}",
                              node=n.name, location=location_of_fx_node(n)))
        steps.append(Step(kind="aten", index=len(calls) - 1, after=sorted(deps)))
        producers[n] = {len(steps) - 1}
    outputs = [n for n in gm.graph.nodes if n.op == "output"]
    for out in outputs:
        for a in out.all_input_nodes:
            for i in producers.get(a, ()):
                steps[i].output = True
    return calls, steps


def graph_breaks(break_reasons: list) -> list[GraphBreak]:
    """Records of Dynamo's ``GraphCompileReason`` objects (duplicates dropped)."""
    out: list[GraphBreak] = []
    seen: set = set()
    for r in break_reasons:
        stack = [SourceLocation(file=f.filename, line=int(f.lineno or 0), function=f.name, code=(f.line or "").strip())
                 for f in (getattr(r, "user_stack", None) or [])]
        text = str(getattr(r, "reason", r)).strip()
        first = text.splitlines()[0] if text else "unknown"
        key = (text, tuple((s.file, s.line) for s in stack))
        if key in seen:
            continue
        seen.add(key)
        out.append(GraphBreak(reason=first, detail=text, location=stack[-1] if stack else None, stack=stack))
    return out


def skipped_frames(reasons: list[str]) -> list[GraphBreak]:
    """Records of the frames TorchDynamo ran eagerly, from its texts of unimplemented cases
    (``torch._dynamo.utils.counters["unimplemented"]``): a graph break inside a loop makes
    it skip the whole frame ("frame skipped: forward (model.py line 13)"), which leaves no
    break reason on any compiled graph, and the nested calls it compiles alone look like a
    program without breaks. The reason names the break that led to it."""
    out: list[GraphBreak] = []
    for text in reasons:
        found = re.search(r"frame skipped: (\S+) \((.+) line (\d+)\)", text)
        if found is None:
            continue
        first = text.strip().splitlines()[0]
        explained = re.search(r"Explanation: (.+)", text)  # (the first break's, which led to the skip)
        if explained is not None:
            first = f"{first} ({explained.group(1).strip()})"
        line = int(found.group(3))
        where = SourceLocation(file=found.group(2), line=line, function=found.group(1),
                               code=linecache.getline(found.group(2), line).strip())
        out.append(GraphBreak(reason=f"{found.group(1)} runs eagerly (TorchDynamo skipped the frame: a graph break "
                                     f"inside a loop), after: {first}", detail=text.strip(), location=where,
                              stack=[where]))
    return out


def capture_location(gm) -> SourceLocation | None:
    """The user's line of a Dynamo graph's first op: the first op whose line is not in
    torchfuse's own files (``torchfuse explain`` wraps a user's function in a module of its
    own); when every line is, the first op's location (the command puts the user's function
    in place of its wrapper's lines). Its module is the innermost one enclosing every op of the
    graph (none for the compiled module itself), not the first op's."""
    ops = [n for n in gm.graph.nodes if n.op in ("call_function", "call_method", "call_module")]
    found = first = None
    own = str(Path(__file__).resolve().parents[1])
    for n in ops:
        loc = location_of_fx_node(n)
        if loc is None:
            continue
        if not loc.file or not _inside(loc.file, own):
            found = loc
            break
        first = first or loc
    found = found or first
    if found is not None:
        found.module = _enclosing_module(ops)
    return found


def _enclosing_module(ops: list) -> str:
    """``path (Class)`` of the innermost module whose call holds every op in ``ops`` (their
    ``nn_module_stack`` entries' common prefix); empty when an op is outside every submodule."""
    common: list | None = None
    for n in ops:
        stack = list((n.meta.get("nn_module_stack") or {}).values())
        common = stack if common is None else [a for a, _ in itertools.takewhile(lambda p: p[0][0] == p[1][0],
                                                                                 zip(common, stack))]
        if not common:
            return ""
    module = module_of({i: entry for i, entry in enumerate(common)}) if common else ""
    return "" if module.startswith("(root)") else module  # the compiled module itself (Dynamo lists a Sequential)


def count_ops(gm) -> int:
    return sum(1 for n in gm.graph.nodes if n.op in ("call_function", "call_method", "call_module"))
