"""Reduction scheduler: persistent, looped, split across programs, or inner-outer.

The kernel works on [XBLOCK, RBLOCK] tiles: XBLOCK kept elements (rows) per program, RBLOCK
reduced elements per step.

Heuristic (run time). The constants come from a sweep on an H200 over bf16 row sums,
softmax and LayerNorm at 768 to 262144 elements per row and column sums
(benchmarks/results/2026-11-30-h200-sweep/sweep.json); the best configurations there hold
16 to 32 elements per thread and at most 8 warps, which the rules below reproduce.

* **Persistent** when the reduced extent (rounded up to a power of two) is at most
  ``persistent_max`` elements: the row is read once and stays in registers between the group's
  reductions and its outputs (softmax, LayerNorm). XBLOCK rows fill a tile of 4096 elements;
  warps = tile / 1024 (32 elements a thread), 1 to 8.
* **Looped** otherwise: RBLOCK = 4096 elements a step with 16 warps for inner reductions; the
  group's reductions run in as many loops as their dependency depth (softmax: 3).
* **Outer** reductions (the unit-stride dim is kept, like a bias gradient) take tiles of
  OUTER_XBLOCK contiguous columns x OUTER_RBLOCK rows, 8 warps; when that gives fewer programs
  than the GPU has multiprocessors and the group cannot split, the tile narrows (down to 8
  columns) and grows in rows.
* **Split** when the kept extent gives fewer programs than the GPU has multiprocessors and the
  reduced extent is long (a full reduction to one value, a column sum over a tall matrix): the
  reduced extent is cut into chunks reduced by separate programs into a workspace, then a
  second kernel combines the chunks and runs the group's epilogue (the two-stage "split
  reduction" of Inductor and nvFuser's grid reductions). Only groups whose reductions do not
  depend on each other can split (``splittable``).
* **Inner-outer** (``reduction.inner_outer``, :func:`inner_outer`) for a group that pairs row
  reductions with column sums over the same rows (``segment.pair_inner_outer``): a grid of
  programs that loop over blocks of whole rows and keep per-column partials in registers, then
  a kernel that sums the partials.
* Under the interpreter blocks are as large as allowed (each program is a NumPy evaluation),
  and splitting starts at smaller sizes so that tests exercise it.
"""
from __future__ import annotations

from ..config import Tuning
from . import LaunchConfig, RuntimeLayout, Stage, cdiv, next_power_of_2, plural, single

def _warps(elements: int, t) -> int:
    return max(1, min(8, next_power_of_2(elements // t.persistent.elements_per_thread) // 32 or 1))


def heuristic(rt: RuntimeLayout, persistent_max: int, interpret: bool, sm_count: int = 0,
              splittable: bool = False, writes_rows: bool = False, tile_inputs: int = 2,
              tuning: Tuning = Tuning()) -> LaunchConfig:
    """Pick persistent, looped or split, block sizes and warps for ``rt``'s sizes.

    Args:
        rt: the call's loop layout.
        persistent_max: largest reduced extent kept in registers (``Options``).
        interpret: kernels run under Triton's interpreter.
        sm_count: multiprocessors of the device (0 when unknown).
        splittable: the group can run as a split reduction.
        writes_rows: the group writes an output of 16-bit elements that varies along the
            reduced dims (whole rows, as a softmax does), not only per-row results.
        tile_inputs: tensors the group reads along the reduced dims.
        tuning: its ``persistent``, ``outer``, ``looped`` and ``split`` sections are read.
    """
    t = tuning
    x = max(rt.xnumel, 1)
    r = rt.rnumel
    rpow = next_power_of_2(max(r, 1))
    inner = rt.r_inner or rt.layout.n_x == 0 or rt.layout.n_r == 0
    if interpret:
        if splittable and x <= 4 and r >= t.split.interpret_min_r:
            return _split(x, r, inner, programs=8, interpret=True, t=t)
        if rpow <= min(persistent_max, t.persistent.interpret_max_row):
            xb = max(1, min(next_power_of_2(x), t.persistent.interpret_tile // rpow))
            return single("reduction.persistent", cdiv(x, xb), xb, rpow, 1, "interpreter")
        return single("reduction.loop", x, 1, t.looped.interpret_rblock, 1, "interpreter")
    if inner:
        x_programs = x
        if splittable and sm_count and x_programs < sm_count and r >= t.split.min_r:
            return _split(x, r, inner, programs=4 * sm_count, interpret=False, t=t)
        if rpow <= persistent_max:
            xb = max(1, min(next_power_of_2(x), t.persistent.tile_elements // rpow))
            w = _warps(xb * rpow, t)
            if rpow == t.persistent.one_warp_row:
                xb = min(xb, t.persistent.writing_rows_xblock) if writes_rows else 1
                w = xb
            blocks = cdiv(x, xb)
            return single("reduction.persistent", blocks, xb, rpow, w,
                          f"inner, {r} reduced elements fit: persistent, {plural(xb, 'row')} x {rpow}, "
                          f"{plural(w, 'warp')}")
        return single("reduction.loop", x, 1, t.looped.rblock, t.looped.warps,
                      f"inner, {r} reduced elements: loop of {t.looped.rblock}")
    xb = min(t.outer.xblock, next_power_of_2(x))
    x_programs = cdiv(x, xb)
    if splittable and sm_count and x_programs < t.split.outer_below * sm_count and r >= t.split.min_r // 8:
        return _split(x, r, inner, programs=t.split.outer_programs * sm_count, interpret=False, t=t,
                      rows=t.split.outer_rblock_one_input if tile_inputs == 1 else t.split.outer_rblock)
    # Too few columns for the GPU (a squeeze-excitation mean over H*W of a channels-last image
    # at batch 1: 72 to 960 columns): narrower tiles give more programs.
    narrowed = False
    while sm_count and xb > t.outer.min_xblock_loop and x_programs < sm_count:
        xb //= 2
        x_programs = cdiv(x, xb)
        narrowed = True
    # a persistent tile (a small tensor, bound by latency) narrows further; a looped one keeps
    # 16-byte rows, as it streams more data
    while sm_count and xb > t.outer.min_xblock and x_programs < sm_count \
            and rpow * xb // 2 <= t.persistent.tile_elements * 2 \
            and rpow <= persistent_max:
        xb //= 2
        x_programs = cdiv(x, xb)
        narrowed = True
    if rpow * xb <= t.persistent.tile_elements * 2 and rpow <= persistent_max:
        # a narrowed tile is a small, latency-bound launch: more threads, fewer elements each
        w = min(8, max(1, xb * rpow // t.outer.small_elements_per_warp)) if narrowed else _warps(xb * rpow, t)
        return single("reduction.persistent", x_programs, xb, rpow, w,
                      f"outer, {r} reduced elements fit: persistent {plural(xb, 'column')} x {rpow}, "
                      f"{plural(w, 'warp')}")
    rb = min(max(t.outer.rblock, t.outer.tile // xb), rpow)
    return single("reduction.loop", x_programs, xb, rb, t.outer.warps,
                  f"outer, {r} reduced elements: {xb} columns, loop of {rb} rows")


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


def inner_outer(rt: RuntimeLayout, interpret: bool, sm_count: int = 0, resident: int = 0,
                tuning: Tuning = Tuning()) -> LaunchConfig:
    """Launch configuration of a ``reduction.inner_outer`` group: ``split`` programs loop over
    blocks of XBLOCK whole rows (RBLOCK = the row length rounded up to a power of two), each
    adding its rows into column partials it writes once; then ``cdiv(rnumel, RBLOCK2)``
    programs sum the ``split`` partials of RBLOCK2 columns each.

    Args:
        rt: the call's loop layout (kept dims: the rows; reduced dims: the columns).
        interpret: kernels run under Triton's interpreter.
        sm_count: multiprocessors of the device (0 when unknown: one program per row block).
        resident: programs of the compiled first kernel that fit on a multiprocessor
            (``resident_programs``); 0 before it is compiled (``programs_per_sm``).
        tuning: its ``inner_outer`` section is read.
    """
    t = tuning.inner_outer
    x = max(rt.xnumel, 1)
    r = max(rt.rnumel, 1)
    rpow = next_power_of_2(r)
    if interpret:
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
        programs = min(blocks, per_sm * sm_count) if sm_count else blocks
    sb = next_power_of_2(programs)
    fr = max(1, min(rpow, t.finish_tile // sb))
    wf = 1 if interpret else max(1, min(8, sb * fr // 256))
    return LaunchConfig("reduction.inner_outer",
                        (Stage((programs,), xb, rpow, w), Stage((cdiv(r, fr),), sb, fr, wf)), split=programs,
                        reason=f"{x} rows of {r}: {programs} programs over {blocks} blocks of {plural(xb, 'row')}, "
                               f"{plural(w, 'warp')}"
                               + (f" ({resident} fit on a multiprocessor)" if resident else "")
                               + f", column partials summed by {cdiv(r, fr)} programs")


def _split(x: int, r: int, inner: bool, programs: int, interpret: bool, t: Tuning, rows: int = 0) -> LaunchConfig:
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
