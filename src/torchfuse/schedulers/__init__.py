"""Schedulers: for each fusion group, which kernel shape to generate and its launch configuration.

The registry lists the schedulers in the order they are tried (:data:`SCHEDULERS`); each one
is a module of this package holding its structural check, its heuristic and its kernel body
behind the contract of :mod:`.base`:

* :mod:`.inner_outer`: a row reduction paired with column sums over the same rows;
* :mod:`.pointwise`: groups that reduce nothing;
* :mod:`.split`: reductions over few kept and many reduced elements, in two stages;
* :mod:`.persistent`: reductions whose reduced extent fits in registers;
* :mod:`.looped`: every other reduction.

At compile time :func:`candidates` keeps the schedulers whose structural check accepts a group
(:func:`refusals` says why the others do not); at run time :func:`choose` asks their
heuristics in order for one call's sizes, and the first configuration given is used.
"""
from __future__ import annotations

from ..config import Tuning
from . import inner_outer, looped, persistent, pointwise, split
from .base import (GroupTraits, LaunchConfig, Scheduler, Stage, Target, cdiv, next_power_of_2,  # noqa: F401
                   plural, single)
from .layout import KernelLayout, RuntimeLayout, analyze  # noqa: F401

#: The schedulers in the order they are tried.
SCHEDULERS: tuple[Scheduler, ...] = (inner_outer.SCHEDULER, pointwise.SCHEDULER, split.SCHEDULER,
                                     persistent.SCHEDULER, looped.SCHEDULER)
_BY_NAME = {s.name: s for s in SCHEDULERS}


def by_name(name: str) -> Scheduler:
    """The scheduler called ``name`` (``LaunchConfig.scheduler``).

    Raises:
        KeyError: no scheduler has that name.
    """
    return _BY_NAME[name]


def candidates(group) -> list[Scheduler]:
    """The schedulers whose structural check accepts ``group``, in registry order."""
    return [s for s in SCHEDULERS if s.accepts(group) is None]


def refusals(group) -> dict[str, str]:
    """Why each scheduler that does not accept ``group`` refuses it, by name."""
    return {s.name: why for s in SCHEDULERS if (why := s.accepts(group)) is not None}


def choose(schedulers: list[Scheduler], rt: RuntimeLayout, traits: GroupTraits, tuning: Tuning,
           target: Target) -> LaunchConfig:
    """The first configuration the heuristics of ``schedulers`` (in order) give for ``rt``.

    Raises:
        ValueError: none gave one (the pointwise and looped heuristics always do).
    """
    for s in schedulers:
        config = s.heuristic(rt, traits, tuning, target)
        if config is not None:
            return config
    raise ValueError(f"no scheduler of {[s.name for s in schedulers]} takes {rt.xnumel} x {rt.rnumel} elements")


def tuning_sections(name: str) -> tuple[str, ...]:
    """The :class:`~torchfuse.config.Tuning` sections the scheduler ``name`` and the code
    writer read (``explain`` lists them with each kernel)."""
    s = _BY_NAME.get(name)
    return (s.tuning_sections if s is not None else ()) + ("codegen",)


__all__ = ["SCHEDULERS", "by_name", "candidates", "refusals", "choose", "tuning_sections", "LaunchConfig", "Stage",
           "Target", "GroupTraits", "Scheduler", "single", "KernelLayout", "RuntimeLayout", "analyze",
           "next_power_of_2", "cdiv", "plural"]
