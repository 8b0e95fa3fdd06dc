"""The explain result as readable text (what ``torchfuse.explain`` prints).

Takes an :class:`~torchfuse.report.result.ExplainResult`; returns lines of plain text, widest
about 110 columns. Ops are compressed (``mul x4, erf, add x3``), ATen calls counted by op and
reason, paths shortened to the file name.
"""
from __future__ import annotations

import collections
import os

from .result import (NO_WORK, OWN_KERNELS, SELF_EXPLAINED, AtenCall, ExplainResult, GraphReport, GroupReport,
                     PlanReport, SourceLocation)

#: how each ATen-call category reads in reports
CATEGORY_TEXT = {
    "library": "vendor library (by design)",
    "unsupported": "unsupported",
    "fallback": "fell back after a compile failure",
    "view": "view (no data moves)",
    "shape": "arithmetic on sizes (no tensor)",
    "constant": "module constant",
    "allocation": "uninitialized tensor (no data moves)",
    "rng_state": ("random draw of a checkpointed region, by design: PyTorch's generator, so that the "
                  "backward's recomputation repeats the forward's numbers"),
    "disabled": "fusion disabled",
    "state": "state update (by design)",
    "pad": "torchfuse's pad kernel (runtime.pad), not ATen",
    "pool": "torchfuse's max-pool kernels (runtime.pool), not ATen",
    "fusion": "your fused op (torchfuse.fusion): its own kernel, not ATen",
    "fusion_aten": ("your fused op (torchfuse.fusion), run op by op through ATen: "
                    "CPU tensors without interpret=True"),
}


def compress_ops(ops: list[str], skip: tuple[str, ...] = ()) -> str:
    """``["mul", "mul", "erf"]`` -> ``"mul x2, erf"``, first-appearance order."""
    counts = collections.Counter(o for o in ops if o not in skip)
    return ", ".join(f"{op} x{n}" if n > 1 else op for op, n in counts.items())


def where(loc: SourceLocation | None) -> str:
    """``file.py:12``, ``file.py:12 (norm (LayerNorm))`` or ``self_attn (MultiheadAttention)``."""
    if loc is None:
        return ""
    text = f"{os.path.basename(loc.file)}:{loc.line}" if loc.file else ""
    if loc.module:
        text = f"{text} in {loc.module}" if text else loc.module
    return text


def launch_text(plan: PlanReport) -> str:
    """``grid=(4,) XBLOCK=1 RBLOCK=16 warps=4`` (stages joined by ``; then``)."""
    parts = []
    for st in plan.stages:
        grid = "(" + ", ".join(str(g) for g in st.grid) + ("," if len(st.grid) == 1 else "") + ")"
        parts.append(f"grid={grid} XBLOCK={st.XBLOCK} RBLOCK={st.RBLOCK} warps={st.num_warps}")
    return "; then ".join(parts)


def plan_time_text(plan: PlanReport) -> str:
    if plan.time_ms is None:
        return ""
    text = f"{plan.time_ms * 1e3:.1f} us, {plan.bandwidth_gbps or 0:.0f} GB/s"
    if plan.copy_fraction is not None:
        text += f" ({plan.copy_fraction:.0%} of copy)"
    return text


def _group_lines(g: GroupReport) -> list[str]:
    lines = [f"    group {g.id} {g.kind:9s} kernel {g.kernel or '(none)'}   ops: {compress_ops(g.ops)}"]
    if g.failed:
        lines.append(f"      FAILED, ran through ATen: {g.failed.splitlines()[0][:200]}")
        if g.reproducer:
            lines.append(f"      reproducer: {g.reproducer}")
    for p in g.plans:
        timing = plan_time_text(p)
        lines.append(f"      [{p.sizes}] {p.scheduler} {launch_text(p)}, moves {p.bytes_moved} B"
                     + (f", {timing}" if timing else ""))
        if p.reason:
            lines.append(f"        why: {p.reason}")
    locs = ", ".join(where(loc) for loc in g.locations[:4])
    if locs:
        lines.append(f"      from {locs}" + (" ..." if len(g.locations) > 4 else ""))
    return lines


def short_op(op: str) -> str:
    """``aten.addmm.default`` -> ``addmm``; ``aten.add.Tensor`` -> ``add.Tensor``."""
    parts = op.split(".")
    if parts[0] in ("aten", "prims") and len(parts) >= 2:
        return parts[1] if len(parts) == 2 or parts[2] == "default" else f"{parts[1]}.{parts[2]}"
    return op


def aten_lines(calls: list[AtenCall], indent: str = "    ") -> list[str]:
    """ATen calls as text: one line per (op, reason) with a count and its source lines (the
    first three distinct ones, then how many more); the ops of one failed group on one line;
    what moves no data (views, constants, arithmetic on sizes) counted last."""
    work: dict[tuple, list[AtenCall]] = {}
    failed: dict[str, list[AtenCall]] = {}
    idle: list[AtenCall] = []
    for c in calls:
        if c.category in NO_WORK:
            idle.append(c)
        elif c.category == "fallback":
            failed.setdefault(c.reason, []).append(c)
        else:
            work.setdefault((c.op, c.category, c.reason), []).append(c)
    lines = []
    for (op, category, reason), items in work.items():
        count = f" x{len(items)}" if len(items) > 1 else ""
        why = CATEGORY_TEXT.get(category, category)
        if reason and category not in SELF_EXPLAINED:
            why += f": {reason}"
        locs = list(dict.fromkeys(w for w in (where(c.location) for c in items) if w))
        loc = ", ".join(locs[:3]) + (f" and {len(locs) - 3} more" if len(locs) > 3 else "")
        lines.append(f"{indent}{op}{count}  [{why}]" + (f"  {loc}" if loc else ""))
    for reason, items in failed.items():
        lines.append(f"{indent}{compress_ops([short_op(c.op) for c in items])}  [{CATEGORY_TEXT['fallback']}: {reason}]")
    if idle:
        lines.append(f"{indent}no data moved: {compress_ops([short_op(c.op) for c in idle])}")
    return lines


#: the option that turns each graph rewrite off (``Options``), for the rewrites line
REWRITE_OPTIONS = {
    "fold_conv_batchnorm": "freeze", "conv_bias_epilogues": "freeze",
    "channels_last_convolutions": "freeze / channels_last_training / channels_last_inference",
    "conv_relu_epilogues": "conv_epilogues",
    "log_softmax_sums": "cross_entropy_rewrites", "one_hot_picks": "cross_entropy_rewrites",
    "grouped_linears": "tuning graph_passes.linear_group_devices",
}


def graph_counts(g: GraphReport) -> str:
    """``3 fusion groups, 1 ATen call (and 2 that move no data)``: one graph's counts, as the
    text summary and the HTML report's graph header give them."""
    return counts_text(len(g.groups), len(g.aten_work), len(g.idle_calls), len(g.own_kernel_calls))


def counts_text(groups: int, work: int, idle: int, own: int = 0) -> str:
    """``3 fusion groups, 1 ATen call (and 2 that move no data)`` from the counts of fusion
    groups, ATen calls that move data, and calls that move none: views, module constants,
    arithmetic on sizes (the ``fusion`` log's words too); ``own`` calls of torchfuse's own
    kernels (pads, max pooling, the user's fused ops) add ``, 2 on torchfuse's own kernels``."""
    return (f"{groups} fusion group{'s' if groups != 1 else ''}, {work} ATen call{'s' if work != 1 else ''}"
            + (f", {own} on torchfuse's own kernel{'s' if own != 1 else ''}" if own else "")
            + (f" (and {idle} that move{'s' if idle == 1 else ''} no data)" if idle else ""))


def graph_origin(g: GraphReport, result: ExplainResult) -> str:
    """``capture 1 at model.py:12, TorchDynamo compile 0/1``, with ``, compiled at its first backward`` for a backward
    AOTAutograd compiled then; ``compiled at the first backward`` when its capture is unknown."""
    if g.capture < 0:
        return "compiled at the first backward"
    capture = result.captures[g.capture] if g.capture < len(result.captures) else None
    place = where(capture.location) if capture is not None else ""  # empty: no file or module known
    return (f"capture {g.capture}" + (f" at {place}" if place else "")
            + (f", TorchDynamo compile {capture.dynamo_id}" if capture is not None and capture.dynamo_id else "")
            + (f", a recompilation of capture {capture.recompiles}"
               if capture is not None and capture.recompiles is not None else "")
            + (", compiled at its first backward" if g.at_first_backward else ""))


def _graph_lines(g: GraphReport, result: ExplainResult) -> list[str]:
    origin = graph_origin(g, result)
    lines = [f"graph {g.index}: {g.name} ({origin}): {g.status}, {graph_counts(g)}, "
             f"torchfuse compiled it in {g.compile_seconds:.3f} s"]
    if 0 <= g.capture < len(result.captures) and result.captures[g.capture].rewrites:
        done = ", ".join(f"{k} x{v}" + (f" (option {REWRITE_OPTIONS[k]})" if k in REWRITE_OPTIONS else "")
                         for k, v in result.captures[g.capture].rewrites.items())
        lines.append(f"  graph rewrites of this capture (before and after AOTAutograd): {done}")
    if g.frozen:
        lines.append(f"  frozen (freeze=True): {g.frozen}")
    if g.error:
        lines.append(f"  error: {g.error.splitlines()[0][:200]}")
    if g.reproducer:
        lines.append(f"  reproducer: {g.reproducer}")
    lines.append(f"  stages: {stage_text(g.stage_seconds)}")
    lines.append(f"  kernels: {g.kernels_compiled} compiled, {g.kernels_cached} reused (loaded earlier in this "
                 f"process or found in the kernel cache); "
                 f"{g.fallbacks} fallbacks" + (f"; CUDA graph: {g.cudagraph}" if g.cudagraph else ""))
    if g.name == "backward" and g.groups and not any(group.kernel for group in g.groups):
        # AOTAutograd compiles a backward with dynamic sizes before any backward runs
        lines.append("  not run: compiled ahead of its first backward, which did not run here "
                     "(explain(..., backward=True) runs it)")
    if g.graph_function:
        from ..runtime.executor import NOT_GENERATED

        # made at a second call with sizes seen before: more_inputs of new sizes do not make it
        hint = ("; to see it here, call it twice: explain(..., more_inputs=[inputs of the same sizes]), or "
                "--calls 2 on the command line" if g.graph_function == NOT_GENERATED else "")
        lines.append(f"  generated function: {g.graph_function}{hint}")
    if g.groups:
        lines.append("  fusion groups:")
        for group in g.groups:
            lines += _group_lines(group)
    own = g.own_kernel_calls
    rest = [c for c in g.aten_calls if c.category not in OWN_KERNELS]
    if rest:
        lines.append("  on ATen:")
        lines += aten_lines(rest)
    if own:
        lines.append("  on torchfuse's own kernels (outside fusion groups):")
        lines += aten_lines(own)
    return lines


def stage_text(stages: dict[str, float]) -> str:
    """A graph's compile seconds by stage, named as the phases of the summary's header are and
    adding up to the graph's compile time: ``passes`` (the ``ir`` stage), ``segment``,
    ``codegen`` (the ``plan`` stage less Triton's compile) and ``triton_compile``."""
    compiled = stages.get("compile", 0.0)
    parts = {"passes": stages.get("ir", 0.0), "segment": stages.get("segment", 0.0),
             "codegen": max(0.0, stages.get("plan", 0.0) - compiled), "triton_compile": compiled}
    return ", ".join(f"{k} {v:.3f} s" for k, v in parts.items())


def call_time_text(result: ExplainResult) -> str:
    """``the call took 0.18 s, 0.12 s of it compiling (...)`` (``the 2 calls took`` with
    ``more_inputs``): the same figures as the HTML tiles."""
    calls = "the call" if result.calls == 1 else f"the {result.calls} calls"
    return (f"{calls} took {result.seconds:.2f} s, {result.compile_seconds():.2f} s of it compiling "
            "(AOTAutograd and torchfuse; TorchDynamo's tracing not counted)")


def format_tuning(result: ExplainResult) -> str:
    """The tuning each generated kernel was built with: per kernel (name, scheduler, the first
    12 digits of its cache key and the groups that ran it: two kernels may share a name), one
    ``section.field = value`` line per field of the sections its scheduler and the code writer
    read, then every other field changed from its default (marked ``(changed)``)."""
    lines = ["tuning per kernel:" + ("" if result.kernels else " no kernel was generated")]
    for k in result.kernels:
        users = [f"{g.name} group {grp.id}" for g in result.graphs for grp in g.groups
                 if any(p.kernel_key == k.key for p in grp.plans)]
        lines.append(f"  {k.name} ({k.scheduler or '?'}), key {k.key[:12]}"
                     + (f", run by {', '.join(users)}" if users else "") + ":")
        lines += [f"    {line}" for line in k.tuning]
    return "\n".join(lines)


def _captured_text(result: ExplainResult) -> str:
    """``2 graphs captured by TorchDynamo (1 of them a recompilation for new inputs; compiled
    as 4: 2 forward, 2 backward)``: AOTAutograd compiles a training graph as a forward and a
    backward, which the summary lists apart; a capture TorchDynamo made again because its
    guards failed is counted as such."""
    n = len(result.captures)
    text = f"{n} graph{'' if n == 1 else 's'} captured by TorchDynamo"
    notes = []
    recompiled = sum(c.recompiles is not None for c in result.captures)
    if recompiled:
        notes.append(f"{recompiled} of them " + ("a recompilation" if recompiled == 1 else "recompilations")
                     + " for new inputs")
    if len(result.graphs) != n:
        kinds: dict[str, int] = {}
        for g in result.graphs:
            kinds[g.name] = kinds.get(g.name, 0) + 1
        notes.append(f"compiled as {len(result.graphs)}: " + ", ".join(
            k if c == 1 else f"{c} {k}" for k, c in kinds.items()))
    return text + (f" ({'; '.join(notes)})" if notes else "")


def format_summary(result: ExplainResult, tuning: bool = False) -> str:
    """The whole result as text; with ``tuning``, followed by :func:`format_tuning`."""
    env = result.environment
    breaks = len(result.graph_breaks)
    idle = len(result.idle_calls)  # views, constants, size arithmetic
    own = len(result.own_kernel_calls)  # pads, max pooling, the user's fused ops
    own_text = f", {own} on torchfuse's own kernels" if own else ""
    # rewrites count apart from fusion groups: a cuDNN epilogue fuses without a group of its own
    rewrites = sum(sum(c.rewrites.values()) for c in result.captures)
    lines = [
        f"torchfuse explain: {_captured_text(result)}, {breaks} graph break(s), "
        f"{len(result.groups)} fusion group(s)"
        f"{f', {rewrites} graph rewrite(s)' if rewrites else ''}, {len(result.aten_work)} op(s) on ATen"
        f"{own_text}"
        f"{f' (and {idle} that move(s) no data)' if idle else ''}, "
        f"{result.kernels_compiled} kernel(s) compiled, {result.kernels_cached} reused, {result.fallbacks} fallback(s)",
        f"  on {env.get('device', '?')} ({env.get('mode', '')}); torch {env.get('torch', '?')}, "
        f"triton {env.get('triton', '?')}; {call_time_text(result)}",
    ]
    if env.get("program"):  # what torchfuse explain on the command line ran
        lines.insert(1, f"  program: {env['program']}")
    lines[:0] = [f"note: {n}" for n in result.notes]
    if not result.captures:
        lines.append("  nothing was captured: TorchDynamo ran the whole call eagerly, without a graph to compile "
                     "(torch._dynamo.explain gives its reasons; for example, a BatchNorm with momentum=None "
                     "reads its batch counter as a Python float)")
    changed = sorted({line for k in result.kernels for line in k.tuning if line.endswith("(changed)")})
    if changed:  # the tuning the kernels were built with, where it differs from the defaults
        lines.append("  tuning changed from the defaults: " + "; ".join(c[:-len("  (changed)")] for c in changed))
    stages = result.stage_seconds()
    if stages and not result.compile_phases:  # a result saved before the phases were recorded
        lines.append("  compile time per stage: " + stage_text(stages))
    if result.compile_phases:  # (runtime.phases)
        from ..runtime.phases import format_phases

        lines.append("  time by phase: " + format_phases(result.compile_phases))
    if result.graph_breaks:
        lines.append("graph breaks:")
        for i, b in enumerate(result.graph_breaks):
            loc = b.location
            lines.append(f"  {i + 1}. {where(loc) or '?'}" + (f" in {loc.function}: {loc.code}" if loc else "")
                         + f"\n     {b.reason}")
    for g in result.graphs:
        lines += _graph_lines(g, result)
    lines.append("recompilations:" + ("" if result.recompilations else " none"))
    for r in result.recompilations:
        lines.append(f"  [{r.source}] {r.where}: {r.reason}")
    t = result.timing
    if t.available:
        lines.append(f"timing: device copy {t.copy_gbps:.0f} GB/s on {t.device}; {t.note}")
    else:
        lines.append(f"timing: not available ({t.note})")
    for w in result.warnings:
        lines.append(f"warning: {w}")
    if tuning:
        lines.append(format_tuning(result))
    return "\n".join(lines)
