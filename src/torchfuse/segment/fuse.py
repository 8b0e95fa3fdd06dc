"""Partitioning: which registry nodes run together as one fusion group.

Takes a :class:`~torchfuse.ir.graph.Graph` and :class:`~torchfuse.config.Options`; returns a
:class:`Units`: a partition of the graph's nodes into groups under construction (each a list
of nodes in graph order), with a group-level cycle check. The passes, in order:

1. :func:`fuse_producers` walks the nodes in topological order and merges each fusible node
   into the groups of its producers, largest group first, whenever the merged group still has
   a :class:`~torchfuse.domain.Domain` (pointwise chains with broadcasts and layout ops;
   reductions with their pointwise producers and consumers) and no cycle appears;
2. :func:`fuse_siblings` merges groups over the same domain that read a common input (the
   several reductions of a LayerNorm or BatchNorm backward read the gradient once), and
   :func:`fuse_consumer_siblings` reduction groups that read results of one producer;
3. :func:`fuse_one_element_groups` merges groups whose every result has one element.

Invariants: every merge keeps the groups' step order acyclic, each group within
``Options.max_group_ops`` nodes and with a domain; a reduction that could split across the GPU
stays splittable (``Tuning.segment``).
"""
from __future__ import annotations

import math
import types
from typing import Sequence

from ..config import Options
from ..domain import Domain, align, extend
from ..ir.graph import Graph, Node, Value, values_in
from ..ir.ops import REGISTRY
from .groups import has_reduction, is_fusible, one_element


class Units:
    """Groups under construction: a partition of the nodes, with a group-level cycle check."""

    def __init__(self, graph: Graph, options: Options):
        self.graph = graph
        self.options = options
        self.index = {n: i for i, n in enumerate(graph.nodes)}
        self.unit: dict[Node, list[Node]] = {n: [n] for n in graph.nodes}
        users = graph.users()
        # the step order also follows what a layout node would read as an ATen view
        # (finalize makes views read outside their group calls): a dynamic reshape's sizes
        # are values of its traced arguments, e.g. a sym_size of another group's result
        readers = {v: list(ns) for v, ns in users.items()}
        for n in graph.nodes:
            if not n.is_call and REGISTRY[n.op].kind == "layout":
                for v in values_in((n.args, n.kwargs)):
                    if n not in readers.setdefault(v, []):
                        readers[v].append(n)
        self.consumers: dict[Node, list[Node]] = {
            n: sorted({u for o in n.outputs for u in readers.get(o, [])}, key=self.index.get) for n in graph.nodes}
        self.producers: dict[Node, list[Node]] = {
            n: sorted({v.producer for v in n.input_values() if v.producer is not None}, key=self.index.get)
            for n in graph.nodes}
        self.users = users
        self.graph_outputs = graph.output_values()
        self.failures: dict[tuple, str] = {}
        #: :meth:`domain`'s answers while partitioning: the sibling passes try again merges that
        #: earlier passes tried (about 40% of BERT's attempts), and the domain of a node list is
        #: a function of the list alone while the graph does not change
        self._domains: dict[tuple, object] = {}

    def members(self, n: Node) -> list[Node]:
        return self.unit[n]

    def outputs_of(self, nodes: Sequence[Node]) -> list[Value]:
        inside = set(nodes)
        outs = []
        for n in nodes:
            for o in n.outputs:
                if o in self.graph_outputs or any(c not in inside for c in self.users.get(o, ())):
                    outs.append(o)
        return outs

    def domain(self, nodes: list[Node], grown: tuple[list[Node], list[Node]] | None = None):
        """:func:`~torchfuse.domain.align` of ``nodes`` (in graph order) and the values they
        write, remembered until :func:`partition` returns.

        Args:
            grown: ``(part, added)``, two groups that ``nodes`` joins: where ``part``'s domain
                is remembered, it is grown by ``added`` (:func:`~torchfuse.domain.extend`)
                rather than aligned again over every node, which makes a group that grows node
                by node cost the square of its size.

        Returns:
            The :class:`~torchfuse.domain.Domain`, or why the nodes cannot share one.
        """
        key = tuple(nodes)
        dom = self._domains.get(key)
        if dom is None:
            outputs = self.outputs_of(nodes)
            known = self._domains.get(tuple(grown[0])) if grown is not None else None
            if isinstance(known, Domain):
                dom = extend(known, nodes, outputs, grown[1])
            if dom is None:
                dom = align(nodes, outputs)
            self._domains[key] = dom
        return dom

    def creates_cycle(self, merged: list[Node], bounded: bool) -> bool:
        """Would running ``merged`` as one step need a result that depends on that step?

        With ``bounded``, every node after the last of ``merged`` must still be alone in its
        unit (true while ``fuse_producers`` walks the graph in order): such nodes only lead
        further forward, so the search stops there.
        """
        inside = set(merged)
        hi = max(self.index[n] for n in merged) if bounded else len(self.index)
        stack: list[Node] = []
        seen: set[int] = set()
        for n in merged:
            for c in self.consumers[n]:
                if c not in inside:
                    stack.append(c)
        while stack:
            n = stack.pop()
            uid = id(self.unit[n])
            if uid in seen:
                continue
            seen.add(uid)
            for m in self.unit[n]:
                if m in inside:
                    return True
                if self.index[m] > hi:
                    continue
                for c in self.consumers[m]:
                    if c in inside:
                        return True
                    if id(self.unit[c]) not in seen:
                        stack.append(c)
        return False

    def try_merge(self, a: Node, b: Node, bounded: bool = False) -> bool:
        ua, ub = self.unit[a], self.unit[b]
        if ua is ub:
            return False
        merged = sorted(ua + ub, key=self.index.get)
        if len(merged) > self.options.max_group_ops:
            return False
        if self.creates_cycle(merged, bounded):
            return False
        dom = self.domain(merged, (ua, ub) if len(ua) >= len(ub) else (ub, ua))
        if isinstance(dom, str):
            self.failures[(id(ua), id(ub))] = dom
            return False
        if self._keeps_split(ua, ub, merged, dom):
            self.failures[(id(ua), id(ub))] = "a reduction over few kept elements stays splittable"
            return False
        for n in merged:
            self.unit[n] = merged
        return True


    def _keeps_split(self, ua: list, ub: list, merged: list, dom) -> bool:
        """Refuse a merge that would stop a reduction from running as a split reduction when
        it has few kept elements and many reduced ones (BatchNorm statistics over N*H*W per
        channel, a softmax over a few long rows): one kernel over both would launch only
        ``kept / XBLOCK`` programs, a small fraction of the GPU, each looping over the whole
        reduced extent. Kept separate, the reduction splits across the GPU and its consumers
        run as their own kernel, at the cost of reading the reduced input once more."""
        if not dom.reduced:
            return False
        kept = [s for i, s in enumerate(dom.sizes) if i not in dom.reduced]
        red = [s for i, s in enumerate(dom.sizes) if i in dom.reduced]
        if not all(isinstance(s, int) for s in kept):
            return False
        k = math.prod(kept)
        r = math.prod(red) if all(isinstance(s, int) for s in red) else None
        t = self.options.tuning.segment
        r_min = t.split_reduced_min_outer if _reduces_outer(merged, dom) else t.split_reduced_min
        if k > t.split_kept_max or (r is not None and r < r_min):
            return False
        from ..schedulers.split import can_split

        def group(nodes, d):
            return types.SimpleNamespace(nodes=nodes, domain=d, outputs=self.outputs_of(nodes))

        if can_split(group(merged, dom)):
            return False
        for part in (ua, ub):
            if has_reduction(part):
                d = self.domain(part)
                if not isinstance(d, str) and can_split(group(part, d)):
                    return True
        return False


def _reduces_outer(nodes: Sequence[Node], dom) -> bool:
    """Whether a reduction in ``nodes`` reads a tensor whose unit-stride dim (of size > 1) is
    a kept dim of ``dom`` (a column reduction), judged from the reduction input's strides."""
    for n in nodes:
        if REGISTRY[n.op].kind != "reduction" or not n.inputs:
            continue
        meta = getattr(n.inputs[0], "meta", None)
        if meta is None or meta.rank != len(dom.sizes):
            continue
        for d, (size, stride) in enumerate(zip(meta.shape, meta.stride)):
            if isinstance(stride, int) and stride == 1 and not (isinstance(size, int) and size <= 1):
                return d not in dom.reduced
    return False


def fuse_producers(units: Units) -> None:
    """Merge each fusible node into its producers' groups, largest first."""
    for node in units.graph.nodes:
        if not is_fusible(node):
            continue
        cands = [p for p in units.producers[node] if is_fusible(p)]
        cands.sort(key=lambda p: -len(units.members(p)))
        for p in cands:
            units.try_merge(p, node, bounded=True)


def fuse_siblings(units: Units) -> None:
    """Merge groups that read a common input and share a domain (horizontal fusion)."""
    users = units.graph.users()
    for v, readers in users.items():
        fus = [r for r in readers if is_fusible(r)]
        for i in range(len(fus)):
            for j in range(i + 1, len(fus)):
                units.try_merge(fus[i], fus[j])


def fuse_consumer_siblings(units: Units) -> None:
    """Merge reduction groups that read results of one producer group (the several column
    sums of a backward pass): one launch, and the producer's results read by one kernel."""
    seen: set[int] = set()
    for node in units.graph.nodes:
        unit = units.unit[node]
        if id(unit) in seen or not is_fusible(node):
            continue
        seen.add(id(unit))
        consumers = []
        for m in unit:
            for c in units.consumers[m]:
                if is_fusible(c) and units.unit[c] is not unit and all(units.unit[c] is not units.unit[x]
                                                                      for x in consumers):
                    consumers.append(c)
        reds = [c for c in consumers if has_reduction(units.members(c))]
        for i in range(len(reds)):
            for j in range(i + 1, len(reds)):
                units.try_merge(reds[i], reds[j])


def fuse_one_element_groups(units: Units) -> None:
    """Merge pointwise groups whose every result has one element, in graph order, whether or
    not they share an input (horizontal fusion of independent scalars). Training-mode
    BatchNorm increments its batch counter, a 0-dim int64 tensor, in every layer: one launch
    each, 53 per ResNet-50 forward, where the work is one integer add. Merged, they are one
    kernel. A group joins the current one while the merge keeps the step order acyclic and
    the group within ``max_group_ops`` (``Units.try_merge``); otherwise it starts the next."""
    anchor = None
    seen: set[int] = set()
    for node in units.graph.nodes:
        if not is_fusible(node):
            continue
        unit = units.unit[node]
        if id(unit) in seen:
            continue
        seen.add(id(unit))
        if has_reduction(unit) or not one_element(unit):
            continue
        if anchor is None or not units.try_merge(anchor, node):
            anchor = node
        seen.add(id(units.unit[node]))


def partition(graph: Graph, options: Options) -> Units:
    units = Units(graph, options)
    fuse_producers(units)
    fuse_siblings(units)
    fuse_consumer_siblings(units)
    fuse_one_element_groups(units)
    units._domains.clear()  # later steps rewrite the graph
    return units
