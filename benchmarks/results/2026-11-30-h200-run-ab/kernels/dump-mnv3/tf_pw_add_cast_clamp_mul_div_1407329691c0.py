import triton
import triton.language as tl
from triton.language.extra import libdevice


@triton.jit
def tf_div_trunc_int(a, b):
    # C division truncates; INT_MIN // -1 wraps to INT_MIN instead of trapping.
    return tl.where(b == -1, -a, a // tl.where(b == -1, 1, b))


@triton.jit
def tf_div_floor_int(a, b):
    q = tf_div_trunc_int(a, b)
    r = a - q * b
    return tl.where((r != 0) & ((r < 0) != (b < 0)), q - 1, q)


@triton.jit
def tf_remainder_int(a, b):
    r = a - tf_div_trunc_int(a, b) * b
    return tl.where((r != 0) & ((r < 0) != (b < 0)), r + b, r)


@triton.jit
def tf_fmod_int(a, b):
    return a - tf_div_trunc_int(a, b) * b


@triton.jit
def tf_remainder_float(a, b):
    # PyTorch: fmod, then shift into the divisor's sign (c10/util/generic_math.h).
    m = libdevice.fmod(a, b)
    return tl.where((m != 0) & ((b < 0) != (m < 0)), m + b, m)


@triton.jit
def tf_div_floor_float(a, b, F32: tl.constexpr):
    # PyTorch's div_floor_floating (c10/util/generic_math.h), step by step; fp32 divides with
    # IEEE rounding (Triton's fp32 "/" does not round exactly).
    m = libdevice.fmod(a, b)
    if F32:
        d = tl.math.div_rn(a - m, b)
        q = tl.math.div_rn(a, b)
    else:
        d = (a - m) / b
        q = a / b
    d = tl.where((m != 0) & ((b < 0) != (m < 0)), d - 1.0, d)
    f = libdevice.floor(d)
    f = tl.where(d - f > 0.5, f + 1.0, f)
    zero = libdevice.copysign(tl.zeros_like(d), q)
    return tl.where(b == 0, q, tl.where(d != 0, f, zero))


# Float maximum/minimum with signed zeros as the device's eager kernels order them. On CUDA
# (fmaxf/fminf, and the tensor-bound clamp built from them) -0.0 < +0.0; x86 vector max/min
# (PyTorch's CPU kernels) return the second operand when the values compare equal. The
# ``*_host`` variants replace the plain names when kernels run on CPU tensors.
@triton.jit
def tf_maximum(a, b):
    return tl.maximum(a, b, propagate_nan=tl.PropagateNan.ALL)


@triton.jit
def tf_minimum(a, b):
    return tl.minimum(a, b, propagate_nan=tl.PropagateNan.ALL)


@triton.jit
def tf_fmax(a, b):
    return tl.maximum(a, b)


@triton.jit
def tf_fmin(a, b):
    return tl.minimum(a, b)


@triton.jit
def tf_clamp_lo(x, lo):
    return tl.maximum(x, lo, propagate_nan=tl.PropagateNan.ALL)


@triton.jit
def tf_clamp_hi(x, hi):
    return tl.minimum(x, hi, propagate_nan=tl.PropagateNan.ALL)


@triton.jit
def tf_clamp_lo_host(x, lo):
    return tl.where(x < lo, lo, x)


@triton.jit
def tf_clamp_hi_host(x, hi):
    return tl.where(x > hi, hi, x)


@triton.jit
def tf_square_f16(x):
    return (x * x).to(tl.float16).to(tl.float32)


@triton.jit
def tf_square_bf16(x):
    return (x * x).to(tl.bfloat16).to(tl.float32)


@triton.jit
def tf_square_host(x):
    return x * x


# Nested ``where`` rather than ``|`` of two comparisons: when an operand is a constant (a
# 0-dim value, as ``minimum(0, x)`` in logsigmoid), the interpreter broadcasts the comparison
# of two constants as a float array, which ``|`` rejects.
@triton.jit
def tf_maximum_host(a, b):
    return tl.where(a > b, a, tl.where(a != a, a, b))


@triton.jit
def tf_minimum_host(a, b):
    return tl.where(a < b, a, tl.where(a != a, a, b))


@triton.jit
def tf_fmax_host(a, b):
    return tl.where(a > b, a, tl.where(b != b, a, b))


@triton.jit
def tf_fmin_host(a, b):
    return tl.where(a < b, a, tl.where(b != b, a, b))


@triton.jit
def tf_sum_combine(a, b):
    return a + b


@triton.jit
def tf_prod_combine(a, b):
    return a * b


@triton.jit
def tf_max_combine(a, b):
    # NaN propagates, as torch.amax
    return tl.where((a > b) | (a != a), a, b)


@triton.jit
def tf_min_combine(a, b):
    return tl.where((a < b) | (a != a), a, b)


@triton.jit
def tf_argmax_combine(v1, i1, v2, i2):
    # PyTorch: NaN is the largest value; ties go to the first index.
    n1 = v1 != v1
    n2 = v2 != v2
    first = (v1 > v2) | (n1 & (n2 == 0)) | (((v1 == v2) | (n1 & n2)) & (i1 < i2))
    return tl.where(first, v1, v2), tl.where(first, i1, i2)


@triton.jit
def tf_argmin_combine(v1, i1, v2, i2):
    n1 = v1 != v1
    n2 = v2 != v2
    first = (v1 < v2) | (n1 & (n2 == 0)) | (((v1 == v2) | (n1 & n2)) & (i1 < i2))
    return tl.where(first, v1, v2), tl.where(first, i1, i2)



@triton.jit
def tf_pw_add_cast_clamp_mul_div(in0, in1, out0, xs0, xnumel, rnumel, XBLOCK: tl.constexpr, RBLOCK: tl.constexpr):
    xoffset = tl.program_id(0) * XBLOCK
    xindex = xoffset + tl.arange(0, XBLOCK)
    xmask = xindex < xnumel
    ld1 = tl.load(in0 + (xindex), mask=xmask, other=0)
    ld2 = tl.load(in1 + (xindex), mask=xmask, other=0)
    t3 = (ld1.to(tl.float32) + ld2.to(tl.float32)).to(tl.float16)
    t4 = t3.to(tl.float32)
    t5 = (t4 + 3.0)
    t6 = tl.where(0.0 != 0.0, 0.0, tf_clamp_lo(t5, 0.0))
    t7 = tl.where(6.0 != 6.0, 6.0, tf_clamp_hi(t6, 6.0))
    t8 = (t4 * t7)
    t9 = tl.math.div_rn(t8, 6.0)
    t10 = t9.to(tl.float16)
    tl.store(out0 + (xindex), t10, mask=xmask)
