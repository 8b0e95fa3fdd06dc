"""Reduction scheduler: persistent (whole reduced extent in registers) or looped.

The kernel works on [XBLOCK, RBLOCK] tiles: XBLOCK kept elements (rows) per program, RBLOCK
reduced elements per step.

Heuristic (run time), after Inductor's and nvFuser's published reduction heuristics:

* Persistent when the reduced extent (rounded up to a power of two) is at most
  ``options.persistent_max_elements``: one read of each input element, the row stays in
  registers between the group's reductions and its outputs (softmax, LayerNorm).
* Inner reductions (the reduced dims are the unit-stride ones) put many threads along r:
  RBLOCK covers the row (persistent) or 1024-2048 elements per step (looped), XBLOCK rows
  fill a program up to about 4096 elements, and warps grow with the tile (8 elements a
  thread).
* Outer reductions (the kept dims are unit-stride, like a bias gradient or column statistics)
  put the contiguous kept dim across lanes for coalesced loads: XBLOCK 64 columns by RBLOCK
  rows per step.
* Under the interpreter blocks are as large as allowed (each program is a NumPy evaluation).
"""
from __future__ import annotations

from . import LaunchConfig, RuntimeLayout, cdiv, next_power_of_2

TILE_ELEMENTS = 4096
LOOP_RBLOCK_INNER = 2048
OUTER_XBLOCK = 64
OUTER_RBLOCK = 64


def _warps(elements: int) -> int:
    return max(1, min(16, next_power_of_2(elements // 256)))


def heuristic(rt: RuntimeLayout, persistent_max: int, interpret: bool) -> LaunchConfig:
    """Pick persistent or looped, block sizes and warps for ``rt``'s sizes."""
    x = max(rt.xnumel, 1)
    r = max(rt.rnumel, 1)
    rpow = next_power_of_2(r)
    if interpret:
        if rpow <= 1 << 14:
            xb = max(1, min(next_power_of_2(x), (1 << 16) // rpow))
            return LaunchConfig("reduction.persistent", xb, rpow, 1, cdiv(x, xb), "interpreter")
        return LaunchConfig("reduction.loop", 1, 1 << 14, 1, x, "interpreter")
    if rt.r_inner or rt.layout.n_x == 0 or rt.layout.n_r == 0:
        if rpow <= persistent_max:
            xb = max(1, min(next_power_of_2(x), TILE_ELEMENTS // rpow))
            w = _warps(xb * rpow)
            return LaunchConfig("reduction.persistent", xb, rpow, w, cdiv(x, xb),
                                f"inner, {r} reduced elements fit: persistent, {xb} rows x {rpow}")
        rb = LOOP_RBLOCK_INNER
        return LaunchConfig("reduction.loop", 1, rb, _warps(rb), x,
                            f"inner, {r} reduced elements: loop of {rb}")
    xb = min(OUTER_XBLOCK, next_power_of_2(x))
    if rpow * xb <= TILE_ELEMENTS * 2 and rpow <= persistent_max:
        return LaunchConfig("reduction.persistent", xb, rpow, _warps(xb * rpow), cdiv(x, xb),
                            f"outer, {r} reduced elements fit: persistent {xb} columns x {rpow}")
    rb = min(OUTER_RBLOCK, rpow)
    return LaunchConfig("reduction.loop", xb, rb, _warps(xb * rb), cdiv(x, xb),
                        f"outer, {r} reduced elements: {xb} columns, loop of {rb} rows")
