"""The Triton helper library of generated kernels, with each helper's interpreter twin.

Generated kernels call these ``tf_*`` functions. Where PyTorch's kernels differ between
devices, or the interpreter runs a GPU form slowly, a helper ``tf_x`` has a twin ``tf_x_host``
beside it (:data:`HOST_VARIANTS`), which the loader (``runtime.compile.load``) puts in its place
when kernels run on CPU tensors through Triton's interpreter. The rules the division helpers
follow are in ``torchfuse.ir.emit``, which writes their calls.

This is an importable module (``torchfuse.codegen.helpers``), and its text is also what
every kernel carries: each generated kernel module is self-contained (the kernel cache key is
the hash of its text, so a kernel that imported helpers would keep its key when a helper
changed). :func:`kernel_header` returns the text between the ``>>> kernel header`` and ``<<<``
markers below, copied into every kernel; :func:`helpers_on_demand` the text between the
``>>> helpers on demand`` markers, copied (after the header) only into the kernels that call
one of :data:`ON_DEMAND`, so the source and cache key of every other kernel stay as they were
before those helpers existed. Edit the helpers here; a change changes the cache keys of the
kernels that carry it.
"""
import inspect
import re
import sys

# >>> kernel header
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


# exp(x) for a value only summed after a max shift (see _Writer.flushable_exp): ex2.approx.ftz
# of x * log2(e), two instructions, where tl.exp's ex2.approx keeps denormal results at the
# cost of a compare and two scaling multiplies (five). Results below 2**-126 become 0.
@triton.jit
def tf_exp_ftz(x):
    return tl.inline_asm_elementwise("ex2.approx.ftz.f32 $0, $1;", "=f,f", [x * 1.4426950408889634],
                                     dtype=tl.float32, is_pure=True, pack=1)


@triton.jit
def tf_exp_ftz_host(x):
    return tl.exp(x)


# x / d for a divisor given as a number (d, and inv = 1 / d rounded to x's dtype): PyTorch's
# CUDA kernels multiply by that reciprocal (aten/src/ATen/native/cuda/BinaryDivTrueKernel.cu,
# "a CPU scalar"); its CPU kernels divide (the ``_host`` variant).
@triton.jit
def tf_div_by_number(x, d, inv):
    return x * inv


@triton.jit
def tf_div_by_number_host(x, d, inv):
    return x / d


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


# Row max / min of an [XBLOCK, RBLOCK] tile with NaN propagating (torch.amax): on a GPU one
# tree reduction whose combine is the device's NaN-propagating max (tf_maximum), in place of a
# plain max plus a NaN-count reduction. The interpreter runs tl.reduce's combine in Python per
# element, so the ``_host`` variants use two NumPy reductions instead. (A combine built from
# compares and selects, as tf_max_combine, was slower on an H200: run AM in NOTES.md.)
@triton.jit
def tf_row_max(x):
    return tl.reduce(x, 1, tf_maximum)[:, None]


@triton.jit
def tf_row_min(x):
    return tl.reduce(x, 1, tf_minimum)[:, None]


# Sums over rows of two or three [XBLOCK, RBLOCK] tiles that do not depend on each other (the
# two row sums of LayerNorm's backward): on a GPU one reduction of a tuple, so the values cross
# warps through shared memory in one exchange rather than one each; under the interpreter
# (``_host``) separate NumPy sums.
@triton.jit
def tf_sum2_combine(a1, b1, a2, b2):
    return a1 + a2, b1 + b2


@triton.jit
def tf_sum3_combine(a1, b1, c1, a2, b2, c2):
    return a1 + a2, b1 + b2, c1 + c2


@triton.jit
def tf_row_sum2(a, b):
    sa, sb = tl.reduce((a, b), 1, tf_sum2_combine)
    return sa[:, None], sb[:, None]


@triton.jit
def tf_row_sum3(a, b, c):
    sa, sb, sc = tl.reduce((a, b, c), 1, tf_sum3_combine)
    return sa[:, None], sb[:, None], sc[:, None]


@triton.jit
def tf_row_sum2_host(a, b):
    return tl.sum(a, 1)[:, None], tl.sum(b, 1)[:, None]


@triton.jit
def tf_row_sum3_host(a, b, c):
    return tl.sum(a, 1)[:, None], tl.sum(b, 1)[:, None], tl.sum(c, 1)[:, None]


@triton.jit
def tf_row_max_host(x):
    m = tl.max(x, 1)[:, None]
    return tl.where(tl.max((x != x).to(tl.int8), 1)[:, None] > 0, float('nan'), m)


@triton.jit
def tf_row_min_host(x):
    m = tl.min(x, 1)[:, None]
    return tl.where(tl.max((x != x).to(tl.int8), 1)[:, None] > 0, float('nan'), m)


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

# <<< kernel header
# >>> helpers on demand
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


# An fp32 value that the compiler cannot fold into the conversion after it: on a GPU, Triton
# turns an integer converted to fp32 and then to fp16/bf16 into one conversion, which rounds
# once where eager rounds twice (c10's Half and BFloat16 are made from a float).
@triton.jit
def tf_fp32_opaque(x):
    return tl.inline_asm_elementwise("mov.b32 $0, $1;", "=r,r", [x], dtype=tl.float32, is_pure=True, pack=1)


@triton.jit
def tf_fp32_opaque_host(x):
    return x
# <<< helpers on demand


# >>> random helpers on demand
# Four random numbers per Philox call (``Tuning.codegen.philox_four``, the writer's
# ``random_by_fours``): the four results of a quarter-size tile of calls are interleaved,
# a0 b0 c0 d0 a1 ..., by a reshape of [..., n, 2, 2] to [..., 4n]. That stays in registers
# when each thread holds at least four of the tile's elements, which the kernel decides from
# its block size and ``tf_threads()``, the threads of a program (a constant when compiled).
from triton.language.extra.cuda import num_threads as tf_threads


@triton.jit
def tf_threads_host():
    # the interpreter has no warps: blocks of at least 4 x 32 elements take the tiled form
    return 32


@triton.jit
def tf_interleave4(a, b, c, d):
    return tl.join(tl.join(a, c), tl.join(b, d))
# <<< random helpers on demand


def _region(name: str) -> str:
    source = inspect.getsource(sys.modules[__name__])
    begin, end = f"# >>> {name}\n", f"# <<< {name}\n"
    return source[source.index(begin) + len(begin):source.index(end)]


def kernel_header() -> str:
    """The imports and helpers every generated kernel module starts with (text)."""
    return _region("kernel header")


def helpers_on_demand() -> str:
    """The helpers placed after the header in kernels that call one of :data:`ON_DEMAND` (text)."""
    return _region("helpers on demand")


def random_helpers_on_demand() -> str:
    """The helpers placed after the header in kernels that draw four random numbers a Philox
    call (text): ``tf_threads`` and ``tf_interleave4``."""
    return _region("random helpers on demand")


def _defined(text: str) -> tuple[str, ...]:
    return tuple(re.findall(r"^def (\w+)\(", text, flags=re.M))


def _named(text: str) -> tuple[str, ...]:
    """The names a region of helpers binds: its functions and its ``import ... as`` names."""
    return tuple(a or b for a, b in re.findall(r"^def (\w+)\(|^from .* import \w+ as (\w+)$", text, flags=re.M))


#: The regions of helpers copied, each whole, after the header only into the kernels that call
#: one of its names: ``(text, names)``, in the order a kernel carries them.
ON_DEMAND_REGIONS = tuple((text, _named(text)) for text in (helpers_on_demand(), random_helpers_on_demand()))
#: Helpers copied only into the kernels that call them.
ON_DEMAND = ON_DEMAND_REGIONS[0][1]
#: The names whose call copies :func:`random_helpers_on_demand` into a kernel.
RANDOM_ON_DEMAND = ON_DEMAND_REGIONS[1][1]
#: Every helper's name, which the loader turns into Triton functions (interpreted ones under the
#: interpreter).
HELPERS = _defined(kernel_header()) + tuple(n for text, _ in ON_DEMAND_REGIONS for n in _defined(text))
#: Helpers replaced under the interpreter (CPU tensors) by their host twin.
HOST_VARIANTS = {"tf_maximum": "tf_maximum_host",
                 "tf_minimum": "tf_minimum_host",
                 "tf_fmax": "tf_fmax_host",
                 "tf_fmin": "tf_fmin_host",
                 "tf_clamp_lo": "tf_clamp_lo_host",
                 "tf_clamp_hi": "tf_clamp_hi_host",
                 "tf_square_f16": "tf_square_host",
                 "tf_square_bf16": "tf_square_host",
                 "tf_row_max": "tf_row_max_host",
                 "tf_row_min": "tf_row_min_host",
                 "tf_row_sum2": "tf_row_sum2_host",
                 "tf_row_sum3": "tf_row_sum3_host",
                 "tf_exp_ftz": "tf_exp_ftz_host",
                 "tf_fp32_opaque": "tf_fp32_opaque_host",
                 "tf_div_by_number": "tf_div_by_number_host",
                 "tf_div_floor_half": "tf_div_floor_half_host",
                 "tf_div_floor_half_by_one_element": "tf_div_floor_half_by_one_element_host",
                 "tf_quotient_by_one_element": "tf_quotient_by_one_element_host",
                 "tf_div_floor_by_number": "tf_div_floor_by_number_host",
                 "tf_neg": "tf_neg_host",
                 "tf_by_device": "tf_by_device_host",
                 "tf_threads": "tf_threads_host"}
