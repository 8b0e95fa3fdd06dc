"""Partitions as plain data: what the graph cache stores of a segmentation, and its replay.

:func:`describe` turns a partition (:class:`~torchfuse.segment.fuse.Units`) into a list of
groups, each the sorted positions of its nodes in the graph's node list (groups of one node
are left out). :func:`replay` builds the partition back from such a list for the same graph
without the search of :func:`~torchfuse.segment.fuse.partition` (which tries a merge, and
aligns the merged group's domain, thousands of times on a BERT-base backward).

The graph cache (:mod:`torchfuse.runtime.plan_cache`) stores the list under a key that fixes
the graph's IR and every option, so a replay reproduces the searched partition. It is
verified all the same, and refused (the caller searches) unless it is a valid partition of
this graph: positions in range and used once, every group of fusible nodes within
``Options.max_group_ops``, with a domain (:func:`~torchfuse.domain.align`), and the groups
in an order (no group needing a result computed from its own). A refused entry can cost a
search, never a wrong kernel.
"""
from __future__ import annotations

import logging
from typing import Any

from ..config import Options
from ..domain import align
from ..ir.graph import Graph
from .fuse import Units
from .groups import is_fusible

log = logging.getLogger("torchfuse.cache")

#: a partition as plain data: per group of two or more nodes, their sorted positions in the graph
PartitionData = list[list[int]]


def describe(units: Units) -> PartitionData:
    """The groups of two or more nodes of ``units``, each as its nodes' sorted positions in the
    graph's node list, in the order of their first node."""
    groups = {id(u): u for u in units.unit.values() if len(u) > 1}
    described = [sorted(units.index[n] for n in u) for u in groups.values()]
    return sorted(described)


def replay(graph: Graph, options: Options, data: Any) -> Units | None:
    """The partition ``data`` (from :func:`describe`, for this graph) as :class:`Units`, or
    ``None`` when it is not a valid partition of ``graph`` (see the module docstring; the reason
    is logged at debug level). Never raises for malformed ``data``."""
    try:
        return _replay(graph, options, data)
    except Exception as e:  # noqa: BLE001 - a stored partition is an optimization only
        log.debug("stored partition refused (%s: %s); partitioning again", type(e).__name__, e)
        return None


class _Refused(Exception):
    pass


def _replay(graph: Graph, options: Options, data: Any) -> Units:
    if not isinstance(data, list):
        raise _Refused("not a list of groups")
    units = Units(graph, options)
    nodes = graph.nodes
    taken: set[int] = set()
    groups = []
    for positions in data:
        if not (isinstance(positions, list) and 1 < len(positions) <= options.max_group_ops
                and all(type(i) is int for i in positions)):
            raise _Refused(f"malformed group {str(positions)[:80]}")
        if positions != sorted(positions) or not 0 <= positions[0] <= positions[-1] < len(nodes):
            raise _Refused(f"group positions out of order or range: {positions[:8]}")
        if taken.intersection(positions) or len(set(positions)) != len(positions):
            raise _Refused("a node in two groups")
        taken.update(positions)
        members = [nodes[i] for i in positions]
        if not all(is_fusible(n) for n in members):
            raise _Refused("a group holds an ATen call")
        groups.append(members)
    for members in groups:
        for n in members:
            units.unit[n] = members
    for members in groups:
        dom = align(members, units.outputs_of(members))
        if isinstance(dom, str):
            raise _Refused(f"a group has no domain: {dom}")
    if not _acyclic(units):
        raise _Refused("a group reads a result computed from its own")
    return units


def _acyclic(units: Units) -> bool:
    """Whether the groups of ``units``, as steps, have an order (Kahn's topological sort of the
    graph whose vertices are the groups and whose edges are the values they pass): one pass
    over the graph, where checking each group on its own would search the graph once per group."""
    group_of = {n: id(u) for n, u in units.unit.items()}
    successors: dict[int, set[int]] = {g: set() for g in group_of.values()}
    waiting = dict.fromkeys(successors, 0)
    for n, consumers in units.consumers.items():
        g = group_of[n]
        for c in consumers:
            h = group_of[c]
            if h != g and h not in successors[g]:
                successors[g].add(h)
                waiting[h] += 1
    ready = [g for g, k in waiting.items() if k == 0]
    ordered = 0
    while ready:
        g = ready.pop()
        ordered += 1
        for h in successors[g]:
            waiting[h] -= 1
            if waiting[h] == 0:
                ready.append(h)
    return ordered == len(successors)
