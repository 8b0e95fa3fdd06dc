"""The scheduler contract: what every scheduler module provides, and what it returns.

A scheduler (after nvFuser's) is three things, each in its own module of this package:

* a **structural check** (compile time): ``accepts(group)`` returns ``None`` when a fusion group
  can be scheduled this way at all, else the reason it cannot;
* a **heuristic** (run time): ``heuristic(rt, traits, tuning, target)`` picks a
  :class:`LaunchConfig` from one call's actual sizes (a
  :class:`~torchfuse.schedulers.layout.RuntimeLayout`), or returns ``None`` when these sizes
  do not suit it (the next scheduler of the registry is asked);
* a **kernel body**: ``write_body(writer, stage)`` writes the code specific to it through a
  :class:`~torchfuse.codegen.writer.KernelWriter` (one call per kernel of its launch).

Configurations whose ``code_key`` is equal share one generated kernel (block sizes are
constexprs; sizes and strides are runtime arguments), so a new batch size reuses compiled code.
The registry (:mod:`torchfuse.schedulers`) orders the schedulers and picks the first that
accepts a group and whose heuristic gives a configuration.
"""
from __future__ import annotations

import dataclasses
from typing import Protocol

from ..config import Tuning
from .layout import RuntimeLayout  # noqa: F401  (re-exported for the schedulers)


def plural(count: int, word: str) -> str:
    """``"1 warp"``, ``"4 warps"``: a count and an English noun for the launch reasons."""
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def next_power_of_2(n: int) -> int:
    return 1 if n <= 1 else 1 << (n - 1).bit_length()


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


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
        scheduler: the name of the scheduler that chose it (``pointwise``,
            ``reduction.persistent``, ``reduction.loop``, ``reduction.split``,
            ``reduction.inner_outer``); reports and the golden files show it.
        stages: the launches, in order (two for the two-stage schedulers: split and
            inner-outer).
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


#: the reason of a launch configuration chosen for Triton's interpreter, where each program is
#: one NumPy pass: as few and as large programs as fit, whatever a GPU would launch
INTERPRETER_REASON = "interpreter: few large programs (a GPU gets its own launch configuration)"


def single(scheduler: str, grid: int, XBLOCK: int, RBLOCK: int, num_warps: int, reason: str) -> LaunchConfig:
    """A one-launch configuration."""
    return LaunchConfig(scheduler, (Stage((grid,), XBLOCK, RBLOCK, num_warps),), reason=reason)


@dataclasses.dataclass(frozen=True)
class Target:
    """What a heuristic plans for.

    Attributes:
        sm_count: multiprocessors of the GPU (0 when unknown).
        interpret: pick the interpreter's blocks (each program is one NumPy evaluation: as
            large as allowed) rather than a GPU's.
        persistent_max: longest reduced extent kept in registers
            (``Options.persistent_max_elements``).
        resident: programs of a compiled inner-outer kernel that fit on a multiprocessor at
            once (0 before it is compiled).
    """

    sm_count: int = 0
    interpret: bool = False
    persistent_max: int = 8192
    resident: int = 0


@dataclasses.dataclass(frozen=True)
class GroupTraits:
    """What a heuristic reads of a fusion group besides its sizes (found once, at compile time).

    Attributes:
        writes_rows: the group writes an output of 16-bit elements that varies along the
            reduced dims (whole rows, as a softmax does), not only per-row results.
        tile_inputs: tensors the group reads along the reduced dims.
    """

    writes_rows: bool = False
    tile_inputs: int = 2

    @staticmethod
    def of(group) -> "GroupTraits":
        """The traits of fusion group ``group``."""
        dom = group.domain
        if not dom.reduced:
            return GroupTraits()
        writes_rows = any(dom.varies_along_reduced(v) and v.meta.dtype.itemsize == 2 for v in group.outputs)
        tile_inputs = sum(1 for v in group.inputs if v.meta is not None and dom.varies_along_reduced(v))
        return GroupTraits(writes_rows=writes_rows, tile_inputs=tile_inputs)


def is_inner(rt: RuntimeLayout) -> bool:
    """A reduction whose reference tensor has its unit stride along the reduced dims (rows),
    or one with only kept or only reduced dims."""
    return rt.r_inner or rt.layout.n_x == 0 or rt.layout.n_r == 0


class Scheduler(Protocol):
    """One scheduler (see the module docstring). Subclasses set the attributes and implement
    the three methods; the defaults suit one-launch schedulers.

    Attributes:
        name: the name its configurations carry (``LaunchConfig.scheduler``).
        stages: kernels a launch runs (1, or 2: a first kernel writes partial results to
            workspaces that the second combines).
        reduces: its kernels work on [XBLOCK, RBLOCK] tiles (every scheduler but pointwise).
        tuning_sections: the :class:`~torchfuse.config.Tuning` sections its heuristic and
            kernel body read (``explain`` shows them), besides ``codegen``.
    """

    name: str
    stages: int = 1
    reduces: bool = True
    tuning_sections: tuple[str, ...] = ()

    def accepts(self, group) -> str | None:
        """``None`` when ``group`` can be scheduled this way, else why not (compile time)."""
        ...

    def heuristic(self, rt: RuntimeLayout, traits: GroupTraits, tuning: Tuning, target: Target) -> LaunchConfig | None:
        """The launch configuration for one call's sizes, or ``None`` when they do not suit."""
        ...

    def write_body(self, writer, stage: int) -> None:
        """Write kernel ``stage`` of the launch (0-based) through ``writer``."""
        ...

    def workspace_elements(self, config: LaunchConfig, rt: RuntimeLayout) -> int:
        """Elements of each workspace a launch with ``config`` needs (two-stage schedulers)."""
        return 0


class RowReductionScheduler(Scheduler):
    """A scheduler of reductions whose column sums are not paired with their rows (the
    persistent and looped schedulers): what they accept."""

    def accepts(self, group) -> str | None:
        if not group.domain.reduced:
            return "it reduces nothing"
        if group.outer:
            return "its column sums are paired with its rows (inner-outer)"
        return None
