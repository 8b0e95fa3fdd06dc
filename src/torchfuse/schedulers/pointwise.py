"""Pointwise scheduler: one flat loop over the kept elements, XBLOCK of them per program.

Heuristic (run time): large tensors take 1024 elements and 2 warps per program (16 elements
a thread: two 16-byte accesses per tensor for 16-bit dtypes, four for 32-bit). Measured on an
H200 (benchmarks/results/2026-11-30-h200-sweep/sweep.json, a bf16 ``a * b + 1`` over 2**27
elements): 1024 x 2 warps and 2048 x 2 reach 95% of a device copy, 1024 x 4 warps 95%,
1024 x 8 warps 86%. Small tensors take the next power of two of their size, at least 128
elements, with fewer warps, so a tiny launch does not run mostly masked lanes. Under the
interpreter each program is a NumPy evaluation, so blocks are as large as allowed.
"""
from __future__ import annotations

from . import LaunchConfig, RuntimeLayout, cdiv, next_power_of_2, single

#: Elements per program for large pointwise kernels (see module docstring).
LARGE_BLOCK = 1024
LARGE_WARPS = 2
INTERPRET_BLOCK = 1 << 16


def heuristic(rt: RuntimeLayout, interpret: bool) -> LaunchConfig:
    """Pick the launch configuration of a pointwise kernel for ``rt``'s sizes."""
    n = max(rt.xnumel, 1)
    if interpret:
        block = min(next_power_of_2(n), INTERPRET_BLOCK)
        return single("pointwise", cdiv(n, block), block, 1, 1, "interpreter: largest block")
    block = min(LARGE_BLOCK, max(128, next_power_of_2(n)))
    warps = LARGE_WARPS if block >= 512 else 1
    return single("pointwise", cdiv(n, block), block, 1, warps, f"{n} elements: {block} per program, {warps} warps")
