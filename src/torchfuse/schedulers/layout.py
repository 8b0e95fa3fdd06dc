"""Runtime layout analysis: from a group's domain and its tensors' actual strides to the
shape of the loops a kernel runs, and the part of it that changes the generated code.

Takes a :class:`~torchfuse.segment.FusionGroup`, the domain's sizes (ints) and every tensor's
strides at run time. Returns a :class:`KernelLayout` (hashable; it goes into the generated
source, so equal layouts share a compiled kernel) and the runtime arguments for it.

Steps: express each tensor's strides per domain dim (0 where it broadcasts); drop size-1
dims; split the rest into kept (x) and reduced (r) dims; order each set outermost-first by the
strides of a reference tensor (the first output for pointwise groups, the largest input that
varies along the reduced dims for reductions), so that the innermost loop index walks memory
with stride 1; merge neighbouring dims over which every tensor is contiguous. Sizes and the
strides that are neither 0 nor 1 stay runtime arguments, so a new batch size or sequence
length reuses the kernel.
"""
from __future__ import annotations

import dataclasses
from typing import Sequence

INT32_LIMIT = 2**31 - 1


@dataclasses.dataclass(frozen=True)
class TensorAccess:
    """How one tensor is addressed: a stride class per collapsed x dim and r dim.

    ``"0"``: broadcast, ``"1"``: unit stride, ``"g"``: a runtime stride argument.
    ``x_linear``/``r_linear``: the tensor is contiguous over all x (r) dims in loop order, so
    its x (r) offset is the linear loop index itself (lets Triton prove 16-byte accesses).
    """

    x: tuple[str, ...]
    r: tuple[str, ...]
    x_linear: bool
    r_linear: bool


@dataclasses.dataclass(frozen=True)
class KernelLayout:
    """The code-relevant result of layout analysis for one group (hashable).

    Attributes:
        n_x: number of collapsed kept dims.
        n_r: number of collapsed reduced dims.
        accesses: one :class:`TensorAccess` per tensor, group inputs first, then outputs.
        index64: offsets may exceed 2**31 - 1, so index arithmetic is 64-bit.
    """

    n_x: int
    n_r: int
    accesses: tuple[TensorAccess, ...]
    index64: bool


@dataclasses.dataclass
class RuntimeLayout:
    """A :class:`KernelLayout` with the sizes and strides of one call.

    Attributes:
        layout: the code-relevant part.
        x_sizes, r_sizes: collapsed loop extents, outermost first.
        strides: per tensor, its ``"g"`` strides in the order the kernel takes them
            (x dims then r dims).
        xnumel, rnumel: products of ``x_sizes`` and ``r_sizes``.
        r_inner: the reference tensor's unit-stride dim is a reduced dim (an inner reduction).
    """

    layout: KernelLayout
    x_sizes: tuple[int, ...]
    r_sizes: tuple[int, ...]
    strides: tuple[tuple[int, ...], ...]
    xnumel: int
    rnumel: int
    r_inner: bool


def _order(dims: list[int], ref: Sequence[int]) -> list[int]:
    # outermost first: larger reference stride first; broadcast (0) dims outermost
    return sorted(dims, key=lambda d: (-(ref[d] if ref[d] != 0 else 1 << 62), dims.index(d)))


def _collapse(order: list[int], sizes: Sequence[int], strides: Sequence[Sequence[int]]):
    """Merge neighbouring dims over which every tensor is contiguous; returns groups of dims."""
    groups: list[list[int]] = []
    for d in order:
        if groups:
            prev = groups[-1][-1]
            if all(st[prev] == st[d] * sizes[d] for st in strides):
                groups[-1].append(d)
                continue
        groups.append([d])
    return groups


def analyze(domain_sizes: Sequence[int], reduced: Sequence[int], tensor_strides: Sequence[Sequence[int]],
            reference: int) -> RuntimeLayout:
    """Analyze one call's layout.

    Args:
        domain_sizes: the domain's sizes at run time.
        reduced: the reduced domain dims.
        tensor_strides: per tensor (inputs, then outputs), its stride along each domain dim
            (0 where it broadcasts), in elements.
        reference: index into ``tensor_strides`` of the tensor whose layout orders the loops.

    Returns:
        The :class:`RuntimeLayout`.
    """
    n = len(domain_sizes)
    keep = [d for d in range(n) if domain_sizes[d] != 1]
    rset = set(reduced)
    xs = [d for d in keep if d not in rset]
    rs = [d for d in keep if d in rset]
    ref = tensor_strides[reference] if tensor_strides else [0] * n
    x_groups = _collapse(_order(xs, ref), domain_sizes, tensor_strides)
    r_groups = _collapse(_order(rs, ref), domain_sizes, tensor_strides)

    def size_of(g):
        p = 1
        for d in g:
            p *= domain_sizes[d]
        return p

    x_sizes = tuple(size_of(g) for g in x_groups)
    r_sizes = tuple(size_of(g) for g in r_groups)
    accesses = []
    runtime_strides = []
    index64 = False
    for st in tensor_strides:
        xst = [st[g[-1]] for g in x_groups]
        rst = [st[g[-1]] for g in r_groups]
        cls = lambda s: "0" if s == 0 else ("1" if s == 1 else "g")
        accesses.append(TensorAccess(
            x=tuple(cls(s) for s in xst), r=tuple(cls(s) for s in rst),
            x_linear=_linear(xst, x_sizes), r_linear=_linear(rst, r_sizes)))
        runtime_strides.append(tuple(s for s in xst + rst if s not in (0, 1)))
        span = sum((sz - 1) * abs(s) for sz, s in zip(x_sizes + r_sizes, xst + rst))
        if span >= INT32_LIMIT:
            index64 = True
    xnumel = 1
    for s in x_sizes:
        xnumel *= s
    rnumel = 1
    for s in r_sizes:
        rnumel *= s
    if xnumel * max(rnumel, 1) >= INT32_LIMIT:
        index64 = True
    r_inner = bool(rs) and any(ref[d] == 1 for d in rs)
    layout = KernelLayout(n_x=len(x_groups), n_r=len(r_groups), accesses=tuple(accesses), index64=index64)
    return RuntimeLayout(layout=layout, x_sizes=x_sizes, r_sizes=r_sizes, strides=tuple(runtime_strides),
                         xnumel=xnumel, rnumel=rnumel, r_inner=r_inner)


def _linear(strides: Sequence[int], sizes: Sequence[int]) -> bool:
    if not strides:
        return True
    if strides[-1] != 1:
        return False
    for i in range(len(strides) - 1):
        if strides[i] != strides[i + 1] * sizes[i + 1]:
            return False
    return True
