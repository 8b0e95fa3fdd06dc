"""The pointwise scheduler: one flat loop over the kept elements, XBLOCK of them a program.

Structural check: the group reduces nothing. Kernel body: the block's indices and mask, then
every output stored (each value computed on the way, once).

Heuristic (run time), in elements per thread (``Tuning.pointwise``):

* Large tensors take ``large_block`` elements and ``large_warps`` warps a program (16 elements
  a thread: two 16-byte accesses a tensor for 16-bit dtypes, four for 32-bit).
* Small tensors (batch-1 inference: 50K to 1M elements) are bound by latency, not bandwidth:
  they need many threads in flight, each with little work. Elements per thread grow with the
  size, one per ``small_threads_per_sm`` x multiprocessors elements, rounded down to a power
  of two, up to 16 (``small_configs``; run AC on an H200, ``benchmarks/NOTES.md``).
* When the multiprocessor count is unknown (0), sizes below 1024 take the next power of two,
  at least 128 elements, with fewer warps.

Under the interpreter each program is a NumPy evaluation, so blocks are as large as allowed.
"""
from __future__ import annotations

from ..config import Tuning
from .base import (INTERPRETER_REASON, GroupTraits, LaunchConfig, RuntimeLayout, Scheduler, Target, cdiv,
                   next_power_of_2, plural, single)


class PointwiseScheduler(Scheduler):
    name = "pointwise"
    reduces = False
    tuning_sections = ("pointwise",)

    def accepts(self, group) -> str | None:
        return "it reduces" if group.domain.reduced else None

    def heuristic(self, rt: RuntimeLayout, traits: GroupTraits, tuning: Tuning, target: Target) -> LaunchConfig:
        """The launch configuration of a pointwise kernel for ``rt.xnumel`` elements (never
        ``None``)."""
        t = tuning.pointwise
        n = max(rt.xnumel, 1)
        if target.interpret:
            block = min(next_power_of_2(n), t.interpret_block)
            return single("pointwise", cdiv(n, block), block, 1, 1, INTERPRETER_REASON)
        sm_count = target.sm_count
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

    def write_body(self, w, stage: int) -> None:
        w.emit_x_block(w.program_id())
        for out in w.g.outputs:
            w.store(out)


SCHEDULER = PointwiseScheduler()
