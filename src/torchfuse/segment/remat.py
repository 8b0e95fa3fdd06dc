"""Rematerialization: groups recompute pointwise values they would read across a reduction.

Takes a partition (:class:`~torchfuse.segment.fuse.Units`); rewrites its graph in place
(copies of pointwise chains inserted for their readers) and returns how many values it
rematerialized; the caller partitions again. Invariant: the graph computes the same values;
a value is recomputed only when that moves no more bytes than reading it.
"""
from __future__ import annotations

import logging

from ..ir.graph import Node, Value, sizes_equal
from ..ir.ops import REGISTRY
from .groups import has_reduction, is_fusible
from .fuse import Units
from .rewrites import rewire, twin

log = logging.getLogger("torchfuse.fusion")


def rematerialize(units: Units) -> int:
    """Let groups recompute pointwise values they would read from a group across a reduction.

    A value that one group computes from its inputs by pointwise ops only, and that another
    group reads where one of the two is a reduction group, costs a full-size write and read:
    * a reduction group reading it (the ``dy * xhat`` and ``dy`` in fp32 that a
      normalization's backward feeds to its weight and bias column sums);
    * a group reading it from a reduction group (BatchNorm's backward: the statistics kernel
      computes ``dy`` and ``x - mean`` in fp32 on the way to its sums, and the input-gradient
      kernel after it needs them again at full size).
    When the chain's full-size inputs that the reader does not read already take no more
    bytes per element than reading the value does, and, when no other group reads the value,
    no more than writing and reading it, the chain is copied into the graph for the reader's
    own use, so the reader reads the (often half-precision) inputs and the value is never
    written (rematerialization, as AOTAutograd's partitioner does across forward and
    backward). The second case is BatchNorm's backward after a ReLU split into statistics
    and input-gradient kernels: ``where(relu_out <= 0, 0, dy)`` in bf16 costs a 2-byte write
    and read per element, recomputing it reads 4 bytes (``relu_out`` and ``dy``).

    Returns:
        The number of values rematerialized; the graph is rewritten in place.
    """
    graph = units.graph
    done = 0
    new_nodes = list(graph.nodes)
    users = graph.users()
    returned = graph.output_values()
    for unit in {id(u): u for u in units.unit.values()}.values():
        if not all(is_fusible(n) for n in unit) or all(REGISTRY[n.op].kind == "layout" for n in unit):
            continue  # (a unit of reshapes alone becomes an ATen view of the written value)
        reader_reduces = has_reduction(unit)
        inside = set(unit)
        reads: dict[Value, list[Node]] = {}
        for n in unit:
            for v in n.input_values():
                p = v.producer
                if p is not None and p not in inside and not p.is_call and is_fusible(p) \
                        and (reader_reduces or has_reduction(units.unit[p])):
                    reads.setdefault(v, []).append(n)
        own = {v for n in unit for v in n.input_values()}
        for v, readers in reads.items():
            chain = _pointwise_chain(units, v)
            if chain is None or v.meta is None:
                continue
            nodes, leaves = chain
            # full size: as many elements as the value (a leaf reached through a reshape counts)
            full = [x for x in leaves if x.meta is not None and sizes_equal(x.meta.numel(), v.meta.numel())]
            extra = sum(x.meta.dtype.itemsize for x in full if x not in own)
            home = units.unit[v.producer]
            sole = not _escapes(v, home, inside, users, returned)
            if extra > v.meta.dtype.itemsize * (2 if sole else 1):
                continue
            clone: dict[Value, Value] = {}
            copies = []
            for n in nodes:  # in graph order
                outs = [Value(name=f"{o.name}_r{done}", meta=o.meta) for o in n.outputs]
                copies.append(twin(n, lambda x: clone.get(x, x), outs))
                clone.update(zip(n.outputs, outs))
            for r in readers:
                rewire(r, v, clone[v])
            first = min(new_nodes.index(r) for r in readers)
            new_nodes[first:first] = copies
            done += 1
    if done:
        graph.nodes = new_nodes
        log.info("rematerialized %d value%s for reduction groups", done, "" if done == 1 else "s")
    return done


def _escapes(v: Value, home: list[Node], inside: set[Node], users: dict, returned: set[Value]) -> bool:
    """Whether ``v`` is written anyway: returned, or read by a step other than its own group
    ``home`` and the reader ``inside``, directly or through reshapes and views in ``home``
    (which become ATen views of the written value)."""
    home_set = set(home)
    stack, seen = [v], set()
    while stack:
        x = stack.pop()
        if x in returned:
            return True
        for u in users.get(x, []):
            if u in inside or u in seen:
                continue
            if u not in home_set:
                return True
            seen.add(u)
            if not u.is_call and REGISTRY[u.op].kind == "layout":
                stack.extend(u.outputs)
    return False


def _pointwise_chain(units: Units, v: Value):
    """``(nodes in graph order, leaf values)`` computing ``v`` by pointwise and layout ops
    inside ``v``'s group, or ``None`` when a reduction, a random op or too many ops lie on
    the way."""
    group = set(units.unit[v.producer])
    nodes: set[Node] = set()
    leaves: list[Value] = []
    stack = [v]
    while stack:
        x = stack.pop()
        p = x.producer
        if p is None or p not in group:
            if x not in leaves:
                leaves.append(x)
            continue
        if p in nodes:
            continue
        if p.is_call or REGISTRY[p.op].kind not in ("pointwise", "layout", "constant"):
            return None
        nodes.add(p)
        if len(nodes) > units.options.tuning.segment.remat_max_ops:
            return None
        stack.extend(x for x in p.inputs if isinstance(x, Value))
    return sorted(nodes, key=units.index.get), leaves
