"""Concatenation in a fusion: ``fd.ops.cat`` as a select over a stacked dim, and the rewrite
that keeps its readers in the same kernel.

A kernel's domain has one index per element, so a concatenation of ``n`` tensors shaped
``[..., d, ...]`` along a dim is defined, as the compiler's ATen pass
:func:`~torchfuse.passes.concat.equal_cats_as_selects` does, as a select over the *stacked*
shape ``[..., n, d, ...]``: ``where(i == 0, x0', where(i == 1, x1', ... x{n-1}'))`` (``xk'``:
``xk`` unsqueezed before the dim, broadcast along the new one; ``i``: an ``arange(n)`` along
it), reshaped to the concatenation's ``[..., n * d, ...]``. A select passes its operand's value
through (signed zeros included), and code generation loads each operand only on the lanes of
its branch, so each is read once.

A reshape that merges dims ends a fusion group, so the readers of that reshape would run as a
second kernel. :func:`compute_in_stacked_domain` (run when a definition is finished) moves the
merge past them instead: the pointwise ops that read the concatenation (or a reshape of it
that merges more dims: GPT-J's interleaved ``stack(...).flatten(-2)``), and those computing
their other operands, are applied again over the stacked shape (their inputs split with a
reshape, a view of the input, or given size-1 dims where they broadcast), and each output is
the merge of its stacked value, a view of the kernel's result. The values are the
same element for element; only the index space changes.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

import torch

from ..ir import ops as registry
from ..ir.graph import Value
from ..passes.concat import dim_groups
from .apply import describe
from .errors import fail
from .sizes import SizeMismatch
from .tensor import FusionScalar, FusionTensor

if TYPE_CHECKING:
    from .definition import Fusion

aten = torch.ops.aten


def cat(fusion: "Fusion", tensors: Sequence, dim: int = 0) -> FusionTensor:
    """The concatenation of ``tensors`` along ``dim`` (see the module docstring).

    Raises:
        DefinitionError: no tensor, tensors of different shapes or devices of sizes (dims that
            cannot be shown equal), a 0-dim tensor, or ``dim`` out of range.
        DefinitionTypeError: an operand that is not a tensor of this fusion, or tensors of
            different dtypes.
    """
    op = "cat"
    tensors = list(tensors) if isinstance(tensors, (list, tuple)) else [tensors]
    if not tensors:
        fail(op, "takes at least one tensor")
    for k, t in enumerate(tensors):
        fusion.ops._tensor(op, f"tensors[{k}]", t)
    first = tensors[0]
    if first.ndim == 0:
        fail(op, f"operand 'tensors[0]' ({describe(first)}) is 0-dim; a concatenation needs a dim")
    if not isinstance(dim, int) or not -first.ndim <= dim < first.ndim:
        fail(op, f"dim {dim!r} is out of range for operands of rank {first.ndim}")
    dim %= first.ndim
    for k, t in enumerate(tensors[1:], 1):
        if t.dtype != first.dtype:
            fail(op, f"operand 'tensors[{k}]' ({describe(t)}) has dtype {t.dtype}, operand 'tensors[0]' "
                     f"({describe(first)}) {first.dtype}; cast them to one dtype first", type_error=True)
        same = t.ndim == first.ndim
        for d in range(first.ndim if same else 0):
            try:
                fusion.sizes.unify(t.shape[d], first.shape[d])
            except SizeMismatch:
                same = False
        if not same:
            fail(op, f"operand 'tensors[{k}]' ({describe(t)}) does not have the shape of operand 'tensors[0]' "
                     f"({describe(first)}); a fusion concatenates tensors of one shape only (RoPE's two halves); "
                     f"concatenate others outside the fusion and pass the result as an input")
    if len(tensors) == 1:
        return _copy(fusion, first)
    n = len(tensors)
    parts = [fusion.ops.unsqueeze(t, dim) for t in tensors]
    index = fusion.applier.apply(op, [aten.arange.default], (n,), {"dtype": torch.int64}, shapes=[[n]])[0]
    index = fusion.ops.broadcast_in_dim(index, [1] * dim + [n] + [1] * (first.ndim - dim), [dim])
    select = parts[-1]
    for k in range(n - 2, -1, -1):
        select = fusion.ops.where(fusion.ops.eq(index, k), parts[k], select)
    merged = fusion.ops.reshape(select, list(first.shape[:dim]) + [n * first.shape[dim]] + list(first.shape[dim + 1:]))
    fusion.stacked.append((merged.value, select.value, dim))
    return merged


def _copy(fusion: "Fusion", t: FusionTensor) -> FusionTensor:
    """A concatenation of one tensor: a new tensor of its values (eager's ``cat`` copies)."""
    return fusion.applier.apply("cat", [aten.clone.default], (t,))[0]


def compute_in_stacked_domain(fusion: "Fusion") -> int:
    """Apply the readers of each concatenation over its stacked shape (see the module
    docstring), where every value they compute is read only by one another or is an output.

    Returns:
        The number of concatenations whose readers were moved.
    """
    done = 0
    for merged, stacked, at in fusion.stacked:
        if _move_readers(fusion, merged, stacked, at):
            done += 1
    return done


def _readers(fusion: "Fusion") -> dict[Value, list]:
    out: dict[Value, list] = {}
    for node in fusion.nodes:
        for v in node.input_values():
            out.setdefault(v, []).append(node)
    return out


def _pointwise(node) -> bool:
    return node.op is not None and registry.REGISTRY[node.op].kind == "pointwise"


def _chain_end(fusion: "Fusion", merged: Value, readers: dict) -> Value:
    """The last of the reshapes that ``merged`` reaches through, each the only reader of the
    one before and not an output (GPT-J's ``stack(...).flatten(-2)``); ``merged`` itself if
    none."""
    top = merged
    while top not in fusion.outputs:
        users = readers.get(top, [])
        if len(users) != 1 or users[0].op != "reshape" or users[0].output is None:
            break
        top = users[0].output
    return top


def _move_readers(fusion: "Fusion", merged: Value, stacked: Value, at: int) -> bool:
    readers = _readers(fusion)
    find = fusion.sizes.find
    top = _chain_end(fusion, merged, readers)
    shape = [find(s) for s in top.meta.shape]
    # the stacked shape (the merged one with the concatenation's dim split in two), cut into
    # one group of dims per dim of the readers' shape
    groups = dim_groups([find(s) for s in stacked.meta.shape], shape)
    if groups is None:
        return False

    def same_shape(v: Value) -> bool:
        return v.meta is not None and [find(s) for s in v.meta.shape] == shape

    region: list = []  # pointwise nodes computing, over the readers' shape, from the concatenation
    inside = {top}
    for node in fusion.nodes:
        if _pointwise(node) and any(v in inside for v in node.input_values()) and same_shape(node.output):
            region.append(node)
            inside.add(node.output)
    if not region:
        return False
    outputs = set(fusion.outputs)
    for v in inside:
        if any(r not in region for r in readers.get(v, [])) or (v is top and v in outputs):
            return False  # a value read elsewhere would be computed twice, or written out as well
    new: dict[Value, Value] = {top: stacked}
    again: set = set()  # producers of operands applied over the stacked shape as well

    def in_stacked(v: Any) -> Any:
        """``v`` (an operand of a moved node) over the stacked shape."""
        if not isinstance(v, Value) or v.meta is None or v.meta.rank == 0:
            return v
        if v in new:
            return new[v]
        offset = len(shape) - v.meta.rank  # (operands broadcast from the right, as the replay's)
        target = []
        for i, s in enumerate(v.meta.shape):
            group = groups[offset + i]
            target += [1] * len(group) if find(s) == 1 else group
        if target == [find(s) for s in v.meta.shape]:
            out = v
        elif (v.producer is not None and _pointwise(v.producer) and same_shape(v)
              and all(r in region or r in again for r in readers.get(v, []))):
            again.add(v.producer)  # (its operands' producers, read by it alone, move too)
            out = _reapply(fusion, v.producer, in_stacked)
        else:  # a view of an input, or size-1 dims added (free in a kernel)
            out = fusion.ops.reshape(FusionTensor(fusion, v), target).value
        new[v] = out
        return out

    for node in region:
        new[node.output] = _reapply(fusion, node, in_stacked)
    fusion.outputs = [fusion.ops.reshape(FusionTensor(fusion, new[o]), shape).value if o in new else o
                      for o in fusion.outputs]
    return True


def _reapply(fusion: "Fusion", node, mapped) -> Value:
    """Apply ``node``'s op again with each operand replaced by ``mapped(operand)``."""

    def handle(x):
        if isinstance(x, Value):
            x = mapped(x)
            return FusionTensor(fusion, x) if x.meta is not None else FusionScalar(fusion, x)
        if isinstance(x, (list, tuple)):
            return type(x)(handle(y) for y in x)
        return x

    args = handle(tuple(node.args))
    kwargs = {k: handle(v) for k, v in node.kwargs.items()}
    return fusion.applier.apply(node.source or node.op, [node.target], args, kwargs, strict_rank=False)[0].value
