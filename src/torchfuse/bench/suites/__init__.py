"""The suites: each module's ``cases(quick)`` lists its :class:`~torchfuse.bench.workload.Case`s.

Selection (``--only``, ``--shard``) works on the (case, mode) pairs of a run, in the order
suites and cases are listed here, so every shard of a sequence of runs sees the same list.
"""
from __future__ import annotations

import fnmatch
import importlib

from ..workload import Case

SUITES = {
    "micro": "torchfuse.bench.suites.micro",
    "hf": "torchfuse.bench.suites.hf",
    "timm": "torchfuse.bench.suites.vision",
    "seed": "torchfuse.bench.suites.seed",
}


def suite_cases(suite: str, quick: bool) -> list[Case]:
    """The cases of ``suite``.

    Raises:
        ValueError: no such suite.
    """
    if suite not in SUITES:
        raise ValueError(f"unknown suite {suite!r}; known: {list(SUITES)}")
    return importlib.import_module(SUITES[suite]).cases(quick)


def matches(case: Case, patterns: list[str]) -> bool:
    """Whether any pattern (shell-style, ``fnmatch``) matches the case's model name or id."""
    return any(fnmatch.fnmatchcase(case.model, p) or fnmatch.fnmatchcase(case.id, p) for p in patterns)


def select(items: list, only: list[str] | None, shard: tuple[int, int] | None) -> list:
    """Keep the ``(case, mode)`` items that ``only`` matches, then every n-th for shard i/n.

    Args:
        only: patterns (``None``: all).
        shard: ``(i, n)`` with ``1 <= i <= n``: items ``i-1, i-1+n, i-1+2n...`` (round robin,
            so that the shards of a suite take about equal time).
    """
    if only:
        items = [it for it in items if matches(it[0], only)]
    if shard:
        i, n = shard
        items = items[i - 1::n]
    return items


def find_case(case_id: str, quick: bool) -> Case:
    """The case with this id (``suite/model/size``).

    Raises:
        KeyError: no such case.
    """
    suite = case_id.split("/", 1)[0]
    for case in suite_cases(suite, quick):
        if case.id == case_id:
            return case
    raise KeyError(f"no case {case_id!r} (quick={quick})")
