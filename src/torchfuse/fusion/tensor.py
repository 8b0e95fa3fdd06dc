"""Handles to the values of a fusion being defined.

A :class:`FusionTensor` stands for a tensor that exists only when the fusion runs: it knows
its dtype, rank and symbolic sizes, and its Python operators apply ops of the fusion
(``x * w + b`` is ``fd.ops.add(fd.ops.mul(x, w), b)``). A :class:`FusionScalar` stands for a
number given at each execution (a runtime kernel argument, so changing it recompiles nothing).
Neither holds data: converting one to ``bool`` or a number raises ``TypeError``.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import sympy
import torch

from ..ir.graph import Value

if TYPE_CHECKING:
    from .definition import Fusion


class FusionScalar:
    """A number supplied at execution (``fd.define_scalar``).

    Attributes:
        fusion: the fusion it belongs to.
        value: its IR value (``meta`` is ``None``; ``example`` the Python type's sample).
    """

    __slots__ = ("fusion", "value")

    def __init__(self, fusion: "Fusion", value: Value):
        self.fusion = fusion
        self.value = value

    @property
    def name(self) -> str:
        return self.value.name

    @property
    def dtype(self) -> type:
        return type(self.value.example)

    def __repr__(self) -> str:
        return f"FusionScalar({self.name}: {self.dtype.__name__})"

    def __bool__(self):
        raise TypeError(f"{self!r} has no value while the fusion is defined")

    # ATen takes a scalar second only: swap the operands where that is exact in IEEE arithmetic
    # (s - x as -x + s: -(x - s) would be -0.0 where x equals s)
    def __add__(self, other): return self.fusion.ops.add(other, self)
    def __mul__(self, other): return self.fusion.ops.mul(other, self)
    def __sub__(self, other): return self.fusion.ops.add(self.fusion.ops.neg(other), self)


class FusionTensor:
    """A tensor of a fusion being defined: an input, or the result of an op.

    Attributes:
        fusion: the fusion it belongs to.
        value: its IR value (:class:`~torchfuse.ir.graph.Value` with ``meta``).
    """

    __slots__ = ("fusion", "value")

    def __init__(self, fusion: "Fusion", value: Value):
        self.fusion = fusion
        self.value = value

    # ------------------------------------------------------------------ metadata
    @property
    def name(self) -> str:
        return self.value.name

    @property
    def dtype(self) -> torch.dtype:
        return self.value.meta.dtype

    @property
    def ndim(self) -> int:
        return self.value.meta.rank

    @property
    def shape(self) -> tuple:
        """The sizes: ``1`` for broadcast dims, ints for static sizes, ``sympy`` symbols (or
        expressions) for sizes bound at execution. They can be passed wherever an op takes
        sizes (``broadcast_in_dim``, ``reshape``, ``full``) and as scalar operands."""
        return tuple(self.fusion.sizes.find(s) for s in self.value.meta.shape)

    def size(self, dim: int):
        return self.shape[dim]

    def __repr__(self) -> str:
        dt = str(self.dtype).replace("torch.", "")
        return f"FusionTensor({self.name}: {dt}[{', '.join(str(s) for s in self.shape)}])"

    def __bool__(self):
        raise TypeError(f"{self!r} has no value while the fusion is defined (use fd.ops.where for data-"
                        "dependent choices)")

    __hash__ = object.__hash__  # (by identity: ``==`` is the fusion's elementwise comparison)

    # ------------------------------------------------------------------ operators
    def __add__(self, other): return self.fusion.ops.add(self, other)
    def __radd__(self, other): return self.fusion.ops.add(other, self)
    def __sub__(self, other): return self.fusion.ops.sub(self, other)
    def __rsub__(self, other): return self.fusion.ops.sub(other, self)
    def __mul__(self, other): return self.fusion.ops.mul(self, other)
    def __rmul__(self, other): return self.fusion.ops.mul(other, self)
    def __truediv__(self, other): return self.fusion.ops.div(self, other)
    # as torch.Tensor's: a number divided by a tensor is the tensor's reciprocal times the
    # number, each rounded to the tensor's dtype (3 / x of fp16 differs from a division)
    def __rtruediv__(self, other): return self.fusion.ops.mul(self.fusion.ops.reciprocal(self), other)
    def __floordiv__(self, other): return self.fusion.ops.div(self, other, rounding_mode="floor")
    def __rfloordiv__(self, other): return self.fusion.ops.div(other, self, rounding_mode="floor")
    def __mod__(self, other): return self.fusion.ops.remainder(self, other)
    def __rmod__(self, other): return self.fusion.ops.remainder(other, self)
    def __pow__(self, other): return self.fusion.ops.pow(self, other)
    def __rpow__(self, other): return self.fusion.ops.pow(other, self)
    def __neg__(self): return self.fusion.ops.neg(self)
    def __abs__(self): return self.fusion.ops.abs(self)
    def __lt__(self, other): return self.fusion.ops.lt(self, other)
    def __le__(self, other): return self.fusion.ops.le(self, other)
    def __gt__(self, other): return self.fusion.ops.gt(self, other)
    def __ge__(self, other): return self.fusion.ops.ge(self, other)
    def __eq__(self, other): return self.fusion.ops.eq(self, other)  # type: ignore[override]
    def __ne__(self, other): return self.fusion.ops.ne(self, other)  # type: ignore[override]
    def __and__(self, other): return self.fusion.ops.bitwise_and(self, other)
    def __or__(self, other): return self.fusion.ops.bitwise_or(self, other)
    def __xor__(self, other): return self.fusion.ops.bitwise_xor(self, other)
    def __rand__(self, other): return self.fusion.ops.bitwise_and(other, self)
    def __ror__(self, other): return self.fusion.ops.bitwise_or(other, self)
    def __rxor__(self, other): return self.fusion.ops.bitwise_xor(other, self)
    def __invert__(self): return self.fusion.ops.bitwise_not(self)

    # a few methods, for code written against torch.Tensor
    def to(self, dtype: torch.dtype) -> "FusionTensor":
        return self.fusion.ops.cast(self, dtype)

    def float(self) -> "FusionTensor":
        return self.fusion.ops.cast(self, torch.float32)


def is_size(x: Any) -> bool:
    """A symbolic size (an expression in size symbols), as ``FusionTensor.shape`` gives."""
    return isinstance(x, sympy.Expr) and not x.is_Integer
