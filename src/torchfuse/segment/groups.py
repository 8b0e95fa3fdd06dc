"""The segmenter's result types: fusion groups and the segmentation of a graph.

:class:`FusionGroup` is a set of registry nodes that runs as one kernel, with its inputs,
outputs and :class:`~torchfuse.domain.Domain`; :class:`Segmentation` is a graph cut into
steps (fusion groups and ATen call nodes) in an executable order. The predicates below say
what kind of work a set of nodes does.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Sequence

from ..domain import Domain
from ..ir.graph import Graph, Node, Value
from ..ir.ops import REGISTRY


@dataclasses.dataclass(eq=False)
class FusionGroup:
    """A set of registry nodes that run as one kernel.

    Attributes:
        id: index of the group among its graph's groups in execution order, used in its name.
        nodes: the group's nodes in topological order.
        inputs: values read from outside the group (tensors and scalars), in first-use order.
        outputs: values the group writes (read later or returned by the graph).
        domain: the iteration domain and the alignment of every value to it.
        outer: for a ``reduction.inner_outer`` group (see :func:`pair_inner_outer`), the nodes
            of the column-sum group paired with its row reductions: their reductions reduce
            the domain's kept dims (the rows) instead of its reduced ones, and what is computed
            from their results is written by the group's second kernel. Empty otherwise.
    """

    id: int
    nodes: list[Node]
    inputs: list[Value]
    outputs: list[Value]
    domain: Domain
    outer: list[Node] = dataclasses.field(default_factory=list)

    @property
    def kind(self) -> str:
        return "reduction" if self.domain.reduced else "pointwise"

    @property
    def name(self) -> str:
        ops = []
        for n in self.nodes:
            if REGISTRY[n.op].kind in ("pointwise", "reduction") and n.op not in ops:
                ops.append(n.op)
        return f"tf_{self.id}_" + "_".join(ops[:4])

    def __str__(self) -> str:
        lines = [f"group {self.id} ({self.kind}, {self.domain}) "
                 f"in=({', '.join(map(str, self.inputs))}) out=({', '.join(map(str, self.outputs))}):"]
        lines += [f"    {n!r}" for n in self.nodes]
        return "\n".join(lines)


@dataclasses.dataclass
class Segmentation:
    """A graph cut into steps: fusion groups and call nodes, in execution order.

    Attributes:
        graph: the segmented graph.
        steps: :class:`FusionGroup` and call :class:`~torchfuse.ir.graph.Node` steps.
        partitions: the partitions of the graph's nodes it was made from, as plain data
            (:func:`torchfuse.segment.replay.describe`; one, or two when rematerialization
            rewrote the graph), for the graph cache.
        replayed: whether every partition was replayed from the graph cache, not searched.
    """

    graph: Graph
    steps: list  # FusionGroup | Node
    partitions: list = dataclasses.field(default_factory=list)
    replayed: bool = False

    @property
    def groups(self) -> list[FusionGroup]:
        return [s for s in self.steps if isinstance(s, FusionGroup)]

    @property
    def calls(self) -> list[Node]:
        return [s for s in self.steps if isinstance(s, Node)]

    def __str__(self) -> str:
        out = []
        for s in self.steps:
            out.append(str(s) if isinstance(s, FusionGroup) else f"aten {s!r}" + (f"    # {s.reason}" if s.reason else ""))
        return "\n".join(out)


def is_fusible(node: Node) -> bool:
    return not node.is_call


def has_reduction(nodes: Sequence[Node]) -> bool:
    return any(REGISTRY[n.op].kind == "reduction" for n in nodes)


def computes(nodes: Sequence[Node]) -> bool:
    return any(REGISTRY[n.op].kind in ("pointwise", "reduction", "constant", "random") for n in nodes)


def one_element(unit: list) -> bool:
    for n in unit:
        for o in n.outputs:
            shape = getattr(o.meta, "shape", None)
            if shape is None or not all(isinstance(d, int) for d in shape) or math.prod(shape) != 1:
                return False
    return True
