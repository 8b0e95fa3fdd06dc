"""The registry's pointwise ops: how each is parsed, promoted and written in Triton.

Registers into :data:`torchfuse.ir.ops.REGISTRY` when imported (by :mod:`torchfuse.ir.ops`).
Each entry follows PyTorch's CUDA kernels (cited where subtle); the emitters take the operands
as Triton expressions in the op's compute dtype and return the result's expression.
"""
from __future__ import annotations

import math
from typing import Callable

import torch
from torch._prims_common import ELEMENTWISE_TYPE_PROMOTION_KIND as PROMOTE

from .emit import (Unsupported, div_numbers, div_promotion, emit_div, emit_fmod, emit_remainder, fdiv, is_float,
                   literal, number_operand, parse_div)
from .graph import Value
from .graph_ops import FMA
from .ops import (ALL_DTYPES, FLOAT, I2F, INT_DTYPES, NUMERIC, OpDef, parse_operands, register,
                  _parse_alpha, _scalar_ok)

aten = torch.ops.aten
prims = torch.ops.prims


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


def _parse_sub(args, kwargs):
    """As ``add``'s, except that a bool operand, tensor or number, is refused: ATen's
    ``sub_check`` raises ``NotImplementedError`` for it, which the op, left to ATen, then
    raises as eager does (PyTorch's fake tensors do not check it while tracing)."""
    for x in args[:2]:
        if isinstance(x, bool) or (isinstance(x, Value) and x.meta is not None and x.meta.dtype == torch.bool):
            raise Unsupported("subtraction with a bool operand, which eager refuses")
    return _parse_alpha(args, kwargs)


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
    if not is_float(dt):
        raise Unsupported("integer pow")
    # PyTorch's CUDA pow special-cases these exponents (pow_tensor_scalar_kernel), in the
    # tensor's own dtype: for fp16/bf16 x * x is rounded to that dtype before it is used
    # again (tf_square_* on CUDA; CPU's kernels compute in fp32: the host variants).
    sq = f"tf_square_{at['half_base']}({x})" if "half_base" in at else f"({x} * {x})"
    special = {2.0: f"({x} * {x})", 3.0: f"({sq} * {x})", 0.5: f"libdevice.sqrt_rn({x})",
               -0.5: f"libdevice.rsqrt({x})", -1.0: fdiv("1.0", x, dt), -2.0: fdiv("1.0", sq, dt),
               1.0: x}
    exponent = at.get("exponent_value")
    if exponent is not None and float(exponent) in special:
        return special[float(exponent)]
    general = f"libdevice.pow({x}, {y})"
    if at.get("runtime_exponent"):  # a number known at run time: the same cases, chosen then
        for value, text in special.items():
            general = f"tl.where({y} == {value!r}, {text}, {general})"
    return general


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
    # libdevice's expf is CUDA's expf, bitwise eager's; tl.exp (ex2.approx of x * log2(e))
    # differed from it in a quarter of fp32 elements on an H100
    return f"libdevice.exp({a[0]})"


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
              numbers="compute", host_scalar=None, unrounded_scalar=None):
    names = ("self", "other", "third")[:nargs]
    register(OpDef(name=name, kind="pointwise", aten=tuple(overloads), parse=parse or parse_operands(*names),
                   emit=emit, promotion=promotion, promoted=promoted, dtypes=frozenset(dtypes),
                   domain=domain, integer_division=integer_division, opmath=opmath, numbers=numbers,
                   host_scalar=host_scalar, unrounded_scalar=unrounded_scalar))



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
# sqrt_rn: libdevice.sqrt and tl.sqrt are sqrt.approx; CUDA's sqrtf (eager's) is correctly rounded
pointwise("sqrt", [aten.sqrt.default], libm("sqrt_rn"), promotion=I2F, dtypes=FLOAT, domain=(0, 100))
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
pointwise("sub", [aten.sub.Tensor, aten.sub.Scalar], _emit_sub, nargs=2, parse=_parse_sub, dtypes=NUMERIC,
          numbers="device")
# a number second is read in fp32 on both devices (CPU: iter.is_scalar(2)), a number first
# is rounded to fp16/bf16 on CPU tensors; a one-element tensor second, on CPU tensors only
pointwise("mul", [aten.mul.Tensor, aten.mul.Scalar], _emit_mul, nargs=2,
          numbers=lambda i, at: "compute" if i == 1 else "device", host_scalar=1)


pointwise("div", [aten.div.Tensor, aten.div.Scalar, aten.div.Tensor_mode, aten.div.Scalar_mode],
          emit_div, nargs=2, parse=parse_div, promotion=div_promotion, dtypes=NUMERIC,
          integer_division=True, numbers=div_numbers, host_scalar=1)
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
    elif inputs[1].meta is None:  # a symbolic number
        attrs["runtime_exponent"] = True
    if not isinstance(inputs[0], Value):
        raise Unsupported("pow with a scalar base")
    base = getattr(inputs[0].meta, "dtype", None)
    if base in (torch.float16, torch.bfloat16):
        attrs["half_base"] = "f16" if base == torch.float16 else "bf16"
        e = attrs.get("exponent_value")
        if isinstance(e, (int, float)) and math.isfinite(e) and abs(e) > torch.finfo(base).max:
            # eager converts the exponent to the base's dtype and raises on overflow (on CUDA
            # tensors too, measured with torch 2.11 on an H100): on ATen, it raises as eager
            raise Unsupported(f"an exponent beyond {base}'s range, which eager refuses")
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


pointwise("fma", [FMA], lambda a, dt, at: f"libdevice.fma({a[0]}, {a[1]}, {a[2]})", nargs=3, dtypes=FLOAT,
          unrounded_scalar=1)
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


# ``prims.copy_strided(x, strides)``: a copy laid out as ``strides`` (the node's metadata), the
# relayout the kernel formulas end with where eager's output strides differ from the formula's
pointwise("clone", [aten.clone.default, prims.copy_strided.default], _emit_identity, parse=_parse_clone,
          promotion=None)


def _parse_copy(args, kwargs):
    # aten.copy(self, src): a value with self's metadata and src's contents.
    return [args[1]], {}


pointwise("copy", [aten.copy.default], _emit_identity, parse=_parse_copy, promotion=None)


