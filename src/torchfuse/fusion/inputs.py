"""Declared inputs of a fusion, and the check of real inputs against them at execution.

A tensor input is declared by dtype, one entry per dim (a new size symbol, a named size, a
static size, or a broadcast 1), and optionally its memory layout: ``dim_order`` (as
:meth:`torch.Tensor.dim_order`: dims from outermost, largest stride, to innermost) and
``contiguity`` (per dim: its stride is the next inner dim's stride times that dim's size, as
nvFuser's contiguity flags). The kernels read any strides they are given; a declared layout is
a contract that :func:`bind` checks, and it decides the layout PyTorch's meta functions see.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Sequence

import sympy
import torch

from ..ir import ops as registry
from ..ir.graph import TensorMeta
from .errors import DefinitionError, DefinitionTypeError
from .sizes import SizeTable

SCALAR_TYPES = {float: 0.5, int: 3, bool: True}


@dataclasses.dataclass(frozen=True)
class InputSpec:
    """One declared input.

    Attributes:
        name: its name in messages and IR text.
        dtype: a ``torch.dtype`` for tensors; ``float``, ``int`` or ``bool`` for scalars.
        shape: per dim ``1`` (broadcast), an ``int`` (static) or a ``sympy.Symbol``; ``None``
            for scalars.
        contiguity: per dim, whether the layout is checked to be dense there; ``None``: any.
        dim_order: dims from outermost to innermost.
    """

    name: str
    dtype: Any
    shape: tuple | None = None
    contiguity: tuple | None = None
    dim_order: tuple = ()

    @property
    def is_tensor(self) -> bool:
        return self.shape is not None


def declare_tensor(sizes: SizeTable, name: str, shape: Sequence, dtype: torch.dtype, contiguity, dim_order
                   ) -> tuple[InputSpec, TensorMeta]:
    """Check a tensor declaration; returns its spec and its symbolic metadata (on ``meta``).

    Args:
        shape: per dim: ``-1`` or ``None`` (a new size symbol), a ``str`` (a named size,
            shared by every dim of that name), ``1`` (a broadcast dim), an ``int`` > 1 (a
            static size), or a size from another input's ``.shape`` (the same size).
        contiguity: ``None`` (any layout), a bool for every dim, or one bool per dim.
        dim_order: ``None`` (row-major) or a permutation of the dims, outermost first.

    Raises:
        DefinitionTypeError: ``dtype`` cannot be loaded by a kernel.
        DefinitionError: a malformed shape, contiguity or dim order.
    """
    op = "define_tensor"
    if not isinstance(dtype, torch.dtype) or dtype not in registry.KERNEL_DTYPES:
        raise DefinitionTypeError(f"{op}: input '{name}' has dtype {dtype}, which kernels do not load; "
                                  f"use one of {sorted(str(d).replace('torch.', '') for d in registry.KERNEL_DTYPES)}")
    dims: list = []
    for d, entry in enumerate(shape):
        if entry is None or (isinstance(entry, int) and not isinstance(entry, bool) and entry == -1):
            dims.append(sizes.new())
        elif isinstance(entry, str):
            try:
                dims.append(sizes.new(entry))
            except ValueError as e:
                raise DefinitionError(f"{op}: input '{name}' dim {d}: {e}") from None
        elif isinstance(entry, sympy.Symbol):
            dims.append(entry)
        elif isinstance(entry, int) and not isinstance(entry, bool) and entry >= 1:
            sizes.declare_static(entry)
            dims.append(entry)
        else:
            raise DefinitionError(f"{op}: input '{name}' dim {d} is {entry!r}; give -1 (a size bound at "
                                  "execution), a size name, 1 (broadcast) or a static size")
    rank = len(dims)
    order = tuple(range(rank)) if dim_order is None else tuple(int(d) for d in dim_order)
    if sorted(order) != list(range(rank)):
        raise DefinitionError(f"{op}: input '{name}' dim_order {dim_order} is not a permutation of its {rank} dims")
    if contiguity is not None:
        contiguity = (bool(contiguity),) * rank if isinstance(contiguity, bool) else tuple(bool(c) for c in contiguity)
        if len(contiguity) != rank:
            raise DefinitionError(f"{op}: input '{name}' has rank {rank} but {len(contiguity)} contiguity flags")
    stride: list = [1] * rank
    running: Any = 1
    for d in reversed(order):
        stride[d] = running
        running = running * dims[d]
    meta = TensorMeta(dtype=dtype, shape=tuple(dims), stride=tuple(stride), device=torch.device("meta"))
    return InputSpec(name, dtype, tuple(dims), contiguity, order), meta


def declare_scalar(name: str, dtype: Any) -> InputSpec:
    """Check a scalar declaration (``float``, ``int``, ``bool`` or a torch dtype of those kinds).

    Raises:
        DefinitionTypeError: another type.
    """
    if isinstance(dtype, torch.dtype):
        dtype = bool if dtype == torch.bool else (float if dtype.is_floating_point else int)
    if dtype not in SCALAR_TYPES:
        raise DefinitionTypeError(f"define_scalar: scalar '{name}' has type {dtype}; use float, int or bool")
    return InputSpec(name, dtype)


def canonical_shapes(specs: list[InputSpec], sizes: SizeTable) -> list[tuple | None]:
    """Per input, its declared sizes after unification (``None`` for scalars)."""
    return [tuple(sizes.find(s) for s in spec.shape) if spec.is_tensor else None for spec in specs]


def bind(specs: list[InputSpec], shapes: list[tuple | None], inputs: Sequence,
         where: str = "execute") -> tuple[torch.device, dict]:
    """Check real inputs against the declarations (``shapes`` from :func:`canonical_shapes`);
    ``where`` begins each error message (what the user called).

    Returns:
        ``(device, {root size symbol: int})``.

    Raises:
        TypeError: wrong number or kind of inputs, or a dtype other than declared.
        ValueError: a size or layout other than declared, sizes that should agree and do not,
            or tensors on several devices.
    """
    if len(inputs) != len(specs):
        raise TypeError(f"{where}: the fusion takes {len(specs)} inputs ({', '.join(s.name for s in specs)}), "
                        f"got {len(inputs)}")
    values: dict = {}
    device = None
    for spec, shape, x in zip(specs, shapes, inputs):
        if not spec.is_tensor:
            if (isinstance(x, torch.Tensor) or not isinstance(x, (bool, int, float))
                    or (spec.dtype is int and not isinstance(x, int))
                    or (spec.dtype is bool and not isinstance(x, bool))):
                # (a float given for an int would be truncated where the fusion reads it)
                raise TypeError(f"{where}: input '{spec.name}' is a {spec.dtype.__name__} scalar, got "
                                f"{type(x).__name__} {x!r}")
            continue
        if not isinstance(x, torch.Tensor):
            raise TypeError(f"{where}: input '{spec.name}' is a tensor, got {type(x).__name__}")
        if x.dtype != spec.dtype:
            raise TypeError(f"{where}: input '{spec.name}' has dtype {x.dtype}, declared {spec.dtype}")
        if x.dim() != len(spec.shape):
            raise ValueError(f"{where}: input '{spec.name}' has rank {x.dim()}, declared {len(spec.shape)}")
        if device is None:
            device = x.device
        elif x.device != device:
            raise ValueError(f"{where}: input '{spec.name}' is on {x.device}, other inputs on {device}")
        for d, size in enumerate(shape):
            actual = int(x.shape[d])
            if isinstance(size, int):
                if actual != size:
                    what = "a broadcast dim (size 1)" if size == 1 else f"static size {size}"
                    raise ValueError(f"{where}: input '{spec.name}' dim {d} has size {actual}; declared {what}")
            elif isinstance(size, sympy.Symbol):
                if values.setdefault(size, actual) != actual:
                    raise ValueError(f"{where}: input '{spec.name}' dim {d} has size {actual}, but size {size} "
                                     f"is {values[size]} in an earlier input (the fusion lines these dims up)")
        if spec.contiguity is not None:
            _check_layout(spec, x, where)
    for spec, shape, x in zip(specs, shapes, inputs):  # sizes that are expressions of other sizes
        if spec.is_tensor:
            for d, size in enumerate(shape):
                if isinstance(size, sympy.Expr) and not isinstance(size, sympy.Symbol):
                    want = int(size.xreplace(values))
                    if int(x.shape[d]) != want:
                        raise ValueError(f"{where}: input '{spec.name}' dim {d} has size {int(x.shape[d])}, "
                                         f"expected {size} = {want}")
    return device or torch.device("cpu"), values



class Binder:
    """:func:`bind` for one fusion's declarations, remembered per call signature: the types,
    dtypes, devices and shapes of the inputs, and the strides of those with a declared
    layout (everything :func:`bind` reads), so that a repeated call checks nothing again.
    A call that fails raises :func:`bind`'s error every time (nothing is remembered).

    Args:
        specs, shapes, where: as :func:`bind`'s.
        capacity: signatures remembered; the memo starts over when full.
    """

    def __init__(self, specs: list[InputSpec], shapes: list[tuple | None], where: str = "execute",
                 capacity: int = 64):
        self.specs, self.shapes, self.where, self.capacity = specs, shapes, where, capacity
        self.memo: dict[tuple, tuple[torch.device, dict]] = {}

    def __call__(self, inputs: Sequence) -> tuple[torch.device, dict]:
        """``(device, {root size symbol: int})`` of ``inputs`` (shared: do not modify it).

        Raises:
            TypeError, ValueError: as :func:`bind`.
        """
        if len(inputs) != len(self.specs):
            return bind(self.specs, self.shapes, inputs, self.where)
        key = tuple((x.dtype, x.device, x.shape, x.stride() if spec.contiguity is not None else None)
                    if isinstance(x, torch.Tensor) else type(x) for spec, x in zip(self.specs, inputs))
        found = self.memo.get(key)
        if found is None:
            found = bind(self.specs, self.shapes, inputs, self.where)
            if len(self.memo) >= self.capacity:
                self.memo.clear()
            self.memo[key] = found
        return found

def _check_layout(spec: InputSpec, x: torch.Tensor, where: str = "execute") -> None:
    expected = 1
    for d in reversed(spec.dim_order):
        size, stride = int(x.shape[d]), int(x.stride(d))
        if size == 1:
            continue
        if spec.contiguity[d] and stride != expected:
            raise ValueError(f"{where}: input '{spec.name}' dim {d} has stride {stride}; its declared layout "
                             f"(dim_order {spec.dim_order}, contiguity {spec.contiguity}) needs {expected}")
        expected = stride * size
