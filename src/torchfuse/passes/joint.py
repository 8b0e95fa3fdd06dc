"""AOTAutograd's joint graph (forward and backward in one), before the partitioner splits it.

An input the forward writes (a buffer updated in place under ``torch.no_grad()``, as
``torch.nn.utils.spectral_norm`` updates its power-iteration vectors, or BatchNorm's running
statistics) holds its new value once the forward has run: with
``keep_inference_input_mutations`` AOTAutograd writes it inside the forward graph (a ``copy_``
at its end). The min-cut partitioner does not know this: it may recompute in the backward a
value the forward computed from the input's old contents, reading the new ones, or pass the
input itself (or a view of it) to the backward. Both give wrong gradients (``torch.compile``'s
default backend shares the fault). :func:`partition` keeps such values saved instead.
"""
from __future__ import annotations

from typing import Any

import torch
import torch.fx

from ..ir.graph_ops import FMA
from . import is_view_of, log

aten = torch.ops.aten


def protect_inputs_written_by_forward(joint: torch.fx.GraphModule) -> int:
    """Make the partitioner save, never recompute, what the forward computes from an input it
    writes; give backward reads of such an input a copy made at the forward's start.

    Marks every forward node that reads such an input (through views) and computes a new
    tensor with ``meta["recompute"] = MUST_SAVE`` (the partitioner's activation-checkpointing
    policy); a backward node reading the input or a view of it reads a ``clone`` of the input
    instead, also saved. Returns how many nodes it marked or redirected."""
    from torch.utils.checkpoint import CheckpointPolicy

    nodes = list(joint.graph.nodes)
    written = {n.args[0] for n in nodes if n.op == "call_function" and n.target is aten.copy_.default
               and isinstance(n.args[0], torch.fx.Node) and n.args[0].op == "placeholder"}
    if not written:
        return 0
    backward = _backward_nodes(nodes)
    done = 0
    for p in written:
        aliases, frontier = [p], [p]
        while frontier:  # the input and its views (the pieces of a split of it among them)
            v = frontier.pop()
            for u in v.users:
                if is_view_of(u, v):
                    aliases.append(u)
                    frontier.append(u)
        copy = None
        for a in aliases:
            for u in list(a.users):
                if u.op != "call_function" or u.target is aten.copy_.default or u in aliases:
                    continue
                if u in backward:
                    if copy is None:
                        with joint.graph.inserting_after(p):
                            copy = joint.graph.call_function(aten.clone.default, (p,))
                        copy.meta = {k: v for k, v in p.meta.items() if k in ("val", "tensor_meta")}
                        copy.meta["recompute"] = CheckpointPolicy.MUST_SAVE
                    u.replace_input_with(a, _replay_views(joint, a, p, copy, u))
                    done += 1
                elif "recompute" not in u.meta:
                    u.meta["recompute"] = CheckpointPolicy.MUST_SAVE
                    done += 1
    if done:
        joint.graph.lint()
        joint.recompile()
        log.info("%d reads of inputs the forward writes kept from recomputation", done)
    return done


def _backward_nodes(nodes: list) -> set:
    """The nodes computed from the joint graph's tangents (its backward part)."""
    found: set = set()
    for n in nodes:
        if (n.op == "placeholder" and n.name.startswith("tangents")) or any(a in found for a in n.all_input_nodes):
            found.add(n)
    return found


def _replay_views(joint: torch.fx.GraphModule, alias: torch.fx.Node, base: torch.fx.Node, copy: torch.fx.Node,
                  before: torch.fx.Node) -> torch.fx.Node:
    """``alias`` (``base`` or a chain of views of it) applied to ``copy``, inserted before
    ``before``."""
    chain = []
    v = alias
    while v is not base:
        chain.append(v)
        v = v.args[0]
    out = copy
    for view in reversed(chain):
        with joint.graph.inserting_before(before):
            new = joint.graph.call_function(view.target, (out, *view.args[1:]), dict(view.kwargs))
        new.meta = {k: val for k, val in view.meta.items() if k in ("val", "tensor_meta")}
        out = new
    return out


#: meta key of a fused multiply-add written as ``aten.addcmul`` for the partitioner: its own target
_FMA_TARGET = "torchfuse_fma_target"


def _fma_targets() -> tuple:
    """torchfuse's fused multiply-add, and PyTorch's ``prims.fma`` where it exists."""
    prims_fma = getattr(getattr(torch.ops.prims, "fma", None), "default", None)
    return (FMA,) if prims_fma is None else (FMA, prims_fma)


def fma_as_addcmul(joint: torch.fx.GraphModule) -> int:
    """Write each fused multiply-add ``fma(a, b, c)`` of three tensors as ``aten.addcmul(c, a, b)``
    (the same value), its target kept in the node's meta, for the min-cut partitioner: it
    recomputes only ATen's pointwise ops, and saves a value of any other op that the backward
    reads: GELU's tanh form computes in fp32 through a fused multiply-add, so a training graph
    saved an fp32 intermediate of each such GELU where the fp16 input it is recomputed from
    does. Returns how many nodes it rewrote; :func:`addcmul_as_fma` undoes it."""
    targets, done = _fma_targets(), 0
    for n in joint.graph.nodes:
        if n.op == "call_function" and n.target in targets and not n.kwargs \
                and all(isinstance(a, torch.fx.Node) for a in n.args):
            a, b, c = n.args
            n.meta[_FMA_TARGET] = n.target
            n.target, n.args = aten.addcmul.default, (c, a, b)
            done += 1
    if done:
        joint.recompile()
    return done


def addcmul_as_fma(gm: torch.fx.GraphModule) -> None:
    """Restore the fused multiply-adds :func:`fma_as_addcmul` rewrote (in a graph the partitioner
    made: its nodes keep their meta)."""
    done = False
    for n in gm.graph.nodes:
        target = n.meta.pop(_FMA_TARGET, None)
        if target is not None and n.target is aten.addcmul.default:
            c, a, b = n.args
            n.target, n.args = target, (a, b, c)
            done = True
    if done:
        gm.recompile()


def partition(joint: torch.fx.GraphModule, joint_inputs: Any, **kwargs):
    """AOTAutograd's ``partition_fn``: PyTorch's min-cut rematerialization partitioner after
    :func:`protect_inputs_written_by_forward`, with fused multiply-adds recomputable as ATen's
    pointwise ops are (:func:`fma_as_addcmul`)."""
    from torch._functorch.partitioners import min_cut_rematerialization_partition

    protect_inputs_written_by_forward(joint)
    rewritten = fma_as_addcmul(joint)
    graphs = min_cut_rematerialization_partition(joint, joint_inputs, **kwargs)
    if rewritten:
        for gm in graphs:
            addcmul_as_fma(gm)
    return graphs
