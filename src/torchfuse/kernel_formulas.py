"""Decompositions that compute as ATen's kernels do where PyTorch's own decompositions round
otherwise: activation and softmax gradients, losses, and ``lerp``, ``addcmul`` and ``addcdiv``.

Each follows the formula of ATen's kernel for its device, read in PyTorch's source and checked
bit for bit against eager on an H100 and on a CPU (benchmarks/NOTES.md): which steps round to
fp16/bf16, which multiply and add nvcc contracts into one fused multiply-add (``FMA``), which
division is a true one. :mod:`torchfuse.decompose` puts them in its table.
"""
from __future__ import annotations

import functools
import struct

import torch
from torch._prims_common import get_computation_dtype

from .ir.graph_ops import FMA

aten = torch.ops.aten


def logit_backward(grad_output: torch.Tensor, self: torch.Tensor, eps: float | None = None) -> torch.Tensor:
    """``aten.logit_backward`` as ATen's CUDA kernel computes it (``logit_backward_kernel_cuda``
    in aten/src/ATen/native/cuda/BinaryMiscBackwardOpsKernels.cu): in the accumulation type
    (fp32 for fp16, bf16 and fp32; fp64 for fp64), ``grad / (x * (1 - x))``, NaN outside [0, 1]
    without ``eps`` (or with a negative one), 0 outside [eps, 1 - eps] with it, rounded once to
    the input's dtype; a NaN ``x`` compares inside either way, so its gradient is NaN.

    PyTorch's decomposition keeps the quotient only where ``x`` compares inside, so with
    ``eps`` a NaN ``x`` got a 0 gradient, and it reads a negative ``eps`` as bounds. (CPU eager
    compares and divides in the input's dtype: in bf16 ``1 - 1e-6`` is 1, so at ``x = 1`` its
    gradient is infinite where CUDA's is 0; its scalar loop multiplies ``grad`` by inf at 0
    and 1 where its vector loop and CUDA divide, so the sign at -0.0 differs between them.)"""
    acc = torch.promote_types(self.dtype, torch.float32)
    x = self.to(acc)
    quotient = grad_output.to(acc) / (x * (1.0 - x))
    if eps is not None and eps >= 0:
        hi = 1.0 - eps if acc == torch.float64 else _to_fp32(1.0 - _to_fp32(eps))  # ``T_ACC(1) - eps``
        result = torch.where((x < eps) | (x > hi), 0.0, quotient)
    else:
        result = torch.where((x < 0) | (x > 1), float("nan"), quotient)
    return result.to(self.dtype)


def _to_fp32(value: float) -> float:
    """``value`` rounded to fp32 (to nearest, ties to even), as a Python float."""
    return struct.unpack("f", struct.pack("f", value))[0]


def kernel_device(device: torch.device) -> str:
    """Whose ATen kernels a decomposition follows where the devices' kernels round differently:
    ``device.type``, ``"cuda"`` or ``"cpu"``. (Tests of the CUDA formulas on a machine without a
    GPU replace this function.)"""
    return device.type


def _contracts_on(device: torch.device) -> bool:
    """Whether ATen's kernels on ``device`` have a multiply and an add contracted into one fused
    multiply-add where their source writes ``a * b + c`` (nvcc's default ``--fmad=true``; GCC's
    contraction of ``Vectorized<float>`` arithmetic in the AVX2 and AVX512 CPU kernels, absent
    from the ``DEFAULT`` capability's)."""
    if kernel_device(device) != "cpu":
        return True
    return torch.backends.cpu.get_cpu_capability() != "DEFAULT"


def _fma(a, b: torch.Tensor, c, contract: bool) -> torch.Tensor:
    """``a * b + c`` in ``b``'s dtype: one fused multiply-add where the kernel's compiler
    contracts it (``contract``), else the product rounded first. A number ``a`` or ``c`` is
    converted to that dtype, as a kernel's ``constexpr`` of its opmath type."""
    if not contract:
        return a * b + c
    a, c = (aten.full_like(b, v) if not isinstance(v, torch.Tensor) else v for v in (a, c))
    return FMA(a, b, c)


def _one_minus_square(y: torch.Tensor, contract: bool) -> torch.Tensor:
    """``1 - y * y``: ``fma(-y, y, 1)`` where the kernel's compiler contracts it."""
    return _fma(aten.neg.default(y), y, 1, contract)


def tanh_backward(out_grad: torch.Tensor, y: torch.Tensor, *, reference) -> torch.Tensor:
    """``aten.tanh_backward`` (``out_grad * (1 - y * y)``) as each device's ATen kernel rounds it.
    CUDA's ``tanh_backward_kernel_cuda`` computes in the tensors' own dtype: fp16/bf16 round
    every step, and nvcc contracts the fp32/fp64 form into ``out_grad * fma(-y, y, 1)``. The CPU
    kernel computes fp16/bf16 in fp32, with the contraction on AVX2/AVX512 builds. (PyTorch's
    decomposition computes in fp32 and rounds the square: on an H100, 72% of fp32 and 47% of
    fp16 elements were an ulp from eager's.) Other dtypes (complex, mixed) take PyTorch's
    decomposition, ``reference``."""
    dtype = out_grad.dtype
    if not (dtype.is_floating_point and y.dtype == dtype):
        return reference(out_grad, y)
    if kernel_device(y.device) == "cuda" and dtype in (torch.float16, torch.bfloat16):
        return out_grad * (1 - y * y)
    op = get_computation_dtype(dtype)
    out = out_grad.to(op) * _one_minus_square(y.to(op), _contracts_on(y.device))
    return out.to(dtype)


def sigmoid_backward(out_grad: torch.Tensor, y: torch.Tensor, *, reference) -> torch.Tensor:
    """``aten.sigmoid_backward`` as each device's ATen kernel rounds it: ``(out_grad * (1 - y)) *
    y``, in that order (PyTorch's decomposition multiplies ``y * (1 - y)`` first). CUDA's
    ``sigmoid_backward_kernel_cuda`` computes in the tensors' own dtype (fp16/bf16 round every
    step); the CPU kernel does so for fp16 and computes bf16 in fp32, rounding once (measured
    on both devices, bit for bit). Other dtypes take PyTorch's decomposition, ``reference``."""
    dtype = out_grad.dtype
    if not (dtype.is_floating_point and y.dtype == dtype):
        return reference(out_grad, y)
    if dtype == torch.bfloat16 and kernel_device(y.device) == "cpu":
        return ((out_grad.float() * (1 - y.float())) * y.float()).to(dtype)
    return (out_grad * (1 - y)) * y


#: GELU's tanh-form constants as ATen's kernels write them (``GeluCUDAKernelImpl.cu``,
#: ``ATen/native/cpu/Activation.cpp``): sqrt(2) * 2 / sqrt(pi) * 0.5 and 0.044715
_GELU_BETA, _GELU_KAPPA = 1.41421356237309504880 * 1.12837916709551257390 * 0.5, 0.044715


def _opmath(t: torch.Tensor) -> tuple[torch.Tensor, torch.dtype, bool]:
    """``t`` in its opmath dtype, that dtype, and whether the kernels of ``t``'s device contract
    multiply-adds."""
    op = get_computation_dtype(t.dtype)
    return t.to(op), op, _contracts_on(t.device)


def gelu(self: torch.Tensor, approximate: str = "none", *, reference) -> torch.Tensor:
    """``aten.gelu``: the tanh form as ATen's kernels compute it, in the opmath dtype, ``0.5 * x
    * (1 + tanh(beta * fma(kappa, x**3, x)))`` (nvcc's contraction; the CPU's vector kernel's),
    rounded once; on an H100, PyTorch's decomposition was an ulp from eager's in 0.4% of fp32
    elements. The erf form, whose formula PyTorch's decomposition shares, and other dtypes take
    ``reference``."""
    if approximate != "tanh" or not self.dtype.is_floating_point:
        return reference(self, approximate)
    x, op, contract = _opmath(self)
    beta, kappa = _in_dtype(_GELU_BETA, op), _in_dtype(_GELU_KAPPA, op)
    inner = _fma(kappa, x * x * x, x, contract) * beta
    return ((x * 0.5) * (aten.tanh.default(inner) + 1)).to(self.dtype)


def gelu_backward(grad: torch.Tensor, self: torch.Tensor, approximate: str = "none", *,
                  reference) -> torch.Tensor:
    """``aten.gelu_backward``: the tanh form as ATen's kernels compute it (``GeluCUDAKernelImpl.cu``),
    in the opmath dtype, with nvcc's contractions: ``inner = beta * fma(kappa, x**3, x)``, ``t =
    tanh(inner)``, ``grad * (0.5 * (1 + t) + (0.5 * x * fma(-t, t, 1)) * (beta * fma(3 * kappa,
    x**2, 1)))``, ``3 * kappa`` rounded in the opmath dtype as the kernel's constant; rounded once.
    On an H100, PyTorch's decomposition was a 16-bit ulp from eager's in 0.3% of fp16 elements.
    The erf form and other dtypes take ``reference``."""
    if approximate != "tanh" or not (self.dtype.is_floating_point and grad.dtype == self.dtype):
        return reference(grad, self, approximate)
    x, op, contract = _opmath(self)
    beta, kappa = _in_dtype(_GELU_BETA, op), _in_dtype(_GELU_KAPPA, op)
    x_sq = x * x
    t = aten.tanh.default(_fma(kappa, x_sq * x, x, contract) * beta)
    left = x * 0.5
    left_derivative = (t + 1) * 0.5
    inner_derivative = _fma(_in_dtype(3 * kappa, op), x_sq, 1, contract) * beta
    # ``left_derivative + right_derivative``: the compilers contract the first product,
    # ``0.5 * right``, which is exact, so the sum is rounded from the rounded right derivative
    total = left_derivative + (left * _one_minus_square(t, contract)) * inner_derivative
    return (grad.to(op) * total).to(self.dtype)


def _sigmoid_as_kernels(x: torch.Tensor) -> torch.Tensor:
    """``1 / (1 + exp(-x))``, the sigmoid ATen's SiLU and Mish kernels compute, a true division."""
    return aten.reciprocal.default(aten.exp.default(aten.neg.default(x)) + 1)


def silu(self: torch.Tensor, *, reference) -> torch.Tensor:
    """``aten.silu`` as ATen's kernels compute it, ``x / (1 + exp(-x))`` in the opmath dtype,
    rounded once (PyTorch's decomposition multiplies by the sigmoid: on an H100 an ulp from
    eager's in 41% of fp32 elements). Other dtypes take ``reference``."""
    if not self.dtype.is_floating_point:
        return reference(self)
    x, _, _ = _opmath(self)
    return aten.div.Tensor(x, aten.exp.default(aten.neg.default(x)) + 1).to(self.dtype)


def silu_backward(grad_output: torch.Tensor, self: torch.Tensor, *, reference) -> torch.Tensor:
    """``aten.silu_backward`` as ATen's kernels compute it, in the opmath dtype: ``s = 1 / (1 +
    exp(-x))``, ``(grad * s) * fma(x, 1 - s, 1)`` (the contraction where the device's compiler
    makes it), rounded once. Other dtypes take ``reference``."""
    if not (self.dtype.is_floating_point and grad_output.dtype == self.dtype):
        return reference(grad_output, self)
    x, op, contract = _opmath(self)
    s = _sigmoid_as_kernels(x)
    return ((grad_output.to(op) * s) * _fma(x, 1 - s, 1, contract)).to(self.dtype)


def mish_backward(grad_output: torch.Tensor, self: torch.Tensor, *, reference) -> torch.Tensor:
    """``aten.mish_backward`` as ATen's kernels compute it, in the opmath dtype: ``s = 1 / (1 +
    exp(-x))``, ``t = tanh(log1p(exp(x)))``, ``grad * fma(x * s, fma(-t, t, 1), t)`` (the
    contractions where the device's compiler makes them), rounded once. Other dtypes take
    ``reference``."""
    if not (self.dtype.is_floating_point and grad_output.dtype == self.dtype):
        return reference(grad_output, self)
    x, op, contract = _opmath(self)
    s = _sigmoid_as_kernels(x)
    t = aten.tanh.default(aten.log1p.default(aten.exp.default(x)))
    return (grad_output.to(op) * _fma(x * s, _one_minus_square(t, contract), t, contract)).to(self.dtype)


def glu_backward(grad_output: torch.Tensor, self: torch.Tensor, dim: int, *, reference) -> torch.Tensor:
    """``aten.glu_backward`` as ATen's CUDA kernel computes it (``glu_backward_kernel`` in
    aten/src/ATen/native/cuda/ActivationGluKernel.cu), in the opmath dtype with ``a`` and ``b``
    the halves of ``self`` along ``dim``: ``s = 1 / (1 + exp(-b))``, ``s * grad`` for ``a`` and
    ``(1 - s) * s * grad * a`` for ``b``, rounded once. Returns ``self``'s shape and dtype.

    PyTorch's decomposition multiplies by ``a`` before ``grad`` (the CPU kernel's order): on an
    H100, 18% of fp32 elements differed from CUDA eager's. Other devices and dtypes, and halves that
    cannot be split, take it (``reference``)."""
    ok = kernel_device(self.device) == "cuda" and _same_floating_dtype(grad_output, self) and self.dim() > 0
    if not ok or self.shape[dim] % 2:
        return reference(grad_output, self, dim)
    x, op, _ = _opmath(self)
    a, b = x.chunk(2, dim)
    g = grad_output.to(op)
    s = _sigmoid_as_kernels(b)
    return torch.cat([s * g, (1 - s) * s * g * a], dim).to(self.dtype)


def hardswish_backward(grad_output: torch.Tensor, self: torch.Tensor, *, reference) -> torch.Tensor:
    """``aten.hardswish_backward`` as ATen's kernels compute it (CUDA's
    ``hardswish_backward_kernel``, the CPU's vector kernel): in the opmath dtype of the promoted
    dtype of ``grad_output`` and ``self``, ``grad * (self / 3 + 0.5)`` for ``-3 < self < 3``, 0 at
    or below -3, ``grad`` above, rounded once to the promoted dtype. ``self / 3`` is a true
    division there; PyTorch's decomposition divides by the number 3, which on a GPU is a
    multiplication by its reciprocal (eager's ``x / 3`` kernel), 13% of fp32 elements an ulp apart
    on an H100. The divisor is written as a tensor to keep the division. Integer dtypes take
    PyTorch's decomposition (``reference``)."""
    dtype = torch.promote_types(grad_output.dtype, self.dtype)
    if not dtype.is_floating_point:
        return reference(grad_output, self)
    op = get_computation_dtype(dtype)
    x, g = self.to(op), grad_output.to(op)
    inner = g * (x / aten.full_like(x, 3) + 0.5)
    out = aten.where.self(x <= -3, aten.full_like(g, 0), aten.where.self(x < 3, inner, g))
    return out.to(dtype)


def _cuda_and_one_dtype(grad_output: torch.Tensor, output: torch.Tensor) -> bool:
    """Whether a softmax gradient follows CUDA's kernel: CUDA tensors of one floating dtype."""
    return (kernel_device(grad_output.device) == "cuda" and grad_output.dtype == output.dtype
            and output.dtype.is_floating_point)


def softmax_backward_data(grad_output: torch.Tensor, output: torch.Tensor, dim: int,
                          input_dtype: torch.dtype, *, reference) -> torch.Tensor:
    """``aten._softmax_backward_data`` on CUDA tensors as ATen computes it
    (``softmax_backward_cuda_out`` in aten/src/ATen/native/cuda/SoftMax.cu): first ``tmp = grad *
    output``, a separate multiply rounded to the tensors' dtype, then in fp32 ``tmp - output *
    sum(tmp)``, which nvcc contracts into ``fma(-output, sum, tmp)``, rounded to ``input_dtype``.
    PyTorch's decomposition (``reference``, which CPU tensors and mixed dtypes take) keeps the
    product in fp32: on an H100, a quarter of fp16 and a third of bf16 elements were a 16-bit
    ulp from eager's. Returns a contiguous tensor of ``output``'s shape."""
    if not _cuda_and_one_dtype(grad_output, output):
        return reference(grad_output, output, dim, input_dtype)
    op = get_computation_dtype(output.dtype)
    tmp = (grad_output * output).to(op)
    total = aten.sum.dim_IntList(tmp, [dim], True)
    return FMA(aten.neg.default(output.to(op)), total, tmp).to(input_dtype).contiguous()


def log_softmax_backward_data(grad_output: torch.Tensor, output: torch.Tensor, dim: int,
                              input_dtype: torch.dtype, *, reference) -> torch.Tensor:
    """``aten._log_softmax_backward_data`` on CUDA tensors as ATen computes it (SoftMax.cu's
    ``LogSoftMaxBackwardEpilogue``): in fp32, ``grad - exp(output) * sum(grad)`` contracted by nvcc
    into ``fma(-exp(output), sum, grad)``, rounded to ``input_dtype``. CPU tensors and mixed
    dtypes take PyTorch's decomposition (``reference``), which rounds the product."""
    if not _cuda_and_one_dtype(grad_output, output):
        return reference(grad_output, output, dim, input_dtype)
    op = get_computation_dtype(output.dtype)
    g = grad_output.to(op)
    total = aten.sum.dim_IntList(g, [dim], True)
    return FMA(aten.neg.default(aten.exp.default(output.to(op))), total, g).to(input_dtype)


#: 1/6 rounded to fp32, as a Python float (ATen's kernels multiply by ``1.0f / 6.0f``)
_FP32_ONE_SIXTH = _to_fp32(1.0 / 6.0)


def hardsigmoid_backward(grad_output: torch.Tensor, self: torch.Tensor) -> torch.Tensor:
    """``aten.hardsigmoid_backward`` as ATen's kernels compute it: ``grad`` times fp32's 1/6
    inside (-3, 3), else 0, in every dtype (``one_sixth(1.0f / 6.0f)`` in
    aten/src/ATen/native/cpu/Activation.cpp and cuda/ActivationHardsigmoidKernel.cu).
    PyTorch's decomposition divides by 6, which differs by an ulp in fp32 and by 3e-8 relative
    in fp64."""
    return torch.where((self > -3.0) & (self < 3.0), grad_output * _FP32_ONE_SIXTH, 0.0)


def soft_margin_loss(input: torch.Tensor, target: torch.Tensor, reduction: int = 1) -> torch.Tensor:
    """``aten.soft_margin_loss`` as ATen computes it (``soft_margin_loss_out`` in
    aten/src/ATen/native/Loss.cpp, on every device): ``log1p(exp(-input * target))`` one op
    at a time into a tensor of ``input``'s dtype, then the mean or sum (``reduction`` 1 or 2).

    PyTorch's decomposition computes the chain in fp32 for fp16 and bf16 inputs, so where
    eager's fp16 ``exp`` overflows (a loss of ``inf``, which ``GradScaler`` skips) it gave a
    finite loss."""
    return _reduced(torch.log1p(torch.exp((-input * target).to(input.dtype))), reduction)


def soft_margin_loss_backward(grad_output: torch.Tensor, self: torch.Tensor, target: torch.Tensor,
                              reduction: int = 1) -> torch.Tensor:
    """``aten.soft_margin_loss_backward`` as ATen computes it (``soft_margin_loss_backward_out``
    in aten/src/ATen/native/Loss.cpp): ``z = exp(-target * self)``, then ``target * z`` times
    ``-norm`` (``1 / numel`` for the mean, else 1), over ``1 + z``, times ``grad_output``, each
    step rounded to ``self``'s dtype: where ``exp`` overflows, eager's gradient is NaN, which
    PyTorch's decomposition (a sigmoid, in fp32) made finite."""
    # a double, as ``mul_(-norm)`` reads it (not rounded to the dtype)
    norm = 1.0 / self.numel() if reduction == 1 and not _empty_mean(self, reduction) else 1.0
    z = torch.exp(-target * self)
    grad = (target * z).to(self.dtype) * -norm
    grad = (grad / (z + 1)).to(self.dtype)
    return (grad * grad_output).to(self.dtype)


def _in_dtype(value: float, dtype: torch.dtype) -> float:
    """``value`` rounded to ``dtype`` (to nearest, ties to even), as a Python float: a C++
    ``Scalar::to<scalar_t>()`` of a double, as ATen's kernels convert their constants. c10's
    ``Half`` and ``BFloat16`` are made from a ``float``, so a double reaches them through fp32:
    two roundings (``1 / 8283`` in fp16 is an ulp above its direct rounding)."""
    if dtype == torch.float16:
        return struct.unpack("e", struct.pack("e", _to_fp32(value)))[0]
    if dtype == torch.bfloat16:
        bits = struct.unpack("I", struct.pack("f", value))[0]  # fp32 first, then to bf16's 16 bits
        bits = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) << 16
        return struct.unpack("f", struct.pack("I", bits))[0]
    return _to_fp32(value) if dtype == torch.float32 else value


def _empty_mean(self: torch.Tensor, reduction: int) -> bool:
    """Whether a loss gradient is the mean's (``reduction`` 1) over no element: its ``1 / numel``
    would divide by zero in Python (eager's, in double, gives inf), and the gradient has no
    element, so any factor does (PyTorch's decompositions raised ``ZeroDivisionError`` and the
    graph ran unfused)."""
    from torch.fx.experimental.symbolic_shapes import guard_or_false

    return reduction == 1 and guard_or_false(self.numel() == 0)


def _loss_norm(self: torch.Tensor, reduction: int, scale: float = 1.0):
    """A loss gradient's factor, ``scale / numel`` for the mean (``reduction`` 1), else ``scale``
    (also for an empty mean, :func:`_empty_mean`), rounded to ``self``'s dtype as ATen's kernels
    convert their double to ``scalar_t`` (:func:`_in_dtype`): a Python number, or for a symbolic
    size a 0-dim tensor of ``self``'s dtype holding the quotient computed in double."""
    n = self.numel()
    if reduction != 1 or _empty_mean(self, reduction):
        return _in_dtype(scale, self.dtype)
    if isinstance(n, int):
        return _in_dtype(scale / n, self.dtype)
    quotient = torch.full((), scale, dtype=torch.float64, device=self.device) / n
    if self.dtype in (torch.float16, torch.bfloat16):
        quotient = quotient.to(torch.float32)  # through fp32, as c10 converts a double
    return quotient.to(self.dtype)


def _same_floating_dtype(*tensors) -> bool:
    return all(t.dtype == tensors[0].dtype for t in tensors) and tensors[0].dtype.is_floating_point


def mse_loss(self: torch.Tensor, target: torch.Tensor, reduction: int = 1, *, reference) -> torch.Tensor:
    """``aten.mse_loss`` as ATen's kernels compute it (``mse_kernel_cuda`` in
    aten/src/ATen/native/cuda/BinaryMiscOpsKernels.cu, the CPU kernel on ``Vectorized<scalar_t>``):
    the difference and its square each rounded to the inputs' dtype, then reduced (``reduction``:
    0 none, 1 mean, 2 sum). Returns a 0-dim tensor, or ``self``'s shape for none.

    PyTorch's decomposition (``reference``) squares in fp32 for fp16/bf16 and rounds once: a
    third of fp16 elements an ulp from eager's. Mixed dtypes and broadcast shapes go to it."""
    if not _same_floating_dtype(self, target) or self.shape != target.shape:
        return reference(self, target, reduction)
    diff = aten.sub.Tensor(self, target)
    return _reduced(aten.mul.Tensor(diff, diff), reduction)


def _reduced(loss: torch.Tensor, reduction: int) -> torch.Tensor:
    """``loss`` under ``reduction`` (0 none, 1 mean, 2 sum), as ATen's losses reduce their
    elementwise tensor."""
    if reduction == 1:
        return aten.mean.default(loss)
    return aten.sum.default(loss) if reduction == 2 else loss


def _eager_cuda_loss(self: torch.Tensor, target: torch.Tensor, parameter) -> bool:
    """Whether a loss's CUDA decomposition below applies: CUDA tensors of one floating dtype
    and one shape, and a positive number as its parameter (``beta``, ``delta``)."""
    return (kernel_device(self.device) == "cuda" and _same_floating_dtype(self, target) and self.shape == target.shape
            and _plain_number(parameter) and parameter > 0)


def _rounded_distance(self: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """``|self - target|`` rounded to the tensors' dtype, in their opmath dtype: how ATen's CUDA
    loss kernels start (``::abs(a - b)`` in ``scalar_t``, then cast to ``opmath_t``)."""
    return aten.abs.default(aten.sub.Tensor(self, target)).to(get_computation_dtype(self.dtype))


def smooth_l1_loss(self: torch.Tensor, target: torch.Tensor, reduction: int = 1, beta: float = 1.0, *,
                   reference) -> torch.Tensor:
    """``aten.smooth_l1_loss`` of CUDA tensors as ATen's kernel (``smooth_l1_kernel_cuda``)
    computes it: ``z = |self - target|`` rounded to the tensors' dtype, then in the opmath dtype
    ``0.5 * z * z / beta`` below ``beta``, else ``z - 0.5 * beta``, rounded once, with ``beta``
    rounded to the tensors' dtype first. PyTorch's decomposition (``reference``, which CPU
    tensors, mixed dtypes, broadcast shapes and ``beta == 0`` take) computes fp16/bf16 from the
    unrounded difference: 7% of elements a 16-bit ulp from eager's on an H100."""
    if not _eager_cuda_loss(self, target, beta):
        return reference(self, target, reduction, beta)
    b = _in_dtype(float(beta), self.dtype)
    z = _rounded_distance(self, target)
    # a tensor divisor keeps a true division (a number would be a multiplication by 1 / beta)
    quadratic = aten.div.Tensor(aten.mul.Tensor(aten.mul.Tensor(z, 0.5), z), aten.full_like(z, b))
    linear = aten.sub.Tensor(z, 0.5 * b)
    loss = aten.where.self(aten.lt.Scalar(z, b), quadratic, linear).to(self.dtype)
    return _reduced(loss, reduction)


def huber_loss(self: torch.Tensor, target: torch.Tensor, reduction: int = 1, delta: float = 1.0, *,
               reference) -> torch.Tensor:
    """``aten.huber_loss`` as ATen computes it. On CUDA (``huber_kernel_cuda``): the kernel runs in
    the dtype of its output, which is like ``self`` (``at::empty_like(input)``), so a ``target``
    of another dtype is first converted to ``self``'s; then ``z = |self - target|`` rounded to that
    dtype, and in the opmath dtype ``0.5 * z * z`` below ``delta``, else ``delta * (z - 0.5 *
    delta)``, rounded once, with ``delta`` rounded to the dtype first. On the CPU, mixed floating
    dtypes compute in the promoted dtype and store the loss in ``self``'s. Other cases take
    PyTorch's decomposition (``reference``), which computes fp16/bf16 in fp32 from the unrounded
    difference (a third of fp16 elements a 16-bit ulp from eager's on an H100 for ``delta=0.7``)."""
    mixed = self.dtype.is_floating_point and target.dtype.is_floating_point and target.dtype != self.dtype
    if mixed and kernel_device(self.device) == "cuda":
        target = target.to(self.dtype)
    elif mixed:
        # the CPU's TensorIterator promotes the inputs and casts the loss to the output, which is
        # like the input (``at::empty_like(input)``): the promoted loss stored in ``self``'s dtype
        return _reduced(reference(self, target, 0, delta).to(self.dtype), reduction)
    if not _eager_cuda_loss(self, target, delta):
        return reference(self, target, reduction, delta)
    d = _in_dtype(float(delta), self.dtype)
    z = _rounded_distance(self, target)
    quadratic = aten.mul.Tensor(aten.mul.Tensor(z, 0.5), z)
    linear = aten.mul.Tensor(aten.sub.Tensor(z, 0.5 * d), d)
    loss = aten.where.self(aten.lt.Scalar(z, d), quadratic, linear).to(self.dtype)
    return _reduced(loss, reduction)


def mse_loss_backward(grad_output: torch.Tensor, self: torch.Tensor, target: torch.Tensor,
                      reduction: int, *, reference) -> torch.Tensor:
    """``aten.mse_loss_backward`` as ATen's kernels compute it (``mse_backward`` in
    aten/src/ATen/native/cuda/PointwiseOpsKernel.cu): ``alpha * (self - target) * grad``, each
    step rounded to ``self``'s dtype, ``alpha`` (2, or 2 / numel for the mean) converted to it.
    Returns ``self``'s shape and dtype.

    PyTorch's decomposition computes in fp32 for fp16/bf16 and rounds once, so where eager's fp16
    ``2 * (x - y)`` overflows (a gradient of ``inf``, a step ``GradScaler`` skips) it gave a
    finite one. Mixed dtypes go to that decomposition (``reference``), which promotes as eager does."""
    if not _same_floating_dtype(grad_output, self, target):
        return reference(grad_output, self, target, reduction)
    return (self - target) * _loss_norm(self, reduction, 2.0) * grad_output


def smooth_l1_loss_backward(grad_output: torch.Tensor, self: torch.Tensor, target: torch.Tensor,
                            reduction: int, beta: float, *, reference) -> torch.Tensor:
    """``aten.smooth_l1_loss_backward`` as ATen's CUDA kernel computes it
    (``smooth_l1_backward_cuda_kernel`` in aten/src/ATen/native/cuda/BinaryMiscBackwardOpsKernels.cu):
    with ``x = self - target``, ``-norm * grad`` below ``-beta``, ``norm * grad`` above ``beta``,
    else ``norm * x * grad / beta``, each step in ``self``'s dtype, ``norm`` (1, or 1 / numel
    for the mean) and ``beta`` converted to it. Returns ``self``'s shape and dtype.

    A NaN difference compares neither below nor above, so its gradient is NaN, as eager's;
    PyTorch's decomposition multiplied by ``sign(x)``, which is 0 for NaN. ``beta <= 0`` and
    mixed dtypes go to that decomposition, ``reference`` (``F.smooth_l1_loss`` sends ``beta ==
    0`` to the L1 loss before it reaches this op)."""
    if beta <= 0 or not _same_floating_dtype(grad_output, self, target):
        return reference(grad_output, self, target, reduction, beta)
    norm, beta_t = _loss_norm(self, reduction), _in_dtype(beta, self.dtype)
    x = self - target
    scaled = norm * grad_output
    inside = x * norm * grad_output / beta_t
    return torch.where(x < -beta_t, -scaled, torch.where(x > beta_t, scaled, inside)).to(self.dtype)


def huber_loss_backward(grad_output: torch.Tensor, self: torch.Tensor, target: torch.Tensor,
                        reduction: int, delta: float, *, reference) -> torch.Tensor:
    """``aten.huber_loss_backward`` as ATen's kernels compute it, each step in ``self``'s dtype,
    ``norm`` (1, or 1 / numel for the mean) and ``delta`` converted to it, ``x = self - target``:
    on CUDA (``huber_backward_cuda_kernel`` in aten/src/ATen/native/cuda/PointwiseOpsKernel.cu)
    ``-norm * grad * delta`` below ``-delta``, ``norm * grad * delta`` above ``delta``, else
    ``norm * x * grad``; on the CPU (``huber_backward_cpu_kernel``'s vector loop) ``norm *
    (+-delta) * grad`` where ``|x| >= delta``, else ``norm * x * grad``. A NaN difference gives
    NaN on both. Returns ``self``'s shape and dtype.

    PyTorch's decomposition computes fp16/bf16 in fp32 and rounds once (different from eager's
    in 37% of fp16 and 17% of bf16 elements on an H100). Mixed dtypes go to it (``reference``); an
    empty input with the mean reduction gives its empty gradient (the decomposition divided by
    the element count, 0, in Python, and the graph ran unfused)."""
    if _empty_mean(self, reduction):
        reduction = 2  # the sum's gradient: as empty as the mean's
    if not _same_floating_dtype(grad_output, self, target):
        return reference(grad_output, self, target, reduction, delta)
    norm, d = _loss_norm(self, reduction), _in_dtype(delta, self.dtype)
    x = self - target
    if kernel_device(self.device) == "cuda":
        outside = norm * grad_output * d
        return torch.where(x < -d, -outside, torch.where(x > d, outside, norm * x * grad_output))
    return norm * torch.where(x >= d, d, torch.where(x <= -d, -d, x)) * grad_output


def binary_cross_entropy(self: torch.Tensor, target: torch.Tensor, weight: torch.Tensor | None = None,
                         reduction: int = 1, *, reference) -> torch.Tensor:
    """``aten.binary_cross_entropy`` as ATen computes it, with eager's checks. An input or target
    element outside [0, 1] (NaN included) raises eager's error through an asynchronous
    device-side check (``_assert_async``, like the CUDA kernel's asserts; at once on a CPU),
    whose ``all`` joins the loss's reduction; a target or weight of another dtype than ``self``
    goes to ATen's kernel, which raises eager's error. PyTorch's decomposition (``reference``,
    which fp32 and fp64 take: the same formula) leaves both out. For fp16/bf16 each step of
    ``(target - 1) * max(log1p(-self), -100) - target * max(log(self), -100)`` is rounded to
    the dtype, as ATen's kernels (CPU and CUDA) compute in ``scalar_t``, where PyTorch's
    decomposition computes in fp32 and rounds once (a third of fp16 elements differed).
    Returns what ATen's op returns: the per-element loss (``reduction`` 0), or its mean (1) or
    sum (2), in ``self``'s dtype."""
    if target.dtype != self.dtype or (weight is not None and weight.dtype != self.dtype):
        return NotImplemented
    aten._assert_async.msg(((self >= 0) & (self <= 1)).all(), "all elements of input should be between 0 and 1")
    aten._assert_async.msg(((target >= 0) & (target <= 1)).all(), "all elements of target should be between 0 and 1")
    if self.dtype not in (torch.float16, torch.bfloat16):
        return reference(self, target, weight, reduction)
    floor = self.new_full((), -100)
    loss = (target - 1) * torch.maximum(torch.log1p(-self), floor) - target * torch.maximum(torch.log(self), floor)
    if weight is not None:
        loss = loss * weight
    return _reduced(loss, reduction)


#: ``EPSILON`` of ATen's ``binary_cross_entropy_backward`` kernels (``constexpr float EPSILON =
#: 1e-12`` in aten/src/ATen/native/Loss.cpp and cuda/Loss.cu): an fp32 value in every dtype
_BCE_EPSILON = _to_fp32(1e-12)


def binary_cross_entropy_backward(grad_output: torch.Tensor, self: torch.Tensor, target: torch.Tensor,
                                  weight: torch.Tensor | None = None, reduction: int = 1, *,
                                  reference) -> torch.Tensor:
    """``aten.binary_cross_entropy_backward`` as ATen's kernels (CPU and CUDA) compute it:
    ``grad * (self - target) / max((1 - self) * self, EPSILON)`` in ``self``'s dtype, each step
    rounded to it, with the fp32 ``EPSILON`` converted to that dtype (0 in fp16, so a gradient
    at ``self`` 0 or 1 equal to ``target`` is NaN, as eager's), then times ``weight`` and divided
    by the element count for the mean, each rounded. PyTorch's decomposition (``reference``,
    which mixed dtypes take) computes fp16/bf16 in fp32 and rounds once, and clamps fp64 at the
    double 1e-12 (4e-9 relative from eager's gradients there). Returns ``self``'s shape and dtype."""
    if not _same_floating_dtype(grad_output, self, target) or (weight is not None and weight.dtype != self.dtype):
        return reference(grad_output, self, target, weight, reduction)
    denominator = torch.clamp((1 - self) * self, min=_in_dtype(_BCE_EPSILON, self.dtype))
    grad = grad_output * (self - target) / denominator
    if weight is not None:
        grad = grad * weight
    if reduction == 1:
        grad = grad / self.numel()
    return grad


def logsumexp(self: torch.Tensor, dim, keepdim: bool = False, *, reference) -> torch.Tensor:
    """``aten.logsumexp`` of fp16/bf16 as ATen computes it (``logsumexp_out_impl`` in
    aten/src/ATen/native/ReduceOps.cpp, a composite of ATen ops on every device): the row max
    (an infinite one replaced by 0), then ``x - max``, its ``exp``, their sum (accumulated in
    fp32), its ``log`` and the added max, each rounded to the tensor's dtype. Returns the
    reduced shape, in ``self``'s dtype.

    PyTorch's decomposition computes fp16/bf16 in fp32 and rounds once: one 16-bit step from
    eager's in 10-15% of bf16 results over rows of 6, through ``Categorical(logits=...)``'s
    normalization and its entropy. Other dtypes and empty inputs take it (``reference``)."""
    if self.dtype not in (torch.float16, torch.bfloat16) or self.numel() == 0:
        return reference(self, dim, keepdim)
    dims = tuple(dim) if isinstance(dim, (list, tuple)) else (dim,)
    maxes = torch.amax(self, dims, keepdim=True)
    maxes = torch.masked_fill(maxes, maxes.abs() == float("inf"), 0)
    squeezed = maxes if keepdim else torch.squeeze(maxes, dims)
    return torch.sum(torch.exp(self - maxes), dims, keepdim).log().add(squeezed)


def weight_norm_interface(v: torch.Tensor, g: torch.Tensor, dim: int = 0, *, reference):
    """``aten._weight_norm_interface`` as ATen's kernels compute it; returns ``(w, norm)``.

    * CPU, fp16/bf16 (``weight_norm_first_dim_kernel`` and ``weight_norm_last_dim_kernel`` in
      aten/src/ATen/native/cpu/WeightNormKernel.cpp): the norm in fp32, returned in fp32, and
      ``v * (g / norm)`` in fp32, rounded once.
    * CUDA, every floating dtype (``weight_norm_fwd_first_dim_kernel`` and
      ``weight_norm_fwd_last_dim_kernel`` in aten/src/ATen/native/cuda/WeightNorm.cu): the
      norm ``sqrt`` of the sum of squares in the accumulation type (fp32 for fp16/bf16, which
      is also the dtype of the returned norm), and ``g * v * (1 / norm)`` in that type, rounded
      once.

    PyTorch's decomposition rounds the norm (to fp16, or a bf16 one's quotient ``g / norm``)
    and each step to the dtype: fp16/bf16 weights were twice as far from float64 as eager's,
    and an fp16 norm made ``_weight_norm_interface_backward`` (on ATen, which reads an fp32
    norm) raise. Other dtypes on a CPU take ``reference``."""
    half = v.dtype in (torch.float16, torch.bfloat16) and g.dtype == v.dtype
    device = kernel_device(v.device)
    cuda = device == "cuda" and v.dtype == g.dtype and v.dtype.is_floating_point
    if not (cuda or (device == "cpu" and half)):
        return reference(v, g, dim)
    other_dims = [i for i in range(v.dim()) if i != dim]
    x, scale = (v.float(), g.float()) if half else (v, g)
    if not cuda:
        norm = x.norm(2, other_dims, keepdim=True)
        return (x * (scale / norm)).to(v.dtype), norm
    norm = torch.sqrt((x * x).sum(other_dims, keepdim=True))
    return (scale * x * torch.reciprocal(norm)).to(v.dtype), norm


def _plain_number(value) -> bool:
    """``value`` is a Python int or float known at trace time (not symbolic, not NaN) within fp32's
    range, so that the kernels' formula can be written with it as a constant."""
    return type(value) in (int, float) and abs(value) < 1e38


def _eager_strides(out: torch.Tensor, *inputs: torch.Tensor) -> torch.Tensor:
    """``out`` with the strides ATen's TensorIterator gives the result of a pointwise op of
    ``inputs`` (PyTorch's ``compute_elementwise_output_strides``, as its reference ``lerp`` keeps
    them), copied to them when the formula's last op laid it out otherwise."""
    from torch._prims_common import compute_elementwise_output_strides
    from torch._refs import _maybe_broadcast

    strides = compute_elementwise_output_strides(*_maybe_broadcast(*inputs))
    return out if out.stride() == strides else torch.ops.prims.copy_strided(out, strides)


def lerp_scalar(start, end, weight, *, reference):
    """``aten.lerp.Scalar`` of floating-point tensors as PyTorch's kernels round it (CPU and CUDA):
    in the opmath dtype, one fused multiply-add, ``weight * (end - start) + start``, or for
    ``|weight| >= 0.5`` ``(weight - 1) * (end - start) + end`` (``ATen/native/Lerp.h``; the CPU
    kernel's ``vec::fmadd``, nvcc's contraction on CUDA), rounded once to fp16/bf16. The reference
    decomposition (``reference``), which symbolic (run-time) weights take, rounds the product
    first. Written as ``add`` with an ``alpha``, which the kernels compute as one fused
    multiply-add, with the weight converted to the opmath dtype, as the kernels convert it.
    Every decomposition here returns eager's output strides (:func:`_eager_strides`)."""
    if start.dtype.is_floating_point and end.dtype == start.dtype and _plain_number(weight):
        op = get_computation_dtype(start.dtype)
        start_, end_ = start.to(op), end.to(op)
        w = _in_dtype(float(weight), op)
        small = abs(w) < 0.5
        alpha = w if small else _in_dtype(w - 1.0, op)
        out = aten.add.Tensor(start_ if small else end_, aten.sub.Tensor(end_, start_), alpha=alpha)
        return _eager_strides(out.to(start.dtype), start, end)
    return reference(start, end, weight)


def lerp_tensor(start, end, weight, *, reference):
    """``aten.lerp.Tensor`` of floating-point tensors as PyTorch's kernels round it: per element
    the fused multiply-add of :func:`lerp_scalar`, chosen by ``|weight| < 0.5``, in the opmath
    dtype and rounded once. Other dtypes take ``reference``."""
    dtype = start.dtype
    if not (dtype.is_floating_point and end.dtype == dtype and weight.dtype == dtype):
        return reference(start, end, weight)
    op = get_computation_dtype(dtype)
    start_, end_, w = start.to(op), end.to(op), weight.to(op)
    diff = aten.sub.Tensor(end_, start_)
    small = aten.lt.Scalar(aten.abs.default(w), 0.5)
    out = aten.where.self(small, FMA(w, diff, start_), FMA(aten.sub.Tensor(w, 1), diff, end_))
    return _eager_strides(out.to(dtype), start, end, weight)


def addcmul(self, tensor1, tensor2, *, value=1, reference):
    """``aten.addcmul`` of floating-point tensors as PyTorch's kernels round it: in the opmath
    dtype, ``fma(value * tensor1, tensor2, self)`` (the CPU kernel's ``vec::fmadd``; CUDA's
    ``pointwise_op_impl`` in ``ATen/native/cuda/DeviceAddCmulCdiv.cuh`` computes
    ``fma(tensor1, tensor2, self)`` for ``value == 1`` and ``fma(value, tensor1 * tensor2, self)``
    otherwise), rounded once to fp16/bf16. Integer tensors and symbolic values take
    ``reference``, which rounds the product."""
    dtype = self.dtype
    if not (dtype.is_floating_point and tensor1.dtype == dtype and tensor2.dtype == dtype
            and _plain_number(value)):
        return _eager_strides(reference(self, tensor1, tensor2, value=value), self, tensor1, tensor2)
    op = get_computation_dtype(dtype)
    s, t1, t2 = self.to(op), tensor1.to(op), tensor2.to(op)
    if _in_dtype(float(value), op) == 1:  # (CUDA compares its opmath value)
        out = FMA(t1, t2, s)
    elif kernel_device(self.device) == "cuda":
        out = aten.add.Tensor(s, aten.mul.Tensor(t1, t2), alpha=value)
    else:
        out = FMA(aten.mul.Tensor(t1, value), t2, s)
    return _eager_strides(out.to(dtype), self, tensor1, tensor2)


def addcdiv(self, tensor1, tensor2, *, value=1, reference):
    """``aten.addcdiv`` of floating-point tensors as PyTorch's kernels round it: in the opmath
    dtype, rounded once to fp16/bf16. The CPU kernel computes ``self + value * tensor1 /
    tensor2`` step by step, as ``reference`` does; CUDA's ``pointwise_op_impl`` computes
    ``self + tensor1 / tensor2`` for ``value == 1`` and ``fma(value, tensor1 / tensor2, self)``
    otherwise."""
    dtype = self.dtype
    if not (kernel_device(self.device) == "cuda" and dtype.is_floating_point and tensor1.dtype == dtype
            and tensor2.dtype == dtype and _plain_number(value)):
        return _eager_strides(reference(self, tensor1, tensor2, value=value), self, tensor1, tensor2)
    op = get_computation_dtype(dtype)
    s, t1, t2 = self.to(op), tensor1.to(op), tensor2.to(op)
    out = aten.add.Tensor(s, aten.div.Tensor(t1, t2), alpha=value)
    return _eager_strides(out.to(dtype), self, tensor1, tensor2)


#: composite pointwise ops whose PyTorch kernels (CPU and CUDA) cast every tensor operand to the
#: result dtype before computing, where their reference decompositions compute in fp32 from the
#: operands as given: a 0-dim fp32 weight of a bf16 ``lerp`` is rounded to bf16 by eager
LOAD_AT_RESULT_DTYPE = (aten.lerp.Tensor, aten.addcmul.default, aten.addcdiv.default)


def _operands_at_result_dtype(decomposition):
    """``decomposition`` (of an op of :data:`LOAD_AT_RESULT_DTYPE`) with its floating-point
    tensor operands first cast to the op's result dtype (type promotion's), as the ATen kernels'
    TensorIterator does: a 0-dim operand of a wider dtype, which does not take part in the
    promotion, is rounded to the 16-bit dtype of the others, not read unrounded."""
    from torch._prims_common import ELEMENTWISE_TYPE_PROMOTION_KIND, elementwise_dtypes

    @functools.wraps(decomposition)
    def cast_first(*args, **kwargs):
        tensors = [a for a in args if isinstance(a, torch.Tensor)]
        _, result = elementwise_dtypes(*tensors, type_promotion_kind=ELEMENTWISE_TYPE_PROMOTION_KIND.DEFAULT)
        if result.is_floating_point:
            args = tuple(a.to(result) if isinstance(a, torch.Tensor) and a.dtype != result else a for a in args)
        return decomposition(*args, **kwargs)

    return cast_first
