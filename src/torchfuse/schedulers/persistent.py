"""The persistent reduction scheduler: the whole reduced extent of a block of rows (or of
columns) is one RBLOCK-wide tile in registers, read once; the group's reductions and its
outputs all work on it (softmax, LayerNorm).

Structural check: a reduction group not paired with column sums (those take the inner-outer
scheduler). Heuristic (``Tuning.persistent`` and ``Tuning.outer``): the reduced extent, rounded
up to a power of two, must be at most ``Options.persistent_max_elements``;

* **inner** reductions (rows): XBLOCK rows fill a tile of ``tile_elements`` elements, warps =
  tile / (32 x ``elements_per_thread``), 1 to 8; rows that pad to ``one_warp_row`` run one row
  a program on one warp (``writing_rows_xblock`` when the kernel writes 16-bit rows);
* **outer** reductions (columns; the unit-stride dim is kept, like a bias gradient): a tile of
  ``outer.xblock`` contiguous columns; when that gives fewer programs than the GPU has
  multiprocessors, the tile narrows (:func:`outer_tile`) and a narrowed tile runs
  ``outer.small_elements_per_warp`` elements a warp (latency-bound, like small pointwise
  kernels). A tile of more than twice ``tile_elements`` is left to the looped scheduler.

Kernel body: the block's indices and masks, the row prelude (``Tuning.codegen.row_prelude``:
the tiles the reductions read, then the per-row values that need no reduction), each
reduction in dependency order (sibling row sums reduced together), then every output.
"""
from __future__ import annotations

from ..config import Tuning
from ..ir.graph import Value
from ..ir.ops import REGISTRY
from .base import (INTERPRETER_REASON, GroupTraits, LaunchConfig, RowReductionScheduler, RuntimeLayout, Target,
                   cdiv, is_inner, next_power_of_2, plural, single)


def _warps(elements: int, t: Tuning) -> int:
    return max(1, min(8, next_power_of_2(elements // t.persistent.elements_per_thread) // 32 or 1))


def outer_tile(x: int, rpow: int, persistent_max: int, sm_count: int, t: Tuning) -> tuple[int, int, bool]:
    """``(XBLOCK, programs, narrowed)`` of an outer reduction over ``x`` columns and ``rpow``
    (a power of two) rows: ``outer.xblock`` columns, halved while the programs do not fill the
    ``sm_count`` multiprocessors, down to ``outer.min_xblock_loop`` (16-byte rows of fp16, as a
    looped tile streams), and further, down to ``outer.min_xblock``, while the tile stays
    persistent (a small, latency-bound tensor: a squeeze-excitation mean at batch 1)."""
    xb = min(t.outer.xblock, next_power_of_2(x))
    programs = cdiv(x, xb)
    narrowed = False
    while sm_count and xb > t.outer.min_xblock_loop and programs < sm_count:
        xb //= 2
        programs = cdiv(x, xb)
        narrowed = True
    while sm_count and xb > t.outer.min_xblock and programs < sm_count \
            and rpow * xb // 2 <= t.persistent.tile_elements * 2 and rpow <= persistent_max:
        xb //= 2
        programs = cdiv(x, xb)
        narrowed = True
    return xb, programs, narrowed


class PersistentScheduler(RowReductionScheduler):
    name = "reduction.persistent"
    tuning_sections = ("persistent", "outer")

    def heuristic(self, rt: RuntimeLayout, traits: GroupTraits, tuning: Tuning, target: Target) -> LaunchConfig | None:
        """A persistent configuration, or ``None`` when the reduced extent does not fit."""
        t = tuning
        x = max(rt.xnumel, 1)
        r = rt.rnumel
        rpow = next_power_of_2(max(r, 1))
        persistent_max = target.persistent_max
        if target.interpret:
            if rpow > min(persistent_max, t.persistent.interpret_max_row):
                return None
            xb = max(1, min(next_power_of_2(x), t.persistent.interpret_tile // rpow))
            return single("reduction.persistent", cdiv(x, xb), xb, rpow, 1, INTERPRETER_REASON)
        if is_inner(rt):
            if rpow > persistent_max:
                return None
            xb = max(1, min(next_power_of_2(x), t.persistent.tile_elements // rpow))
            w = _warps(xb * rpow, t)
            if rpow == t.persistent.one_warp_row:
                xb = min(xb, t.persistent.writing_rows_xblock) if traits.writes_rows else 1
                w = xb
            blocks = cdiv(x, xb)
            return single("reduction.persistent", blocks, xb, rpow, w,
                          f"inner, {r} reduced elements fit: persistent, {plural(xb, 'row')} x {rpow}, "
                          f"{plural(w, 'warp')}")
        xb, programs, narrowed = outer_tile(x, rpow, persistent_max, target.sm_count, t)
        if rpow * xb > t.persistent.tile_elements * 2 or rpow > persistent_max:
            return None
        # a narrowed tile is a small, latency-bound launch: more threads, fewer elements each
        w = min(8, max(1, xb * rpow // t.outer.small_elements_per_warp)) if narrowed else _warps(xb * rpow, t)
        return single("reduction.persistent", programs, xb, rpow, w,
                      f"outer, {r} reduced elements fit: persistent {plural(xb, 'column')} x {rpow}, "
                      f"{plural(w, 'warp')}")

    def write_body(self, w, stage: int) -> None:
        w.emit_x_block(w.program_id())
        w.r_prologue("0")
        if w.tuning.codegen.row_prelude:
            row_prelude(w)
        for node in w.persistent_order():
            w.emit_persistent_reduction(node)
        for out in w.g.outputs:
            w.store(out)


def row_prelude(w) -> None:
    """Emit the loads of the tiles that the row reductions read, then the per-row values that
    depend on no reduction (``Tuning.codegen.row_prelude``), in graph order. (Tiles read only
    after a reduction are loaded there: loaded first they stay live across it, sm_90 gave
    LayerNorm's forward 79 registers instead of 56.) Used by the inner-outer scheduler too."""
    memo: dict = {}
    reduced: set[Value] = set()
    stack = [n.inputs[0] for n in w.reduction_nodes()]
    while stack:
        v = stack.pop()
        if isinstance(v, Value) and v not in reduced:
            reduced.add(v)
            node = w.producer_of.get(v)
            if node is not None and REGISTRY[node.op].kind != "reduction":
                stack.extend(node.inputs)
    for v in w.g.inputs:
        if v in reduced and v.meta is not None and w.per_element(v):
            w.value(v)
    for node in w.g.nodes:
        if REGISTRY[node.op].kind in ("reduction", "random") or node.op == "arange":
            continue
        for o in node.outputs:
            if not w.per_element(o) and not w.deps(o, memo) and w.lookup(o) is None:
                w.value(o)


SCHEDULER = PersistentScheduler()
