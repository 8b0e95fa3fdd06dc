"""``libdevice`` for Triton's interpreter.

Triton's interpreter (``TRITON_INTERPRET``) runs kernels with NumPy but has no
implementation of the ``libdevice`` math library, which generated kernels call for accurate
transcendental functions. This module stands in for ``triton.language.extra.libdevice`` in
kernels loaded for the interpreter: each function evaluates with PyTorch's own CPU kernel on
the interpreter tensor's NumPy data, so results are PyTorch's.
"""
from __future__ import annotations

import numpy as np
import torch


def _wrap(fn):
    def call(*args):
        import triton.language as tl
        from triton.runtime.interpreter import TensorHandle

        first = next(a for a in args if isinstance(a, tl.tensor))
        datas = []
        for a in args:
            if isinstance(a, tl.tensor):
                datas.append(torch.from_numpy(np.ascontiguousarray(a.handle.data)))
            else:  # a number (a literal operand): a 0-dim tensor, as torch's functions take
                value = a.value if isinstance(a, tl.constexpr) else a
                datas.append(torch.tensor(value, dtype=torch.from_numpy(first.handle.data[:0]).dtype)
                             if isinstance(value, (int, float)) else value)
        result = fn(*datas)
        out = result.numpy().astype(first.handle.data.dtype, copy=False)
        ttype = tl.block_type(first.dtype, list(out.shape)) if out.shape else first.dtype
        return tl.tensor(TensorHandle(np.array(out), first.dtype.scalar), ttype)

    call.__name__ = getattr(fn, "__name__", "libdevice_fn")
    return call


def fma(a, b, c) -> torch.Tensor:
    """``a * b + c`` rounded once (IEEE 754 fusedMultiplyAdd), as ``libdevice.fma`` on a GPU and
    the CPU's vector ``fmadd``; NumPy has no such operation. Numbers take the first tensor's
    dtype (fp32 or fp64).

    fp32: the product is exact in fp64 and the fp64 sum's rounding error exact (TwoSum); the sum
    rounded to odd (nudged one fp64 ulp toward the error when it was inexact and even) then
    rounds to fp32 as the exact value would (Boldo and Melquiond, "Emulation of FMA and
    correctly rounded sums: proved algorithms using rounding to odd", 2008). fp64: exact
    rational arithmetic per finite element. With a non-finite operand the product is taken
    exact: an infinite ``c`` with finite ``a`` and ``b`` is ``c`` (``a * b`` would overflow to inf
    first and give NaN against ``-c``).
    """
    dtype = next(x.dtype for x in (a, b, c) if isinstance(x, torch.Tensor))
    a, b, c = (x if isinstance(x, torch.Tensor) else torch.tensor(x, dtype=dtype) for x in (a, b, c))
    a, b, c = torch.broadcast_tensors(a.to(dtype), b.to(dtype), c.to(dtype))
    if dtype == torch.float64:
        from fractions import Fraction

        out = a * b + c
        finite = (a.isfinite() & b.isfinite() & c.isfinite()).reshape(-1)
        flat_a, flat_b, flat_c, flat_out = a.reshape(-1), b.reshape(-1), c.reshape(-1), out.view(-1)
        for i in finite.nonzero().reshape(-1).tolist():
            exact = Fraction(flat_a[i].item()) * Fraction(flat_b[i].item()) + Fraction(flat_c[i].item())
            if exact != 0:  # (an exact zero keeps the sign the plain sum gives it)
                try:
                    flat_out[i] = float(exact)
                except OverflowError:
                    flat_out[i] = float("inf") if exact > 0 else float("-inf")
        return torch.where(c.isinf() & a.isfinite() & b.isfinite(), c, out)
    p = a.double() * b.double()
    wide_c = c.double()
    s = p + wide_c
    v = s - p
    err = (p - (s - v)) + (wide_c - v)
    even = (s.view(torch.int64) & 1) == 0
    nudge = s.isfinite() & (err != 0) & even
    s = torch.where(nudge, torch.nextafter(s, torch.where(err > 0, torch.inf, -torch.inf).double()), s)
    return s.to(dtype)  # (an fp32 product is finite in fp64: non-finite operands sum as IEEE's fma)


def fmod(a, b) -> torch.Tensor:
    """C's exact ``fmod`` (the remainder with the dividend's sign), as ``libdevice.fmod`` on a
    GPU. PyTorch's vectorized CPU kernel divides instead, which overflows for a divisor many
    orders of magnitude smaller than the dividend (``fmod(2, -3e-39)``: NaN from 16 elements
    on, 1.8e-39 from its scalar loop); the exact remainder is representable in the operands'
    format, so it is computed in fp64 with NumPy and rounded back exactly."""
    dtype = next(x.dtype for x in (a, b) if isinstance(x, torch.Tensor))
    a, b = (x.double().numpy() if isinstance(x, torch.Tensor) else np.float64(x) for x in (a, b))
    with np.errstate(invalid="ignore", divide="ignore"):
        return torch.from_numpy(np.asarray(np.fmod(a, b))).to(dtype)


_FUNCTIONS = {
    "exp": torch.exp, "exp2": torch.exp2, "expm1": torch.expm1, "log": torch.log, "log2": torch.log2,
    "log10": torch.log10, "log1p": torch.log1p, "sqrt": torch.sqrt, "sqrt_rn": torch.sqrt, "rsqrt": torch.rsqrt,
    "sin": torch.sin, "cos": torch.cos, "tan": torch.tan, "asin": torch.asin, "acos": torch.acos,
    "atan": torch.atan, "sinh": torch.sinh, "cosh": torch.cosh, "tanh": torch.tanh, "asinh": torch.asinh,
    "acosh": torch.acosh, "atanh": torch.atanh, "erf": torch.erf, "erfc": torch.erfc,
    "erfinv": torch.erfinv, "lgamma": torch.lgamma, "floor": torch.floor, "ceil": torch.ceil,
    "trunc": torch.trunc, "nearbyint": torch.round, "pow": torch.pow, "atan2": torch.atan2,
    "hypot": torch.hypot, "copysign": torch.copysign, "fmod": fmod, "fma": fma,
}


class _Namespace:
    pass


libdevice = _Namespace()
for _name, _fn in _FUNCTIONS.items():
    setattr(libdevice, _name, _wrap(_fn))
