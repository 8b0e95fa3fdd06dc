"""Graph-level ops that torchfuse adds to PyTorch's, for decompositions that ATen cannot express.

``torch.ops.torchfuse_ops.fma(a, b, c)`` is ``a * b + c`` rounded once (IEEE 754
fusedMultiplyAdd), in the operands' promoted dtype, or for fp16/bf16 in fp32 and then rounded
to it. PyTorch's ``addcmul`` and ``lerp`` kernels compute a fused multiply-add on both devices
(``std::fma`` and nvcc's contraction on CUDA, ``vec::fmadd`` on CPU), which no chain of ATen ops
reproduces: a ``mul`` rounds its product. The decompositions in :mod:`torchfuse.kernel_formulas`
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


def fma_reference(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    """What :func:`fma` computes, with ATen ops that autograd and functorch differentiate."""
    from torch._prims_common import ELEMENTWISE_TYPE_PROMOTION_KIND, elementwise_dtypes

    _, result = elementwise_dtypes(a, b, c, type_promotion_kind=ELEMENTWISE_TYPE_PROMOTION_KIND.DEFAULT)
    if result in (torch.float16, torch.bfloat16) and b.numel() == 1 and b.dtype != result:
        # a one-element multiplier of another dtype is read unrounded, as a kernel's Scalar
        return torch.addcmul(c.float(), a.float(), b.float()).to(result)
    return torch.addcmul(c, a, b)


@torch.library.custom_op(f"{NAMESPACE}::fma", mutates_args=())
def fma(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    """``a * b + c`` rounded once; broadcast shapes, the promoted dtype (type promotion's
    ``DEFAULT`` kind), ``addcmul``'s layout. A one-element ``b`` of another dtype than fp16/bf16
    ``a`` and ``c`` is read unrounded, as ATen's kernels read a ``Scalar`` (``prims.fma``'s
    multiplier: a tensor learning rate). Raises what ``torch.addcmul`` raises (shapes that do
    not broadcast, integer or bool operands mixed with floats it cannot promote)."""
    return fma_reference(a, b, c)


@fma.register_fake
def _fma_fake(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    return fma_reference(a, b, c)


def _fma_setup_context(ctx, inputs, output) -> None:
    a, b, c = inputs
    ctx.save_for_backward(a, b)
    ctx.c_shape, ctx.c_dtype = c.shape, c.dtype


def _fma_backward(ctx, grad: torch.Tensor):
    """Gradients of ``a * b + c``: ``grad * b``, ``grad * a`` and ``grad``, each summed to its
    operand's shape (over broadcast dims) and cast to its dtype."""
    a, b = ctx.saved_tensors
    shapes = (a.shape, b.shape, ctx.c_shape)
    dtypes = (a.dtype, b.dtype, ctx.c_dtype)
    grads = (grad * b, grad * a, grad)
    return tuple(g.sum_to_size(shape).to(dtype) if need else None
                 for g, shape, dtype, need in zip(grads, shapes, dtypes, ctx.needs_input_grad))


torch.library.register_autograd(f"{NAMESPACE}::fma", _fma_backward, setup_context=_fma_setup_context)


FMA = torch.ops.torchfuse_ops.fma.default
