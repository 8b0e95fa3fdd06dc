"""Segmenter: partitions a graph into fusion groups and ATen calls.

Takes a :class:`~torchfuse.ir.graph.Graph`; returns a :class:`Segmentation`, the graph's
steps in an executable order, each a :class:`FusionGroup` (one generated kernel) or a call
node (run through ATen).

Passes, in order:

1. ``fuse_producers`` walks the nodes in topological order and merges each fusible node into
   the groups of its producers, largest group first, whenever the merged group still has a
   :class:`~torchfuse.domain.Domain` (pointwise chains with broadcasts and layout ops;
   reductions with their pointwise producers and consumers) and no cycle appears.
2. ``fuse_siblings`` merges groups over the same domain that read a common input (the
   several reductions of a LayerNorm or BatchNorm backward read the gradient once), and
   ``fuse_consumer_siblings`` groups over one domain that read results of one producer.
3. ``finalize`` turns layout-only groups back into ATen views (they move no data), takes
   layout ops whose results leave their group out of it (a view must stay a view of its
   base), and computes each group's inputs, outputs and domain.

Invariants of the result: the steps are a topological order of groups and calls; each group's
outputs are exactly its values read by a later step or returned by the graph.
"""
from __future__ import annotations

import dataclasses
import math
import types
import logging
from typing import Sequence

from .config import Options
from .domain import Domain, align, group_values
from .ir.from_fx import eliminate_dead_code
from .ir.graph import Graph, Node, Value, is_one, map_values, sizes_equal
from .ir.ops import REDUCTIONS, REGISTRY
from .schedulers import next_power_of_2

log = logging.getLogger("torchfuse.fusion")


@dataclasses.dataclass(eq=False)
class FusionGroup:
    """A set of registry nodes that run as one kernel.

    Attributes:
        id: index of the group in its graph, used in kernel names.
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
    """A graph cut into steps: fusion groups and call nodes, in execution order."""

    graph: Graph
    steps: list  # FusionGroup | Node

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


class _Units:
    """Groups under construction: a partition of the nodes, with a group-level cycle check."""

    def __init__(self, graph: Graph, options: Options):
        self.graph = graph
        self.options = options
        self.index = {n: i for i, n in enumerate(graph.nodes)}
        self.unit: dict[Node, list[Node]] = {n: [n] for n in graph.nodes}
        users = graph.users()
        self.consumers: dict[Node, list[Node]] = {
            n: sorted({u for o in n.outputs for u in users.get(o, [])}, key=self.index.get) for n in graph.nodes}
        self.producers: dict[Node, list[Node]] = {
            n: sorted({v.producer for v in n.input_values() if v.producer is not None}, key=self.index.get)
            for n in graph.nodes}
        self.users = users
        self.graph_outputs = graph.output_values()
        self.failures: dict[tuple, str] = {}

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
        dom = align(merged, self.outputs_of(merged))
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
        from .schedulers.split import can_split

        def group(nodes, d):
            return types.SimpleNamespace(nodes=nodes, domain=d, outputs=self.outputs_of(nodes))

        if can_split(group(merged, dom)):
            return False
        for part in (ua, ub):
            if _has_reduction(part):
                d = align(part, self.outputs_of(part))
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


def fuse_producers(units: _Units) -> None:
    """Merge each fusible node into its producers' groups, largest first."""
    for node in units.graph.nodes:
        if not is_fusible(node):
            continue
        cands = [p for p in units.producers[node] if is_fusible(p)]
        cands.sort(key=lambda p: -len(units.members(p)))
        for p in cands:
            units.try_merge(p, node, bounded=True)


def fuse_siblings(units: _Units) -> None:
    """Merge groups that read a common input and share a domain (horizontal fusion)."""
    users = units.graph.users()
    for v, readers in users.items():
        fus = [r for r in readers if is_fusible(r)]
        for i in range(len(fus)):
            for j in range(i + 1, len(fus)):
                units.try_merge(fus[i], fus[j])


def fuse_consumer_siblings(units: _Units) -> None:
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
        reds = [c for c in consumers if _has_reduction(units.members(c))]
        for i in range(len(reds)):
            for j in range(i + 1, len(reds)):
                units.try_merge(reds[i], reds[j])


def _one_element(unit: list) -> bool:
    for n in unit:
        for o in n.outputs:
            shape = getattr(o.meta, "shape", None)
            if shape is None or not all(isinstance(d, int) for d in shape) or math.prod(shape) != 1:
                return False
    return True


def fuse_one_element_groups(units: _Units) -> None:
    """Merge pointwise groups whose every result has one element, in graph order, whether or
    not they share an input (horizontal fusion of independent scalars). Training-mode
    BatchNorm increments its batch counter, a 0-dim int64 tensor, in every layer: one launch
    each, 53 per ResNet-50 forward, where the work is one integer add. Merged, they are one
    kernel. A group joins the current one while the merge keeps the step order acyclic and
    the group within ``max_group_ops`` (``_Units.try_merge``); otherwise it starts the next."""
    anchor = None
    seen: set[int] = set()
    for node in units.graph.nodes:
        if not is_fusible(node):
            continue
        unit = units.unit[node]
        if id(unit) in seen:
            continue
        seen.add(id(unit))
        if _has_reduction(unit) or not _one_element(unit):
            continue
        if anchor is None or not units.try_merge(anchor, node):
            anchor = node
        seen.add(id(units.unit[node]))


def _rewire(node: Node, old: Value, new: Value) -> None:
    """Make ``node`` read ``new`` wherever it read ``old`` (operands and call arguments)."""
    swap = lambda x: new if x is old else x
    node.inputs = [swap(x) for x in node.inputs]
    node.args = map_values(node.args, swap)
    node.kwargs = map_values(node.kwargs, swap)


def _twin(node: Node, swap, outputs: list[Value]) -> Node:
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
    from .ir.graph import Value

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
            _rewire(reader, node.output, out)
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
    from .ir.graph import Value

    returned = graph.output_values()
    users = {v: list(r) for v, r in graph.users().items()}  # kept current as copies are made
    nodes = list(graph.nodes)
    count = 0
    for index in range(len(nodes) - 1, -1, -1):  # copies go after the node: not revisited
        node = nodes[index]
        if node.is_call or REGISTRY[node.op].kind != "pointwise" or len(node.outputs) != 1 \
                or not _one_element([node]):
            continue
        all_readers = users.get(node.output, [])
        readers = list(dict.fromkeys(u for u in all_readers if not u.is_call))  # x * x reads x once
        keep = node.output in returned or any(u.is_call for u in all_readers)
        for reader in readers[0 if keep else 1:]:
            count += 1
            out = Value(name=f"{node.output.name}_s{count}", meta=node.output.meta)
            copy = _twin(node, lambda x: x, [out])
            _rewire(reader, node.output, out)
            all_readers[:] = [u for u in all_readers if u is not reader]
            users[out] = [reader]
            for v in copy.input_values():
                users.setdefault(v, []).append(copy)
            nodes.insert(index + 1, copy)
    graph.nodes = nodes
    return count


def _has_reduction(nodes: Sequence[Node]) -> bool:
    return any(REGISTRY[n.op].kind == "reduction" for n in nodes)


def _computes(nodes: Sequence[Node]) -> bool:
    return any(REGISTRY[n.op].kind in ("pointwise", "reduction", "constant", "random") for n in nodes)


def finalize(units: _Units) -> Segmentation:
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
    for nodes in groups:
        pending = [nodes]
        while pending:
            cur = pending.pop()
            if not _computes(cur):
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
                        as_calls.add(_detach_view(units, n, set(cur)))
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
            dom = align(cur, units.outputs_of(cur))
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
        dom = align(nodes, outs)
        assert not isinstance(dom, str), dom
        inputs, _ = group_values(nodes)
        fg = FusionGroup(id=gid, nodes=nodes, inputs=inputs, outputs=outs, domain=dom)
        made.append(fg)
    made = pair_inner_outer(made, graph, units.options)
    for fg in made:
        for n in fg.nodes:
            group_of[n] = fg
    steps = _schedule_steps(graph, group_of, units)
    return Segmentation(graph=graph, steps=steps)


# ---------------------------------------------------------------------------- inner-outer pairs

def _static_extent(dom: Domain, dims) -> int | None:
    n = 1
    for d in dims:
        s = dom.sizes[d]
        try:
            n *= int(s)
        except TypeError:  # a symbolic size
            return None
    return n


def _plain(g: FusionGroup) -> bool:
    return not any(REGISTRY[n.op].kind == "random" or n.op == "arange" for n in g.nodes)


def _row_refusal(g: FusionGroup, limit: int) -> str | None:
    """Why reduction group ``g`` cannot be the row side of a pair (None: it can): its whole
    reduced extent must be static and fit the persistent scheduler within ``limit``."""
    if g.outer:
        return f"{g.name} is paired already"
    if not _plain(g):
        return f"{g.name} draws random numbers or builds indices"
    r = _static_extent(g.domain, g.domain.reduced)
    if r is None:
        return f"the row length of {g.name} is symbolic (a dynamic size), not known when pairing"
    if next_power_of_2(r) > limit:
        return f"the rows of {g.name} ({r} elements) are longer than the {limit} that pair"
    kept = [d for d in range(len(g.domain.sizes)) if d not in g.domain.reduced and not is_one(g.domain.sizes[d])]
    if not kept or r <= 1:
        return f"{g.name} reduces everything to one value or nothing"
    return None


def _column_candidate(g: FusionGroup) -> bool:
    """A group of plain sums that writes only reduced results (a weight or bias gradient)."""
    reds = [n for n in g.nodes if REGISTRY[n.op].kind == "reduction"]
    if not reds or g.outer or not _plain(g):
        return False
    if any(REDUCTIONS[n.op].combine != "sum" or REDUCTIONS[n.op].mean for n in reds):
        return False
    return not any(g.domain.varies_along_reduced(o) for o in g.outputs)


def _transposed_dims(rows: FusionGroup, cols: FusionGroup) -> dict | None:
    """``cols``' value dims in ``rows``' domain, when ``cols`` reduces exactly the dims that
    ``rows`` keeps and keeps the ones it reduces, over the same sizes, and the two read a
    common input that spans the whole domain (the tensor the pair reads once); else None."""
    d1, d2 = rows.domain, cols.domain
    if len(d1.sizes) != len(d2.sizes):
        return None
    big1 = {k for k in range(len(d1.sizes)) if not is_one(d1.sizes[k])}
    big2 = {k for k in range(len(d2.sizes)) if not is_one(d2.sizes[k])}
    perm: dict[int, int] = {}
    spans = False
    for v in cols.inputs:
        if v.meta is None or v not in d1.dims:
            continue
        a, b = d1.dims[v], d2.dims[v]
        for x, y in zip(a, b):
            if (x is None) != (y is None):
                return None
            if x is not None and perm.setdefault(y, x) != x:
                return None
        spans = spans or {x for x in a if x is not None} == big1
    if not spans or set(perm) != big2 or len(set(perm.values())) != len(perm):
        return None
    if any(not sizes_equal(d1.sizes[x], d2.sizes[y]) for y, x in perm.items()):
        return None
    # the column group reduces the rows' kept dims and keeps their reduced ones
    if {perm[y] for y in big2 if y in d2.reduced} != {x for x in big1 if x not in d1.reduced}:
        return None
    if {perm[y] for y in big2 if y not in d2.reduced} != {x for x in big1 if x in d1.reduced}:
        return None
    out: dict = {}
    for v, dims in d2.dims.items():
        mapped = tuple(None if y is None else perm[y] for y in dims)
        if v in d1.dims and d1.dims[v] != mapped:
            return None
        out[v] = mapped
    return out


def _shared_reads(rows: FusionGroup, cols: FusionGroup) -> tuple[int, int]:
    """What pairing saves: (inputs of both that span every dim of the rows' domain, inputs of
    both); a column group pairs with the row group that shares the most."""
    d1 = rows.domain
    big = {k for k in range(len(d1.sizes)) if not is_one(d1.sizes[k])}
    row_inputs = set(rows.inputs)
    shared = [v for v in cols.inputs if v.meta is not None and v in d1.dims and v in row_inputs]
    return sum(1 for v in shared if {x for x in d1.dims[v] if x is not None} == big), len(shared)


def _reaches(graph: Graph, users: dict, src: FusionGroup, dst: FusionGroup) -> bool:
    """Does a result of ``src`` reach a node of ``dst`` (through any other step)?"""
    inside, target = set(src.nodes), set(dst.nodes)
    stack = [u for v in src.outputs for u in users.get(v, ()) if u not in inside]
    seen: set[Node] = set()
    while stack:
        n = stack.pop()
        if n in target:
            return True
        if n in seen:
            continue
        seen.add(n)
        stack.extend(u for o in n.outputs for u in users.get(o, ()))
    return False


def _parts(g: FusionGroup) -> list[FusionGroup]:
    """The independent parts of column group ``g`` (connected through values computed inside
    it), each with at least one sum; ``[g]`` when it is one part. Sibling fusion can merge the
    weight-gradient sum of one LayerNorm with the sums of another over the same rows (they read
    a common input); pairing places each part with its own row group."""
    produced = {o: n for n in g.nodes for o in n.outputs}
    parent = {n: n for n in g.nodes}

    def find(n: Node) -> Node:
        while parent[n] is not n:
            parent[n] = parent[parent[n]]
            n = parent[n]
        return n

    for n in g.nodes:
        for x in n.inputs:
            p = produced.get(x) if isinstance(x, Value) else None
            if p is not None:
                parent[find(n)] = find(p)
    comps: dict[Node, list[Node]] = {}
    for n in g.nodes:
        comps.setdefault(find(n), []).append(n)
    if len(comps) == 1 or not all(_has_reduction(c) for c in comps.values()):
        return [g]
    return [_subgroup(g, c) for c in comps.values()]


def _subgroup(g: FusionGroup, nodes: list[Node]) -> FusionGroup:
    """The group of ``g``'s ``nodes`` (in ``g``'s order): their inputs, the outputs of ``g``
    they compute, ``g``'s domain restricted to their values."""
    inputs, produced = group_values(nodes)
    made = set(produced)
    keep = made | set(inputs)
    dom = Domain(sizes=g.domain.sizes, reduced=g.domain.reduced,
                 dims={v: d for v, d in g.domain.dims.items() if v in keep})
    return FusionGroup(id=g.id, nodes=nodes, inputs=inputs, outputs=[o for o in g.outputs if o in made], domain=dom)


def _view_classes(graph: Graph) -> dict[Value, Value]:
    """Each value written by an ATen view call, mapped to the first value a call with the same
    target and arguments writes. Views read outside their group are given to each reading
    group as a call of its own (``_detach_view``), so two groups can read one view of one
    tensor through two values."""
    first: dict = {}
    canon: dict[Value, Value] = {}
    ident = lambda v: ("value", id(v))
    for n in graph.nodes:
        if n.op is None and n.reason == "view (no data moves)" and len(n.outputs) == 1:
            key = (n.target, repr(map_values(n.args, ident)), repr(map_values(n.kwargs, ident)))
            canon[n.outputs[0]] = first.setdefault(key, n.outputs[0])
    return canon


def _as_read_by(part: FusionGroup, rows: FusionGroup, canon: dict) -> tuple[FusionGroup, dict]:
    """``part`` reading ``rows``' own value wherever both read the same view of one tensor
    through two values, and that substitution (empty when there is none)."""
    theirs = {canon[v]: v for v in rows.inputs if v in canon}
    subst = {v: theirs[canon[v]] for v in part.inputs if v in canon and theirs.get(canon[v], v) is not v}
    if not subst:
        return part, {}
    swap = lambda v: subst.get(v, v)
    dom = Domain(sizes=part.domain.sizes, reduced=part.domain.reduced,
                 dims={swap(v): d for v, d in part.domain.dims.items()})
    inputs = list(dict.fromkeys(swap(v) for v in part.inputs))
    return FusionGroup(id=part.id, nodes=part.nodes, inputs=inputs, outputs=part.outputs, domain=dom), subst


def pair_inner_outer(groups: list[FusionGroup], graph: Graph, options: Options) -> list[FusionGroup]:
    """Merge each row-reduction group with the column sums over the same rows and columns.

    LayerNorm's backward has two such groups: its input gradient reduces every row (kept: the
    rows, reduced: the normalized dims), and its weight and bias gradients sum every column
    over the rows. Apart, both read the output gradient and the input: five passes over the
    data for three. Paired, one ``reduction.inner_outer`` kernel reads each block of rows once,
    writes its input gradient and adds the block into column partials that stay in registers
    across the program's blocks; a second kernel sums those partials. Inductor's mixed-order
    reductions and nvFuser's inner-outer persistent scheduler do the same; on an H200 the pair
    cost 95 + 73 us at bf16 16384 x 4096, and the paired kernels 145 us (``benchmarks/NOTES.md``,
    runs R and AH).

    A column group is considered part by part (:func:`_parts`: sibling fusion may have merged
    the sums of two LayerNorms), and a part may read the rows' input through another value of
    the same view (:func:`_view_classes`). A pair needs: no path between the two (they run at
    one step); the part's reductions all plain sums of values that span the domain, and its
    outputs those sums or values computed from them; a common input spanning every dim (the
    read the pair saves); a static row length (a size TorchDynamo made dynamic is not known
    here) of at most ``Tuning.inner_outer.max_row`` elements (4096: longer rows ran slower
    paired on an H200) and ``persistent_max_elements``. Groups with random numbers or
    ``arange`` are left alone. Among the row groups that qualify, a part pairs with the one
    that shares the most full-size inputs with it (``_shared_reads``); one row group takes
    every part that chooses it. The parts of a column group left unpaired stay one group; a
    column group with no part paired is logged (topic ``fusion``) with the reason.

    Returns the groups, paired ones merged (under the row group's id), renumbered in order.
    """
    if not options.inner_outer:
        return groups
    limit = min(options.persistent_max_elements, options.tuning.inner_outer.max_row)
    cols = [g for g in groups if _column_candidate(g)]
    if not cols:
        return groups
    rows = [g for g in groups if g.domain.reduced]
    users = graph.users()
    order = {n: i for i, n in enumerate(graph.nodes)}
    canon = _view_classes(graph)
    # row group id -> (row group, [(part, its column group, dims in the rows' domain, substitution)])
    taken: dict[int, tuple[FusionGroup, list]] = {}
    left: dict[int, list[FusionGroup]] = {}
    as_columns: set[int] = set()  # column groups with a part paired: not row groups too
    for g2 in cols:
        if id(g2) in taken:
            continue  # paired already as the row side (a plain row sum)
        why = "no row-reduction group over the same rows and columns reads its input"
        parts = _parts(g2)
        for part in parts:
            best = None
            for g1 in rows:
                if g1 is g2:
                    continue
                seen, subst = _as_read_by(part, g1, canon)
                dims = _transposed_dims(g1, seen)
                if dims is None:
                    continue
                refusal = f"{g1.name} is paired already" if id(g1) in as_columns else _row_refusal(g1, limit)
                if refusal is not None:
                    why = refusal
                    continue
                others = [p for p, c, _, _ in taken.get(id(g1), (None, []))[1] if c is not g2]
                if any(_reaches(graph, users, a, b) or _reaches(graph, users, b, a)
                       for a, b in [(g1, part)] + [(o, part) for o in others]):
                    why = f"one of it and {g1.name} (or a column sum paired with it) reads a result of the other"
                    continue
                score = _shared_reads(g1, seen)
                if best is None or score > best[0]:
                    best = (score, g1, dims, subst)
            if best is None:
                left.setdefault(id(g2), []).append(part)
                continue
            _, g1, dims, subst = best
            taken.setdefault(id(g1), (g1, []))[1].append((part, g2, dims, subst))
            as_columns.add(id(g2))
        if len(left.get(id(g2), ())) == len(parts):
            log.info("sums %s not paired as the column side of an inner-outer kernel: %s", g2.name, why)
    if not taken:
        return groups
    merged: dict[int, FusionGroup | None] = {}
    for g1, parts in taken.values():
        dims: dict = {}
        column_nodes: set[Node] = set()
        outputs = list(g1.outputs)
        for part, g2, part_dims, subst in parts:
            for n in part.nodes:
                for old, new in subst.items():
                    _rewire(n, old, new)
            dims.update(part_dims)
            column_nodes.update(part.nodes)
            outputs += part.outputs
            merged.setdefault(id(g2), None)
        nodes = sorted(g1.nodes + list(column_nodes), key=order.get)
        inputs, _ = group_values(nodes)
        dom = Domain(sizes=g1.domain.sizes, reduced=g1.domain.reduced, dims={**g1.domain.dims, **dims})
        merged[id(g1)] = FusionGroup(id=g1.id, nodes=nodes, inputs=inputs, outputs=outputs, domain=dom,
                                     outer=[n for n in nodes if n in column_nodes])
        log.info("group %s and the sums of %s run as one inner-outer reduction", g1.name,
                 ", ".join(dict.fromkeys(g2.name for _, g2, _, _ in parts)))
    for g2 in cols:
        rest = left.get(id(g2), [])
        if id(g2) in as_columns and rest:  # the parts left unpaired stay one group
            merged[id(g2)] = _subgroup(g2, sorted((n for p in rest for n in p.nodes), key=order.get))
    out = [merged.get(id(g), g) for g in groups]
    out = sorted((g for g in out if g is not None), key=lambda g: order[g.nodes[0]])
    for i, g in enumerate(out):
        g.id = i
    return out


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


def _is_input_cast(nodes: list[Node], units: _Units) -> bool:
    """A group that is one dtype conversion of a graph input, and not itself returned."""
    n = _single_cast(nodes)
    if n is None:
        return False
    x = n.inputs[0]
    return x.producer is None and x in units.graph.inputs and n.output not in units.graph_outputs


def _is_output_cast(nodes: list[Node], units: _Units) -> bool:
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


def _detach_view(units: _Units, node: Node, group: set) -> Node:
    """Give the readers of layout ``node`` outside ``group`` their own copy of the view.

    Returns the new node (a layout registry node to be turned into an ATen view call); the
    original keeps serving readers inside the group.
    """
    import copy

    graph = units.graph
    old = node.output
    new_val = Value(name=f"{old.name}_view", meta=old.meta)
    twin = Node(op=node.op, inputs=list(node.inputs), attrs=dict(node.attrs), outputs=[new_val],
                target=node.target, args=copy.copy(node.args), kwargs=dict(node.kwargs), source=node.source)
    new_val.producer = twin
    swap = lambda v: new_val if v is old else v
    outside = [u for u in units.users.get(old, []) if u not in group]
    for u in outside:
        _rewire(u, old, new_val)
    if old in units.graph_outputs:
        graph.outputs = map_values(graph.outputs, swap)
        units.graph_outputs = graph.output_values()
    pos = graph.nodes.index(node)
    graph.nodes.insert(pos + 1, twin)
    units.index[twin] = units.index[node] + 0.5
    units.unit[twin] = [twin]
    units.users[old] = [u for u in units.users.get(old, []) if u in group]
    units.users[new_val] = outside
    src = node.inputs[0]
    units.users.setdefault(src, []).append(twin)
    units.consumers[twin] = outside
    units.consumers[node] = [u for u in units.consumers[node] if u in group]
    units.producers[twin] = units.producers[node]
    if src.producer is not None:
        units.consumers[src.producer] = units.consumers[src.producer] + [twin]
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


def _schedule_steps(graph: Graph, group_of: dict, units: _Units) -> list:
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


def _partition(graph: Graph, options: Options) -> _Units:
    units = _Units(graph, options)
    fuse_producers(units)
    fuse_siblings(units)
    fuse_consumer_siblings(units)
    fuse_one_element_groups(units)
    return units


def rematerialize(units: _Units) -> int:
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
        if not all(is_fusible(n) for n in unit):
            continue
        reader_reduces = _has_reduction(unit)
        inside = set(unit)
        reads: dict[Value, list[Node]] = {}
        for n in unit:
            for v in n.input_values():
                p = v.producer
                if p is not None and p not in inside and not p.is_call and is_fusible(p) \
                        and (reader_reduces or _has_reduction(units.unit[p])):
                    reads.setdefault(v, []).append(n)
        own = {v for n in unit for v in n.input_values()}
        for v, readers in reads.items():
            chain = _pointwise_chain(units, v)
            if chain is None or v.meta is None:
                continue
            nodes, leaves = chain
            full = [x for x in leaves if x.meta is not None and tuple(x.meta.shape) == tuple(v.meta.shape)]
            extra = sum(x.meta.dtype.itemsize for x in full if x not in own)
            home = units.unit[v.producer]
            sole = v not in returned and all(u in inside or units.unit.get(u) is home for u in users.get(v, []))
            if extra > v.meta.dtype.itemsize * (2 if sole else 1):
                continue
            clone: dict[Value, Value] = {}
            copies = []
            for n in nodes:  # in graph order
                outs = [Value(name=f"{o.name}_r{done}", meta=o.meta) for o in n.outputs]
                copies.append(_twin(n, lambda x: clone.get(x, x), outs))
                clone.update(zip(n.outputs, outs))
            for r in readers:
                _rewire(r, v, clone[v])
            first = min(new_nodes.index(r) for r in readers)
            new_nodes[first:first] = copies
            done += 1
    if done:
        graph.nodes = new_nodes
        log.info("rematerialized %d values for reduction groups", done)
    return done


def _pointwise_chain(units: _Units, v: Value):
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
        cast = _twin(node, lambda x, old=v, new=base: new if x is old else x, [cast_val])
        # the reshape now writes the cast's old result: its readers, and the graph's outputs,
        # are unchanged (a returned result that became a view of an intermediate is made a
        # tensor of its own at run time: ``runtime.executor._no_view``)
        view = _twin(r, lambda x, old=base, new=cast_val: new if x is old else x, [out])
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
            view = _twin(r, lambda v, old=out, new=x: new if v is old else v, [view_val])
            cast = _twin(node, lambda v, old=x, new=view_val: new if v is old else v, [r.output])
            replaced[r] = [view, cast]
    if moved:
        graph.nodes = [m for n in graph.nodes for m in replaced.get(n, [n])]
        eliminate_dead_code(graph)
        log.info("moved %d casts of inputs below the reshapes that read them", moved)
    return moved


def segment(graph: Graph, options: Options) -> Segmentation:
    """Partition ``graph`` into fusion groups and ATen calls (see the module docstring)."""
    duplicate_constants(graph)
    duplicate_scalars(graph)
    sink_casts_below_reshapes(graph)
    cast_inputs_after_reshapes(graph)
    units = _partition(graph, options)
    if rematerialize(units):
        # the chains the reduction groups now recompute may have no reader left
        eliminate_dead_code(graph)
        units = _partition(graph, options)
    return finalize(units)
