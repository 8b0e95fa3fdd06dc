"""Pointwise scheduler: one flat loop over the kept elements, XBLOCK of them per program.

Heuristic (run time), in elements per thread:

* Large tensors take 1024 elements and 2 warps per program (16 elements a thread: two 16-byte
  accesses per tensor for 16-bit dtypes, four for 32-bit). Measured on an H200
  (benchmarks/results/2026-11-30-h200-sweep/sweep.json, a bf16 ``a * b + 1`` over 2**27
  elements): 1024 x 2 warps and 2048 x 2 reach 95% of a device copy, 1024 x 4 warps 95%,
  1024 x 8 warps 86%.
* Small tensors (batch-1 inference: 50K to 1M elements, a few hundred KiB) are bound by
  latency, not bandwidth: they need many threads in flight, each with little work. Elements
  per thread grow with the size, one per ``Tuning.pointwise.small_threads_per_sm`` x multiprocessors
  elements, rounded down to a power of two, up to 16. Measured on an H200
  (benchmarks/results/2026-11-30-h200-run-ac/, fp16 channels-last bias + hardswish, gating and
  bias + relu kernels from 47K to 1M elements, device time from CUDA-graph replays): at 47K to
  131K elements one element a thread (256 x 8 warps) took 1.6-1.8 us where 1024 x 2 warps took
  2.6-3.6 us; at 200K, two a thread; at 750K, four; at 0.8M to 1M, eight (2048 x 8 warps).
* When the multiprocessor count is unknown (0), sizes below 1024 take the next power of two,
  at least 128 elements, with fewer warps.

Under the interpreter each program is a NumPy evaluation, so blocks are as large as allowed.
"""
from __future__ import annotations

from ..config import Tuning
from . import LaunchConfig, RuntimeLayout, cdiv, next_power_of_2, plural, single

def heuristic(rt: RuntimeLayout, interpret: bool, sm_count: int = 0, tuning: Tuning = Tuning()) -> LaunchConfig:
    """Pick the launch configuration of a pointwise kernel for ``rt``'s sizes.

    Args:
        rt: the kernel's runtime layout (``rt.xnumel`` elements).
        interpret: whether the kernel runs under Triton's interpreter.
        sm_count: multiprocessors of the device, 0 when unknown.
        tuning: its ``pointwise`` section is read.
    """
    t = tuning.pointwise
    n = max(rt.xnumel, 1)
    if interpret:
        block = min(next_power_of_2(n), t.interpret_block)
        return single("pointwise", cdiv(n, block), block, 1, 1, "interpreter: largest block")
    if sm_count:
        per = max(n // (t.small_threads_per_sm * sm_count), 1)
        ept = 1 << (per.bit_length() - 1)  # a power of two, rounded down
        if ept < 16:
            block, warps = next((b, w) for e, b, w in t.small_configs if e == ept)
            block = min(block, max(128, next_power_of_2(n)))
            warps = min(warps, block // 32)
            return single("pointwise", cdiv(n, block), block, 1, warps,
                          f"{n} elements on {sm_count} multiprocessors: latency-bound, {block} per program, "
                          f"{plural(warps, 'warp')}")
    block = min(t.large_block, max(128, next_power_of_2(n)))
    warps = t.large_warps if block >= 512 else 1
    return single("pointwise", cdiv(n, block), block, 1, warps,
                  f"{n} elements: {block} per program, {plural(warps, 'warp')}")
