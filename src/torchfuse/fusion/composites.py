"""Building blocks of the op namespace composed of its primitive ops.

Each is written with ``fd.ops`` primitives only, so it adds nothing to the IR but the
primitives it applies, and fuses like them. As PyTorch's kernels do, fp16 and bf16 inputs are
computed in fp32 and rounded once at the end. Normalizations take the dims they normalize
over (default: the last) and parameters of the normalized dims' shape (broadcast here).
"""
from __future__ import annotations

import math
from typing import Sequence

import torch

HALF = (torch.float16, torch.bfloat16)


class Composites:
    """Mixed into :class:`torchfuse.fusion.ops.Ops`; methods use its primitives."""

    def _compute(self, x):
        """``x`` in the dtype its math runs in (fp32 for fp16/bf16)."""
        return self.cast(x, torch.float32) if x.dtype in HALF else x

    def _result(self, y, dtype: torch.dtype):
        return self.cast(y, dtype) if y.dtype != dtype else y

    def _param(self, p, x, dims: Sequence[int]):
        """A weight or bias over ``dims`` of ``x``, broadcast to ``x``'s rank."""
        if p.ndim == x.ndim:
            return p
        shape = [x.shape[d] if d in dims else 1 for d in range(x.ndim)]
        return self.broadcast_in_dim(p, shape, list(dims))

    def silu(self, x):
        """SiLU (swish), ``x / (1 + exp(-x))`` in fp32 for fp16/bf16, rounded once: the formula
        of PyTorch's kernels (and of the compiler's ``aten.silu``), so values are eager's
        where the device's ``exp`` is."""
        xf = self._compute(x)
        return self._result(self.div(xf, self.add(self.exp(self.neg(xf)), 1.0)), x.dtype)

    def gelu(self, x, approximate: str = "none"):
        """GELU: ``x * Phi(x)`` with the erf (``"none"``) or tanh (``"tanh"``) form."""
        xf = self._compute(x)
        if approximate == "tanh":
            inner = self.mul(self.add(xf, self.mul(self.mul(self.mul(xf, xf), xf), 0.044715)), math.sqrt(2 / math.pi))
            y = self.mul(self.mul(xf, 0.5), self.add(self.tanh(inner), 1.0))
        else:
            y = self.mul(self.mul(xf, 0.5), self.add(self.erf(self.mul(xf, 1 / math.sqrt(2))), 1.0))
        return self._result(y, x.dtype)

    def softmax(self, x, dim: int = -1):
        """``exp(x - max) / sum(exp(x - max))`` along ``dim``."""
        xf = self._compute(x)
        shifted = self.sub(xf, self.amax(xf, dim, keepdim=True))
        e = self.exp(shifted)
        return self._result(self.div(e, self.sum(e, dim, keepdim=True)), x.dtype)

    def dropout(self, x, p: float):
        """Zero each element with probability ``p`` and scale the rest by ``1 / (1 - p)``.

        Returns:
            ``(result, keep)``: ``keep`` is the bool mask of kept elements.
        """
        if not 0 <= p <= 1:
            raise ValueError(f"dropout: p={p} is not a probability")
        keep = self.lt(self.rand_like(x, dtype=torch.float32), 1.0 - p)
        scale = 0.0 if p == 1 else 1.0 / (1.0 - p)
        return self.where(keep, self.mul(x, scale), 0.0), keep

    def layer_norm(self, x, weight=None, bias=None, dims: Sequence[int] | int = -1, eps: float = 1e-5):
        """Layer normalization over ``dims``: ``(x - mean) * rstd * weight + bias``.

        Returns:
            ``(result, mean, rstd)``; ``mean`` and ``rstd`` are fp32 for fp16/bf16 inputs and
            keep the normalized dims as size 1.
        """
        dims = self._dims("layer_norm", x, dims)
        xf = self._compute(x)
        var, mean = self.var_mean(xf, dims, correction=0, keepdim=True)
        rstd = self.rsqrt(self.add(var, eps))
        y = self.mul(self.sub(xf, mean), rstd)
        if weight is not None:
            y = self.mul(y, self._param(weight, x, dims))
        if bias is not None:
            y = self.add(y, self._param(bias, x, dims))
        return self._result(y, x.dtype), mean, rstd

    def rms_norm(self, x, weight=None, dims: Sequence[int] | int = -1, eps: float = 1e-6):
        """RMS normalization over ``dims``: ``x * rsqrt(mean(x**2) + eps) * weight``.

        Returns:
            ``(result, rstd)``; ``rstd`` keeps the normalized dims as size 1.
        """
        dims = self._dims("rms_norm", x, dims)
        xf = self._compute(x)
        rstd = self.rsqrt(self.add(self.mean(self.mul(xf, xf), dims, keepdim=True), eps))
        y = self.mul(xf, rstd)
        if weight is not None:
            y = self.mul(y, self._param(weight, x, dims))
        return self._result(y, x.dtype), rstd
