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
            else:
                datas.append(a.value if isinstance(a, tl.constexpr) else a)
        result = fn(*datas)
        out = result.numpy().astype(first.handle.data.dtype, copy=False)
        ttype = tl.block_type(first.dtype, list(out.shape)) if out.shape else first.dtype
        return tl.tensor(TensorHandle(np.array(out), first.dtype.scalar), ttype)

    call.__name__ = getattr(fn, "__name__", "libdevice_fn")
    return call


_FUNCTIONS = {
    "exp": torch.exp, "exp2": torch.exp2, "expm1": torch.expm1, "log": torch.log, "log2": torch.log2,
    "log10": torch.log10, "log1p": torch.log1p, "sqrt": torch.sqrt, "rsqrt": torch.rsqrt,
    "sin": torch.sin, "cos": torch.cos, "tan": torch.tan, "asin": torch.asin, "acos": torch.acos,
    "atan": torch.atan, "sinh": torch.sinh, "cosh": torch.cosh, "tanh": torch.tanh, "asinh": torch.asinh,
    "acosh": torch.acosh, "atanh": torch.atanh, "erf": torch.erf, "erfc": torch.erfc,
    "erfinv": torch.erfinv, "lgamma": torch.lgamma, "floor": torch.floor, "ceil": torch.ceil,
    "trunc": torch.trunc, "nearbyint": torch.round, "pow": torch.pow, "atan2": torch.atan2,
    "hypot": torch.hypot, "copysign": torch.copysign, "fmod": torch.fmod,
}


class _Namespace:
    pass


libdevice = _Namespace()
for _name, _fn in _FUNCTIONS.items():
    setattr(libdevice, _name, _wrap(_fn))
