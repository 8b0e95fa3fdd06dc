"""Schedulers: for each fusion group, which kernel shape to generate and its launch configuration.

The contract (after nvFuser's): the segmenter's structural check (``torchfuse.domain.align``)
decides at compile time that a group can be scheduled at all; at run time a scheduler's
``heuristic`` picks a :class:`LaunchConfig` from the actual sizes; configurations whose
``code_key`` is equal share one generated kernel, so new sizes reuse compiled code.
"""
from __future__ import annotations

import dataclasses

from .layout import KernelLayout, RuntimeLayout, analyze


@dataclasses.dataclass(frozen=True)
class LaunchConfig:
    """Launch configuration of one kernel call.

    Attributes:
        scheduler: ``pointwise``, ``reduction.persistent`` or ``reduction.loop``.
        XBLOCK: kept-space elements per program.
        RBLOCK: reduced-space elements per program and loop step (1 for pointwise).
        num_warps: warps per program.
        grid: number of programs.
        reason: one line saying why this configuration was chosen (shown by reports).
    """

    scheduler: str
    XBLOCK: int
    RBLOCK: int
    num_warps: int
    grid: int
    reason: str = ""

    @property
    def persistent(self) -> bool:
        return self.scheduler != "reduction.loop"

    @property
    def code_key(self) -> tuple:
        """What of this configuration changes generated source (block sizes are constexprs)."""
        return (self.scheduler,)


def next_power_of_2(n: int) -> int:
    return 1 if n <= 1 else 1 << (n - 1).bit_length()


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


__all__ = ["LaunchConfig", "KernelLayout", "RuntimeLayout", "analyze", "next_power_of_2", "cdiv"]
