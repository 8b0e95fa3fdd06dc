"""Rewrites of the IR graph the segmenter makes before partitioning, so that more fuses.

Takes a :class:`~torchfuse.ir.graph.Graph`; each pass rewrites ``graph.nodes`` in place and
returns what it did: constants and one-element results copied into each reader
(:func:`duplicate_constants`, :func:`duplicate_scalars`), casts moved across the reshapes
next to them so that they join the group that computes or reads their value
(:func:`sink_casts_below_reshapes`, :func:`cast_inputs_after_reshapes`), a checkpointed
region's random draw made to read a stand-in of its operand's layout, so that the ops on both
sides of it fuse (:func:`draw_from_layout_stand_ins`). Invariants: the
graph computes the same values, its outputs are the same :class:`~torchfuse.ir.graph.Value`
objects, and its nodes stay in a topological order.
"""
from __future__ import annotations

import dataclasses
import logging

from ..ir.from_fx import eliminate_dead_code
from ..ir.graph import Graph, Node, Value, map_values
from ..ir.ops import REGISTRY
from ..ir.random_state import RNG_STATE_OPS, layout_operand
from .groups import one_element

log = logging.getLogger("torchfuse.fusion")


def rewire(node: Node, old: Value, new: Value) -> None:
    """Make ``node`` read ``new`` wherever it read ``old`` (operands and call arguments)."""
    swap = lambda x: new if x is old else x
    node.inputs = [swap(x) for x in node.inputs]
    node.args = map_values(node.args, swap)
    node.kwargs = map_values(node.kwargs, swap)


def twin(node: Node, swap, outputs: list[Value]) -> Node:
    """A copy of ``node`` reading ``swap(v)`` for each value ``v`` it read, writing ``outputs``."""
    twin = Node(op=node.op, inputs=[swap(x) if isinstance(x, Value) else x for x in node.inputs],
                attrs=dict(node.attrs), outputs=outputs, target=node.target, args=map_values(node.args, swap),
                kwargs=map_values(node.kwargs, swap), source=node.source)
    for o in outputs:
        o.producer = twin
    return twin


def duplicate_constants(graph: Graph) -> None:
    """Give every reader of a constant (``full``, ``scalar_tensor``) its own copy, so that each
    fusion group computes it in registers instead of one group writing it for the others."""
    users = graph.users()
    new_nodes: list[Node] = []
    count = 0
    for node in graph.nodes:
        new_nodes.append(node)
        if node.is_call or REGISTRY[node.op].kind != "constant":
            continue
        # each reader once (``z + z`` reads z twice: a second copy would have no reader left,
        # and an unread constant stays in the graph as a step of its own)
        readers = list(dict.fromkeys(u for u in users.get(node.output, []) if not u.is_call))
        for reader in readers[1:]:
            count += 1
            out = Value(name=f"{node.output.name}_c{count}", meta=node.output.meta)
            copy = Node(op=node.op, inputs=[], attrs=dict(node.attrs), outputs=[out], target=node.target,
                        args=node.args, kwargs=node.kwargs, source=node.source)
            out.producer = copy
            rewire(reader, node.output, out)
            new_nodes.insert(len(new_nodes) - 1, copy)
    graph.nodes = new_nodes


def duplicate_scalars(graph: Graph) -> int:
    """Give every fusible reader of a one-element pointwise result (static shape) its own copy
    of the node, walking the graph backwards so that whole chains of such nodes are copied.

    A group cannot write a 0-dim result next to full-size ones (every program would write
    it), so a scalar read by two groups, or by one group at two places that merge one after
    the other, became a kernel of its own: cross-entropy's backward scales the loss gradient
    (``-grad / total_weight``) in a one-element kernel ahead of the row kernel. Copied, each
    reader recomputes it from its (one-element) inputs in registers.

    Returns:
        The number of nodes added; ``graph.nodes`` is rewritten in place.
    """
    returned = graph.output_values()
    users = {v: list(r) for v, r in graph.users().items()}  # kept current as copies are made
    nodes = list(graph.nodes)
    count = 0
    for index in range(len(nodes) - 1, -1, -1):  # copies go after the node: not revisited
        node = nodes[index]
        if node.is_call or REGISTRY[node.op].kind != "pointwise" or len(node.outputs) != 1 \
                or not one_element([node]):
            continue
        all_readers = users.get(node.output, [])
        readers = list(dict.fromkeys(u for u in all_readers if not u.is_call))  # x * x reads x once
        keep = node.output in returned or any(u.is_call for u in all_readers)
        for reader in readers[0 if keep else 1:]:
            count += 1
            out = Value(name=f"{node.output.name}_s{count}", meta=node.output.meta)
            copy = twin(node, lambda x: x, [out])
            rewire(reader, node.output, out)
            all_readers[:] = [u for u in all_readers if u is not reader]
            users[out] = [reader]
            for v in copy.input_values():
                users.setdefault(v, []).append(copy)
            nodes.insert(index + 1, copy)
    graph.nodes = nodes
    return count


def sink_casts_below_reshapes(graph: Graph) -> int:
    """Rewrite ``cast(reshape(x))`` as ``reshape(cast(x))`` when ``x`` is computed by a fusible
    op, so the cast joins the group that computes ``x``.

    A reshape that merges or splits dimensions cannot sit inside a fusion group (its domain
    has one index per dimension), so a cast after it would run as a kernel of its own: under
    autocast every linear layer of a transformer flattens its (batch, sequence, hidden) input
    and casts it to half precision (GPT-2 on an H200: 75 such cast kernels per training step,
    about 20 us each). A cast is elementwise and a reshape moves no data, so they commute; the
    rewrite applies when the cast keeps the reshape's strides.

    Returns:
        The number of casts moved; ``graph.nodes`` is rewritten in place.
    """
    moved = 0
    new_nodes: list[Node] = []
    for node in graph.nodes:
        new_nodes.append(node)
        if node.is_call or node.op != "cast" or not isinstance(node.inputs[0], Value):
            continue
        v = node.inputs[0]
        r = v.producer
        out = node.output
        if r is None or r.is_call or r.op != "reshape" or v.meta is None or out.meta is None:
            continue
        base = r.inputs[0]
        p = base.producer if isinstance(base, Value) else None
        if p is None or p.is_call or REGISTRY[p.op].kind not in ("pointwise", "reduction") or base.meta is None:
            continue
        if tuple(out.meta.stride) != tuple(v.meta.stride):
            continue
        moved += 1
        cast_val = Value(name=f"{base.name}_c{moved}", meta=dataclasses.replace(base.meta, dtype=out.meta.dtype))
        cast = twin(node, lambda x, old=v, new=base: new if x is old else x, [cast_val])
        # the reshape now writes the cast's old result: its readers, and the graph's outputs,
        # are unchanged (a returned result that became a view of an intermediate is made a
        # tensor of its own at run time: ``runtime.calls._no_view``)
        view = twin(r, lambda x, old=base, new=cast_val: new if x is old else x, [out])
        new_nodes[-1:] = [cast, view]
    if moved:
        graph.nodes = new_nodes
        eliminate_dead_code(graph)
        log.info("moved %d casts above the reshapes they followed", moved)
    return moved


def cast_inputs_after_reshapes(graph: Graph) -> int:
    """Rewrite ``reshape(cast(x))`` as ``cast(reshape(x))`` when ``x`` is not computed by a
    fusible op (a graph input, an ATen call's result) and the cast's every reader is a reshape,
    so the cast joins the group that reads the reshaped value instead of writing a converted
    copy.

    The mirror of :func:`sink_casts_below_reshapes`. HuggingFace's causal-LM loss calls
    ``logits.float()`` and then flattens the logits for the cross-entropy: the forward wrote
    an fp32 copy of the logits (GPT-2 at 8 x 512: 4096 x 50257 elements, 824 MB) for the
    log-softmax kernel to read, and the backward converted the saved bf16 logits the same way.

    Returns:
        The number of casts moved; ``graph.nodes`` is rewritten in place.
    """
    users = graph.users()
    outputs = set(graph.output_values())
    moved = 0
    replaced: dict = {}  # an old reshape node -> its [reshape, cast] replacement
    for node in graph.nodes:
        if node.is_call or node.op != "cast" or not isinstance(node.inputs[0], Value):
            continue
        x, out = node.inputs[0], node.output
        p = x.producer
        if (p is not None and not p.is_call) or out in outputs or x.meta is None or out.meta is None:
            continue
        readers = users.get(out, [])
        if not readers or any(u.is_call or u.op != "reshape" for u in readers):
            continue
        if tuple(out.meta.stride) != tuple(x.meta.stride):
            continue
        for r in readers:
            moved += 1
            view_val = Value(name=f"{x.name}_v{moved}", meta=dataclasses.replace(r.output.meta, dtype=x.meta.dtype))
            view = twin(r, lambda v, old=out, new=x: new if v is old else v, [view_val])
            cast = twin(node, lambda v, old=x, new=view_val: new if v is old else v, [r.output])
            replaced[r] = [view, cast]
    if moved:
        graph.nodes = [m for n in graph.nodes for m in replaced.get(n, [n])]
        eliminate_dead_code(graph)
        log.info("moved %d casts of inputs below the reshapes that read them", moved)
    return moved


#: the reason a random draw's stand-in operand carries (an ATen call that moves no data)
LAYOUT_STAND_IN = "uninitialized stand-in for a random draw's operand, whose layout alone it reads"


def draw_from_layout_stand_ins(graph: Graph) -> int:
    """Make each random draw of a checkpointed region (:mod:`torchfuse.ir.random_state`) whose
    op reads its operand for its layout only (``rand_like(x)``) read an uninitialized tensor of
    ``x``'s sizes, strides, dtype and device, when a fusible op computes ``x``.

    The draw stays on ATen; reading ``x`` itself, it would run between the group that computes
    ``x`` and the group that reads the numbers drawn, which then could not be one kernel:
    dropout's ``x`` (the activation before it) would be written by one kernel and read back by
    the next, which compares the numbers with ``p`` and scales ``x`` by the mask; in the
    backward, which recomputes ``x``, again. With the stand-in the draw runs before both,
    and they fuse. ``rand_like`` makes its result from the operand's layout and the generator
    alone, so the numbers are the ones the draw makes from ``x`` (the other graph, which draws
    them again from the saved generator state, may read ``x`` itself). The stand-in costs an
    allocation of ``x``'s size, freed after the draw, and no memory traffic.

    Returns:
        The number of draws rewritten; ``graph.nodes`` is rewritten in place.
    """
    import torch

    count = 0
    new_nodes: list[Node] = []
    for node in graph.nodes:
        i = layout_operand(node.target, node.args) if node.is_call and node.target in RNG_STATE_OPS else None
        x = node.args[i] if i is not None else None
        if isinstance(x, Value) and x.meta is not None and x.producer is not None and not x.producer.is_call:
            m = x.meta
            count += 1
            out = Value(name=f"{x.name}_layout{count}", meta=m)
            stand_in = Node(op=None, inputs=[], attrs={}, outputs=[out], target=torch.ops.aten.empty_strided.default,
                            args=(list(m.shape), list(m.stride)), kwargs={"dtype": m.dtype, "device": m.device},
                            reason=LAYOUT_STAND_IN, source=node.source)
            out.producer = stand_in
            node.args = (*node.args[:i], out, *node.args[i + 1:])
            new_nodes.append(stand_in)
        new_nodes.append(node)
    if count:
        graph.nodes = new_nodes
        eliminate_dead_code(graph)  # an operand only the draw read is not computed at all
        log.info("%d random draws read a stand-in of their operand's layout", count)
    return count
