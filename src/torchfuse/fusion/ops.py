"""The op namespace of a fusion definition: ``fd.ops``.

Pointwise math, comparisons and logic come from the op registry (:mod:`torchfuse.ir.ops`):
every registry pointwise op with one or two tensor operands is a method here of the same
name, with PyTorch's type promotion and a docstring generated from its entry. The rest of
the namespace:

* ``cast``, ``where``, ``clamp``;
* reductions: ``sum``, ``mean``, ``amax``, ``amin``, ``prod``, ``any``, ``all``, ``var``,
  ``var_mean``, ``argmax``, ``argmin``;
* layout: ``broadcast_in_dim``, ``expand``, ``reshape``, ``permute``, ``transpose``,
  ``squeeze``, ``unsqueeze``, and ``cat`` of tensors of one shape (:mod:`.concat`);
* random numbers: ``rand_like``, ``randn_like``, ``bernoulli`` (Philox in the kernel, seeded
  from PyTorch's generator: ``torch.manual_seed`` reproduces them);
* constants: ``full``, ``full_like``, ``zeros_like``, ``ones_like``;
* building blocks composed of the above (:mod:`torchfuse.fusion.composites`): ``silu``,
  ``gelu``, ``softmax``, ``dropout``, ``layer_norm``, ``rms_norm``.

Every op checks its operands when applied and raises
:class:`~torchfuse.fusion.errors.DefinitionError` naming itself and the operand at fault.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

import torch

from ..ir import ops as registry
from . import composites
from .apply import describe
from .errors import fail
from .tensor import FusionTensor

if TYPE_CHECKING:
    from .definition import Fusion

aten = torch.ops.aten
prims = torch.ops.prims

#: registry pointwise ops that are not plain one- or two-operand functions (written below)
_WRITTEN_BY_HAND = {"cast", "clone", "copy", "where", "clamp", "true_divide", "div"}


class Ops(composites.Composites):
    """The ops of one fusion (``fd.ops``); each returns :class:`FusionTensor` handles."""

    def __init__(self, fusion: "Fusion"):
        self._fusion = fusion

    def _apply(self, op: str, overloads: Sequence, args: Sequence, kwargs: dict | None = None, **kw) -> list:
        return self._fusion.applier.apply(op, overloads, args, kwargs, **kw)

    def _tensor(self, op: str, slot: str, x: Any) -> FusionTensor:
        if not isinstance(x, FusionTensor):
            fail(op, f"operand '{slot}' ({describe(x)}) must be a tensor of this fusion", type_error=True)
        if x.fusion is not self._fusion:
            fail(op, f"operand '{slot}' ({describe(x)}) belongs to another fusion")
        return x

    # ------------------------------------------------------------------ pointwise
    def div(self, x, y, rounding_mode: str | None = None) -> FusionTensor:
        """``x / y`` (true division; integers promote to float), or rounded quotients with
        ``rounding_mode="trunc"`` or ``"floor"`` (aten.div)."""
        if rounding_mode is None:
            return self._apply("div", [aten.div.Tensor, aten.div.Scalar], (x, y))[0]
        return self._apply("div", [aten.div.Tensor_mode, aten.div.Scalar_mode], (x, y),
                           {"rounding_mode": rounding_mode})[0]

    def cast(self, x, dtype: torch.dtype) -> FusionTensor:
        """``x`` converted to ``dtype`` (prims.convert_element_type: PyTorch's rounding and
        wrapping)."""
        self._tensor("cast", "a", x)
        if not isinstance(dtype, torch.dtype):
            fail("cast", f"dtype must be a torch.dtype, got {dtype!r}", type_error=True)
        return self._apply("cast", [prims.convert_element_type.default], (x, dtype))[0]

    def where(self, condition, x, y) -> FusionTensor:
        """``x`` where the bool ``condition`` holds, else ``y`` (aten.where; numbers allowed
        for ``x`` and ``y``)."""
        return self._apply("where", registry.REGISTRY["where"].aten, (condition, x, y))[0]

    def clamp(self, x, min=None, max=None) -> FusionTensor:  # noqa: A002 - PyTorch's names
        """``x`` limited to ``[min, max]`` (numbers or tensors; either may be ``None``)."""
        if isinstance(min, FusionTensor) or isinstance(max, FusionTensor):
            return self._apply("clamp", [aten.clamp.Tensor], (x, min, max))[0]
        return self._apply("clamp", [aten.clamp.default], (x, min, max))[0]

    # ------------------------------------------------------------------ reductions
    def _dims(self, op: str, x: FusionTensor, dims) -> list[int]:
        self._tensor(op, "self", x)
        if dims is None:
            return list(range(x.ndim))
        dims = [dims] if isinstance(dims, int) else list(dims)
        out = []
        for d in dims:
            if not isinstance(d, int) or not -max(x.ndim, 1) <= d < max(x.ndim, 1):
                fail(op, f"dim {d!r} is out of range for operand 'self' ({describe(x)}) of rank {x.ndim}")
            out.append(d % max(x.ndim, 1))
        if len(set(out)) != len(out):
            fail(op, f"dims {dims} name a dim twice")
        return sorted(out)

    def sum(self, x, dims=None, keepdim: bool = False, dtype: torch.dtype | None = None) -> FusionTensor:
        """Sum over ``dims`` (default: all). Integer and bool inputs sum to int64, as in
        PyTorch; fp16/bf16 accumulate in fp32."""
        dims = self._dims("sum", x, dims)
        return self._apply("sum", [aten.sum.dim_IntList], (x, dims, keepdim), {"dtype": dtype} if dtype else {})[0]

    def mean(self, x, dims=None, keepdim: bool = False) -> FusionTensor:
        """Mean over ``dims`` (floating-point inputs)."""
        return self._apply("mean", [aten.mean.dim], (x, self._dims("mean", x, dims), keepdim))[0]

    def amax(self, x, dims=None, keepdim: bool = False) -> FusionTensor:
        """Largest element over ``dims`` (NaN propagates)."""
        return self._apply("amax", [aten.amax.default], (x, self._dims("amax", x, dims), keepdim))[0]

    def amin(self, x, dims=None, keepdim: bool = False) -> FusionTensor:
        """Smallest element over ``dims`` (NaN propagates)."""
        return self._apply("amin", [aten.amin.default], (x, self._dims("amin", x, dims), keepdim))[0]

    def prod(self, x, dim: int, keepdim: bool = False) -> FusionTensor:
        """Product over one dim."""
        (d,) = self._dims("prod", x, dim)
        return self._apply("prod", [aten.prod.dim_int], (x, d, keepdim))[0]

    def any(self, x, dims=None, keepdim: bool = False) -> FusionTensor:
        """Whether any element over ``dims`` is nonzero (bool)."""
        return self._apply("any", [aten.any.dims], (x, self._dims("any", x, dims), keepdim))[0]

    def all(self, x, dims=None, keepdim: bool = False) -> FusionTensor:
        """Whether every element over ``dims`` is nonzero (bool)."""
        return self._apply("all", [aten.all.dims], (x, self._dims("all", x, dims), keepdim))[0]

    def var(self, x, dims=None, correction: float = 1, keepdim: bool = False) -> FusionTensor:
        """Variance over ``dims`` with ``correction`` (1: Bessel's), by Welford's algorithm."""
        dims = self._dims("var", x, dims)
        return self._apply("var", [aten.var.correction], (x, dims), {"correction": correction, "keepdim": keepdim})[0]

    def var_mean(self, x, dims=None, correction: float = 1, keepdim: bool = False) -> tuple[FusionTensor, FusionTensor]:
        """``(variance, mean)`` over ``dims`` in one pass (Welford's algorithm)."""
        dims = self._dims("var_mean", x, dims)
        var, mean = self._apply("var_mean", [aten.var_mean.correction], (x, dims),
                                {"correction": correction, "keepdim": keepdim})
        return var, mean

    def argmax(self, x, dim: int, keepdim: bool = False) -> FusionTensor:
        """Index (int64) of the first largest element along ``dim`` (NaN counts as largest)."""
        (d,) = self._dims("argmax", x, dim)
        return self._apply("argmax", [aten.argmax.default], (x, d, keepdim))[0]

    def argmin(self, x, dim: int, keepdim: bool = False) -> FusionTensor:
        """Index (int64) of the first smallest element along ``dim``."""
        (d,) = self._dims("argmin", x, dim)
        return self._apply("argmin", [aten.argmin.default], (x, d, keepdim))[0]

    # ------------------------------------------------------------------ layout
    def broadcast_in_dim(self, x, shape: Sequence, broadcast_dims: Sequence[int]) -> FusionTensor:
        """``x`` seen with ``shape``: dim ``i`` of ``x`` becomes dim ``broadcast_dims[i]``
        (increasing); every other dim, and dims of ``x`` of size 1, repeat (no data moves).

        Raises:
            DefinitionError: ``broadcast_dims`` does not have one entry per dim of ``x``, is
                not increasing, or maps a dim onto a dim of another size.
        """
        op = "broadcast_in_dim"
        self._tensor(op, "a", x)
        shape, dims = list(shape), [int(d) for d in broadcast_dims]
        if len(dims) != x.ndim:
            fail(op, f"operand 'a' ({describe(x)}) has rank {x.ndim} but broadcast_dims {dims} has {len(dims)} entries")
        if any(not 0 <= d < len(shape) for d in dims) or sorted(set(dims)) != dims:
            fail(op, f"broadcast_dims {dims} must be increasing dims of the {len(shape)}-dim output shape")
        for i, d in enumerate(dims):
            self._fusion.applier.unify_dim(op, f"dim {i} of operand 'a' ({describe(x)})", x.shape[i], shape[d])
        return self._apply(op, [prims.broadcast_in_dim.default], (x, shape, dims), shapes=[shape])[0]

    def expand(self, x, shape: Sequence) -> FusionTensor:
        """``x`` repeated along its size-1 dims to ``shape`` (``-1`` keeps a size; new dims
        are added in front), as ``torch.Tensor.expand``."""
        op = "expand"
        self._tensor(op, "self", x)
        shape = list(shape)
        if len(shape) < x.ndim:
            fail(op, f"operand 'self' ({describe(x)}) has rank {x.ndim}, more than the {len(shape)} sizes given")
        off = len(shape) - x.ndim
        for i in range(x.ndim):
            if isinstance(shape[off + i], int) and shape[off + i] == -1:
                shape[off + i] = x.shape[i]
            else:
                self._fusion.applier.unify_dim(op, f"dim {i} of operand 'self' ({describe(x)})", x.shape[i], shape[off + i])
        return self._apply(op, [aten.expand.default], (x, shape), shapes=[shape])[0]

    def reshape(self, x, shape: Sequence) -> FusionTensor:
        """``x`` with another shape of the same number of elements (one ``-1`` allowed).

        Inside a kernel only reshapes that add or drop size-1 dims are free; one that merges
        or splits dims ends a fusion group (it runs as a view between kernels).

        Raises:
            DefinitionError: the element counts cannot be shown equal.
        """
        import sympy

        op = "reshape"
        self._tensor(op, "self", x)
        shape = list(shape)
        numel = sympy.Integer(1)
        for s in x.shape:
            numel = numel * s
        unknown = [i for i, s in enumerate(shape) if isinstance(s, int) and s == -1]
        if len(unknown) > 1:
            fail(op, f"shape {shape} has more than one -1")
        known = sympy.Integer(1)
        for i, s in enumerate(shape):
            if i not in unknown:
                if isinstance(s, int) and s < 1:
                    fail(op, f"shape {shape} has size {s}")
                known = known * self._fusion.sizes.find(s)
        if unknown:
            rest = sympy.cancel(numel / known)
            if sympy.fraction(rest)[1] != 1:
                fail(op, f"cannot infer -1 in {shape} for operand 'self' ({describe(x)}): {numel} / {known} is not a size")
            shape[unknown[0]] = int(rest) if rest.is_Integer else rest
        elif sympy.expand(numel - known) != 0:
            fail(op, f"shape {shape} has {known} elements, operand 'self' ({describe(x)}) has {numel}")
        for s in shape:
            if isinstance(s, int):
                self._fusion.sizes.declare_static(s)
        return self._apply(op, [aten.reshape.default], (x, shape), shapes=[shape])[0]

    def permute(self, x, dims: Sequence[int]) -> FusionTensor:
        """``x`` with its dims reordered: result dim ``i`` is dim ``dims[i]`` of ``x``."""
        self._tensor("permute", "self", x)
        dims = [int(d) % max(x.ndim, 1) for d in dims]
        if sorted(dims) != list(range(x.ndim)):
            fail("permute", f"dims {dims} are not a permutation of the {x.ndim} dims of operand 'self' ({describe(x)})")
        return self._apply("permute", [aten.permute.default], (x, dims))[0]

    def transpose(self, x, dim0: int, dim1: int) -> FusionTensor:
        """``x`` with two dims swapped."""
        self._tensor("transpose", "self", x)
        order = list(range(x.ndim))
        order[dim0], order[dim1] = order[dim1], order[dim0]
        return self.permute(x, order)

    def squeeze(self, x, dims: Sequence[int] | int) -> FusionTensor:
        """``x`` without the given dims, which must be broadcast dims (size 1)."""
        dims = self._dims("squeeze", x, dims)
        for d in dims:
            if self._fusion.sizes.find(x.shape[d]) != 1:
                fail("squeeze", f"dim {d} of operand 'self' ({describe(x)}) has size {x.shape[d]}, not 1")
        return self._apply("squeeze", [aten.squeeze.dims], (x, dims))[0]

    def unsqueeze(self, x, dim: int) -> FusionTensor:
        """``x`` with a new size-1 dim at ``dim``."""
        self._tensor("unsqueeze", "self", x)
        if not -x.ndim - 1 <= dim <= x.ndim:
            fail("unsqueeze", f"dim {dim} is out of range for operand 'self' ({describe(x)})")
        return self._apply("unsqueeze", [aten.unsqueeze.default], (x, dim % (x.ndim + 1)))[0]

    def cat(self, tensors: Sequence, dim: int = 0) -> FusionTensor:
        """The concatenation of ``tensors`` along ``dim`` (``torch.cat``), for tensors of one
        shape and dtype: ``n`` tensors ``[..., d, ...]`` give ``[..., n * d, ...]``. Defined as a
        select over the stacked shape ``[..., n, d, ...]``, which fuses with the tensors'
        producers and, where they are pointwise, with its readers (:mod:`.concat`); the
        values are the operands' own, bit for bit.

        Raises:
            DefinitionError: tensors of different shapes (concatenate those outside the
                fusion), a 0-dim tensor, ``dim`` out of range, or no tensor.
            DefinitionTypeError: tensors of different dtypes, or an operand that is not a
                tensor of this fusion.
        """
        from .concat import cat

        return cat(self._fusion, tensors, dim)

    # ------------------------------------------------------------------ random numbers
    def rand_like(self, x, dtype: torch.dtype | None = None) -> FusionTensor:
        """Uniform numbers in ``[0, 1)`` of ``x``'s shape (``x`` is read for its shape only)."""
        self._tensor("rand_like", "self", x)
        return self._apply("rand_like", [aten.rand_like.default], (x,), {"dtype": dtype} if dtype else {})[0]

    def randn_like(self, x, dtype: torch.dtype | None = None) -> FusionTensor:
        """Standard normal numbers of ``x``'s shape."""
        self._tensor("randn_like", "self", x)
        return self._apply("randn_like", [aten.randn_like.default], (x,), {"dtype": dtype} if dtype else {})[0]

    def bernoulli(self, x, p: float) -> FusionTensor:
        """Ones with probability ``p``, else zeros, of ``x``'s shape and dtype."""
        self._tensor("bernoulli", "self", x)
        return self._apply("bernoulli", [aten.bernoulli.p], (x, float(p)))[0]

    # ------------------------------------------------------------------ constants
    def full(self, shape: Sequence, value, dtype: torch.dtype = torch.float32) -> FusionTensor:
        """A tensor of ``shape`` (ints or sizes from inputs' ``.shape``) filled with ``value``."""
        for s in shape:
            if isinstance(s, int):
                self._fusion.sizes.declare_static(s)
        return self._apply("full", [aten.full.default], (list(shape), value), {"dtype": dtype}, shapes=[list(shape)])[0]

    def full_like(self, x, value, dtype: torch.dtype | None = None) -> FusionTensor:
        """A tensor of ``x``'s shape (and dtype unless given) filled with ``value``."""
        self._tensor("full_like", "self", x)
        return self._apply("full_like", [aten.full_like.default], (x, value), {"dtype": dtype} if dtype else {})[0]

    def zeros_like(self, x, dtype: torch.dtype | None = None) -> FusionTensor:
        return self.full_like(x, 0, dtype)

    def ones_like(self, x, dtype: torch.dtype | None = None) -> FusionTensor:
        return self.full_like(x, 1, dtype)


def _dtype_names(dtypes) -> str:
    return ", ".join(sorted(str(d).replace("torch.", "") for d in dtypes))


def _registry_method(opdef: registry.OpDef, nargs: int):
    overloads = list(opdef.aten)
    name = opdef.name

    if nargs == 1:
        def method(self, x):
            return self._apply(name, overloads, (x,))[0]
    elif name in ("add", "sub"):
        def method(self, x, y, alpha=1):
            return self._apply(name, overloads, (x, y), {"alpha": alpha} if alpha != 1 else {})[0]
    elif nargs == 2:
        def method(self, x, y):
            return self._apply(name, overloads, (x, y))[0]
    else:
        def method(self, x, y, z):
            return self._apply(name, overloads, (x, y, z))[0]
    promotion = opdef.promotion.name.lower() if opdef.promotion is not None and not callable(opdef.promotion) else "default"
    method.__name__ = name
    method.__doc__ = (f"Pointwise ``{name}`` ({', '.join(str(o) for o in overloads)}); type promotion: "
                      f"{promotion}; computes in {_dtype_names(opdef.dtypes)}.")
    return method


def _tensor_operands(overload) -> int:
    return sum(1 for a in overload._schema.arguments if not a.kwarg_only and "Tensor" in str(a.type))


#: the namespace's methods generated from the registry: name -> number of operands
FROM_REGISTRY: dict[str, int] = {}
for _opdef in registry.REGISTRY.values():
    if _opdef.kind != "pointwise" or _opdef.name in _WRITTEN_BY_HAND or hasattr(Ops, _opdef.name):
        continue
    _n = max(_tensor_operands(o) for o in _opdef.aten)
    if _n in (1, 2, 3):
        setattr(Ops, _opdef.name, _registry_method(_opdef, _n))
        FROM_REGISTRY[_opdef.name] = _n
