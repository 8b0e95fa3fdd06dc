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

from . import LaunchConfig, RuntimeLayout, Stage, cdiv, next_power_of_2, plural, single

TILE_ELEMENTS = 4096
ELEMENTS_PER_THREAD = 32
LOOP_RBLOCK = 4096
LOOP_WARPS = 16
#: Outer (column) reductions: tiles of OUTER_XBLOCK kept (contiguous) x OUTER_RBLOCK reduced
#: elements; split when fewer than OUTER_SPLIT_BELOW programs per multiprocessor would run,
#: into about OUTER_SPLIT_PROGRAMS programs per multiprocessor.
OUTER_XBLOCK = 128
OUTER_RBLOCK = 16
OUTER_WARPS = 8
OUTER_SPLIT_BELOW = 4
OUTER_SPLIT_PROGRAMS = 8
#: The partial stage of a split outer reduction: XBLOCK columns x RBLOCK rows per step, warps.
#: Measured on an H200 (``benchmarks/sweep_split.py``, bf16 column sums cast to fp32):
#: 64 x 8 with 4 warps at 8 programs per multiprocessor was within 7% of the best candidate on
#: 8192x768, 8192x3072 and 16384x4096 (6.1, 14.3 and 35.0 us), where 128 x 16 with 8 warps took
#: 14.4, 22.1 and 40.6 us. On normalization graphs (two inputs and per-row or per-channel
#: statistics: LayerNorm and RMSNorm weight gradients, channels-last BatchNorm;
#: ``benchmarks/sweep_norms.py``) 64 x 16 was best or within 3% of the best on all five cases,
#: 20% faster than 64 x 8 (LayerNorm backward at 16384 x 4096: 72.8 against 92.9 us).
SPLIT_OUTER_XBLOCK = 64
SPLIT_OUTER_RBLOCK = 16
SPLIT_OUTER_WARPS = 4
#: The partial stage's rows a step when the group reads one tensor along the reduced dims (a
#: BatchNorm's statistics in the forward; its backward's column sums read two). On an H200 (run BM,
#: ``benchmarks/norms.py --ops batch_norm_cl --alt schedulers.reduction.SPLIT_OUTER_RBLOCK=32``,
#: 64x256x56x56 channels-last, device us of the partial kernel, 16 -> 32 rows): forward bf16
#: 42.7 -> 37.0 and fp32 66.3 -> 58.5; backward bf16 58.1 -> 58.9 and fp32 103.5 -> 107.4.
SPLIT_OUTER_RBLOCK_ONE_INPUT = 32
#: Outer reductions that cannot split and give fewer programs than multiprocessors halve
#: XBLOCK down to OUTER_MIN_XBLOCK columns when the tile is persistent (OUTER_MIN_XBLOCK_LOOP,
#: 16 contiguous bytes of fp16 a row, when it loops over tiles of OUTER_TILE elements). On an
#: H200, MobileNetV3-Large at batch 1 ran its squeeze-excitation means (hard-swish + mean over
#: 7x7 to 28x28, 72 to 960 channels, channels-last) as 1 to 8 programs of 128 columns: 12 to
#: 17 us per kernel. Sweeping those means (benchmarks/results/2026-11-30-h200-run-ad/,
#: ``benchmarks/sweep_small.py``; device time per launch from CUDA-graph replays): 2 columns
#: x 1024 rows with 8 warps took 3.9-4.1 us at 72 and 120 channels over 28x28 (8 columns:
#: 6.3-6.5 us, Inductor 4.5 us); at 672 x 14x14, 4 columns 2.9 us (8 columns 3.1, Inductor
#: 4.6); at 960 x 7x7, 8 columns 2.2 us and 4 columns 2.3 (Inductor 2.1).
OUTER_MIN_XBLOCK = 2
OUTER_MIN_XBLOCK_LOOP = 8
OUTER_TILE = 2048
#: Such a narrowed persistent tile runs 64 elements a warp, 2 a thread (up to 8 warps),
#: rather than the 32 of large tiles: at batch 1 the squeeze-excitation means are bound by
#: latency, like the small pointwise kernels (see the pointwise scheduler).
OUTER_SMALL_ELEMENTS_PER_WARP = 64
#: Persistent inner reductions with many row blocks loop over them in fewer programs
#: (``reduction.persistent_rows``), so that loads of the next rows overlap the current
#: reduction; programs per multiprocessor for that grid.
ROWS_LOOP = False
ROWS_PROGRAMS_PER_SM = 4
#: Reduced extent from which a group with too few programs is split (GPU / interpreter).
SPLIT_MIN_R = 8192
INTERPRET_SPLIT_MIN_R = 2048
INTERPRET_TILE = 1 << 16
#: elements a step of a looped reduction takes under the interpreter (tests lower it to run
#: many steps on short rows)
INTERPRET_LOOP_RBLOCK = 1 << 14
#: Rows that pad to this many elements run one row a program on one warp (32 elements a
#: thread), so that their reductions stay within a warp: no exchange through shared memory and
#: no barrier; kernels that also write whole rows of 16-bit elements (a softmax, a
#: normalization's output, a gradient, in fp16 or bf16) ran two such rows a program on two
#: warps until run BM (WRITING_ROWS_XBLOCK).
#: Measured on an H200 (benchmarks/NOTES.md, run AQ; ``benchmarks/sweep_rows.py --sweep warps``),
#: bf16 32768 x 1024, device us, 1 row x 1 warp / 2 x 2 / 4 x 4 (the earlier choice):
#: cross-entropy forward (per-row outputs only) 39.4 / 45.9 / 51.1; cross-entropy backward 44.2 /
#: 41.5 / 49.0; softmax forward 36.0 / 35.6 / 37.4; LayerNorm forward 34.3 / 33.6 / 34.7; RMSNorm
#: forward 33.6 / 33.3 / 34.2; softmax backward 47.5 / 47.5 / 47.6. 2 rows x 1 warp (64 elements
#: a thread) was slower in every case. In fp32, 2 x 2 lost to 1 x 1 (run AZ against runs AR and
#: AT, GPU ms at 32768 x 1024): cross-entropy backward 0.075 against 0.070, softmax, LayerNorm
#: and RMSNorm forward 0.066-0.067 against 0.064-0.065. At rows of 4096 one row on 4 warps stayed
#: best (fewer warps: up to 1.9x slower).
ONE_WARP_ROW = 1024
#: Rows a program (on as many warps) at ONE_WARP_ROW elements when the kernel writes whole
#: 16-bit rows (see above). Two rows on two warps put both warps along the row (Triton's
#: layout), so each thread holds elements of both rows and computes both rows' per-row values.
#: Once cross-entropy's backward kernel lost its per-element adds and predicate spills
#: (``codegen.triton.SINK_SELECTS``, ``ROW_PRELUDE``), one row on one warp was as fast or
#: faster: on an H200 (run BM, ``benchmarks/norms.py --shapes 32768x1024 --alt
#: schedulers.reduction.WRITING_ROWS_XBLOCK=1``, bf16 device ms, 2 -> 1) cross-entropy's
#: backward 0.038 -> 0.036 (Inductor 0.036); softmax's and LayerNorm's forwards 0.034 -> 0.034,
#: softmax's backward 0.047 -> 0.047, log-softmax's 0.048 -> 0.047, RMSNorm's forward 0.033 ->
#: 0.034.
WRITING_ROWS_XBLOCK = 1


def _warps(elements: int) -> int:
    return max(1, min(8, next_power_of_2(elements // ELEMENTS_PER_THREAD) // 32 or 1))


def heuristic(rt: RuntimeLayout, persistent_max: int, interpret: bool, sm_count: int = 0,
              splittable: bool = False, writes_rows: bool = False, tile_inputs: int = 2) -> LaunchConfig:
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
    """
    x = max(rt.xnumel, 1)
    r = rt.rnumel
    rpow = next_power_of_2(max(r, 1))
    inner = rt.r_inner or rt.layout.n_x == 0 or rt.layout.n_r == 0
    if interpret:
        if splittable and x <= 4 and r >= INTERPRET_SPLIT_MIN_R:
            return _split(x, r, inner, programs=8, interpret=True)
        if rpow <= min(persistent_max, 1 << 14):
            xb = max(1, min(next_power_of_2(x), INTERPRET_TILE // rpow))
            return single("reduction.persistent", cdiv(x, xb), xb, rpow, 1, "interpreter")
        return single("reduction.loop", x, 1, INTERPRET_LOOP_RBLOCK, 1, "interpreter")
    if inner:
        x_programs = x
        if splittable and sm_count and x_programs < sm_count and r >= SPLIT_MIN_R:
            return _split(x, r, inner, programs=4 * sm_count, interpret=False)
        if rpow <= persistent_max:
            xb = max(1, min(next_power_of_2(x), TILE_ELEMENTS // rpow))
            w = _warps(xb * rpow)
            if rpow == ONE_WARP_ROW:
                xb = min(xb, WRITING_ROWS_XBLOCK) if writes_rows else 1
                w = xb
            blocks = cdiv(x, xb)
            if ROWS_LOOP and sm_count and blocks > 2 * ROWS_PROGRAMS_PER_SM * sm_count:
                grid = ROWS_PROGRAMS_PER_SM * sm_count
                return single("reduction.persistent_rows", grid, xb, rpow, w,
                              f"inner, {r} reduced elements fit: {grid} programs loop over {blocks} blocks of "
                              f"{plural(xb, 'row')} x {rpow}, {plural(w, 'warp')}")
            return single("reduction.persistent", blocks, xb, rpow, w,
                          f"inner, {r} reduced elements fit: persistent, {plural(xb, 'row')} x {rpow}, "
                          f"{plural(w, 'warp')}")
        return single("reduction.loop", x, 1, LOOP_RBLOCK, LOOP_WARPS,
                      f"inner, {r} reduced elements: loop of {LOOP_RBLOCK}")
    xb = min(OUTER_XBLOCK, next_power_of_2(x))
    x_programs = cdiv(x, xb)
    if splittable and sm_count and x_programs < OUTER_SPLIT_BELOW * sm_count and r >= SPLIT_MIN_R // 8:
        return _split(x, r, inner, programs=OUTER_SPLIT_PROGRAMS * sm_count, interpret=False,
                      rows=SPLIT_OUTER_RBLOCK_ONE_INPUT if tile_inputs == 1 else SPLIT_OUTER_RBLOCK)
    # Too few columns for the GPU (a squeeze-excitation mean over H*W of a channels-last image
    # at batch 1: 72 to 960 columns): narrower tiles give more programs.
    narrowed = False
    while sm_count and xb > OUTER_MIN_XBLOCK_LOOP and x_programs < sm_count:
        xb //= 2
        x_programs = cdiv(x, xb)
        narrowed = True
    # a persistent tile (a small tensor, bound by latency) narrows further; a looped one keeps
    # 16-byte rows, as it streams more data
    while sm_count and xb > OUTER_MIN_XBLOCK and x_programs < sm_count and rpow * xb // 2 <= TILE_ELEMENTS * 2 \
            and rpow <= persistent_max:
        xb //= 2
        x_programs = cdiv(x, xb)
        narrowed = True
    if rpow * xb <= TILE_ELEMENTS * 2 and rpow <= persistent_max:
        # a narrowed tile is a small, latency-bound launch: more threads, fewer elements each
        w = min(8, max(1, xb * rpow // OUTER_SMALL_ELEMENTS_PER_WARP)) if narrowed else _warps(xb * rpow)
        return single("reduction.persistent", x_programs, xb, rpow, w,
                      f"outer, {r} reduced elements fit: persistent {plural(xb, 'column')} x {rpow}, "
                      f"{plural(w, 'warp')}")
    rb = min(max(OUTER_RBLOCK, OUTER_TILE // xb), rpow)
    return single("reduction.loop", x_programs, xb, rb, OUTER_WARPS,
                  f"outer, {r} reduced elements: {xb} columns, loop of {rb} rows")


#: ``reduction.inner_outer`` (a row reduction paired with column sums over the same rows; see
#: ``segment.pair_inner_outer``): each program loops over blocks of whole rows of
#: INNER_OUTER_TILE elements (INNER_OUTER_SHORT_TILE for rows of at most INNER_OUTER_SHORT_ROW)
#: with its column partials in registers, INNER_OUTER_ELEMENTS_PER_THREAD elements a thread (at
#: most INNER_OUTER_WARPS warps), the loop over blocks software-pipelined in
#: INNER_OUTER_STAGES stages (0: Triton's default). The grid is INNER_OUTER_PROGRAMS_PER_SM
#: programs a multiprocessor until the first kernel is compiled; with INNER_OUTER_FIT the
#: executor then sizes it to the programs that fit on a multiprocessor at once
#: (``resident_programs``), at most INNER_OUTER_MAX_PER_SM. Rows longer than
#: INNER_OUTER_MAX_ROW are not paired.
#:
#: From sweeps on an H200 (benchmarks/NOTES.md, runs AG, AH and AJ;
#: ``benchmarks/sweep_inner_outer.py``) on bf16 LayerNorm and RMSNorm backward:
#: * two pipelining stages took LayerNorm 16384x4096 from 166 to 144 us (the two unpaired
#:   kernels: 171); at 8192 elements a row every configuration lost to the unpaired kernels
#:   (180 against 175 us), hence the longest row;
#: * the grid fitted to residency took RMSNorm 16384x4096 from 158 to 125 us (3 programs fit;
#:   LayerNorm's fit 2, and 3 took 210 us there: the third waits for a second wave);
#: * blocks of 2048 elements with 4 warps beat 4096 with 8 on rows of 1024 (LayerNorm
#:   32768x1024 70.7 against 75.8 us, RMSNorm 73.9 against 84.6), not on longer rows.
INNER_OUTER_PROGRAMS_PER_SM = 2
INNER_OUTER_FIT = True
INNER_OUTER_MAX_PER_SM = 4
INNER_OUTER_TILE = 4096
INNER_OUTER_SHORT_ROW = 1024
INNER_OUTER_SHORT_TILE = 2048
INNER_OUTER_ELEMENTS_PER_THREAD = 16
INNER_OUTER_WARPS = 8
INNER_OUTER_STAGES = 2
INNER_OUTER_MAX_ROW = 4096
#: the second kernel: at most FINISH_TILE partials x columns a program
FINISH_TILE = 4096
#: under the interpreter: about this many row blocks, over at most this many programs, so that
#: tests cover programs with several blocks and a partial last block
INTERPRET_INNER_OUTER_BLOCKS = 8
INTERPRET_INNER_OUTER_PROGRAMS = 3


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


def inner_outer(rt: RuntimeLayout, interpret: bool, sm_count: int = 0, resident: int = 0) -> LaunchConfig:
    """Launch configuration of a ``reduction.inner_outer`` group: ``split`` programs loop over
    blocks of XBLOCK whole rows (RBLOCK = the row length rounded up to a power of two), each
    adding its rows into column partials it writes once; then ``cdiv(rnumel, RBLOCK2)``
    programs sum the ``split`` partials of RBLOCK2 columns each.

    Args:
        rt: the call's loop layout (kept dims: the rows; reduced dims: the columns).
        interpret: kernels run under Triton's interpreter.
        sm_count: multiprocessors of the device (0 when unknown: one program per row block).
        resident: programs of the compiled first kernel that fit on a multiprocessor
            (``resident_programs``); 0 before it is compiled (INNER_OUTER_PROGRAMS_PER_SM).
    """
    x = max(rt.xnumel, 1)
    r = max(rt.rnumel, 1)
    rpow = next_power_of_2(r)
    if interpret:
        xb = max(1, min(next_power_of_2(cdiv(x, INTERPRET_INNER_OUTER_BLOCKS)), INTERPRET_TILE // rpow))
        blocks = cdiv(x, xb)
        programs = min(blocks, INTERPRET_INNER_OUTER_PROGRAMS)
        w = 1
    else:
        tile = INNER_OUTER_SHORT_TILE if rpow <= INNER_OUTER_SHORT_ROW else INNER_OUTER_TILE
        xb = max(1, min(next_power_of_2(x), tile // rpow))
        w = max(1, min(INNER_OUTER_WARPS, xb * rpow // (32 * INNER_OUTER_ELEMENTS_PER_THREAD)))
        blocks = cdiv(x, xb)
        per_sm = min(resident, INNER_OUTER_MAX_PER_SM) if resident else INNER_OUTER_PROGRAMS_PER_SM
        programs = min(blocks, per_sm * sm_count) if sm_count else blocks
    sb = next_power_of_2(programs)
    fr = max(1, min(rpow, FINISH_TILE // sb))
    wf = 1 if interpret else max(1, min(8, sb * fr // 256))
    return LaunchConfig("reduction.inner_outer",
                        (Stage((programs,), xb, rpow, w), Stage((cdiv(r, fr),), sb, fr, wf)), split=programs,
                        reason=f"{x} rows of {r}: {programs} programs over {blocks} blocks of {plural(xb, 'row')}, "
                               f"{plural(w, 'warp')}"
                               + (f" ({resident} fit on a multiprocessor)" if resident else "")
                               + f", column partials summed by {cdiv(r, fr)} programs")


def _split(x: int, r: int, inner: bool, programs: int, interpret: bool, rows: int = SPLIT_OUTER_RBLOCK) -> LaunchConfig:
    if interpret:
        xb, rb, w = next_power_of_2(x), 512, 1
    elif inner:
        xb, rb, w = 1, 2048, 8
    else:
        xb, rb, w = min(SPLIT_OUTER_XBLOCK, next_power_of_2(x)), rows, SPLIT_OUTER_WARPS
    x_programs = cdiv(x, xb)
    split = max(2, min(programs // x_programs, cdiv(r, rb), 1024))
    rchunk = cdiv(cdiv(r, split), rb) * rb
    split = cdiv(r, rchunk)
    sb = next_power_of_2(split)
    fx = max(1, min(next_power_of_2(x), max(1, 2048 // sb)))
    finish = Stage((cdiv(x, fx),), fx, sb, 1 if interpret else max(1, min(8, fx * sb // 256)))
    return LaunchConfig("reduction.split", (Stage((x_programs, split), xb, rb, w), finish), split=split,
                        rchunk=rchunk, reason=f"{x} kept x {r} reduced: {split} chunks of {rchunk}, then combine")
