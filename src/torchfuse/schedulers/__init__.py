"""Schedulers: for each fusion group, which kernel shape to generate and its launch configuration.

The contract (after nvFuser's): the segmenter's structural check (``torchfuse.domain.align``)
decides at compile time that a group can be scheduled at all; at run time a scheduler's
``heuristic`` picks a :class:`LaunchConfig` from the actual sizes; configurations whose
``code_key`` is equal share one generated kernel, so new sizes reuse compiled code.
"""
from __future__ import annotations

import dataclasses

from .layout import KernelLayout, RuntimeLayout, analyze


def plural(count: int, word: str) -> str:
    """``"1 warp"``, ``"4 warps"``: a count and an English noun for the launch reasons."""
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


@dataclasses.dataclass(frozen=True)
class Stage:
    """One kernel launch: ``grid`` programs (a 1- or 2-tuple) of XBLOCK x RBLOCK tiles."""

    grid: tuple[int, ...]
    XBLOCK: int
    RBLOCK: int
    num_warps: int

    def __str__(self) -> str:
        return f"grid={self.grid} XBLOCK={self.XBLOCK} RBLOCK={self.RBLOCK} warps={self.num_warps}"


@dataclasses.dataclass(frozen=True)
class LaunchConfig:
    """Launch configuration of one group call.

    Attributes:
        scheduler: ``pointwise``, ``reduction.persistent``, ``reduction.loop``, ``reduction.split`` (the reduced extent cut into ``split``
            chunks of ``rchunk`` elements reduced by separate programs into a workspace, then
            combined by a second kernel) or ``reduction.inner_outer`` (``split`` programs
            loop over blocks of rows and write per-column partials; a second kernel sums them).
        stages: the launches, in order (two for ``reduction.split`` and
            ``reduction.inner_outer``).
        split, rchunk: number of chunks and elements per chunk (split reductions), or number
            of programs of the first stage (``reduction.inner_outer``, ``rchunk`` 0).
        reason: one line saying why this configuration was chosen (shown by reports).
    """

    scheduler: str
    stages: tuple[Stage, ...]
    split: int = 1
    rchunk: int = 0
    reason: str = ""

    @property
    def XBLOCK(self) -> int:
        return self.stages[0].XBLOCK

    @property
    def RBLOCK(self) -> int:
        return self.stages[0].RBLOCK

    @property
    def num_warps(self) -> int:
        return self.stages[0].num_warps

    @property
    def grid(self) -> int:
        return self.stages[0].grid[0]

    @property
    def code_key(self) -> tuple:
        """What of this configuration changes generated source (block sizes are constexprs)."""
        return (self.scheduler,)


#: Schedulers of two launches whose first writes partial results to workspaces for the second
#: (the kernels take the workspaces and the ``split``/``rchunk`` arguments).
TWO_STAGE = ("reduction.split", "reduction.inner_outer")


#: The tuning sections each scheduler's heuristic and kernel body read (``explain`` shows them).
TUNING_SECTIONS = {"pointwise": ("pointwise", "codegen"), "reduction.persistent": ("persistent", "outer", "codegen"),
                   "reduction.loop": ("looped", "outer", "codegen"), "reduction.split": ("split", "looped", "codegen"),
                   "reduction.inner_outer": ("inner_outer", "persistent", "codegen")}


def tuning_sections(scheduler: str) -> tuple[str, ...]:
    """The :class:`~torchfuse.config.Tuning` sections that scheduler ``scheduler`` reads."""
    return TUNING_SECTIONS.get(scheduler, ())


def single(scheduler: str, grid: int, XBLOCK: int, RBLOCK: int, num_warps: int, reason: str) -> LaunchConfig:
    """A one-launch configuration."""
    return LaunchConfig(scheduler, (Stage((grid,), XBLOCK, RBLOCK, num_warps),), reason=reason)


def next_power_of_2(n: int) -> int:
    return 1 if n <= 1 else 1 << (n - 1).bit_length()


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


__all__ = ["LaunchConfig", "Stage", "TWO_STAGE", "single", "KernelLayout", "RuntimeLayout", "analyze", "next_power_of_2", "cdiv"]
