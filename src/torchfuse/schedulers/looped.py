"""The looped reduction scheduler: rows (or columns) too long to stay in registers are reduced
in loops over RBLOCK-wide steps.

Structural check: a reduction group not paired with column sums. Heuristic
(``Tuning.looped``, ``Tuning.outer``): it takes every size the schedulers before it leave
(never ``None``): inner reductions take ``rblock`` elements a step on ``warps`` warps; outer
ones the tile of :func:`~torchfuse.schedulers.persistent.outer_tile` (16-byte rows at least)
and ``max(outer.rblock, outer.tile // XBLOCK)`` rows a step.

Kernel body: the group's reductions run in as many loops as their dependency depth (softmax:
the max, then the sum of exponentials, then the output); values that vary along the reduced
dims are recomputed in each loop that needs them, and each output is written in the first
loop after everything it needs is known.
"""
from __future__ import annotations

from ..config import Tuning
from ..ir.graph import Value
from .base import (INTERPRETER_REASON, GroupTraits, LaunchConfig, RowReductionScheduler, RuntimeLayout, Target,
                   is_inner, next_power_of_2, single)
from .persistent import outer_tile


class LoopedScheduler(RowReductionScheduler):
    name = "reduction.loop"
    tuning_sections = ("looped", "outer")

    def heuristic(self, rt: RuntimeLayout, traits: GroupTraits, tuning: Tuning, target: Target) -> LaunchConfig:
        t = tuning
        x = max(rt.xnumel, 1)
        r = rt.rnumel
        if target.interpret:
            return single("reduction.loop", x, 1, t.looped.interpret_rblock, 1, INTERPRETER_REASON)
        if is_inner(rt):
            return single("reduction.loop", x, 1, t.looped.rblock, t.looped.warps,
                          f"inner, {r} reduced elements: loop of {t.looped.rblock}")
        rpow = next_power_of_2(max(r, 1))
        xb, programs, _ = outer_tile(x, rpow, target.persistent_max, target.sm_count, t)
        rb = min(max(t.outer.rblock, t.outer.tile // xb), rpow)
        return single("reduction.loop", programs, xb, rb, t.outer.warps,
                      f"outer, {r} reduced elements: {xb} columns, loop of {rb} rows")

    def write_body(self, w, stage: int) -> None:
        w.emit_x_block(w.program_id())
        lv = w.levels()
        depth = max(lv.values(), default=0)
        memo: dict = {}
        out_pass: dict[Value, int] = {}
        for out in w.g.outputs:
            if w.in_r(out):
                need = w.deps(out, memo)
                p = 1 + max((lv[n] for n in need), default=0)
                out_pass[out] = p if p <= depth else depth + 1
        for k in range(1, depth + 2):
            reds = [n for n in w.reduction_nodes() if lv[n] == k]
            outs = [o for o in w.g.outputs if out_pass.get(o) == k]
            if not reds and not outs:
                continue
            accs = w.emit_r_loop(reds, outs, "0", "rnumel")
            for n in reds:
                w.emit_loop_finish(n, accs)
        for out in w.g.outputs:
            if not w.in_r(out):
                w.store(out)


SCHEDULER = LoopedScheduler()
