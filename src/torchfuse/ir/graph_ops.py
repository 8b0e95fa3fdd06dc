"""Graph-level ops that torchfuse adds to PyTorch's, for decompositions that ATen cannot express.

``torch.ops.torchfuse_ops.fma(a, b, c)`` is ``a * b + c`` rounded once (IEEE 754
fusedMultiplyAdd), in the operands' promoted dtype, or for fp16/bf16 in fp32 and then rounded
to it. PyTorch's ``addcmul`` and ``lerp`` kernels compute a fused multiply-add on both devices
(``std::fma`` and nvcc's contraction on CUDA, ``vec::fmadd`` on CPU), which no chain of ATen ops
reproduces: a ``mul`` rounds its product. The decompositions in :mod:`torchfuse.decompose`
write these ops with it, and the registry fuses it as ``libdevice.fma``.

Run through ATen (an unfused graph, or a fusion group's fallback), it calls ``addcmul`` with
``value=1``, which PyTorch's kernels compute as ``fma(tensor1, tensor2, self)``.

PyTorch's own ``prims.fma`` (``torch._inductor.inductor_prims``, which TorchDynamo writes for
``Tensor.add_`` with a tensor ``alpha`` and ``Tensor.addcdiv_`` with a ``value``) has the same
meaning but rounds the product when it runs through ATen; the registry fuses it as this op.
"""
from __future__ import annotations

import torch

#: the library namespace, apart from ``torchfuse``, where :func:`torchfuse.fused` registers
#: users' ops by their own names
NAMESPACE = "torchfuse_ops"


@torch.library.custom_op(f"{NAMESPACE}::fma", mutates_args=())
def fma(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    """``a * b + c`` rounded once; broadcast shapes, the promoted dtype (type promotion's
    ``DEFAULT`` kind), ``addcmul``'s layout. Raises what ``torch.addcmul`` raises (shapes that
    do not broadcast, integer or bool operands mixed with floats it cannot promote)."""
    return torch.addcmul(c, a, b)


@fma.register_fake
def _fma_fake(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    return torch.addcmul(c, a, b)


FMA = torch.ops.torchfuse_ops.fma.default
