"""THE op registry: every primitive op the compiler can fuse, in one table.

Each :class:`OpDef` says which ATen overloads map to it, how to read their arguments
(``parse``), how PyTorch promotes its operand dtypes (``promotion``, PyTorch's own
``ELEMENTWISE_TYPE_PROMOTION_KIND``), how to write it in Triton (``emit``), which compute
dtypes it takes, and the input domain its tests sample from. The segmenter, the code
generator and the registry-driven tests all read this table; an ATen op with no entry here
runs through ATen.

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
import math
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


def lookup(target: Any) -> OpDef | None:
    """The registry entry for an ATen overload, or ``None`` when it is not fusible."""
    return ATEN_TO_OP.get(target)


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
    return tuple(sorted({normalize_dim(int(d), rank) for d in dims}))


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


# ----------------------------------------------------------------------------- emission helpers

def libm(name: str) -> Callable:
    """Emit ``libdevice.<name>`` (double or single precision chosen by Triton from the dtype)."""
    return lambda a, dt, at: f"libdevice.{name}({', '.join(a)})"


def _float_only(fn: Callable) -> Callable:
    return fn


def _emit_abs(a, dt, at):
    if dt == torch.bool:
        return a[0]
    return f"tl.abs({a[0]})"


def _emit_neg(a, dt, at):
    # tf_neg: eager's negation on each device (a NaN's sign flipped on CPU tensors, a GPU's
    # NaN from arithmetic on CUDA); Triton's unary minus computes 0 - x, +0.0 for +0.0
    return f"tf_neg({a[0]})" if is_float(dt) else f"(-{a[0]})"


def _alpha_times(a, dt, at, sign: int) -> str | None:
    """``a[0] + sign * alpha * a[1]`` for float ``add``/``sub`` with an ``alpha``: one fused
    multiply-add, as PyTorch's kernels compute ``a + alpha * b`` (CUDA's ``AddFunctor``
    contracted by nvcc, the CPU's ``vec::fmadd``); alpha in fp32 on a GPU, rounded to fp16/bf16
    tensors' dtype on CPU tensors (``alpha.to<scalar_t>()``). ``None`` without an alpha."""
    alpha = at.get("alpha", 1)
    if alpha == 1 or not is_float(dt):
        return None
    return f"libdevice.fma({a[1]}, {number_operand(sign * alpha, dt, at.get('common_dtype'), 'device')}, {a[0]})"


def _emit_add(a, dt, at):
    fused = _alpha_times(a, dt, at, 1)
    if fused is not None:
        return fused
    alpha = at.get("alpha", 1)
    b = a[1] if alpha == 1 else f"({a[1]} * {literal(alpha, dt)})"
    if dt == torch.bool:
        return f"({a[0]} | {b})"
    return f"({a[0]} + {b})"


def _emit_sub(a, dt, at):
    fused = _alpha_times(a, dt, at, -1)
    if fused is not None:
        return fused
    alpha = at.get("alpha", 1)
    b = a[1] if alpha == 1 else f"({a[1]} * {literal(alpha, dt)})"
    return f"({a[0]} - {b})"


def _emit_mul(a, dt, at):
    if dt == torch.bool:
        return f"({a[0]} & {a[1]})"
    return f"({a[0]} * {a[1]})"


def _emit_pow(a, dt, at):
    x, y = a
    exponent = at.get("exponent_value")
    if exponent is not None and is_float(dt):
        # PyTorch's CUDA pow special-cases these exponents (pow_tensor_scalar_kernel), in the
        # tensor's own dtype: for fp16/bf16 x * x is rounded to that dtype before it is used
        # again (tf_square_* on CUDA; CPU's kernels compute in fp32: the host variants).
        sq = f"tf_square_{at['half_base']}({x})" if "half_base" in at else f"({x} * {x})"
        special = {2.0: f"({x} * {x})", 3.0: f"({sq} * {x})", 0.5: f"libdevice.sqrt({x})",
                   -0.5: f"libdevice.rsqrt({x})", -1.0: fdiv("1.0", x, dt), -2.0: fdiv("1.0", sq, dt),
                   1.0: x}
        if float(exponent) in special:
            return special[float(exponent)]
    if not is_float(dt):
        raise Unsupported("integer pow")
    return f"libdevice.pow({x}, {y})"


def _emit_maximum(a, dt, at):
    x, y = a
    if dt == torch.bool:
        return f"({x} | {y})"
    if is_float(dt):  # NaN propagates (torch.maximum); signed zeros as the device orders them
        return f"tf_maximum({x}, {y})"
    return f"tl.maximum({x}, {y})"


def _emit_minimum(a, dt, at):
    x, y = a
    if dt == torch.bool:
        return f"({x} & {y})"
    if is_float(dt):
        return f"tf_minimum({x}, {y})"
    return f"tl.minimum({x}, {y})"


def _emit_fmax(a, dt, at):
    x, y = a
    if not is_float(dt):
        return _emit_maximum(a, dt, at)
    return f"tf_fmax({x}, {y})"


def _emit_fmin(a, dt, at):
    x, y = a
    if not is_float(dt):
        return _emit_minimum(a, dt, at)
    return f"tf_fmin({x}, {y})"


def _emit_clamp(a, dt, at):
    x = a[0]
    lo = a[1] if len(a) > 1 and a[1] is not None else None
    hi = a[2] if len(a) > 2 and a[2] is not None else None
    # PyTorch's clamp: NaN input stays NaN, a NaN bound gives NaN (tensor bounds can hold NaN);
    # a lower bound above the upper gives the upper.
    # Floats: CUDA's clamp is fminf(fmaxf(x, lo), hi) (signed zeros ordered), x86's keeps x
    # on ties (tf_clamp_lo/hi and their host variants in the codegen header).
    for bound, cmp, fn in ((lo, "<", "tf_clamp_lo"), (hi, ">", "tf_clamp_hi")):
        if bound is not None:
            if is_float(dt):
                x = f"tl.where({bound} != {bound}, {bound}, {fn}({x}, {bound}))"
            else:
                x = f"tl.where({x} {cmp} {bound}, {bound}, {x})"
    return x


def _parse_clamp(args, kwargs):
    x = args[0]
    lo = args[1] if len(args) > 1 else kwargs.get("min")
    hi = args[2] if len(args) > 2 else kwargs.get("max")
    for b in (lo, hi):
        if isinstance(b, float) and math.isnan(b):
            raise Unsupported("NaN clamp bound")
    return [x, lo, hi], {}


def _emit_sign(a, dt, at):
    x = a[0]
    if dt == torch.bool:
        return x
    one, zero = literal(1, dt), literal(0, dt)
    return f"tl.where({x} > {zero}, {one}, tl.where({x} < {zero}, -{one}, {zero}))"


def _emit_relu(a, dt, at):
    zero = literal(0, dt)
    if dt == torch.bool:
        return a[0]
    if is_float(dt):  # clamp_min(x, 0): relu(-0.0) is +0.0 on CUDA, -0.0 on CPU, as eager
        return f"tf_clamp_lo({a[0]}, {zero})"
    return f"tl.where({a[0]} < {zero}, {zero}, {a[0]})"


def _emit_sigmoid(a, dt, at):
    return fdiv("1.0", f"(1.0 + {_emit_exp([f'(-{a[0]})'], dt, at)})", dt)


def _emit_exp(a, dt, at):
    if dt == torch.float64:
        return f"libdevice.exp({a[0]})"
    return f"tl.exp({a[0]})"


def _emit_exp2(a, dt, at):
    if dt == torch.float64:
        return f"libdevice.exp2({a[0]})"
    return f"tl.exp2({a[0]})"


def _emit_reciprocal(a, dt, at):
    return fdiv("1.0", a[0], dt)


def _emit_cmp(sym: str):
    def emit(a, dt, at):
        if dt == torch.bfloat16:  # exact, and Triton's interpreter cannot compare bf16 values
            return f"({a[0]}.to(tl.float32) {sym} {a[1]}.to(tl.float32))"
        return f"({a[0]} {sym} {a[1]})"
    return emit


def _emit_logical(sym: str):
    def emit(a, dt, at):
        xs = [x if dt == torch.bool else f"({x} != {literal(0, dt)})" for x in a]
        return f"({xs[0]} {sym} {xs[1]})"
    return emit


def _emit_logical_not(a, dt, at):
    if dt == torch.bool:
        return f"({a[0]} == 0)"
    return f"({a[0]} == {literal(0, dt)})"


def _emit_bitwise(sym: str):
    return lambda a, dt, at: f"({a[0]} {sym} {a[1]})"


def _emit_bitwise_not(a, dt, at):
    if dt == torch.bool:
        return f"({a[0]} == 0)"
    # xor with all ones of the dtype: Triton's ``~`` builds a -1 constant, which is out of
    # range for uint8 in the interpreter
    return f"({a[0]} ^ {literal(-1, dt)})"


def _emit_where(a, dt, at):
    return f"tl.where({a[0]}, {a[1]}, {a[2]})"


def _emit_isnan(a, dt, at):
    if not is_float(dt):
        return f"({a[0]} != {a[0]})"
    return f"({a[0]} != {a[0]})"


def _emit_isinf(a, dt, at):
    if not is_float(dt):
        return f"({a[0]} != {a[0]})"
    return f"(tl.abs({a[0]}) == float('inf'))"


def _emit_identity(a, dt, at):
    return a[0]


def _emit_round(a, dt, at):
    if not is_float(dt):
        return a[0]
    return f"libdevice.nearbyint({a[0]})"  # round half to even, as torch.round


def _emit_trunc_like(name: str):
    def emit(a, dt, at):
        if not is_float(dt):
            return a[0]
        return f"libdevice.{name}({a[0]})"
    return emit


# ----------------------------------------------------------------------------- pointwise ops

def pointwise(name, overloads, emit, *, promotion=PROMOTE.DEFAULT, parse=None, nargs=1,
              dtypes=ALL_DTYPES, domain=None, promoted=None, integer_division=False, opmath=True,
              numbers="compute"):
    names = ("self", "other", "third")[:nargs]
    register(OpDef(name=name, kind="pointwise", aten=tuple(overloads), parse=parse or parse_operands(*names),
                   emit=emit, promotion=promotion, promoted=promoted, dtypes=frozenset(dtypes),
                   domain=domain, integer_division=integer_division, opmath=opmath, numbers=numbers))


FLOAT = FLOAT_DTYPES
NUMERIC = FLOAT_DTYPES | INT_DTYPES
I2F = PROMOTE.INT_TO_FLOAT

pointwise("abs", [aten.abs.default], _emit_abs, promotion=PROMOTE.COMPLEX_TO_FLOAT, dtypes=NUMERIC)
pointwise("neg", [aten.neg.default], _emit_neg, dtypes=NUMERIC)
pointwise("reciprocal", [aten.reciprocal.default], _emit_reciprocal, promotion=I2F, dtypes=FLOAT)
pointwise("exp", [aten.exp.default], _emit_exp, promotion=I2F, dtypes=FLOAT, domain=(-10, 10))
pointwise("exp2", [aten.exp2.default], _emit_exp2, promotion=I2F, dtypes=FLOAT, domain=(-10, 10))
pointwise("expm1", [aten.expm1.default], libm("expm1"), promotion=I2F, dtypes=FLOAT, domain=(-10, 10))
pointwise("log", [aten.log.default], libm("log"), promotion=I2F, dtypes=FLOAT, domain=(0.01, 100))
pointwise("log2", [aten.log2.default], libm("log2"), promotion=I2F, dtypes=FLOAT, domain=(0.01, 100))
pointwise("log10", [aten.log10.default], libm("log10"), promotion=I2F, dtypes=FLOAT, domain=(0.01, 100))
pointwise("log1p", [aten.log1p.default], libm("log1p"), promotion=I2F, dtypes=FLOAT, domain=(-0.9, 100))
pointwise("sqrt", [aten.sqrt.default], libm("sqrt"), promotion=I2F, dtypes=FLOAT, domain=(0, 100))
pointwise("rsqrt", [aten.rsqrt.default], libm("rsqrt"), promotion=I2F, dtypes=FLOAT, domain=(0.01, 100))
pointwise("sin", [aten.sin.default], libm("sin"), promotion=I2F, dtypes=FLOAT)
pointwise("cos", [aten.cos.default], libm("cos"), promotion=I2F, dtypes=FLOAT)
pointwise("tan", [aten.tan.default], libm("tan"), promotion=I2F, dtypes=FLOAT, domain=(-1.5, 1.5))
pointwise("asin", [aten.asin.default], libm("asin"), promotion=I2F, dtypes=FLOAT, domain=(-1, 1))
pointwise("acos", [aten.acos.default], libm("acos"), promotion=I2F, dtypes=FLOAT, domain=(-1, 1))
pointwise("atan", [aten.atan.default], libm("atan"), promotion=I2F, dtypes=FLOAT)
pointwise("sinh", [aten.sinh.default], libm("sinh"), promotion=I2F, dtypes=FLOAT, domain=(-5, 5))
pointwise("cosh", [aten.cosh.default], libm("cosh"), promotion=I2F, dtypes=FLOAT, domain=(-5, 5))
pointwise("tanh", [aten.tanh.default], libm("tanh"), promotion=I2F, dtypes=FLOAT)
pointwise("asinh", [aten.asinh.default], libm("asinh"), promotion=I2F, dtypes=FLOAT)
pointwise("acosh", [aten.acosh.default], libm("acosh"), promotion=I2F, dtypes=FLOAT, domain=(1, 50))
pointwise("atanh", [aten.atanh.default], libm("atanh"), promotion=I2F, dtypes=FLOAT, domain=(-0.95, 0.95))
pointwise("sigmoid", [aten.sigmoid.default], _emit_sigmoid, promotion=I2F, dtypes=FLOAT)
pointwise("erf", [aten.erf.default], libm("erf"), promotion=I2F, dtypes=FLOAT)
pointwise("erfc", [aten.erfc.default], libm("erfc"), promotion=I2F, dtypes=FLOAT)
pointwise("erfinv", [aten.erfinv.default], libm("erfinv"), promotion=I2F, dtypes=FLOAT, domain=(-0.99, 0.99))
pointwise("lgamma", [aten.lgamma.default], libm("lgamma"), promotion=I2F, dtypes=FLOAT, domain=(0.1, 20))
pointwise("floor", [aten.floor.default], _emit_trunc_like("floor"), dtypes=NUMERIC)
pointwise("ceil", [aten.ceil.default], _emit_trunc_like("ceil"), dtypes=NUMERIC)
pointwise("trunc", [aten.trunc.default], _emit_trunc_like("trunc"), dtypes=NUMERIC)
pointwise("round", [aten.round.default], _emit_round, dtypes=NUMERIC)
pointwise("sign", [aten.sign.default, aten.sgn.default], _emit_sign, dtypes=ALL_DTYPES)
pointwise("relu", [aten.relu.default], _emit_relu, dtypes=NUMERIC)
pointwise("isnan", [aten.isnan.default], _emit_isnan, promotion=PROMOTE.ALWAYS_BOOL)
pointwise("isinf", [aten.isinf.default], _emit_isinf, promotion=PROMOTE.ALWAYS_BOOL)
pointwise("logical_not", [aten.logical_not.default], _emit_logical_not, promotion=PROMOTE.ALWAYS_BOOL)
pointwise("bitwise_not", [aten.bitwise_not.default], _emit_bitwise_not, dtypes=INT_DTYPES | {torch.bool})

pointwise("add", [aten.add.Tensor, aten.add.Scalar], _emit_add, nargs=2, parse=_parse_alpha, numbers="device")
pointwise("sub", [aten.sub.Tensor, aten.sub.Scalar], _emit_sub, nargs=2, parse=_parse_alpha, dtypes=NUMERIC,
          numbers="device")
# a number second is read in fp32 on both devices (CPU: iter.is_scalar(2)), a number first
# is rounded to fp16/bf16 on CPU tensors
pointwise("mul", [aten.mul.Tensor, aten.mul.Scalar], _emit_mul, nargs=2,
          numbers=lambda i, at: "compute" if i == 1 else "device")


pointwise("div", [aten.div.Tensor, aten.div.Scalar, aten.div.Tensor_mode, aten.div.Scalar_mode],
          emit_div, nargs=2, parse=parse_div, promotion=div_promotion, dtypes=NUMERIC,
          integer_division=True, numbers=div_numbers)
pointwise("true_divide", [prims.div.default], lambda a, dt, at: (
    fdiv(a[0], a[1], dt) if is_float(dt) else f"tf_div_trunc_int({a[0]}, {a[1]})"),
    nargs=2, dtypes=NUMERIC, integer_division=True)
pointwise("remainder", [aten.remainder.Tensor, aten.remainder.Scalar], emit_remainder, nargs=2,
          dtypes=NUMERIC, integer_division=True, numbers="common")
pointwise("fmod", [aten.fmod.Tensor, aten.fmod.Scalar], emit_fmod, nargs=2, dtypes=NUMERIC,
          integer_division=True, numbers="common")


def _parse_pow(args, kwargs):
    inputs = list(args[:2])
    for x in inputs:
        _scalar_ok(x)
    attrs = {}
    if not isinstance(inputs[1], Value):
        attrs["exponent_value"] = inputs[1]
    if not isinstance(inputs[0], Value):
        raise Unsupported("pow with a scalar base")
    base = getattr(inputs[0].meta, "dtype", None)
    if base in (torch.float16, torch.bfloat16):
        attrs["half_base"] = "f16" if base == torch.float16 else "bf16"
    return inputs, attrs


pointwise("pow", [aten.pow.Tensor_Tensor, aten.pow.Tensor_Scalar], _emit_pow, nargs=2, parse=_parse_pow,
          promotion=PROMOTE.BOOL_TO_LONG, dtypes=FLOAT, domain=(0.1, 4), numbers="common")
pointwise("maximum", [aten.maximum.default], _emit_maximum, nargs=2)
pointwise("minimum", [aten.minimum.default], _emit_minimum, nargs=2)
pointwise("fmax", [aten.fmax.default], _emit_fmax, nargs=2, dtypes=NUMERIC)
pointwise("fmin", [aten.fmin.default], _emit_fmin, nargs=2, dtypes=NUMERIC)
pointwise("atan2", [aten.atan2.default], libm("atan2"), nargs=2, promotion=I2F, dtypes=FLOAT)
pointwise("hypot", [aten.hypot.default], libm("hypot"), nargs=2, dtypes=FLOAT)
pointwise("copysign", [aten.copysign.Tensor, aten.copysign.Scalar], libm("copysign"), nargs=2,
          promotion=I2F, dtypes=FLOAT, numbers="common")
for _name, _sym, _ovl in [("eq", "==", aten.eq), ("ne", "!=", aten.ne), ("lt", "<", aten.lt),
                          ("le", "<=", aten.le), ("gt", ">", aten.gt), ("ge", ">=", aten.ge)]:
    pointwise(_name, [_ovl.Tensor, _ovl.Scalar], _emit_cmp(_sym), nargs=2, promotion=PROMOTE.ALWAYS_BOOL,
              opmath=False)
for _name, _sym, _ovl in [("logical_and", "&", aten.logical_and), ("logical_or", "|", aten.logical_or),
                          ("logical_xor", "^", aten.logical_xor)]:
    pointwise(_name, [_ovl.default], _emit_logical(_sym), nargs=2, promotion=PROMOTE.ALWAYS_BOOL)
for _name, _sym, _ovl in [("bitwise_and", "&", aten.bitwise_and), ("bitwise_or", "|", aten.bitwise_or),
                          ("bitwise_xor", "^", aten.bitwise_xor)]:
    pointwise(_name, [_ovl.Tensor, _ovl.Scalar], _emit_bitwise(_sym), nargs=2,
              dtypes=INT_DTYPES | {torch.bool})


def _parse_where(args, kwargs):
    cond, a, b = args[:3]
    if not isinstance(cond, Value):
        raise Unsupported("where with a scalar condition")
    return [cond, a, b], {}


pointwise("where", [aten.where.self, aten.where.ScalarSelf, aten.where.ScalarOther, aten.where.Scalar],
          _emit_where, parse=_parse_where, nargs=3, promoted=(1, 2))
pointwise("clamp", [aten.clamp.default, aten.clamp.Tensor], _emit_clamp, parse=_parse_clamp, nargs=3,
          dtypes=NUMERIC)


def _parse_cast(args, kwargs):
    x = args[0]
    dtype = kwargs.get("dtype", args[1] if len(args) > 1 and isinstance(args[1], torch.dtype) else None)
    device = kwargs.get("device")
    if device is not None and isinstance(x, Value) and x.meta is not None and torch.device(device) != x.meta.device:
        raise Unsupported("copy to another device")
    if kwargs.get("layout") not in (None, torch.strided):
        raise Unsupported("non-strided layout")
    return [x], {"dtype": dtype}


def _emit_cast(a, dt, at):
    return a[0]  # the code generator converts the result to the output dtype


pointwise("cast", [aten._to_copy.default, prims.convert_element_type.default], _emit_cast,
          parse=_parse_cast, promotion=None)


def _parse_clone(args, kwargs):
    return [args[0]], {}


pointwise("clone", [aten.clone.default], _emit_identity, parse=_parse_clone, promotion=None)


def _parse_copy(args, kwargs):
    # aten.copy(self, src): a value with self's metadata and src's contents.
    return [args[1]], {}


pointwise("copy", [aten.copy.default], _emit_identity, parse=_parse_copy, promotion=None)


# ----------------------------------------------------------------------------- constants

def _parse_full(args, kwargs):
    value = args[1] if len(args) > 1 else kwargs["fill_value"]
    if isinstance(value, Value) or isinstance(value, complex):
        raise Unsupported("symbolic or complex fill value")
    return [], {"value": value}


def _parse_full_like(args, kwargs):
    value = args[1] if len(args) > 1 else kwargs["fill_value"]
    if isinstance(value, Value) or isinstance(value, complex):
        raise Unsupported("symbolic or complex fill value")
    return [], {"value": value}


def _parse_scalar_tensor(args, kwargs):
    value = args[0]
    if isinstance(value, Value) or isinstance(value, complex):
        raise Unsupported("symbolic or complex value")
    return [], {"value": value}


def _parse_arange(args, kwargs):
    """``arange(end)``, ``arange(start, end)`` and ``arange(start, end, step)`` with integer
    start and step; the length is the output's size, so the end may be symbolic."""
    if kwargs.get("layout") not in (None, torch.strided):
        raise Unsupported("non-strided layout")
    if len(args) == 1:
        start, step = 0, 1
    else:
        start, step = args[0], args[2] if len(args) > 2 else kwargs.get("step", 1)
    if type(start) is not int or type(step) is not int:  # a Value (symbolic), a float or a bool
        raise Unsupported("symbolic or non-integer start or step")
    return [], {"start": start, "step": step}


register(OpDef("full", "constant", (aten.full.default,), _parse_full, promotion=None))
register(OpDef("full_like", "constant", (aten.full_like.default,), _parse_full_like, promotion=None))
register(OpDef("scalar_tensor", "constant", (aten.scalar_tensor.default,), _parse_scalar_tensor, promotion=None))
# The class indices a comparison with targets needs (nll_loss by mask): computed from the loop
# index in the kernel, never loaded. Integer results only: a float arange's rounding of
# ``start + i * step`` is PyTorch's to define.
register(OpDef("arange", "constant", (aten.arange.default, aten.arange.start, aten.arange.start_step), _parse_arange,
               promotion=None, dtypes=frozenset({torch.int32, torch.int64})))


# ----------------------------------------------------------------------------- random numbers
#
# Random ops draw from Triton's Philox generator inside the kernel, keyed by a seed drawn once
# per call from PyTorch's default (CPU) generator, so ``torch.manual_seed`` makes runs
# reproducible; the numbers differ from eager's, as any fused implementation's must. Each
# element's counter is its linear position in the kernel's iteration space, so the numbers do
# not depend on block sizes. A random op must cover its whole group domain (checked by the
# segmenter), so that no two elements share a counter.

def _parse_random_like(args, kwargs):
    if kwargs.get("layout") not in (None, torch.strided):
        raise Unsupported("non-strided layout")
    if kwargs.get("generator") is not None:
        raise Unsupported("explicit generator")
    return [], {}


def _parse_random(args, kwargs):
    return _parse_random_like(args, kwargs)


def _parse_bernoulli_p(args, kwargs):
    p = args[1] if len(args) > 1 else kwargs.get("p", 0.5)
    if isinstance(p, Value) or kwargs.get("generator") is not None:
        raise Unsupported("tensor p or explicit generator")
    return [], {"p": float(p)}


register(OpDef("rand", "random", (aten.rand_like.default, aten.rand.default), _parse_random, promotion=None,
               dtypes=FLOAT_DTYPES))
register(OpDef("randn", "random", (aten.randn_like.default, aten.randn.default), _parse_random, promotion=None,
               dtypes=FLOAT_DTYPES))
register(OpDef("bernoulli", "random", (aten.bernoulli.p,), _parse_bernoulli_p, promotion=None,
               dtypes=FLOAT_DTYPES))


# ----------------------------------------------------------------------------- layout ops

def _parse_permute(args, kwargs):
    x, dims = args[0], args[1]
    return [x], {"dims": tuple(normalize_dim(int(d), _rank(x)) for d in dims)}


def _parse_unsqueeze(args, kwargs):
    x, d = args[0], int(args[1])
    return [x], {"dim": d % (_rank(x) + 1)}


def _parse_squeeze(args, kwargs):
    x = args[0]
    dims = args[1] if len(args) > 1 else None
    if _rank(x) == 0:  # squeeze(0) of a 0-dim tensor is allowed and squeezes nothing
        return [x], {"dims": ()}
    return [x], {"dims": None if dims is None else _normalize_dims(dims, _rank(x))}


def _parse_reshape(args, kwargs):
    return [args[0]], {}


def _parse_broadcast_in_dim(args, kwargs):
    return [args[0]], {"broadcast_dims": tuple(int(d) for d in args[2])}


register(OpDef("permute", "layout", (aten.permute.default,), _parse_permute, promotion=None))
register(OpDef("expand", "layout", (aten.expand.default,), _parse_reshape, promotion=None))
register(OpDef("unsqueeze", "layout", (aten.unsqueeze.default,), _parse_unsqueeze, promotion=None))
register(OpDef("squeeze", "layout", (aten.squeeze.default, aten.squeeze.dim, aten.squeeze.dims),
               _parse_squeeze, promotion=None))
register(OpDef("reshape", "layout", (aten.view.default, aten._unsafe_view.default, aten.reshape.default),
               _parse_reshape, promotion=None))
register(OpDef("alias", "layout", (aten.alias.default,), _parse_reshape, promotion=None))
register(OpDef("broadcast_in_dim", "layout", (prims.broadcast_in_dim.default,), _parse_broadcast_in_dim,
               promotion=None))


# ----------------------------------------------------------------------------- reductions
#
# attrs of every reduction: dims (sorted, normalized), keepdim, and per op: correction (var),
# out_dtype is the output value's dtype. The code generator keys on ``combine``.

@dataclasses.dataclass(frozen=True)
class ReductionInfo:
    """How a reduction combines: ``sum``, ``prod``, ``max``, ``min``, ``welford``, ``argmax``,
    ``argmin``, ``any``, ``all``; and which outputs it has (``value``, ``index``, ``mean``...)."""

    combine: str
    outputs: tuple[str, ...] = ("value",)
    mean: bool = False


REDUCTIONS: dict[str, ReductionInfo] = {}


def _parse_reduce(default_keepdim=False, dims_arg=1, keep_arg=2, dtype_kw=True):
    def parse(args, kwargs):
        x = args[0]
        rank = _rank(x)
        dims = args[dims_arg] if len(args) > dims_arg else kwargs.get("dim")
        keepdim = args[keep_arg] if len(args) > keep_arg else kwargs.get("keepdim", default_keepdim)
        attrs = {"dims": _normalize_dims(dims, rank), "keepdim": bool(keepdim)}
        return [x], attrs
    return parse


def _parse_reduce_all(args, kwargs):
    x = args[0]
    return [x], {"dims": tuple(range(_rank(x))), "keepdim": False}


def _parse_prims_reduce(args, kwargs):
    x = args[0]
    return [x], {"dims": _normalize_dims(args[1], _rank(x)), "keepdim": False}


def _parse_var(args, kwargs):
    x = args[0]
    dims = args[1] if len(args) > 1 else kwargs.get("dim")
    correction = kwargs.get("correction")
    if correction is None:
        correction = 1
    keepdim = kwargs.get("keepdim", False)
    if isinstance(correction, Value):
        raise Unsupported("symbolic correction")
    return [x], {"dims": _normalize_dims(dims, _rank(x)), "keepdim": bool(keepdim),
                 "correction": float(correction)}


def _parse_prims_var(args, kwargs):
    x = args[0]
    correction = args[2] if len(args) > 2 else kwargs.get("correction", 1)
    return [x], {"dims": _normalize_dims(args[1], _rank(x)), "keepdim": False, "correction": float(correction)}


def _parse_arg(args, kwargs):
    x = args[0]
    dim = args[1] if len(args) > 1 else kwargs.get("dim")
    keepdim = args[2] if len(args) > 2 else kwargs.get("keepdim", False)
    if dim is None:
        # argmax over the flattened tensor: the index is into the flattened tensor, which
        # matches a reduction over all dims of a contiguous view only; keep it on ATen.
        raise Unsupported("argmax/argmin without dim")
    return [x], {"dims": (normalize_dim(int(dim), _rank(x)),), "keepdim": bool(keepdim)}


def reduction(name, overloads, parse, info: ReductionInfo, dtypes=ALL_DTYPES):
    register(OpDef(name, "reduction", tuple(overloads), parse, promotion=None, dtypes=frozenset(dtypes)))
    REDUCTIONS[name] = info


reduction("sum", [aten.sum.dim_IntList], _parse_reduce(), ReductionInfo("sum"))
reduction("sum_all", [aten.sum.default], _parse_reduce_all, ReductionInfo("sum"))
reduction("prims_sum", [prims.sum.default], _parse_prims_reduce, ReductionInfo("sum"))
reduction("prod", [aten.prod.dim_int], _parse_reduce(), ReductionInfo("prod"), dtypes=NUMERIC | {torch.bool})
reduction("mean", [aten.mean.dim], _parse_reduce(), ReductionInfo("sum", mean=True), dtypes=FLOAT)
reduction("mean_all", [aten.mean.default], _parse_reduce_all, ReductionInfo("sum", mean=True), dtypes=FLOAT)
reduction("amax", [aten.amax.default], _parse_reduce(), ReductionInfo("max"))
reduction("amin", [aten.amin.default], _parse_reduce(), ReductionInfo("min"))
reduction("any", [aten.any.dim, aten.any.dims, aten.any.default], _parse_reduce(), ReductionInfo("any"))
reduction("all", [aten.all.dim, aten.all.dims, aten.all.default], _parse_reduce(), ReductionInfo("all"))
reduction("var", [aten.var.correction], _parse_var, ReductionInfo("welford", outputs=("var",)), dtypes=FLOAT)
reduction("prims_var", [prims.var.default], _parse_prims_var, ReductionInfo("welford", outputs=("var",)),
          dtypes=FLOAT)
reduction("var_mean", [aten.var_mean.correction], _parse_var,
          ReductionInfo("welford", outputs=("var", "mean")), dtypes=FLOAT)
reduction("argmax", [aten.argmax.default], _parse_arg, ReductionInfo("argmax", outputs=("index",)),
          dtypes=NUMERIC)
reduction("argmin", [aten.argmin.default], _parse_arg, ReductionInfo("argmin", outputs=("index",)),
          dtypes=NUMERIC)
reduction("max_dim", [aten.max.dim], _parse_arg, ReductionInfo("argmax", outputs=("value", "index")),
          dtypes=NUMERIC)
reduction("min_dim", [aten.min.dim], _parse_arg, ReductionInfo("argmin", outputs=("value", "index")),
          dtypes=NUMERIC)


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
