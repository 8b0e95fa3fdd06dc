"""Finalization: from a partition to the ordered steps of a :class:`Segmentation`.

Takes a :class:`~torchfuse.segment.fuse.Units`; returns the
:class:`~torchfuse.segment.groups.Segmentation`. Layout-only groups become ATen views (they
move no data); layout ops whose results leave their group are taken out of it (a view must
stay a view of its base); each group's inputs, outputs and domain are computed;
stand-alone casts of graph inputs (or of values the graph only returns) become calls the
runtime batches into one multi-tensor copy; row and column reductions over the same rows are
paired (:mod:`.inner_outer`); the steps are ordered. Invariants of the result: the steps are a
topological order of groups and calls; each group's outputs are exactly its values read by a
later step or returned by the graph.
"""
from __future__ import annotations

import logging

from ..domain import align, group_values
from ..ir.graph import Graph, Node, Value, map_values
from ..ir.ops import REGISTRY
from .groups import FusionGroup, Segmentation, computes, is_fusible
from .inner_outer import pair_inner_outer
from .fuse import Units
from .rewrites import rewire

log = logging.getLogger("torchfuse.fusion")


def finalize(units: Units) -> Segmentation:
    """Turn the partition into ordered steps with each group's inputs, outputs and domain."""
    graph = units.graph
    groups: list[list[Node]] = []
    seen: set[int] = set()
    for n in graph.nodes:
        if is_fusible(n) and id(units.unit[n]) not in seen:
            seen.add(id(units.unit[n]))
            groups.append(units.unit[n])

    final: list[list[Node]] = []
    as_calls: set[Node] = set()
    # each kept group's (outputs, inputs, domain): the domain the groups are made with below,
    # unless what follows changes a group's outputs or inputs (a later group's view, detached
    # below, is read by this group's nodes through a new value)
    aligned: dict[tuple, tuple] = {}
    twins: dict[Value, Node] = {}  # a layout node's output -> the ATen view its outside readers read
    for nodes in groups:
        pending = [nodes]
        while pending:
            cur = pending.pop()
            if not computes(cur):
                as_calls.update(cur)
                continue
            outs = set(units.outputs_of(cur))
            if not outs:  # nothing reads its results (groups are pure): drop it
                log.info("dropping a fusion group whose results are unused (%d ops)", len(cur))
                continue
            escaping = [n for n in cur if REGISTRY[n.op].kind == "layout" and n.output in outs]
            if escaping:
                # A view read outside the group must stay a view of its (written) base: readers
                # outside get an ATen view of their own; inside, the layout op stays index math.
                inside = [n for n in escaping if any(u in cur for u in units.users.get(n.output, ()))]
                for n in escaping:
                    if n in inside:
                        as_calls.add(_detach_view(units, n, set(cur), twins))
                    else:
                        as_calls.add(n)
                rest = [n for n in cur if n not in escaping or n in inside]
                for n in rest:
                    units.unit[n] = rest
                for n in escaping:
                    if n not in inside:
                        units.unit[n] = [n]
                pending.append(rest)
                continue
            outs = units.outputs_of(cur)
            dom = align(cur, outs)
            if isinstance(dom, str):
                if len(cur) == 1:
                    as_calls.update(cur)
                    continue
                log.info("splitting group after finalization: %s", dom)
                for n in cur:
                    units.unit[n] = [n]
                    pending.append([n])
                continue
            final.append(cur)
            aligned[tuple(cur)] = (outs, group_values(cur)[0], dom)
    # call nodes (layout ops dropped from groups) need ATen targets
    for n in as_calls:
        _to_call(n)
    for test, reason in ((_is_input_cast, BATCHED_CAST), (_is_output_cast, BATCHED_CAST_LATE)):
        casts = [cur for cur in final if test(cur, units)]
        if len(casts) >= units.options.tuning.segment.cast_batch_min:
            for cur in casts:
                final.remove(cur)
                for view in cur[:-1]:  # a returned cast's views (see _is_output_cast)
                    _to_call(view)
                _to_batched_cast(cur[-1], reason)

    group_of: dict[Node, FusionGroup] = {}
    made: list[FusionGroup] = []
    for gid, nodes in enumerate(sorted(final, key=lambda g: units.index[g[0]])):
        outs = units.outputs_of(nodes)
        inputs, _ = group_values(nodes)
        known = aligned.get(tuple(nodes))
        dom = known[2] if known is not None and known[:2] == (outs, inputs) else align(nodes, outs)
        assert not isinstance(dom, str), dom
        fg = FusionGroup(id=gid, nodes=nodes, inputs=inputs, outputs=outs, domain=dom)
        made.append(fg)
    made = pair_inner_outer(made, graph, units.options)
    for fg in made:
        for n in fg.nodes:
            group_of[n] = fg
    steps = _schedule_steps(graph, group_of, units)
    # ids follow the execution order: a group whose first node comes early can run late (a
    # backward graph's view of a forward input, added to a gradient computed at its end)
    for gid, fg in enumerate(s for s in steps if isinstance(s, FusionGroup)):
        fg.id = gid
    return Segmentation(graph=graph, steps=steps)


# ---------------------------------------------------------------------------- inner-outer pairs


#: Reasons such casts carry as call nodes; the executor batches the calls of each reason:
#: casts of graph inputs at the first one's place (under autocast: every weight's cast to
#: half precision before its matrix product), casts whose results the graph only returns at
#: the last one's place (under autocast: every weight gradient's cast back to fp32).
BATCHED_CAST = "cast of a graph input (batched into one multi-tensor copy)"


BATCHED_CAST_LATE = "cast of a returned value (batched into one multi-tensor copy at the end)"


def _single_cast(nodes: list[Node]) -> Node | None:
    if len(nodes) != 1 or nodes[0].op != "cast":
        return None
    n = nodes[0]
    x, out = n.inputs[0], n.output
    if not isinstance(x, Value) or x.meta is None or out.meta is None:
        return None
    if tuple(x.meta.shape) != tuple(out.meta.shape) or x.meta.device != out.meta.device:
        return None
    return n


def _is_input_cast(nodes: list[Node], units: Units) -> bool:
    """A group that is one dtype conversion of a graph input, and not itself returned."""
    n = _single_cast(nodes)
    if n is None:
        return False
    x = n.inputs[0]
    return x.producer is None and x in units.graph.inputs and n.output not in units.graph_outputs


def _is_output_cast(nodes: list[Node], units: Units) -> bool:
    """A group that is one dtype conversion whose result the graph returns and reads nowhere,
    possibly of a view: layout ops (permute, reshape ...) in a chain, then the cast. Under
    autocast every weight gradient is such a group (``mm(...).t()`` cast back to fp32); the
    views become ATen view calls and the cast joins the batched copy."""
    *layouts, last = nodes
    n = _single_cast([last])
    if n is None or n.output not in units.graph_outputs or units.users.get(n.output):
        return False
    reader = last
    for layout in reversed(layouts):  # each view is read by the next node of the chain only
        v = layout.output
        if (REGISTRY[layout.op].kind != "layout" or reader.inputs[0] is not v or v in units.graph_outputs
                or list(units.users.get(v, ())) != [reader]):
            return False
        reader = layout
    return True


def _to_batched_cast(node: Node, reason: str) -> None:
    """Make a cast registry node a call of ``_to_copy`` marked for batching (``reason``)."""
    import torch

    node.target = torch.ops.aten._to_copy.default
    node.args = (node.inputs[0],)
    node.kwargs = {"dtype": node.output.meta.dtype}
    node.reason = reason
    node.op = None


def _detach_view(units: Units, node: Node, group: set, twins: dict[Value, Node]) -> Node:
    """Give the readers of layout ``node`` outside ``group`` their own copy of the view.

    Returns the copy (a layout registry node to be turned into an ATen view call); the
    original keeps serving readers inside the group. ``twins`` maps each view detached so far
    to its copy: a view detached again (a copy detached from the same group after it reads
    it) gives its new outside readers the copy it already has.
    """
    import copy

    graph = units.graph
    old = node.output
    outside = [u for u in units.users.get(old, []) if u not in group]
    twin = twins.get(old)
    if twin is None:
        new_val = Value(name=f"{old.name}_view", meta=old.meta)
        twin = Node(op=node.op, inputs=list(node.inputs), attrs=dict(node.attrs), outputs=[new_val],
                    target=node.target, args=copy.copy(node.args), kwargs=dict(node.kwargs), source=node.source)
        new_val.producer = twin
        twins[old] = twin
        graph.nodes.insert(graph.nodes.index(node) + 1, twin)
        units.index[twin] = units.index[node] + 0.5
        units.unit[twin] = [twin]
        units.users[new_val] = []
        units.consumers[twin] = []
        units.producers[twin] = units.producers[node]
        src = node.inputs[0]
        units.users.setdefault(src, []).append(twin)
        if src.producer is not None:
            units.consumers[src.producer] = units.consumers[src.producer] + [twin]
    new_val = twin.output
    swap = lambda v: new_val if v is old else v
    for u in outside:
        rewire(u, old, new_val)
    if old in units.graph_outputs:
        graph.outputs = map_values(graph.outputs, swap)
        units.graph_outputs = graph.output_values()
    units.users[old] = [u for u in units.users.get(old, []) if u in group]
    units.users[new_val] = units.users[new_val] + outside
    units.consumers[twin] = units.consumers[twin] + outside
    units.consumers[node] = [u for u in units.consumers[node] if u in group]
    return twin


def _to_call(node: Node) -> None:
    """Make a layout registry node a call of its ATen op (a view).

    A node traced from FX keeps its original ATen target and arguments (symbolic sizes in
    them are values, read at run time); only nodes built without one get an equivalent call.
    """
    if node.target is not None:
        node.reason = "view (no data moves)"
        node.op = None
        return
    import torch

    aten = torch.ops.aten
    x = node.inputs[0]
    out = node.output
    if node.op == "permute":
        node.target, node.args = aten.permute.default, (x, list(node.attrs["dims"]))
    elif node.op == "unsqueeze":
        node.target, node.args = aten.unsqueeze.default, (x, node.attrs["dim"])
    elif node.op == "squeeze":
        dims = node.attrs["dims"]
        node.target, node.args = (aten.squeeze.default, (x,)) if dims is None else (aten.squeeze.dims, (x, list(dims)))
    elif node.op == "alias":
        node.target, node.args = aten.alias.default, (x,)
    elif node.op in ("expand", "reshape", "broadcast_in_dim"):
        shape = list(out.meta.shape)
        node.target = aten.expand.default if node.op == "expand" else aten.view.default
        node.args = (x, shape)
        if node.op == "broadcast_in_dim":
            node.target = torch.ops.prims.broadcast_in_dim.default
            node.args = (x, shape, list(node.attrs["broadcast_dims"]))
        elif node.op == "reshape":
            node.target = aten.reshape.default
    else:
        raise AssertionError(f"{node.op} is not a layout op")
    node.kwargs = {}
    node.reason = "view (no data moves)"
    node.op = None


def _schedule_steps(graph: Graph, group_of: dict, units: Units) -> list:
    """Order groups and calls: each step after every step it reads from (Kahn's algorithm)."""
    step_of: dict[Node, object] = {}
    steps: list = []
    for n in graph.nodes:
        s = group_of.get(n, n)
        step_of[n] = s
        if s is n or (isinstance(s, FusionGroup) and s not in steps):
            steps.append(s)
    deps: dict[int, set[int]] = {id(s): set() for s in steps}
    for n in graph.nodes:
        s = step_of[n]
        for v in n.input_values():
            p = v.producer
            if p is not None and step_of[p] is not s:
                deps[id(s)].add(id(step_of[p]))
    by_id = {id(s): s for s in steps}
    order: list = []
    done: set[int] = set()
    pos = {id(s): i for i, s in enumerate(steps)}
    ready = sorted((sid for sid, d in deps.items() if not d), key=pos.get)
    waiting = {sid: set(d) for sid, d in deps.items() if d}
    dependents: dict[int, list[int]] = {}
    for sid, d in deps.items():
        for p in d:
            dependents.setdefault(p, []).append(sid)
    import heapq
    heap = [(pos[s], s) for s in ready]
    heapq.heapify(heap)
    while heap:
        _, sid = heapq.heappop(heap)
        if sid in done:
            continue
        done.add(sid)
        order.append(by_id[sid])
        for t in dependents.get(sid, []):
            w = waiting.get(t)
            if w is None:
                continue
            w.discard(sid)
            if not w:
                del waiting[t]
                heapq.heappush(heap, (pos[t], t))
    if waiting:
        raise AssertionError("fusion created a cycle between steps")
    return order
