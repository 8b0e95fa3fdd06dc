"""Triton text the registry's emitters share: dtypes, Python numbers, and division.

Takes Python values and Triton expressions (strings); returns Triton expressions. Used by
:mod:`torchfuse.ir.ops` (each op's ``emit``) and by the code generator (operands, constants).

Where PyTorch computes differently on a GPU and on CPU tensors, the text calls a helper of the
helper library (:mod:`torchfuse.codegen.helpers`) whose ``_host`` variant replaces it when
kernels run on CPU tensors through the interpreter, so one kernel source serves both devices:
``tf_by_device(gpu, host)`` picks a constant, the division helpers pick a formula.

How a Python number operand is read (:func:`number_operand`): PyTorch's kernels for ``add``,
``sub``, ``mul`` and ``div`` on a GPU read it in the op's compute dtype (fp32 for fp16/bf16
tensors: ``opmath_gpu_kernel_with_scalars``), its CPU kernels for ``add`` and ``sub`` first
round it to the tensors' dtype (``iter.scalar_value<scalar_t>``), while ``mul`` and ``div``
take it in fp32 there too (``iter.is_scalar(2)`` in ``BinaryOpsKernel.cpp``); ``remainder``,
``fmod``, ``copysign``, the exponent of ``pow`` and the dividend of a division with a
rounding mode read it in the tensors' dtype on both (``gpu_kernel_with_scalars`` with
``scalar_t`` arguments; on the CPU in the vector loop, where the scalar loop of a short
tensor or a row's tail reads ``pow``'s exponent in float64). Measured against eager on an H200
and on CPU tensors.
"""
from __future__ import annotations

import math
import numbers
import re
from typing import Any

import torch

from .graph import Value


class Unsupported(Exception):
    """This use of an op cannot be fused; the message says why. The op runs through ATen."""


def is_float(dtype: torch.dtype) -> bool:
    return dtype.is_floating_point


_TRITON_DTYPES = {
    torch.float16: "tl.float16", torch.bfloat16: "tl.bfloat16", torch.float32: "tl.float32",
    torch.float64: "tl.float64", torch.int8: "tl.int8", torch.int16: "tl.int16",
    torch.int32: "tl.int32", torch.int64: "tl.int64", torch.uint8: "tl.uint8", torch.bool: "tl.int1",
}
HALF_DTYPES = (torch.float16, torch.bfloat16)


def triton_dtype(dtype: torch.dtype) -> str:
    """The ``tl`` dtype name for a torch dtype.

    Raises:
        Unsupported: the dtype has no Triton counterpart the compiler uses.
    """
    try:
        return _TRITON_DTYPES[dtype]
    except KeyError:
        raise Unsupported(f"dtype {dtype}") from None


def convert(expr: str, src: torch.dtype, dst: torch.dtype) -> str:
    """Triton expression converting ``expr`` from ``src`` to ``dst`` as PyTorch casts. To
    fp16/bf16 from fp64 or a 32/64-bit integer, through fp32: ``c10::Half`` and
    ``c10::BFloat16`` are made from a ``float`` only, so eager rounds twice (fp64
    ``2049 + 2**-30`` is fp16 2048, not 2050; just below 65520 is inf), where Triton's
    conversion rounds once. From an integer the fp32 value passes through ``tf_fp32_opaque``:
    on a GPU Triton folds the two integer conversions into one. From a float to uint8, through
    int64, as c10's ``static_cast_with_inter_type<uint8_t, ...>``: a negative value wraps."""
    if src == dst:
        return expr
    if dst == torch.bool:
        return f"({expr} != 0)"
    if dst == torch.uint8 and src.is_floating_point:
        # c10's cast to uint8 goes through int64 (TypeCast.h), so -1.0 wraps to 255 and 2**40 + 3
        # is 3, where a direct conversion saturates on a GPU
        expr = f"{expr}.to(tl.int64)"
    elif dst in HALF_DTYPES and src in _WIDER_THAN_FP32_SIGNIFICAND:
        expr = f"{expr}.to(tl.float32)"
        if not src.is_floating_point:
            expr = f"tf_fp32_opaque({expr})"
    return f"{expr}.to({triton_dtype(dst)})"


#: dtypes whose values fp32 does not hold exactly (its significand has 24 bits)
_WIDER_THAN_FP32_SIGNIFICAND = frozenset({torch.float64, torch.int32, torch.int64, torch.uint32, torch.uint64})


#: -0.0 of each float dtype as the integer with only its sign bit set (bitcast): Triton makes
#: a float constant equal to 0 a null (+0.0) value, and negating +0.0 gives +0.0 on a GPU
#: (its unary minus is ``0 - x``)
_NEGATIVE_ZERO = {torch.float16: ("tl.int16", -(2**15)), torch.bfloat16: ("tl.int16", -(2**15)),
                  torch.float32: ("tl.int32", -(2**31)), torch.float64: ("tl.int64", -(2**63))}


def rounded(value: Any, dtype: torch.dtype) -> Any:
    """The Python scalar ``value`` converted to ``dtype`` as PyTorch converts it (from its own
    64-bit type: ``int8`` wraps, a float64 keeps its 53 bits), as a Python number."""
    if isinstance(value, (bool, numbers.Integral)):
        source = torch.bool if isinstance(value, bool) else torch.int64
    else:
        source = torch.float64
    return torch.tensor(value, dtype=source).to(dtype).item()


def literal(value: Any, dtype: torch.dtype) -> str:
    """A Triton expression for the Python scalar ``value`` converted to ``dtype`` as PyTorch would.

    The conversion is done here, with ``torch``, so that e.g. ``int8 + 1000`` wraps exactly
    as eager does, and a float64 constant keeps its 53 bits.
    """
    if dtype == torch.bool:
        return f"tl.full([], {1 if bool(value) else 0}, tl.int1)"
    v = rounded(value, dtype)
    if dtype.is_floating_point:
        if v == 0 and math.copysign(1.0, v) < 0:
            int_type, bits = _NEGATIVE_ZERO[dtype]
            return f"tl.full([], {bits}, {int_type}).to({triton_dtype(dtype)}, bitcast=True)"
        if math.isnan(v):
            text = "float('nan')"
        elif math.isinf(v):
            text = "float('inf')" if v > 0 else "float('-inf')"
        else:
            text = repr(float(v))
        if dtype == torch.float64 or (dtype == torch.float32 and 0 < abs(v) < 2.0 ** -126):
            # Triton makes a Python float below fp32's smallest normal number an fp64 constant,
            # and ops that do not treat it as weak (tl.math.div_rn) then compute in fp64
            return f"tl.full([], {text}, {triton_dtype(dtype)})"
        if dtype == torch.bfloat16:  # exact: v is a bf16 value (the interpreter has no bf16 constants)
            return f"tl.full([], {text}, tl.float32).to(tl.bfloat16)"
        return text if dtype == torch.float32 else f"tl.full([], {text}, {triton_dtype(dtype)})"
    v = int(v)
    if dtype == torch.int64 and not (-(2**31) <= v < 2**31):
        return f"tl.full([], {v}, tl.int64)"
    return f"tl.full([], {v}, {triton_dtype(dtype)})"


def number_operand(value: Any, compute: torch.dtype, common: torch.dtype | None, rule: str) -> str:
    """A Python number operand of an op computed in ``compute`` whose tensors' common dtype is
    ``common`` (fp16/bf16 with fp32 compute; ``None`` when it is ``compute`` itself).

    ``rule`` (the op's, see the module doc): ``"compute"`` reads the number in ``compute``;
    ``"common"`` rounds it to ``common`` first; ``"device"`` reads it in ``compute`` on a GPU
    and rounded to ``common`` on CPU tensors (``tf_by_device``).
    """
    if common is None or rule == "compute" or not compute.is_floating_point:
        return literal(value, compute)
    low = literal(rounded(value, common), compute)
    if rule == "common":
        return low
    high = literal(value, compute)
    return high if high == low else f"tf_by_device({high}, {low})"


def runtime_number_operand(name: str, compute: torch.dtype, common: torch.dtype | None, rule: str) -> str:
    """A number known at run time (kernel argument ``name``: a symbolic int) as an operand, read
    by ``rule`` as :func:`number_operand` reads a constant: in ``compute``, rounded to ``common``
    first, or either by the device (``tf_by_device``)."""
    if compute == torch.bool:
        return f"({name} != 0)"
    high = f"tl.full([], {name}, {triton_dtype(compute)})"
    if common is None or rule == "compute" or not compute.is_floating_point or not common.is_floating_point:
        return high
    # an int reaches fp16/bf16 through fp32, as c10's (opaque: a GPU compiler folds the two steps)
    low = convert(f"tf_fp32_opaque(tl.full([], {name}, tl.float32))", torch.float32, common) \
        if common in HALF_DTYPES else f"tl.full([], {name}, {triton_dtype(common)})"
    low = f"{low}.to({triton_dtype(compute)})"
    return low if rule == "common" else f"tf_by_device({high}, {low})"


def _float_text(v: float) -> str:
    """A Python float as Triton source (``float('inf')`` for infinities, ``float('nan')``)."""
    return f"float('{v}')" if not math.isfinite(v) else repr(v)


def _literal_value(text: str) -> float | None:
    """The value of a float literal as ``literal`` writes it for fp32 or fp64 (not infinities,
    NaN or -0.0), else None."""
    m = re.fullmatch(r"tl\.full\(\[\], (.*), tl\.float(?:32|64)\)", text)
    try:
        return float(m.group(1) if m else text)
    except ValueError:
        return None


# ----------------------------------------------------------------------------- division

def fdiv(x: str, y: str, dt: torch.dtype, number: bool = False) -> str:
    """Float division rounded as IEEE 754 (and PyTorch) round it.

    Triton's ``/`` on fp32 lowers to PTX ``div.full.f32`` (up to 2 ulp off, e.g.
    ``4.6875 / 0.9375`` gives 5.0000005), so fp32 (and the fp32 compute of fp16/bf16) uses
    ``tl.math.div_rn``; fp64's ``/`` is already ``div.rn.f64``.

    In fp32, a literal divisor that is a power of two whose reciprocal is a normal number (a
    mean's backward dividing by 1024) becomes a multiplication by that reciprocal: both are
    the exact quotient rounded once, so the values are the same, without a division's
    instructions and the call to its slow path.

    With ``number`` (``x / 3.0``, an ATen division by a Python number), other literal divisors
    go through ``tf_div_by_number``: on a GPU a multiplication by the reciprocal rounded to
    ``dt``, as PyTorch's CUDA kernels compute it, on CPU tensors a division, as its CPU kernels
    do; either way bitwise eager's on that device."""
    d = _literal_value(y)
    if d is not None and dt == torch.float32 and math.isfinite(d):
        mant, exp = math.frexp(d)
        if abs(mant) == 0.5 and -125 <= 1 - exp <= 127:  # 1 / d = 2**(1 - exp), a normal number
            return f"({x} * {1.0 / d!r})"
    if d is not None and number and dt in (torch.float32, torch.float64):
        return f"tf_div_by_number({x}, {y}, {_reciprocal(d, dt)})"
    if dt == torch.float64:
        return f"({x} / {y})"
    return f"tl.math.div_rn({x}, {y})"


def _reciprocal(d: float, dt: torch.dtype) -> str:
    """``1 / d`` rounded to ``dt``, as PyTorch's CUDA kernels compute it once per launch."""
    inv = (torch.ones((), dtype=dt) / torch.tensor(d, dtype=dt)).item()
    return f"tl.full([], {_float_text(inv)}, {triton_dtype(dt)})"


def one_element(v: Any) -> bool:
    """Whether tensor value ``v`` holds one element (static sizes all 1), possibly seen through
    layout ops (``expand`` of a 0-dim tensor): the operand PyTorch's CPU kernels treat as a
    scalar (``TensorIterator::is_scalar``: every stride 0 in the iteration)."""
    from .ops import REGISTRY

    while isinstance(v, Value) and v.meta is not None:
        if all(isinstance(s, int) and s == 1 for s in v.meta.shape):
            return True
        p = v.producer
        if p is None or p.is_call or REGISTRY[p.op].kind != "layout":
            return False
        v = p.inputs[0]
    return False


def parse_div(args, kwargs):
    """``div(a, b, rounding_mode=None)``. For a rounding mode, ``divisor`` records a divisor
    that is a Python number (``"number"``) or a one-element tensor (``"one_element"``), which
    PyTorch's kernels divide by in their own ways (:func:`emit_div`)."""
    inputs = list(args[:2])
    mode = args[2] if len(args) > 2 else kwargs.get("rounding_mode")
    for x in inputs:
        if isinstance(x, complex):
            raise Unsupported("complex scalar")
    attrs = {}
    if isinstance(inputs[1], Value) and inputs[1].meta is None:
        attrs["divisor"] = "runtime_number"  # a symbolic int: a number, known at run time
    if mode is not None:
        attrs["rounding_mode"] = mode
        if not isinstance(inputs[1], Value):
            attrs["divisor"] = "number"
        elif one_element(inputs[1]):
            attrs["divisor"] = "one_element"
    return inputs, attrs


def emit_div(a, dt, at):
    """``div`` in compute dtype ``dt`` (fp32 for fp16/bf16 tensors, whose dtype is the attrs'
    ``common_dtype``), as PyTorch's kernels on each device compute it:

    * ``trunc``: ``trunc(a / b)``; the quotient of fp16/bf16 tensors rounded to their dtype
      first (both devices' kernels divide in ``scalar_t``), except by a one-element divisor on
      CPU tensors (an fp32 division there). By a number: ``trunc(a * (1 / b))`` on a GPU, a
      division on CPU tensors.
    * ``floor``: PyTorch's ``div_floor_floating`` (``c10/util/generic_math.h``): fp32 steps
      with the floor held in fp16/bf16 on a GPU; every step rounded to fp16/bf16 on CPU
      tensors (its vector kernel), fp32 by a one-element divisor there. By a number: on a GPU
      the same steps with multiplications by ``1 / b``; on CPU tensors fp32 divisions.

    Raises:
        Unsupported: an unknown rounding mode.
    """
    mode = at.get("rounding_mode")
    x, y = a
    divisor = at.get("divisor")
    if mode not in (None, "trunc", "floor"):
        raise Unsupported(f"rounding_mode {mode}")
    if divisor == "runtime_number" and dt in (torch.float32, torch.float64):
        return _div_by_runtime_number(x, y, dt, mode, at.get("common_dtype", dt))
    if mode is None:
        return fdiv(x, y, dt, number=True)  # a literal divisor here is a Python number
    if not is_float(dt):
        return f"tf_div_{mode}_int({x}, {y})"
    st = at.get("common_dtype", dt)  # the dtype eager's kernel computes on (scalar_t)
    f32 = dt != torch.float64
    if divisor == "number":
        if mode == "trunc":
            return f"libdevice.trunc({fdiv(x, y, dt, number=True)})"
        d = _literal_value(y)
        if d == 0:  # a true division by zero on both devices (CUDA's div_true_kernel, CPU's a / 0)
            return f"tf_div_by_number({x}, {y}, {_reciprocal(0.0, dt)})"
        if d is None:  # infinite, NaN or -0.0: the divisions and the reciprocal's products agree
            return f"tf_div_floor_float({x}, {y}, {f32})"
        return f"tf_div_floor_by_number({x}, {y}, {_reciprocal(d, dt)}, {triton_dtype(st)}, {f32})"
    if st not in HALF_DTYPES:
        if mode == "trunc":
            return f"libdevice.trunc({fdiv(x, y, dt)})"
        return f"tf_div_floor_float({x}, {y}, {f32})"
    one = "_by_one_element" if divisor == "one_element" else ""
    if mode == "trunc":
        q = fdiv(x, y, dt)
        q = f"tf_quotient{one}({q}, {triton_dtype(st)})" if one else f"{q}.to({triton_dtype(st)}).to(tl.float32)"
        return f"libdevice.trunc({q})"
    return f"tf_div_floor_half{one}({x}, {y}, {triton_dtype(st)})"


def _div_by_runtime_number(x: str, y: str, dt: torch.dtype, mode: str | None, st: torch.dtype) -> str:
    """``div`` by a number known at run time (a symbolic int, read in ``dt``), as by a constant
    (:func:`emit_div`): its reciprocal, rounded to ``dt``, computed in the kernel once per
    program, where the constant's is computed when the kernel is written; a floor division by
    zero is a true division, as PyTorch's CUDA kernel makes it."""
    inv = f"(1.0 / {y})" if dt == torch.float64 else f"tl.math.div_rn(tl.full([], 1.0, tl.float32), {y})"
    true = f"tf_div_by_number({x}, {y}, {inv})"
    if mode is None:
        return true
    if mode == "trunc":
        return f"libdevice.trunc({true})"
    floor = f"tf_div_floor_by_number({x}, {y}, {inv}, {triton_dtype(st)}, {dt != torch.float64})"
    return f"tl.where({y} == 0, {true}, {floor})"


def div_promotion(attrs):
    from torch._prims_common import ELEMENTWISE_TYPE_PROMOTION_KIND as PROMOTE

    return PROMOTE.DEFAULT if attrs.get("rounding_mode") else PROMOTE.INT_TO_FLOAT


def div_numbers(position: int, attrs: dict) -> str:
    """How ``div`` reads a Python number operand (see the module doc): a divisor in the
    compute dtype (by its reciprocal on a GPU, ``emit_div``); a dividend of a division with a
    rounding mode in the tensors' dtype (the general kernels), of a true division in the
    compute dtype on a GPU and rounded on CPU tensors (only the divisor is a scalar there)."""
    if position == 1:
        return "compute"
    return "common" if attrs.get("rounding_mode") else "device"


def _fp64(a, dt) -> tuple[list, str]:
    """fp32 operands of ``fmod`` widened to fp64, and the cast back. Under Triton's default
    flush-to-zero in libdevice (nvvm-reflect), its fp32 ``fmod`` read a subnormal operand as 0
    (``2 % -3e-39``: NaN against eager's -1.2e-39 on an H200); kernels now compile without it
    (:func:`torchfuse.runtime.compile.triton_options`), and this exact form stays until the fp32
    one is measured that way. In fp64 every fp32 (and bf16) value is normal, and the remainder,
    exact, rounds back to fp32 exactly."""
    if dt != torch.float32:
        return list(a), ""
    return [f"tl.cast({x}, tl.float64)" for x in a], ".to(tl.float32)"


def emit_remainder(a, dt, at):
    if is_float(dt):
        (x, y), back = _fp64(a, dt)
        return f"tf_remainder_float({x}, {y}){back}"
    return f"tf_remainder_int({a[0]}, {a[1]})"


def emit_fmod(a, dt, at):
    if is_float(dt):
        (x, y), back = _fp64(a, dt)
        return f"libdevice.fmod({x}, {y}){back}"
    return f"tf_fmod_int({a[0]}, {a[1]})"
