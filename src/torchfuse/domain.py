"""The iteration domain of a fusion group, and how every value of the group sits in it.

A fusion group runs as one kernel over one *domain*: a list of sizes (the shape of the
reduction input, or the largest pointwise output) of which some dims are *reduced*. Every
value the group reads, computes or writes is aligned to the domain: each of its dims maps to a
domain dim, or to ``None`` where the value has size 1 (it is broadcast along that domain dim).
Layout ops (permute, expand, unsqueeze, squeeze, size-1 reshapes) only change that mapping, so
inside a group they cost nothing.

:func:`align` takes the nodes of a candidate group and the values it must write, and returns
a :class:`Domain` or the reason none exists. The segmenter calls it on every merge it tries;
the code generator reads the result.

Invariants of a returned domain: every tensor value read or written by the group is aligned;
non-``None`` dims of a value are distinct and have the domain dim's size; each reduction's
reduced dims map exactly onto the domain's reduced dims of size > 1; every written value covers
every domain dim of size > 1 of its space (all dims, or all non-reduced dims for values that
do not vary along the reduced dims), so no element is written twice.
"""
from __future__ import annotations

import dataclasses
from typing import Sequence

from .ir.graph import Node, Size, Value, is_one, sizes_equal
from .ir.ops import REGISTRY

Dims = tuple  # tuple[int | None, ...]


@dataclasses.dataclass
class Domain:
    """The domain of one fusion group.

    Attributes:
        sizes: the domain's sizes (``int`` or ``sympy.Expr``).
        reduced: sorted domain dims that the group's reductions reduce (empty for pointwise).
        dims: for each tensor value of the group, its dims' domain dims (``None``: size 1).
    """

    sizes: tuple[Size, ...]
    reduced: tuple[int, ...]
    dims: dict[Value, Dims]
    #: the value whose shape and dims define the domain (its dims are ``0..rank-1``), and
    #: whether propagating from it alone placed every value (no part of the group needed a
    #: seed of its own); :func:`extend` grows such a domain instead of aligning again
    seed: Value | None = dataclasses.field(default=None, compare=False, repr=False)
    from_seed: bool = dataclasses.field(default=False, compare=False, repr=False)

    def varies_along_reduced(self, v: Value) -> bool:
        """True when ``v`` changes along a reduced dim (it lives in the [x, r] space)."""
        return any(d is not None and d in self.reduced for d in self.dims[v])

    def __str__(self) -> str:
        sizes = ", ".join(f"{s}{'*' if i in self.reduced else ''}" for i, s in enumerate(self.sizes))
        return f"domain[{sizes}]"


class _Conflict(Exception):
    pass


def _shape(v: Value):
    return v.meta.shape


def _tensor_inputs(node: Node) -> list[Value]:
    return [x for x in node.inputs if isinstance(x, Value) and x.meta is not None]


class _Aligner:
    def __init__(self, sizes: Sequence[Size], reduced: Sequence[int]):
        self.sizes = tuple(sizes)
        self.reduced = tuple(sorted(reduced))
        self.dims: dict[Value, Dims] = {}
        self.changed = False
        self._ones: dict[Value, tuple[bool, ...]] = {}  # per value, which of its sizes are 1

    def assign(self, v: Value, dims: Dims) -> None:
        if v.meta is None:
            return
        shape = _shape(v)
        if len(dims) != len(shape):
            raise _Conflict(f"{v} rank mismatch")
        ones = self._ones.get(v)
        if ones is None:  # a value is assigned again at every pass of the propagation
            ones = self._ones[v] = tuple([is_one(s) for s in shape])
        dims = tuple([None if one else d for one, d in zip(ones, dims)])
        old = self.dims.get(v)
        if old == dims:  # checked when first assigned (the checks read only v, dims and the sizes)
            return
        for s, d, one in zip(shape, dims, ones):
            if d is None:
                if not one:
                    raise _Conflict(f"{v} has a size-{s} dim that maps to no domain dim")
            elif not sizes_equal(s, self.sizes[d]):
                raise _Conflict(f"{v} size {s} does not match domain dim {d} of size {self.sizes[d]}")
        known = [d for d in dims if d is not None]
        if len(set(known)) != len(known):
            raise _Conflict(f"{v} maps two dims onto one domain dim")
        if old is not None:
            raise _Conflict(f"{v} aligned two ways: {old} and {dims}")
        self.dims[v] = dims
        self.changed = True

    def known(self, v: Value) -> Dims | None:
        return self.dims.get(v)

    # -- rules: backward (output known -> inputs) and forward (inputs known -> output)

    def backward(self, node: Node) -> None:
        kind = REGISTRY[node.op].kind
        outs = [o for o in node.outputs if o in self.dims]
        if not outs:
            return
        od = self.dims[outs[0]]
        out = outs[0]
        if kind in ("pointwise",):
            ro = len(od)
            for x in _tensor_inputs(node):
                rx = x.meta.rank
                self.assign(x, tuple(od[j + ro - rx] for j in range(rx)))
        elif kind == "reduction":
            x = node.inputs[0]
            rdims = node.attrs["dims"]
            kept = [d for d in range(x.meta.rank) if d not in rdims]
            if node.attrs["keepdim"]:
                kept_domain = [od[d] for d in kept]
            else:
                kept_domain = list(od)
            if len(rdims) != len(self.reduced):
                raise _Conflict("reduction over a different number of dims than the group's")
            result: list = [None] * x.meta.rank
            for d, k in zip(kept, kept_domain):
                result[d] = k
            for d, r in zip(rdims, self.reduced):
                result[d] = r
            self.assign(x, tuple(result))
        elif kind == "layout":
            self._layout_backward(node, out, od)

    def forward(self, node: Node) -> None:
        kind = REGISTRY[node.op].kind
        ins = _tensor_inputs(node)
        if kind == "pointwise":
            # known inputs may determine the output alone (x [N, C] known, bias [C] not yet)
            known = [x for x in ins if x in self.dims]
            out = node.output
            ro = out.meta.rank
            result = []
            for oj in range(ro):
                found = None
                for x in known:
                    j = oj - (ro - x.meta.rank)
                    if j >= 0 and self.dims[x][j] is not None:
                        found = self.dims[x][j]
                        break
                if found is None and not is_one(out.meta.shape[oj]):
                    return  # a broadcast the inputs do not determine
                result.append(found)
            self.assign(out, tuple(result))
            return
        if any(x not in self.dims for x in ins):
            return
        if kind == "reduction":
            x = node.inputs[0]
            xd = self.dims[x]
            rdims = node.attrs["dims"]
            if node.attrs["keepdim"]:
                od = tuple(None if d in rdims else xd[d] for d in range(len(xd)))
            else:
                od = tuple(xd[d] for d in range(len(xd)) if d not in rdims)
            for o in node.outputs:
                self.assign(o, od)
        elif kind == "layout":
            self._layout_forward(node, self.dims[ins[0]])

    def _layout_backward(self, node: Node, out: Value, od: Dims) -> None:
        x = node.inputs[0]
        op, at = node.op, node.attrs
        xs = _shape(x)
        if op == "permute":
            res = [None] * len(od)
            for k, p in enumerate(at["dims"]):
                res[p] = od[k]
            self.assign(x, tuple(res))
        elif op == "unsqueeze":
            d = at["dim"]
            self.assign(x, od[:d] + od[d + 1:])
        elif op == "squeeze":
            squeezed = _squeezed_dims(x, at["dims"])
            it = iter(od)
            self.assign(x, tuple(None if d in squeezed else next(it) for d in range(len(xs))))
        elif op in ("expand",):
            off = len(od) - len(xs)
            self.assign(x, tuple(od[j + off] for j in range(len(xs))))
        elif op == "broadcast_in_dim":
            self.assign(x, tuple(od[b] for b in at["broadcast_dims"]))
        elif op in ("reshape", "alias"):
            xmap = _reshape_map(xs, _shape(out))
            res = [None] * len(xs)
            for xi, oi in xmap.items():
                res[xi] = od[oi]
            self.assign(x, tuple(res))

    def _layout_forward(self, node: Node, xd: Dims) -> None:
        out = node.output
        op, at = node.op, node.attrs
        x = node.inputs[0]
        os_ = _shape(out)
        if op == "permute":
            self.assign(out, tuple(xd[p] for p in at["dims"]))
        elif op == "unsqueeze":
            d = at["dim"]
            self.assign(out, xd[:d] + (None,) + xd[d:])
        elif op == "squeeze":
            squeezed = _squeezed_dims(x, at["dims"])
            self.assign(out, tuple(xd[d] for d in range(len(xd)) if d not in squeezed))
        elif op in ("expand", "broadcast_in_dim"):
            if op == "expand":
                off = len(os_) - len(xd)
                src = {j + off: xd[j] for j in range(len(xd))}
            else:
                src = {b: xd[k] for k, b in enumerate(at["broadcast_dims"])}
            res = []
            for oj in range(len(os_)):
                d = src.get(oj)
                if d is None and not is_one(os_[oj]):
                    return
                res.append(d)
            self.assign(out, tuple(res))
        elif op in ("reshape", "alias"):
            xmap = _reshape_map(_shape(x), os_)
            res = [None] * len(os_)
            for xi, oi in xmap.items():
                res[oi] = xd[xi]
            self.assign(out, tuple(res))


def _propagate(a: _Aligner, nodes, group_size: int) -> None:
    for _ in range(2 * group_size + 2):
        a.changed = False
        for n in reversed(nodes):
            a.backward(n)
        for n in nodes:
            a.forward(n)
        if not a.changed:
            break


def _seed_unconnected(a: _Aligner, nodes, reductions) -> bool:
    """Align one value not reached from the seed: a reduction input with the group's reduced
    dims, or a value with exactly the domain's shape. Returns whether it aligned one."""
    n_dom = len(a.sizes)
    kept = [d for d in range(n_dom) if d not in a.reduced]
    for r in reductions:
        x = r.inputs[0]
        if x in a.dims or x.meta.rank != n_dom or len(r.attrs["dims"]) != len(a.reduced):
            continue
        dims = [None] * n_dom
        for d, dd in zip(r.attrs["dims"], a.reduced):
            dims[d] = dd
        for d, dd in zip([d for d in range(n_dom) if d not in r.attrs["dims"]], kept):
            dims[d] = dd
        a.assign(x, tuple(dims))
        return True
    for n in nodes:
        for o in n.outputs:
            if o.meta is not None and o not in a.dims and o.meta.rank == n_dom and all(
                    sizes_equal(s, t) for s, t in zip(o.meta.shape, a.sizes)):
                a.assign(o, tuple(range(n_dom)))
                return True
    return False


def _squeezed_dims(x: Value, dims) -> set[int]:
    shape = _shape(x)
    cand = range(len(shape)) if dims is None else dims
    return {d for d in cand if is_one(shape[d])}


def _reshape_map(xs, os_) -> dict[int, int]:
    """Map the non-1 dims of ``xs`` to those of ``os_`` when a reshape only adds/removes 1s.

    Raises:
        _Conflict: the reshape merges or splits dims (it moves elements between dims).
    """
    xn = [i for i, s in enumerate(xs) if not is_one(s)]
    on = [i for i, s in enumerate(os_) if not is_one(s)]
    if len(xn) != len(on) or not all(sizes_equal(xs[a], os_[b]) for a, b in zip(xn, on)):
        raise _Conflict("reshape that merges or splits dims")
    return dict(zip(xn, on))


def group_values(nodes: Sequence[Node]) -> tuple[list[Value], list[Value]]:
    """(external inputs, values produced) of a node set, each in first-seen order."""
    produced: list[Value] = []
    pset: set[Value] = set()
    for n in nodes:
        for o in n.outputs:
            produced.append(o)
            pset.add(o)
    inputs: list[Value] = []
    seen: set[Value] = set()
    for n in nodes:
        for x in n.inputs:
            if isinstance(x, Value) and x not in pset and x not in seen:
                seen.add(x)
                inputs.append(x)
    return inputs, produced


def align(nodes: Sequence[Node], outputs: Sequence[Value]) -> Domain | str:
    """Find the domain of the candidate group ``nodes`` (topologically ordered registry nodes).

    Args:
        nodes: the group's nodes.
        outputs: the values the group must write (used outside it).

    Returns:
        The :class:`Domain`, or a string saying why the nodes cannot share one kernel.
    """
    reductions = [n for n in nodes if REGISTRY[n.op].kind == "reduction"]
    reason = "no value to define a domain"
    for seed, rdims in _seeds(nodes, reductions):
        result = _align_with(nodes, outputs, seed, rdims, reductions)
        if isinstance(result, Domain):
            return result
        reason = result
    return reason


def extend(known: Domain, nodes: Sequence[Node], outputs: Sequence[Value], added: Sequence[Node]) -> Domain | None:
    """:func:`align` of ``nodes``, a group whose nodes but ``added`` had the domain ``known``,
    computed from ``known``: when the grown group is seeded by ``known``'s seed and ``known``
    placed every value from it alone, propagating from that seed places the old values as it
    did before, so only the rules of ``added`` can place anything new or find a conflict, and
    only they are run. A group that aligns this way gets the domain :func:`align` would give
    it (a successful alignment is the unique one its seed forces).

    Args:
        known: the domain of ``nodes`` without ``added``.
        nodes: the grown group, in graph order.
        outputs: the values it must write.
        added: its nodes that were not in ``known``'s group, in graph order.

    Returns:
        The domain, or ``None`` where this cannot decide (another seed, a conflict, a value not
        placed, an output that does not cover the domain): :func:`align` then says why, in its
        own words.
    """
    if known.seed is None or not known.from_seed:
        return None
    reductions = [n for n in nodes if REGISTRY[n.op].kind == "reduction"]
    if reductions:
        first, rdims = reductions[0].inputs[0], reductions[0].attrs["dims"]
    else:  # _seeds' first without sorting them all: a pointwise group's seed moves with each node it gains
        tensors = [o for n in reversed(nodes) for o in n.outputs if o.meta is not None]
        first, rdims = (max(tensors, key=lambda t: t.meta.rank) if tensors else None), ()
    if first is not known.seed or tuple(sorted(rdims)) != known.reduced:
        return None
    a = _Aligner(known.sizes, known.reduced)
    a.dims = dict(known.dims)
    try:
        seeded = _place(a, nodes, reductions, added)
    except _Conflict:
        return None
    result = _checked(a, nodes, outputs, reductions)
    if not isinstance(result, Domain):
        return None
    result.seed, result.from_seed = known.seed, not seeded
    return result


def _seeds(nodes: Sequence[Node], reductions: list) -> list:
    """The values :func:`align` tries to define the domain with, in order, each with the dims
    the group reduces: the first reduction's input; for a pointwise group, outputs of the
    largest rank, of up to three shapes, the last-computed first."""
    if reductions:
        return [(reductions[0].inputs[0], tuple(reductions[0].attrs["dims"]))]
    seen_shapes = []
    candidates = []
    tensors = [o for n in reversed(nodes) for o in n.outputs if o.meta is not None]
    for v in sorted(tensors, key=lambda t: -t.meta.rank):
        if any(len(s) == len(v.meta.shape) and all(sizes_equal(a, b) for a, b in zip(s, v.meta.shape))
               for s in seen_shapes):
            continue
        seen_shapes.append(v.meta.shape)
        candidates.append((v, ()))
        if len(candidates) >= 3:
            break
    return candidates


def _align_with(nodes, outputs, seed: Value, rdims, reductions) -> Domain | str:
    a = _Aligner(seed.meta.shape, rdims)
    try:
        a.assign(seed, tuple(range(seed.meta.rank)))
        from_seed = not _place(a, nodes, reductions, nodes)
    except _Conflict as e:
        return str(e)
    result = _checked(a, nodes, outputs, reductions)
    if isinstance(result, Domain):
        result.seed, result.from_seed = seed, from_seed
    return result


def _place(a: _Aligner, nodes, reductions, rules) -> bool:
    """Propagate with the rules of ``rules`` (of ``nodes``) until nothing changes, seeding the
    parts of ``nodes`` not connected to what is placed (horizontally fused siblings) one by
    one. Returns whether such a seed was needed.

    Raises:
        _Conflict: a value placed two ways, or with sizes the domain does not have.
    """
    seeded = False
    while True:
        _propagate(a, rules, len(nodes))
        if not _seed_unconnected(a, nodes, reductions):
            return seeded
        seeded = True


def _checked(a: _Aligner, nodes, outputs, reductions) -> Domain | str:
    """The domain ``a`` placed, or why it is not one (see the module's invariants)."""
    inputs, produced = group_values(nodes)
    for v in inputs + produced:
        if v.meta is not None and v not in a.dims:
            return f"{v} could not be placed in the domain"
    dom = Domain(sizes=a.sizes, reduced=a.reduced, dims=a.dims)
    reduced_big = {r for r in dom.reduced if not is_one(dom.sizes[r])}
    kept_big = {d for d in range(len(dom.sizes)) if d not in dom.reduced and not is_one(dom.sizes[d])}
    for r in reductions:
        xd = a.dims[r.inputs[0]]
        mapped = {xd[d] for d in r.attrs["dims"]} - {None}
        if mapped != reduced_big:
            return f"reduction {r.outputs[0]} reduces other dims than the group's"
        if any(xd[d] in dom.reduced for d in range(len(xd)) if d not in r.attrs["dims"] and xd[d] is not None):
            return f"reduction {r.outputs[0]} keeps a reduced dim"
    randoms = [o for n in nodes if REGISTRY[n.op].kind == "random" for o in n.outputs]
    for v in list(outputs) + randoms:
        if v.meta is None:
            continue
        covered = {d for d in a.dims[v] if d is not None}
        if covered & set(dom.reduced):
            need = kept_big | reduced_big
        else:
            need = kept_big
        if covered != need:
            if v in randoms:
                return f"random values {v} do not cover the domain (elements would share a counter)"
            return f"output {v} does not cover the domain (it would be written more than once)"
    return dom
