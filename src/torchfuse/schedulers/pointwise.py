"""Pointwise scheduler: one flat loop over the kept elements, XBLOCK of them per program.

Heuristic (run time): large tensors take 1024 elements and 4 warps per program, 8 elements a
thread, so that fp32 data moves as two 16-byte accesses per thread and fp16/bf16 as one;
this is the shape PyTorch's own vectorized elementwise kernels use (4 elements of 32 bits per
thread per access). Small tensors take the next power of two of their size, at least 128
elements, with fewer warps, so a tiny launch does not run mostly masked lanes. Under the
interpreter each program is a NumPy evaluation, so blocks are as large as allowed.
"""
from __future__ import annotations

from . import LaunchConfig, RuntimeLayout, cdiv, next_power_of_2

#: Elements per program for large pointwise kernels (see module docstring).
LARGE_BLOCK = 1024
INTERPRET_BLOCK = 1 << 16


def heuristic(rt: RuntimeLayout, interpret: bool) -> LaunchConfig:
    """Pick the launch configuration of a pointwise kernel for ``rt``'s sizes."""
    n = max(rt.xnumel, 1)
    if interpret:
        block = min(next_power_of_2(n), INTERPRET_BLOCK)
        return LaunchConfig("pointwise", block, 1, 1, cdiv(n, block), "interpreter: largest block")
    block = min(LARGE_BLOCK, max(128, next_power_of_2(n)))
    warps = 4 if block >= 512 else (2 if block >= 256 else 1)
    return LaunchConfig("pointwise", block, 1, warps, cdiv(n, block),
                        f"{n} elements: {block} per program, {warps} warps")
