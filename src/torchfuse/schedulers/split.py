"""The split reduction scheduler: a long reduced extent is cut into ``split`` chunks of
``rchunk`` elements reduced by separate programs into workspaces, then a second kernel
combines the chunks and runs the group's epilogue (the two-stage "split reduction" of
Inductor, nvFuser's grid reductions). For a full reduction to one value, a column sum over a
tall matrix, a BatchNorm's statistics: too few kept elements to fill the GPU otherwise.

Structural check (:func:`can_split`): no reduction of the group reads another's result, and
no output that varies along the reduced dims depends on a reduction. Heuristic
(``Tuning.split``): it splits when the kept extent gives fewer programs than the GPU has
multiprocessors (inner), or fewer than ``outer_below`` a multiprocessor (outer), and the
reduced extent is at least ``min_r`` (outer: ``min_r // 8``); under the interpreter at most 4
kept elements and ``interpret_min_r`` reduced ones, so that tests exercise it.

Kernel bodies: stage 0, program (x block, chunk) loops over its chunk and stores each
reduction's partial (:func:`~torchfuse.codegen.reductions.workspace_components`) at
``ws[k][chunk * xnumel + x]``; stage 1 loads a row's partials, combines them and writes the
group's kept-space outputs.
"""
from __future__ import annotations

from ..codegen.reductions import reductions_read, workspace_components
from ..config import Tuning
from ..ir.graph import Node
from ..ir.ops import REDUCTIONS, REGISTRY
from .base import (GroupTraits, LaunchConfig, RuntimeLayout, Scheduler, Stage, Target, cdiv, is_inner,
                   next_power_of_2)


def can_split(group) -> bool:
    """Whether ``group`` (its ``nodes``, ``domain`` and ``outputs``) can run as a split
    reduction: it has a reduction, none depends on another, and no output that varies along
    the reduced dims depends on one."""
    producer_of = {o: n for n in group.nodes for o in n.outputs}
    reds = [n for n in group.nodes if REGISTRY[n.op].kind == "reduction"]
    if not reds:
        return False
    memo: dict = {}
    if any(reductions_read(n.inputs[0], producer_of, memo) for n in reds):
        return False
    dom = group.domain
    for o in group.outputs:
        if o.meta is not None and dom.varies_along_reduced(o) and reductions_read(o, producer_of, memo):
            return False
    return True


def split_config(x: int, r: int, inner: bool, programs: int, interpret: bool, t: Tuning,
                 rows: int = 0) -> LaunchConfig:
    """Two stages for ``x`` kept and ``r`` reduced elements over about ``programs`` programs:
    the chunks' partial kernel (``rows`` rows a step for an outer reduction, default
    ``split.outer_rblock``), then the kernel that combines a row's chunks."""
    if interpret:
        xb, rb, w = next_power_of_2(x), 512, 1
    elif inner:
        xb, rb, w = 1, 2048, 8
    else:
        xb, rb, w = min(t.split.outer_xblock, next_power_of_2(x)), rows or t.split.outer_rblock, t.split.outer_warps
    x_programs = cdiv(x, xb)
    split = max(2, min(programs // x_programs, cdiv(r, rb), 1024))
    rchunk = cdiv(cdiv(r, split), rb) * rb
    split = cdiv(r, rchunk)
    sb = next_power_of_2(split)
    fx = max(1, min(next_power_of_2(x), max(1, 2048 // sb)))
    finish = Stage((cdiv(x, fx),), fx, sb, 1 if interpret else max(1, min(8, fx * sb // 256)))
    return LaunchConfig("reduction.split", (Stage((x_programs, split), xb, rb, w), finish), split=split,
                        rchunk=rchunk, reason=f"{x} kept x {r} reduced: {split} chunks of {rchunk}, then combine")


class SplitScheduler(Scheduler):
    name = "reduction.split"
    stages = 2
    tuning_sections = ("split",)

    def accepts(self, group) -> str | None:
        if not group.domain.reduced:
            return "it reduces nothing"
        if group.outer:
            return "its column sums are paired with its rows (inner-outer)"
        if not can_split(group):
            return "a reduction reads another's result, or an output along the reduced dims reads a reduction"
        return None

    def heuristic(self, rt: RuntimeLayout, traits: GroupTraits, tuning: Tuning, target: Target) -> LaunchConfig | None:
        t = tuning
        x = max(rt.xnumel, 1)
        r = rt.rnumel
        inner = is_inner(rt)
        if target.interpret:
            if x <= 4 and r >= t.split.interpret_min_r:
                return split_config(x, r, inner, programs=8, interpret=True, t=t)
            return None
        sm_count = target.sm_count
        if inner:
            if sm_count and x < sm_count and r >= t.split.min_r:
                return split_config(x, r, inner, programs=4 * sm_count, interpret=False, t=t)
            return None
        programs = cdiv(x, min(t.outer.xblock, next_power_of_2(x)))
        if sm_count and programs < t.split.outer_below * sm_count and r >= t.split.min_r // 8:
            return split_config(x, r, inner, programs=t.split.outer_programs * sm_count, interpret=False, t=t,
                                rows=t.split.outer_rblock_one_input if traits.tile_inputs == 1 else t.split.outer_rblock)
        return None

    def workspace_elements(self, config: LaunchConfig, rt: RuntimeLayout) -> int:
        return config.split * rt.xnumel  # one partial per chunk and kept element

    def write_body(self, w, stage: int) -> None:
        w.emit_x_block(w.program_id())
        if stage == 0:
            _write_partial(w)
        else:
            _write_finish(w)


def _write_partial(w) -> None:
    """Stage 0: program (x block, chunk) reduces its chunk of r into the workspaces."""
    pid1 = w.program_id(1)
    w.emit(f"rstart = {pid1} * rchunk")
    w.emit("rend = tl.minimum(rstart + rchunk, rnumel)")
    w.r_limit = "rend"
    reds = w.reduction_nodes()
    accs = w.emit_r_loop(reds, [o for o in w.g.outputs if w.in_r(o)], "rstart", "rend")
    k = 0
    for n in reds:
        for comp, var in _partial_components(w, n, accs[n]):
            w.emit(f"tl.store(ws{k} + {pid1} * xnumel + xindex, {var}, mask=xmask)")
            k += 1


def _partial_components(w, node: Node, a: str) -> list[tuple[str, str]]:
    """Reduce the lanes of a loop accumulator to one partial per row, uncombined."""
    c = REDUCTIONS[node.op].combine
    res = w.fresh("part")
    acc = w.acc_of(node)
    if c == "sum":
        w.emit(f"{res} = tl.sum({a}, 1)[:, None]")
        return [("value", res)]
    if c == "prod":
        w.emit(f"{res} = tl.reduce({a}, 1, tf_prod_combine)[:, None]")
        return [("value", res)]
    if c in ("max", "min"):
        return [("value", w.max_nan(a, c, acc))]
    if c in ("any", "all"):
        fn = "tl.max" if c == "any" else "tl.min"
        w.emit(f"{res} = {fn}({a}, 1)[:, None]")
        return [("value", res)]
    if c == "welford":
        w.combine_welford_lanes(a, res)
        return [("mean", f"{res}_mean"), ("m2", f"{res}_m2"), ("w", f"{res}_w")]
    best = w.max_nan(f"{a}_v", c, acc)
    idx = w.first_index(f"{a}_v", f"{a}_i", best)
    value = w.value_at(node, f"{a}_v", f"{a}_i", idx, acc, best)  # the chunk's element at its index
    return [("v", value), ("i", f"{idx}.to(tl.int64)")]


def _write_finish(w) -> None:
    """Stage 1: combine the chunks' partials per row, then the group's kept-space epilogue."""
    w.emit("sindex = tl.arange(0, RBLOCK)[None, :]")
    w.emit("xsmask = xmask & (sindex < nsplit)")
    accs: dict = {}
    k = 0
    for n in w.reduction_nodes():
        a = w.fresh("acc")
        accs[n] = a
        c = REDUCTIONS[n.op].combine
        acc = w.acc_of(n)
        for comp, dtype in workspace_components(n):
            name = a if comp == "value" else f"{a}_{comp}"
            other = w.identity(c, acc) if comp in ("value", "v") else (w.index_sentinel if comp == "i" else "0.0")
            w.emit(f"{name} = tl.load(ws{k} + sindex * xnumel + xindex, mask=xsmask, other={other})")
            k += 1
        w.emit_loop_finish(n, accs)
    for out in w.g.outputs:
        if not w.in_r(out):
            w.store(out)


SCHEDULER = SplitScheduler()
