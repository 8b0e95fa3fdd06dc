"""Segmenter: partitions a graph into fusion groups and ATen calls.

Takes a :class:`~torchfuse.ir.graph.Graph` and :class:`~torchfuse.config.Options`; returns a
:class:`Segmentation`, the graph's steps in an executable order, each a :class:`FusionGroup`
(one generated kernel) or a call node (run through ATen). :func:`segment` is the list of
passes, in order:

1. :mod:`.rewrites`: constants and one-element results copied into each reader, casts moved
   across reshapes, a checkpointed region's random draw made to read a stand-in of its
   operand's layout (the draw stays on ATen), so that they fuse;
2. :mod:`.fuse`: nodes merged into their producers' groups, then siblings over one
   domain (every merge keeps a :class:`~torchfuse.domain.Domain` and an acyclic order);
3. :mod:`.remat`: pointwise chains a group would read across a reduction recomputed by the
   reader where that moves fewer bytes (then partitioned again);
4. :mod:`.steps`: layout-only groups back to ATen views, each group's inputs, outputs and
   domain, batched casts, row and column reductions paired for the inner-outer scheduler
   (:mod:`.inner_outer`), and the steps ordered.

Given the partitions an earlier segmentation of the same graph settled on (the graph cache's),
steps 2 and 3's partitions are replayed (:mod:`.replay`) instead of searched.

Invariants of the result: the steps are a topological order of groups and calls; each group's
outputs are exactly its values read by a later step or returned by the graph.
"""
from __future__ import annotations

from typing import Sequence

from ..config import Options
from ..ir.from_fx import eliminate_dead_code
from ..ir.graph import Graph
from .fuse import Units, partition
from .groups import FusionGroup, Segmentation, is_fusible  # noqa: F401
from .inner_outer import pair_inner_outer  # noqa: F401
from .remat import rematerialize
from .replay import PartitionData, describe, replay
from .rewrites import (cast_inputs_after_reshapes, draw_from_layout_stand_ins, duplicate_constants, duplicate_scalars,
                       sink_casts_below_reshapes)
from .steps import BATCHED_CAST, BATCHED_CAST_LATE, finalize  # noqa: F401


def segment(graph: Graph, options: Options, stored: Sequence[PartitionData] | None = None) -> Segmentation:
    """Partition ``graph`` into fusion groups and ATen calls (see the module docstring).

    Args:
        stored: the partitions a previous segmentation of this graph with these options
            settled on (its :attr:`Segmentation.partitions`, from the graph cache): each is
            replayed (:func:`.replay.replay`) instead of searched, as long as it is a valid
            partition of the graph at that point; the first refused one, and every one after
            it, is searched.
    """
    duplicate_constants(graph)
    duplicate_scalars(graph)
    sink_casts_below_reshapes(graph)
    cast_inputs_after_reshapes(graph)
    draw_from_layout_stand_ins(graph)
    pending = list(stored or ())
    made: list[PartitionData] = []
    units = _partition(graph, options, pending, made)
    if rematerialize(units):
        # the chains the reduction groups now recompute may have no reader left
        eliminate_dead_code(graph)
        units = _partition(graph, options, pending, made)
    seg = finalize(units)
    seg.partitions = [data for data, _ in made]
    seg.replayed = bool(made) and all(replayed for _, replayed in made) and not pending
    return seg


def _partition(graph: Graph, options: Options, pending: list, made: list) -> Units:
    """The next partition: the next of ``pending`` replayed, else searched (and ``pending``
    emptied: a graph cut differently from the stored one is not the stored graph's). Appends
    ``(its data, whether it was replayed)`` to ``made``."""
    replayed = replay(graph, options, pending.pop(0)) if pending else None
    if replayed is None:
        pending.clear()
    units = replayed if replayed is not None else partition(graph, options)
    made.append((describe(units), replayed is not None))
    return units
