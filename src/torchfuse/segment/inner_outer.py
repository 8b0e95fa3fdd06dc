"""Pairing for the inner-outer scheduler: a row-reduction group and the column sums over the
same rows and columns become one group (``FusionGroup.outer``).

Takes the finalized :class:`~torchfuse.segment.groups.FusionGroup` list of a graph (and the
graph, for views and paths between groups); returns the groups with each pair merged under
the row group's id, renumbered in graph order (:func:`pair_inner_outer`). Invariants: paired
groups have no path between them; the merged domain is the row group's, with the column
group's values mapped into it (their reductions reduce its kept dims).
"""
from __future__ import annotations

import logging

from ..config import Options
from ..domain import Domain, group_values
from ..ir.graph import Graph, Node, Value, is_one, map_values, sizes_equal
from ..ir.ops import REDUCTIONS, REGISTRY
from ..schedulers.base import next_power_of_2
from .groups import FusionGroup, has_reduction
from .rewrites import rewire

log = logging.getLogger("torchfuse.fusion")


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


def _reaches(users: dict, src: set[Node], dst: set[Node], steps: dict[Node, set[Node]]) -> bool:
    """Does a result of the nodes ``src`` reach a node of ``dst`` (through any other step)?

    The walk goes step by step, not value by value: a group that reads a result of ``src``
    runs after it, and so does everything that reads any of the group's results, whether or
    not the value read depends on the one that entered it. ``steps`` maps each node of a group
    to its step's nodes (the pairs made so far included); nodes of ``src`` and ``dst`` are not
    part of the steps they are taken from.
    """
    stack = [u for n in src for o in n.outputs for u in users.get(o, ()) if u not in src]
    seen: set[Node] = set()
    while stack:
        n = stack.pop()
        if n in dst:
            return True
        if n in seen:
            continue
        for m in steps.get(n, (n,)):
            if m not in src and m not in dst and m not in seen:
                seen.add(m)
                stack.extend(u for o in m.outputs for u in users.get(o, ()))
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
    if len(comps) == 1 or not all(has_reduction(c) for c in comps.values()):
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
    # each grouped node -> its step's nodes, as the pairs below move column parts into row groups
    steps = {n: nodes for g in groups for nodes in [set(g.nodes)] for n in g.nodes}
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
                row, col = steps[g1.nodes[0]], set(part.nodes)  # the row group with its pairs so far
                if _reaches(users, row, col, steps) or _reaches(users, col, row, steps):
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
            steps[part.nodes[0]].difference_update(part.nodes)
            steps[g1.nodes[0]].update(part.nodes)
            steps.update(dict.fromkeys(part.nodes, steps[g1.nodes[0]]))
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
                    rewire(n, old, new)
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
