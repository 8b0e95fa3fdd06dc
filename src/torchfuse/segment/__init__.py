"""Segmenter: partitions a graph into fusion groups and ATen calls.

Takes a :class:`~torchfuse.ir.graph.Graph` and :class:`~torchfuse.config.Options`; returns a
:class:`Segmentation`, the graph's steps in an executable order, each a :class:`FusionGroup`
(one generated kernel) or a call node (run through ATen). :func:`segment` is the list of
passes, in order:

1. :mod:`.rewrites`: constants and one-element results copied into each reader, casts moved
   across reshapes, so that they fuse;
2. :mod:`.fuse`: nodes merged into their producers' groups, then siblings over one
   domain (every merge keeps a :class:`~torchfuse.domain.Domain` and an acyclic order);
3. :mod:`.remat`: pointwise chains a group would read across a reduction recomputed by the
   reader where that moves fewer bytes (then partitioned again);
4. :mod:`.steps`: layout-only groups back to ATen views, each group's inputs, outputs and
   domain, batched casts, row and column reductions paired for the inner-outer scheduler
   (:mod:`.inner_outer`), and the steps ordered.

Invariants of the result: the steps are a topological order of groups and calls; each group's
outputs are exactly its values read by a later step or returned by the graph.
"""
from __future__ import annotations

from ..config import Options
from ..ir.from_fx import eliminate_dead_code
from ..ir.graph import Graph
from .fuse import partition
from .groups import FusionGroup, Segmentation, is_fusible  # noqa: F401
from .inner_outer import pair_inner_outer  # noqa: F401
from .remat import rematerialize
from .rewrites import cast_inputs_after_reshapes, duplicate_constants, duplicate_scalars, sink_casts_below_reshapes
from .steps import BATCHED_CAST, BATCHED_CAST_LATE, finalize  # noqa: F401


def segment(graph: Graph, options: Options) -> Segmentation:
    """Partition ``graph`` into fusion groups and ATen calls (see the module docstring)."""
    duplicate_constants(graph)
    duplicate_scalars(graph)
    sink_casts_below_reshapes(graph)
    cast_inputs_after_reshapes(graph)
    units = partition(graph, options)
    if rematerialize(units):
        # the chains the reduction groups now recompute may have no reader left
        eliminate_dead_code(graph)
        units = partition(graph, options)
    return finalize(units)
