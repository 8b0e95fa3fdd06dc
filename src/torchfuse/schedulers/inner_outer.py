"""The inner-outer scheduler: a row-reduction group and the column sums over the same rows
(``segment.pair_inner_outer``: a LayerNorm's or RMSNorm's input gradient with its weight and
bias gradients) as one launch that reads each row once.

Structural check: the group carries paired column sums (``FusionGroup.outer``). Heuristic
(``Tuning.inner_outer``): ``split`` programs loop over blocks of XBLOCK whole rows (RBLOCK =
the row length rounded up to a power of two; ``tile`` or ``short_tile`` elements a block,
``elements_per_thread`` a thread), ``programs_per_sm`` a multiprocessor until the first
kernel is compiled, then (``fit``) as many as fit on a multiprocessor at once
(:func:`resident_programs`, at most ``max_per_sm``); a second kernel of
``cdiv(rnumel, RBLOCK2)`` programs sums the ``split`` partials of RBLOCK2 columns each.

Kernel bodies: stage 0 is a grid-stride loop over row blocks; per block the row reductions run
as the persistent scheduler's do (with its row prelude) and their results are written, and the
paired column sums' inputs are added into [XBLOCK, RBLOCK] accumulators, which after the loop
are summed over their rows into one partial per column at ``ws[k][program * rnumel + column]``.
Stage 1 sums the partials and writes the column sums and what the group computes from them.
"""
from __future__ import annotations

import dataclasses

from ..config import Tuning
from .base import (GroupTraits, LaunchConfig, RuntimeLayout, Scheduler, Stage, Target, cdiv, next_power_of_2,
                   plural)
from .persistent import row_prelude


def resident_programs(n_regs: int, shared_bytes: int, num_warps: int, regs_per_sm: int = 65536,
                      shared_per_sm: int = 233472, threads_per_sm: int = 2048, warp_size: int = 32) -> int:
    """Programs of one kernel that a multiprocessor holds at once, from CUDA's occupancy rules:
    registers are allocated per warp in units of 256, every program of ``num_warps`` warps
    needs its registers, its threads and its shared memory (plus 1 KiB the system reserves per
    program) on the multiprocessor. At least 1.

    Args:
        n_regs: registers per thread of the compiled kernel.
        shared_bytes: its shared memory per program (bytes).
        num_warps: warps per program.
        regs_per_sm, shared_per_sm (bytes), threads_per_sm, warp_size: the device's limits
            (defaults: an H100/H200, compute capability 9.0).
    """
    regs_per_warp = cdiv(max(n_regs, 1) * warp_size, 256) * 256
    by_regs = (regs_per_sm // regs_per_warp) // num_warps
    by_threads = threads_per_sm // (num_warps * warp_size)
    by_shared = shared_per_sm // (shared_bytes + 1024)
    return max(1, min(by_regs, by_threads, by_shared))


class InnerOuterScheduler(Scheduler):
    name = "reduction.inner_outer"
    stages = 2
    tuning_sections = ("inner_outer", "persistent")

    def accepts(self, group) -> str | None:
        return None if group.outer else "no column sums are paired with its rows"

    def heuristic(self, rt: RuntimeLayout, traits: GroupTraits, tuning: Tuning, target: Target) -> LaunchConfig:
        """The configuration for ``rt`` (kept dims: the rows; reduced dims: the columns); never
        ``None``. ``target.resident`` (0 before the first kernel is compiled) sets the
        programs a multiprocessor; without a multiprocessor count, one program a row block."""
        t = tuning.inner_outer
        x = max(rt.xnumel, 1)
        r = max(rt.rnumel, 1)
        rpow = next_power_of_2(r)
        resident = target.resident
        if target.interpret:
            xb = max(1, min(next_power_of_2(cdiv(x, t.interpret_blocks)), tuning.persistent.interpret_tile // rpow))
            blocks = cdiv(x, xb)
            programs = min(blocks, t.interpret_programs)
            w = 1
        else:
            tile = t.short_tile if rpow <= t.short_row else t.tile
            xb = max(1, min(next_power_of_2(x), tile // rpow))
            w = max(1, min(t.warps, xb * rpow // (32 * t.elements_per_thread)))
            blocks = cdiv(x, xb)
            per_sm = min(resident, t.max_per_sm) if resident else t.programs_per_sm
            programs = min(blocks, per_sm * target.sm_count) if target.sm_count else blocks
        sb = next_power_of_2(programs)
        fr = max(1, min(rpow, t.finish_tile // sb))
        wf = 1 if target.interpret else max(1, min(8, sb * fr // 256))
        return LaunchConfig("reduction.inner_outer",
                            (Stage((programs,), xb, rpow, w), Stage((cdiv(r, fr),), sb, fr, wf)), split=programs,
                            reason=f"{x} rows of {r}: {programs} programs over {blocks} blocks of "
                                   f"{plural(xb, 'row')}, {plural(w, 'warp')}"
                                   + (f" ({resident} fit on a multiprocessor)" if resident else "")
                                   + f", column partials summed by {plural(cdiv(r, fr), 'program')}")

    def workspace_elements(self, config: LaunchConfig, rt: RuntimeLayout) -> int:
        return config.split * rt.rnumel  # one partial per program and column

    def write_body(self, w, stage: int) -> None:
        if stage == 0:
            _write_rows(w)
        else:
            _write_columns(w)


def fitted(rt: RuntimeLayout, compiled, registers: int, props, num_warps: int, tuning: Tuning,
           target: Target) -> LaunchConfig:
    """The configuration once the first kernel is compiled (``compiled``: Triton's compiled
    kernel, of which its ``metadata.shared`` is read, bytes; ``registers``: a thread's), its grid sized to the programs that fit on
    a multiprocessor of the device ``props`` (``torch.cuda.get_device_properties``): a grid
    larger than what fits runs in two waves, one smaller leaves multiprocessors part empty (on
    an H200, RMSNorm's kernel fits 3 a multiprocessor and LayerNorm's 2; runs AJ and AK)."""
    resident = resident_programs(registers, compiled.metadata.shared, num_warps,
                                 getattr(props, "regs_per_multiprocessor", 65536),
                                 getattr(props, "shared_memory_per_multiprocessor", 233472),
                                 getattr(props, "max_threads_per_multi_processor", 2048))
    return SCHEDULER.heuristic(rt, GroupTraits(), tuning, dataclasses.replace(target, interpret=False,
                                                                              resident=resident))


def _open_row_block_loop(w, stages: int) -> str:
    """Open a grid-stride loop over the blocks of XBLOCK rows (each program takes every
    ``num_programs``-th block; ``stages``: software-pipelining stages, 0 for Triton's default);
    returns the block index expression."""
    pipelined = f", num_stages={stages}" if stages else ""
    w.emit(f"for xblock in tl.range(tl.program_id(0), tl.cdiv(xnumel, XBLOCK), tl.num_programs(0){pipelined}):")
    w.indent += 1
    return "xblock.to(tl.int64)" if w.layout.index64 else "xblock"


def _write_rows(w) -> None:
    """Stage 0 (see the module docstring)."""
    w.emit(f"pid = {w.program_id()}")
    outer = [n for n in w.reduction_nodes() if n in w.outer]
    accs: dict = {}
    for n in outer:
        w.emit_loop_init(n, accs)
    pid = _open_row_block_loop(w, w.tuning.inner_outer.stages)
    w.scopes.append({})
    w.emit_x_block(pid)
    w.r_prologue("0")
    if w.tuning.codegen.row_prelude:
        row_prelude(w)
    for node in w.persistent_order():
        w.emit_persistent_reduction(node)
    w.loop_start = "0"
    for n in outer:
        w.emit_loop_accumulate(n, accs)
    for out in w.g.outputs:
        if out not in w.outer_values:
            w.store(out)
    w.scopes.pop()
    w.indent -= 1
    # (names bound inside the loop are not visible after it)
    w.r_offset = "0"
    w.emit("rindex = tl.arange(0, RBLOCK)[None, :]")
    w.emit("rmask = rindex < rnumel")
    for k, n in enumerate(outer):
        part = w.fresh("part")
        w.emit(f"{part} = tl.sum({accs[n]}, 0)[None, :]")
        w.emit(f"tl.store(ws{k} + pid * rnumel + rindex, {part}, mask=rmask)")


def _write_columns(w) -> None:
    """Stage 1: each program sums the ``nsplit`` partials of RBLOCK columns (XBLOCK >= nsplit)
    and writes the column sums and what the group computes from them."""
    w.r_offset = f"{w.program_id()} * RBLOCK"
    w.emit(f"rindex = {w.r_offset} + tl.arange(0, RBLOCK)[None, :]")
    w.emit("rmask = rindex < rnumel")
    w.emit(f"xindex = tl.zeros([1, 1], {w.index_type})")
    w.emit("xmask = xindex < 1")
    w.emit("xrmask = xmask & rmask")
    if w.needs_unravel("r"):
        w.unravel("r", w.layout.n_r, "rindex")
    w.emit("sindex = tl.arange(0, XBLOCK)[:, None]")
    w.emit("smask = (sindex < nsplit) & rmask")
    for k, n in enumerate(n for n in w.reduction_nodes() if n in w.outer):
        a, res = w.fresh("acc"), w.fresh("red")
        w.emit(f"{a} = tl.load(ws{k} + sindex * rnumel + rindex, mask=smask, other=0)")
        w.emit(f"{res} = tl.sum({a}, 0)[None, :]")
        w.finish_reduction(n, {"value": (res, w.acc_of(n))})
    for out in w.g.outputs:
        if out in w.outer_values:
            w.store(out)


SCHEDULER = InnerOuterScheduler()
