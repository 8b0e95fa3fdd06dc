"""THE op registry: every primitive op the compiler can fuse, in one table.

Each :class:`OpDef` says which ATen overloads map to it, how to read their arguments
(``parse``), how PyTorch promotes its operand dtypes (``promotion``, PyTorch's own
``ELEMENTWISE_TYPE_PROMOTION_KIND``), how to write it in Triton (``emit``), which compute
dtypes it takes, and the input domain its tests sample from. The segmenter, the code
generator and the registry-driven tests all read this table; an ATen op with no entry here
runs through ATen. This module defines the table and what its entries share (parsing and
promotion helpers); the entries themselves are registered by kind in :mod:`.ops_pointwise`,
:mod:`.ops_data` (constants, random numbers, layout ops) and :mod:`.ops_reductions`, imported
at the end of this module, so that ``REGISTRY`` is complete once ``torchfuse.ir.ops`` is.

Kinds:
    ``pointwise``  one output element from the same-index elements of the inputs.
    ``reduction``  reduces some dims of one input (sum, amax, var_mean, argmax ...).
    ``layout``     relabels dims without moving data (permute, expand, unsqueeze, squeeze,
                   size-1 reshapes): inside a fusion group it is pure index arithmetic.
    ``constant``   a tensor computed from no input: filled with one scalar (full,
                   scalar_tensor), or an integer ``arange`` (each element from its index).
    ``random``     random numbers from Triton's Philox generator (rand, randn, bernoulli).

Semantics follow PyTorch's CUDA kernels, which the sources cite where they are subtle
(floor division, remainder, NaN propagation of max/min, rounding of ``round``).
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable

import torch
from torch._prims_common import ELEMENTWISE_TYPE_PROMOTION_KIND as PROMOTE

from .emit import (Unsupported, div_numbers, div_promotion, emit_div, emit_fmod, emit_remainder, fdiv,  # noqa: F401
                   is_float, literal, number_operand, parse_div, triton_dtype)
from .graph import Value

aten = torch.ops.aten
prims = torch.ops.prims

FLOAT_DTYPES = frozenset({torch.float16, torch.bfloat16, torch.float32, torch.float64})
INT_DTYPES = frozenset({torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8})
ALL_DTYPES = FLOAT_DTYPES | INT_DTYPES | {torch.bool}
#: dtypes a Triton kernel can load and store.
KERNEL_DTYPES = ALL_DTYPES
#: short names the tables use
FLOAT = FLOAT_DTYPES
NUMERIC = FLOAT_DTYPES | INT_DTYPES
I2F = PROMOTE.INT_TO_FLOAT


@dataclasses.dataclass(frozen=True)
class OpDef:
    """One primitive op.

    Attributes:
        name: registry name, used in IR text, kernel names and tests.
        kind: ``pointwise``, ``reduction``, ``layout`` or ``constant``.
        aten: the ATen overloads that map to this op.
        parse: ``(args, kwargs) -> (inputs, attrs)``; ``args`` hold :class:`Value` objects for
            tensors. Raises :class:`Unsupported` for argument combinations it cannot fuse.
        emit: pointwise only: ``(args, dtype, attrs) -> str``, a Triton expression of the
            argument expressions, all already of the compute ``dtype``.
        promotion: PyTorch's type-promotion kind for the promoted operands, or ``None`` when
            operands are used at their own dtype (casts, ``where``'s condition).
        promoted: indices of the inputs that take part in promotion (``None``: all).
        dtypes: compute dtypes the emission supports.
        domain: ``(low, high)`` for sampling float test inputs; ``None`` means unbounded.
        integer_division: the op divides integers (stays on ATen under the interpreter by
            default, where eager raises ZeroDivisionError and a kernel cannot).
        opmath: the op computes in PyTorch's "opmath" dtype (fp32 for fp16/bf16 operands).
            ``False`` for comparisons, which eager (CPU and CUDA) evaluates in the operands'
            common dtype: ``x_fp16 == 0.1`` compares with fp16(0.1), and an int32 operand of
            an fp16 comparison is first rounded to fp16.
        numbers: how a Python number operand is read when the op computes fp16/bf16 tensors
            in fp32 (:func:`torchfuse.ir.emit.number_operand`): ``"compute"``, ``"common"``
            or ``"device"``, or ``(position, attrs) -> rule``.
        host_scalar: the input that PyTorch's CPU kernel reads unrounded in fp32 when it holds
            one element of another dtype than the fp16/bf16 tensors' (``mul`` and ``div``,
            ``original_scalar_value<opmath_t>(2)`` in ``ATen/native/cpu/BinaryOpsKernel.cpp``;
            its CUDA kernels load it as the tensors' dtype, ``BinaryFunctor`` in
            ``ATen/native/cuda/Loops.cuh``), or ``None``.
        unrounded_scalar: the input read unrounded in the compute dtype when it holds one
            element of another dtype than the fp16/bf16 tensors', as ATen's kernels read a
            ``Scalar`` argument, or ``None``: the multiplier of ``prims.fma``, which TorchDynamo
            writes for ``addcmul_``/``addcdiv_`` with a tensor ``value`` and ``add_`` with a
            tensor ``alpha`` (each read in fp32 by the CUDA kernels, and by the CPU ones but
            ``add_``'s, which rounds it).
    """

    name: str
    kind: str
    aten: tuple
    parse: Callable
    emit: Callable | None = None
    promotion: Any = PROMOTE.DEFAULT
    promoted: tuple[int, ...] | None = None
    dtypes: frozenset = ALL_DTYPES
    domain: tuple[float, float] | None = None
    integer_division: bool = False
    opmath: bool = True
    numbers: Any = "compute"
    host_scalar: int | None = None
    unrounded_scalar: int | None = None


REGISTRY: dict[str, OpDef] = {}
ATEN_TO_OP: dict[Any, OpDef] = {}


def register(opdef: OpDef) -> OpDef:
    if opdef.name in REGISTRY:
        raise ValueError(f"op {opdef.name} registered twice")
    REGISTRY[opdef.name] = opdef
    for overload in opdef.aten:
        ATEN_TO_OP[overload] = opdef
    return opdef


#: ATen ops that run in vendor libraries (matrix products, convolutions, attention) by design
LIBRARY_OPS = frozenset({
    "mm", "addmm", "bmm", "baddbmm", "addbmm", "matmul", "mv", "addmv", "dot", "vdot", "linear", "_int_mm",
    "_scaled_mm", "convolution", "_convolution", "convolution_backward", "cudnn_convolution",
    "cudnn_convolution_relu", "cudnn_convolution_add_relu", "cudnn_convolution_transpose", "miopen_convolution",
    "mkldnn_convolution",
})
_LIBRARY_PARTS = ("scaled_dot_product", "flash_attention", "efficient_attention", "cudnn_attention")


def is_library_op(target: Any) -> bool:
    """True for ATen ops that stay on cuBLAS/cuDNN by design (not for lack of a fusion rule)."""
    packet = getattr(target, "overloadpacket", None)
    name = getattr(packet, "__name__", None) or getattr(target, "__name__", "") or ""
    return name in LIBRARY_OPS or any(part in name for part in _LIBRARY_PARTS)


#: overloads looked up by name, for ops that exist only once a PyTorch module defines them:
#: ``prims.fma`` is made by ``torch._inductor.inductor_prims``, which TorchDynamo imports when
#: it writes the op (for ``Tensor.add_`` with a tensor ``alpha``, ``Tensor.addcdiv_``)
BY_NAME: dict[str, str] = {"prims.fma.default": "fma"}


def lookup(target: Any) -> OpDef | None:
    """The registry entry for an ATen overload, or ``None`` when it is not fusible."""
    opdef = ATEN_TO_OP.get(target)
    if opdef is None and isinstance(target, torch._ops.OpOverload) and str(target) in BY_NAME:
        return REGISTRY[BY_NAME[str(target)]]
    return opdef


# ----------------------------------------------------------------------------- parsing helpers

def _rank(v: Any) -> int:
    return v.meta.rank if isinstance(v, Value) and v.meta is not None else 0


def normalize_dim(d: int, rank: int) -> int:
    r = max(rank, 1)
    if not -r <= d < r:
        raise IndexError(f"dim {d} out of range for rank {rank}")
    return d % r


def _normalize_dims(dims, rank: int) -> tuple[int, ...]:
    if dims is None or (isinstance(dims, (list, tuple)) and len(dims) == 0):
        return tuple(range(rank))
    if isinstance(dims, int):
        dims = [dims]
    dims = tuple(sorted({normalize_dim(int(d), rank) for d in dims}))
    # a 0-dim tensor's dim 0 (or -1), which PyTorch accepts, is no dim: nothing is reduced
    return () if rank == 0 else dims


def _scalar_ok(x: Any) -> None:
    if isinstance(x, complex):
        raise Unsupported("complex scalar")


def parse_operands(*names: str, kw: tuple[str, ...] = ()):
    """A parser taking the first ``len(names)`` args as inputs and ``kw`` as attributes."""

    def parse(args, kwargs):
        n = len(names)
        inputs = list(args[:n])
        for i, name in enumerate(names):
            if i >= len(inputs):
                inputs.append(kwargs[name])
        for x in inputs:
            _scalar_ok(x)
        attrs = {}
        rest = list(args[n:])
        for i, k in enumerate(kw):
            if i < len(rest):
                attrs[k] = rest[i]
            elif k in kwargs:
                attrs[k] = kwargs[k]
        return inputs, attrs

    return parse


def _parse_alpha(args, kwargs):
    inputs = list(args[:2])
    alpha = args[2] if len(args) > 2 else kwargs.get("alpha", 1)
    for x in inputs:
        _scalar_ok(x)
    if isinstance(alpha, Value):
        raise Unsupported("symbolic alpha")
    return inputs, ({"alpha": alpha} if alpha != 1 else {})


def compute_dtype_for_promotion(opdef: OpDef, attrs: dict, operands: list[Any]) -> torch.dtype | None:
    """PyTorch's computation dtype for a pointwise op's promoted operands.

    ``operands`` are fake tensors or Python numbers (what the FX graph traced). Returns the
    "opmath" dtype PyTorch computes in (fp32 for fp16/bf16 inputs; the common dtype itself for
    ops with ``opmath=False``), or ``None`` when the op takes its operands at their own dtype.
    """
    from torch._prims_common import elementwise_dtypes

    kind = opdef.promotion(attrs) if callable(opdef.promotion) else opdef.promotion
    if kind is None:
        return None
    idx = opdef.promoted if opdef.promoted is not None else range(len(operands))
    promoted = [operands[i] for i in idx if i < len(operands) and operands[i] is not None]
    if not opdef.opmath:
        kind = PROMOTE.NO_OPMATH
    compute, _ = elementwise_dtypes(*promoted, type_promotion_kind=kind)
    return compute


def common_dtype_for_promotion(opdef: OpDef, attrs: dict, operands: list[Any]) -> torch.dtype | None:
    """The dtype PyTorch casts a pointwise op's promoted tensor operands to before computing
    (TensorIterator's common dtype: fp16 for an int32 + fp16 add, whose arithmetic then runs in
    fp32). ``None`` when the op takes its operands at their own dtype."""
    from torch._prims_common import elementwise_dtypes

    kind = opdef.promotion(attrs) if callable(opdef.promotion) else opdef.promotion
    if kind is None:
        return None
    idx = opdef.promoted if opdef.promoted is not None else range(len(operands))
    promoted = [operands[i] for i in idx if i < len(operands) and operands[i] is not None]
    compute, result = elementwise_dtypes(*promoted, type_promotion_kind=kind)
    if result == torch.bool and kind is PROMOTE.ALWAYS_BOOL:
        result, _ = elementwise_dtypes(*promoted, type_promotion_kind=PROMOTE.NO_OPMATH)
    return result


# The tables, by kind: each module registers its ops when imported (at the end, as they use
# the definitions above), in this order.
from . import ops_pointwise  # noqa: E402,F401,I001
from . import ops_data  # noqa: E402,F401,I001
from .ops_reductions import REDUCTIONS, ReductionInfo  # noqa: E402,F401,I001
