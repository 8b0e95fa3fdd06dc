"""Kernel helpers whose GPU form and CPU form (``_host``) differ, held by a kernel's module
only when the kernel calls one of them.

Takes nothing; :data:`HEADER_ON_DEMAND` is Triton source placed after the code generator's
``HEADER`` in the modules of kernels that call a helper listed in :data:`ON_DEMAND`, so the
source and cache key of every other kernel stay as they were before these existed. The loader
(``runtime.compile.load``) swaps each for its ``_host`` variant when kernels run on CPU tensors
through the interpreter, as for ``HEADER``'s (``codegen.triton.HOST_VARIANTS``). The rules
they follow are in ``torchfuse.ir.emit`` (which writes the calls).
"""
from __future__ import annotations

import re

#: The helpers' Triton source (see the module doc).
HEADER_ON_DEMAND = '''\
# Division with a rounding mode of fp16/bf16 tensors (ST: their dtype; a, b in fp32), as
# PyTorch's c10::div_floor_floating runs on each device: CUDA's kernel in fp32 with the floor
# held in ST; the CPU's vector kernel with every step rounded to ST (the ``_host`` variant).
# By a one-element divisor the CPU kernels compute in fp32 (``_by_one_element`` variants).
@triton.jit
def tf_div_floor_half(a, b, ST: tl.constexpr):
    m = libdevice.fmod(a, b)
    d = tl.math.div_rn(a - m, b)
    d = tl.where((m != 0) & ((b < 0) != (m < 0)), d - 1.0, d)
    f = libdevice.floor(d).to(ST).to(tl.float32)
    f = tl.where(d - f > 0.5, (f + 1.0).to(ST).to(tl.float32), f)
    q = tl.math.div_rn(a, b).to(ST).to(tl.float32)
    zero = libdevice.copysign(tl.zeros_like(d), q)
    return tl.where(b == 0, q, tl.where(d != 0, f, zero))


@triton.jit
def tf_div_floor_half_host(a, b, ST: tl.constexpr):
    m = libdevice.fmod(a, b)
    d = tl.math.div_rn((a - m).to(ST).to(tl.float32), b).to(ST).to(tl.float32)
    d = tl.where((m != 0) & ((b < 0) != (m < 0)), (d - 1.0).to(ST).to(tl.float32), d)
    f = libdevice.floor(d)
    f = tl.where((d - f).to(ST).to(tl.float32) > 0.5, (f + 1.0).to(ST).to(tl.float32), f)
    q = tl.math.div_rn(a, b).to(ST).to(tl.float32)
    zero = libdevice.copysign(tl.zeros_like(d), q)
    return tl.where(b == 0, q, tl.where(d != 0, f, zero))


@triton.jit
def tf_div_floor_half_by_one_element(a, b, ST: tl.constexpr):
    return tf_div_floor_half(a, b, ST)


@triton.jit
def tf_div_floor_half_by_one_element_host(a, b, ST: tl.constexpr):
    return tf_div_floor_float(a, b, True)


@triton.jit
def tf_quotient_by_one_element(q, ST: tl.constexpr):
    return q.to(ST).to(q.dtype)


@triton.jit
def tf_quotient_by_one_element_host(q, ST: tl.constexpr):
    return q


# Floor division by a number d (inv = 1 / d in the compute dtype): PyTorch's CUDA kernel runs
# div_floor_floating's steps with multiplications by inv, the floor held in the tensors' dtype
# ST (aten/src/ATen/native/cuda/BinaryDivFloorKernel.cu, "a CPU scalar"); its CPU kernels
# divide (the ``_host`` variant).
@triton.jit
def tf_div_floor_by_number(a, d, inv, ST: tl.constexpr, F32: tl.constexpr):
    m = libdevice.fmod(a, d)
    q = (a - m) * inv
    q = tl.where((m != 0) & ((d < 0) != (m < 0)), q - 1.0, q)
    f = libdevice.floor(q).to(ST).to(q.dtype)
    f = tl.where(q - f > 0.5, (f + 1.0).to(ST).to(q.dtype), f)
    zero = libdevice.copysign(tl.zeros_like(q), a * inv)
    return tl.where(q != 0, f, zero)


@triton.jit
def tf_div_floor_by_number_host(a, d, inv, ST: tl.constexpr, F32: tl.constexpr):
    return tf_div_floor_float(a, d, F32)


# Negation as eager's kernels give it: on CUDA a NaN comes out as the GPU's arithmetic makes it
# (fp32's canonical NaN; fp64's input NaN, quieted: not a sign flip), on CPU tensors every sign
# bit flips, NaN's included (the ``_host`` variant). Zeros and infinities flip on both.
@triton.jit
def tf_neg(x):
    return tl.where(x == x, x * -1.0, x + 0.0)


@triton.jit
def tf_neg_host(x):
    return -x


# A constant that PyTorch's kernels read differently on each device (a Python number added to
# fp16/bf16 tensors: fp32 on a GPU, rounded to the tensors' dtype on CPU tensors).
@triton.jit
def tf_by_device(gpu, host):
    return gpu


@triton.jit
def tf_by_device_host(gpu, host):
    return host
'''
ON_DEMAND = tuple(re.findall(r"^def (\w+)\(", HEADER_ON_DEMAND, flags=re.M))
