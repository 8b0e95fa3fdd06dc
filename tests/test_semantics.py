"""Exact PyTorch semantics of fused kernels: type promotion (0-dim tensors and Python scalars
included), NaN propagation, -0.0 and infinities, integer division and remainder, float floor
division, clamp, where, casts, and errors.

Where eager PyTorch on CPU (the reference these tests can run) differs from PyTorch's CUDA
kernels, which torchfuse follows, the test compares with an independently computed reference
of the CUDA semantics and says so.
"""
from __future__ import annotations

import logging
import math

import re

import pytest
import torch

import torchfuse
from test_ops import (BF16, BOOL, DEVICE, F16, F32, F64, I8, I16, I32, I64, U8,
                      aten_calls, assert_all_fused, assert_matches, dtype_id, fused_ops, make_sample,
                      run_compiled, tensor)

pytestmark = pytest.mark.filterwarnings("ignore:.*encountered in:RuntimeWarning")

NAN, INF = float("nan"), float("inf")


def sample(dtype, seed, shape=(5, 7), **kw):
    return make_sample(dtype, seed, shape=shape, **kw)


def check(fn, *args, exact=False, groups=None, **options):
    """Compile ``fn``, compare with eager on ``args``, and require every registry op fused."""
    expected = fn(*args)
    actual, graphs = run_compiled(fn, *args, **options)
    assert_matches(actual, expected, exact=exact)
    assert_all_fused(graphs, groups=groups)
    return actual


# ----------------------------------------------------------------------------- type promotion

PROMOTION = {
    "int8+uint8->int16": (lambda a, b: a + b, [sample(I8, 1), sample(U8, 2)]),
    "int16*uint8->int16": (lambda a, b: a * b, [sample(I16, 3), sample(U8, 4)]),
    # integers fp16 represents exactly (see test_operands_convert_to_the_common_dtype_first)
    "int32+float16->float16": (lambda a, b: a + b, [sample(I32, 5).clamp(-2048, 2048), sample(F16, 6)]),
    "float16+bfloat16->float32": (lambda a, b: a + b, [sample(F16, 7), sample(BF16, 8)]),
    "bool+bool->bool": (lambda a, b: a + b, [sample(BOOL, 9), sample(BOOL, 10)]),
    "int/int->float32": (lambda a, b: a / b, [sample(I32, 11), sample(I8, 12, nonzero=True)]),
    "int8+1000 wraps in int8": (lambda a: a + 1000, [sample(I8, 13)]),
    "uint8-1 wraps": (lambda a: a - 1, [sample(U8, 14)]),
    "uint8*-1 wraps": (lambda a: a * -1, [sample(U8, 15)]),
    "int8+2.5->float32": (lambda a: a + 2.5, [sample(I8, 16)]),
    "bool*2->int64": (lambda a: a * 2, [sample(BOOL, 17)]),
    "bool+True->bool": (lambda a: a + True, [sample(BOOL, 18)]),
    "float16<2->bool": (lambda a: a < 2, [sample(F16, 19)]),
    "int8+0dim int64->int8": (lambda a, b: a + b, [sample(I8, 20), tensor(300)]),
    "int64+0dim float64->float64": (lambda a, b: a + b, [sample(I64, 21), tensor(0.25, dtype=F64)]),
    "float16+0dim float64->float16": (lambda a, b: a * b, [sample(F16, 22), tensor(0.5, dtype=F64)]),
    "bool+0dim int64->int64": (lambda a, b: a + b, [sample(BOOL, 23), tensor(-3)]),
    "0dim int8+0dim float16": (lambda a, b: a + b, [tensor(3, dtype=I8), tensor(2.5, dtype=F16)]),
    "uint8 0dim+int8->int8": (lambda a, b: a + b, [tensor(250, dtype=U8), sample(I8, 24)]),
    "where(c, int8, 2.5)->float32": (lambda c, a: torch.where(c, a, 2.5), [sample(BOOL, 25), sample(I8, 26)]),
    "where(c, float16, float32)": (lambda c, a, b: torch.where(c, a, b), [sample(BOOL, 27), sample(F16, 28),
                                                                         sample(F32, 29)]),
    "where(c, float16, 0dim float32)": (lambda c, a, b: torch.where(c, a, b), [sample(BOOL, 30), sample(F16, 31),
                                                                              tensor(2.0)]),
    "where(c, 1, 0)->int64": (lambda c: torch.where(c, 1, 0), [sample(BOOL, 32)]),
    "clamp(int8, min=0.5)->float32": (lambda a: torch.clamp(a, min=0.5), [sample(I8, 33)]),
    "float32 + int64 0dim": (lambda a, b: a - b, [sample(F32, 34), tensor(2**40)]),
}


@pytest.mark.parametrize("case", list(PROMOTION))
def test_type_promotion(case):
    """Result dtype and values equal eager's for mixed tensors, 0-dim tensors and scalars."""
    fn, args = PROMOTION[case]
    check(fn, *args, exact=True, groups=1)


def test_operands_convert_to_the_common_dtype_first():
    """Mixed-dtype ops cast each operand to the result dtype, then compute (TensorIterator's
    common-dtype cast, on CPU and CUDA alike): an int32 operand of an fp16 op is rounded to fp16."""
    a = tensor([2049, -2**31, 4097, 3], dtype=I32)
    b = tensor([0.5, INF, 1.0, 0.25], dtype=F16)
    check(lambda a, b: (a + b, a * b), a, b, exact=True)


@pytest.mark.parametrize("dtype", [F16, BF16], ids=dtype_id)
def test_exact_rounding_off_keeps_half_precision_chains_in_fp32(dtype):
    """``exact_rounding=True`` (the default) gives eager's values bit for bit on a chain of
    half-precision ops; ``False`` keeps the chain's intermediates in fp32 (each op's compute
    dtype) instead of rounding them to ``dtype`` between ops, so its values differ from eager's
    and lie closer to an fp64 evaluation of the same chain."""
    def chain(a, b):
        return ((a * b + a).sin() * 1.7 + b).exp() * a - b * b

    torch.manual_seed(0)
    a, b = (torch.randn(4096, device=DEVICE).to(dtype) for _ in range(2))
    eager, exact64 = chain(a, b), chain(a.double(), b.double())
    exact, _ = run_compiled(chain, a, b)
    assert torch.equal(exact, eager)
    wide, _ = run_compiled(chain, a, b, exact_rounding=False)
    assert wide.dtype == dtype and not torch.equal(wide, eager)
    error = lambda r: (r.double() - exact64).abs().mean().item()  # noqa: E731
    assert error(wide) < 0.5 * error(eager), (error(wide), error(eager))


@pytest.mark.parametrize("dtype,other", [(F16, None), (BF16, None), (F16, I32), (BF16, I32)],
                         ids=["float16", "bfloat16", "float16-int32", "bfloat16-int32"])
def test_comparisons_use_the_common_dtype(dtype, other):
    """Comparisons run in the operands' common dtype, not in fp32 (CPU and CUDA kernels alike):
    ``x == 0.1`` compares with 0.1 rounded to fp16/bf16, and an int32 operand is rounded to
    the float dtype first (2049 == fp16 2048)."""
    x = tensor([0.1, 0.2, -0.1, 2048.0, 1.0, 4096.0]).to(dtype)
    if other is None:
        fn = lambda x: (x == 0.1, x < 0.1, x >= -0.1, x != 0.1, x > 2049)
        check(fn, x, exact=True)
    else:
        i = tensor([0, 1, 0, 2049, 1, 4097], dtype=other)
        check(lambda x, i: (x == i, x < i, i <= x), x, i, exact=True)


@pytest.mark.parametrize("dtype", [F16, BF16], ids=dtype_id)
def test_python_scalar_with_half_tensor_follows_the_device(dtype):
    """``x + 0.1`` on an fp16/bf16 tensor, and ``alpha``, as eager on the tensors' device.

    On a GPU PyTorch reads the number and ``alpha`` as fp32 values
    (``opmath_gpu_kernel_with_scalars``) and computes ``a + alpha * b`` as one fused
    multiply-add; on CPU tensors its ``add``/``sub`` kernels first round them to the tensors'
    dtype (``scalar_value<scalar_t>``), then its vector kernel's ``fmadd``; ``*`` and ``/``
    read the number in fp32 on both. (The CPU's scalar loop for the last elements of a row
    shorter than a vector rounds ``alpha * b`` first; the rows here are whole vectors.)
    """
    x, y = sample(dtype, 40, shape=(4, 64), specials=False), sample(dtype, 41, shape=(4, 64), specials=False)
    fn = lambda x, y: (x + 0.1, x - 1.7, 0.1 - x, x * 0.1, torch.add(x, y, alpha=3), torch.sub(x, y, alpha=0.3),
                       torch.add(x, 2.5, alpha=0.3))
    check(fn, x, y, exact=True)


def _float_scalar_ops(x):
    return (x + 2, x - 2.5, 2.5 - x, x * -3, x / 4, 4 / x, x // 2, x % -1.5, x ** 2, x ** 3,
            torch.fmod(x, 2.0), x < 0.5, x >= -1, x == 2.5, torch.copysign(x, -1.0), torch.clamp(x, -1, 1),
            torch.where(x > 0, x, -1.5), torch.add(x, 2, alpha=3), torch.sub(x, 1.5, alpha=2), -x + 1)


def _int_scalar_ops(x):
    return (x + 300, x - 7, 7 - x, x * 3, x / 2, x // 3, x // -3, x % 5, x % -5, torch.fmod(x, 3), x & 6,
            x | 1, x ^ 5, x < 3, x == 0, torch.clamp(x, -5, 5), x * 2.5, torch.add(x, 3, alpha=2), x != 1)


def _bool_scalar_ops(x):
    return (x & True, x | False, x ^ True, x + 1, x * 2.5, x == True, torch.where(x, 1.5, -2), x + True,  # noqa: E712
            torch.clamp(x, 0, 0), x / 2)


SCALAR_OPS = {F32: _float_scalar_ops, F64: _float_scalar_ops, F16: _float_scalar_ops, I8: _int_scalar_ops,
              I32: _int_scalar_ops, I64: _int_scalar_ops, U8: _int_scalar_ops, BOOL: _bool_scalar_ops}


@pytest.mark.parametrize("dtype", list(SCALAR_OPS), ids=dtype_id)
def test_python_scalar_operands(dtype):
    """Binary ops with a Python number on either side (``.Scalar`` overloads, reversed
    operands, alpha) keep the tensor's dtype category and equal eager bitwise. The scalars
    are exact in fp16, where eager on CPU and on CUDA round differently otherwise (see
    test_python_scalar_with_half_tensor_follows_the_device)."""
    x = sample(dtype, 45, specials=False, nonzero=True, no_min=True)
    check(SCALAR_OPS[dtype], x, exact=True, interpret_integer_division=True)


# ----------------------------------------------------------------------------- NaN, -0.0, inf

SPECIAL = tensor([NAN, INF, -INF, -0.0, 0.0, 1.0, -1.0, 0.4, -0.4, 2.5, -2.5, 1e-40])
OTHER = tensor([1.0, NAN, INF, 0.0, -0.0, -INF, NAN, -0.0, 0.0, INF, -2.5, -1e-40])


def _specials(a, b, s):
    """Ops whose results on special values are exactly defined (bitwise, sign of zero
    included); transcendental functions only on ``s`` (NaN, infinities, zeros), where
    their results are exact."""
    return (-a, a.abs(), a * -0.0, a + b, a - b, a * b, a / b, torch.trunc(a), torch.round(a), torch.ceil(a),
            torch.floor(a), torch.sign(a), torch.relu(a), torch.copysign(a, b), torch.sqrt(a),
            torch.reciprocal(a), torch.atan2(a, b), torch.maximum(a, b), torch.minimum(a, b), torch.fmax(a, b),
            torch.fmin(a, b), torch.isnan(a), torch.isinf(a), a == b, a != b, a < b, torch.clamp(a, -1.0, 1.0),
            torch.where(a > b, a, b), a.to(BOOL), torch.remainder(a, b), torch.fmod(a, b),
            torch.exp(s), torch.log(s), torch.tanh(s), torch.sigmoid(s), torch.expm1(s), torch.log1p(s),
            torch.sin(s), torch.atan(s), torch.erf(s), s ** 2.0, torch.exp2(s))


@pytest.mark.parametrize("dtype", [F32, F64, F16], ids=dtype_id)
def test_nan_signed_zero_and_infinity(dtype):
    """NaN propagates (maximum/minimum/clamp keep it; fmax/fmin drop it), zeros keep their sign
    and infinities follow IEEE, bit for bit as eager, fp32 subnormals included (kernels compile
    without flush-to-zero). ``maximum(-0.0, 0.0)`` is left out: IEEE leaves the sign of that
    result to the implementation."""
    a, b = SPECIAL.to(dtype), OTHER.to(dtype)
    zeros = (a == 0) & (b == 0)
    b = torch.where(zeros, torch.ones((), dtype=dtype), b)
    s = tensor([NAN, INF, -INF, -0.0, 0.0]).to(dtype)
    check(_specials, a, b, s, exact=True)


def test_clamp_nan_rules():
    """clamp: NaN input stays NaN; a NaN tensor bound gives NaN; min > max gives max."""
    x = tensor([NAN, -3.0, 0.5, 3.0, -0.0, INF, -INF, 2.0])
    lo = tensor([0.0, NAN, 0.0, -1.0, 0.0, 0.0, -1.0, 3.0])
    hi = tensor([1.0, 1.0, NAN, 1.0, 1.0, 1.0, 1.0, 1.0])
    f = lambda x, lo, hi: (torch.clamp(x, lo, hi), torch.clamp(x, min=lo), torch.clamp(x, max=hi),
                           torch.clamp(x, 1.0, -1.0), torch.clamp(x, min=0.0), x.clamp(max=-0.5))
    check(f, x, lo, hi, exact=True)


@pytest.mark.parametrize("dtype", [F32, F64, F16], ids=dtype_id)
def test_maximum_minimum_with_a_constant_operand(dtype):
    """A constant operand of maximum/minimum/fmax/fmin, on either side (logsigmoid decomposes
    to ``minimum(0, x) - log1p(exp(-abs(x)))``), with NaN and infinities in the other."""
    x = tensor([NAN, -2.0, 0.25, 1.5, INF, -INF, 3.0, -0.5]).to(dtype)

    def f(x):
        c = torch.zeros((), dtype=x.dtype, device=x.device)
        return (torch.minimum(c, x), torch.maximum(c, x), torch.minimum(x, c), torch.maximum(x, c),
                torch.fmin(c, x), torch.fmax(c, x), torch.fmin(x, c), torch.fmax(x, c))

    check(f, x, exact=True)
    check(torch.nn.functional.logsigmoid, x)


def test_clamp_with_nan_scalar_bound_runs_through_aten(caplog):
    """A NaN scalar bound is not fused; the op runs through ATen with a logged reason."""
    x = sample(F32, 41)
    fn = lambda x: torch.clamp(x.sin(), min=NAN).cos()
    with caplog.at_level(logging.INFO, logger="torchfuse.fusion"):
        actual, graphs = run_compiled(fn, x)
    assert_matches(actual, fn(x), exact=True)
    calls = aten_calls(graphs)
    assert [str(c.target) for c in calls] == ["aten.clamp.default"] and "NaN" in calls[0].reason
    assert any("stays on ATen" in r.getMessage() and "NaN" in r.getMessage() for r in caplog.records)
    assert fused_ops(graphs) == [["sin"], ["cos"]]


@pytest.mark.parametrize("dtype", [F16, F32], ids=dtype_id)
def test_pow_special_exponents(dtype):
    """``x ** 0.5`` is ``sqrt(x)`` and ``x ** -0.5`` is ``rsqrt(x)``, as on CUDA
    (``pow_tensor_scalar_kernel`` special-cases them), so ``(-inf) ** 0.5`` is NaN and
    ``(-0.0) ** 0.5`` is -0.0. Eager on CPU agrees for fp32 but calls ``pow`` for fp16
    (giving inf and +0.0 there), so the reference is fp32 eager, rounded."""
    x = tensor([-INF, -0.0, 0.0, 4.0, 2.0, INF, NAN, -1.0, 0.25]).to(dtype)
    fn = lambda x: (x ** 0.5, x ** -0.5, x ** 2, x ** 3, x ** -1, x ** -2, x ** 1.0)
    actual, graphs = run_compiled(fn, x)
    reference = tuple(r.to(dtype) for r in fn(x.to(F32)))
    assert_matches(actual, reference, exact=True)
    assert_all_fused(graphs)


# ----------------------------------------------------------------------------- integer division

INT_DIVISION = lambda a, b: (a // b, torch.div(a, b, rounding_mode="trunc"), a % b, torch.fmod(a, b),
                             torch.div(a, b, rounding_mode="floor"))


@pytest.mark.parametrize("dtype", [I8, I16, I32, I64, U8], ids=dtype_id)
def test_integer_division_and_remainder(dtype):
    """Floor and truncating division, remainder (sign of the divisor) and fmod (sign of the
    dividend) on every sign combination, as eager. (No zero divisors: eager raises there.)"""
    a = sample(dtype, 50, no_min=True)
    b = sample(dtype, 51, nonzero=True)
    check(INT_DIVISION, a, b, exact=True, interpret_integer_division=True)


def _wrap(value: int, bits: int) -> int:
    value &= (1 << bits) - 1
    return value - (1 << bits) if value >> (bits - 1) else value


@pytest.mark.parametrize("dtype", [I8, I32, I64], ids=dtype_id)
def test_integer_minimum_divided_by_minus_one(dtype):
    """``INT_MIN // -1`` overflows and wraps to INT_MIN, its remainder is 0, without trapping.

    Eager on CPU dies of SIGFPE for int32/int64 here, so the expected values come from Python
    integers wrapped to the dtype's width."""
    info = torch.iinfo(dtype)
    a = tensor([info.min, info.min, info.min, info.max, -7, 7], dtype=dtype)
    b = tensor([-1, 1, info.min, -1, -1, info.min], dtype=dtype)
    actual, graphs = run_compiled(INT_DIVISION, a, b, interpret_integer_division=True)
    bits = info.bits
    pairs = list(zip(a.tolist(), b.tolist()))

    def trunc(x, y):
        q = abs(x) // abs(y)
        return q if (x < 0) == (y < 0) else -q

    expected = ([x // y for x, y in pairs], [trunc(x, y) for x, y in pairs], [x % y for x, y in pairs],
                [x - trunc(x, y) * y for x, y in pairs], [x // y for x, y in pairs])
    for got, want in zip(actual, expected):
        assert got.dtype == dtype
        assert got.tolist() == [_wrap(v, bits) for v in want]
    assert_all_fused(graphs)


@pytest.mark.skipif(DEVICE != "cpu", reason="eager raises for integer division by zero on CPU only")
def test_integer_division_on_cpu_stays_on_aten_by_default():
    """Without ``interpret_integer_division``, integer division on CPU runs through ATen (with a
    reason), so dividing by zero raises eager's RuntimeError instead of returning garbage."""
    a, b = tensor([7, -7, 3]), tensor([2, 0, 1])
    fn = lambda a, b: (a * 2) // b + 1
    with pytest.raises(RuntimeError) as eager:
        fn(a, b)
    with pytest.raises(RuntimeError) as compiled:
        torchfuse.compile(fn, dynamic=False)(a, b)
    assert "ZeroDivisionError" in str(eager.value) and "ZeroDivisionError" in str(compiled.value)
    torch._dynamo.reset()
    b = tensor([2, -3, 1])
    actual, graphs = run_compiled(fn, a, b, interpret_integer_division=False)
    assert_matches(actual, fn(a, b))
    calls = aten_calls(graphs)
    assert len(calls) == 1 and "ZeroDivisionError" in calls[0].reason
    assert fused_ops(graphs) == [["mul"], ["add"]]


@pytest.mark.parametrize("dtype", [F32, F64, F16], ids=dtype_id)
def test_float_floor_division_and_remainder(dtype):
    """Float ``//`` follows eager's ``div_floor_floating`` (fmod-based, not ``floor(a / b)``:
    ``1 // 0.1`` is 9), with signed zeros, infinities and zero divisors; ``%`` takes the
    divisor's sign."""
    a = tensor([1.0, -1.0, 0.5, -0.0, 7.0, INF, 5.0, -7.0, INF, 0.0, 7.5, -7.5, 3.0, -0.0])
    b = tensor([0.1, 0.1, -0.0, 3.0, INF, 2.0, -0.0, INF, INF, 0.0, -2.0, 2.0, -INF, -4.0])
    fn = lambda a, b: (a // b, a % b, torch.fmod(a, b), torch.div(a, b, rounding_mode="trunc"))
    check(fn, a.to(dtype), b.to(dtype), exact=True)


@pytest.mark.parametrize("dtype", [F32, BF16, F16, F64], ids=dtype_id)
def test_division_by_a_number_is_eagers_on_each_device(dtype):
    """Division by a number is bitwise eager's on the device it runs on: on a GPU a
    multiplication by the reciprocal, as PyTorch's CUDA kernels compute it, on CPU tensors a
    division (``tf_div_by_number`` and its host variant); by a power of two, whose reciprocal
    is exact, a plain multiplication on both (no division, no slow-path call). Subnormal, huge,
    infinite, NaN and signed-zero dividends, divisors down to 2**-127, fp64 too."""
    tiny = torch.finfo(torch.float32).tiny
    a = tensor([1.0, -3.0, 1e-40, -3e-39, tiny, 3e38, -3e38, INF, -INF, NAN, 0.0, -0.0, 7.25, 1e-45]).to(dtype)
    fn = lambda a: (a / 1024.0, a / 0.5, a / -2.0, a / 2.0 ** 20, a / 2.0 ** -126, a / 2.0 ** -127, a / 3.0,
                    a * 0.1 / 4.0)
    # divisors below fp32's smallest normal number: Triton would make such a Python float an
    # fp64 constant and compute the quotient and what follows in fp64
    tiny_divisors = lambda a: (a / 1e-40 * 1e-30, (a / 2.0 ** -149) * 0.0, a / 2.0 ** -149 - (a / 2.0 ** -149) * 2,
                               a + 1e-40, torch.div(a, 1e-40, rounding_mode="trunc") * 1e-30)
    actual, graphs = run_compiled(tiny_divisors, a)
    assert_matches(actual, tiny_divisors(a), exact=True)
    actual, graphs = run_compiled(fn, a)
    assert_matches(actual, fn(a), exact=True)
    assert_all_fused(graphs)
    text = "\n".join(p.kernel.source.text for g in graphs for st in g.steps if hasattr(st, "plans")
                     for p in st.plans.values() if p.kernel is not None)
    body = text[text.index("def tf_pw"):]
    # fp32 arithmetic: only 3.0 is not a power of two; fp64 always takes the helper
    assert "div_rn(" not in body and body.count("tf_div_by_number(") == (8 if dtype == F64 else 1), body


# ----------------------------------------------------------------------------- where

@pytest.mark.parametrize("dtype", [F32, BF16, F16], ids=dtype_id)
def test_negative_zero_constants_keep_their_sign(dtype):
    """A -0.0 constant stays -0.0 in every float dtype (bf16 included, where the interpreter
    would negate the 16-bit pattern of +0 as an integer)."""
    x = tensor([[1.0, -1.0, 2.0, -2.0]] * 2).to(dtype)
    a = tensor([[-0.0], [-0.0]]).to(dtype)
    fn = lambda x, a: (torch.where(x >= 0, a, -0.0), torch.full_like(x, -0.0) * 1.0, x * 0.0 + -0.0)
    actual, graphs = run_compiled(fn, x, a)
    assert_matches(actual, fn(x, a), exact=True)

def test_where_branches():
    """where with tensor, 0-dim and scalar branches, broadcasting, and NaN in the unused branch."""
    c = sample(BOOL, 60)
    x = sample(F32, 61)
    row = sample(F16, 62, shape=(7,))
    f = lambda c, x, row: (torch.where(c, x, NAN), torch.where(c, 0.0, x), torch.where(c, row, x),
                           torch.where(c[:, :1], row, -1), torch.where(x > 0, x, x * 0.01))
    check(f, c, x, row, exact=True)


# ----------------------------------------------------------------------------- casts

CAST_TARGETS = (F32, F16, F64, I8, I16, I32, I64, U8, BOOL)


def _cast_source(dtype: torch.dtype) -> torch.Tensor:
    """Values every target represents without undefined behaviour (no NaN or out-of-range
    floats to integers), with fractions, halves and negatives where the source has them."""
    if dtype == BOOL:
        return sample(BOOL, 70)
    if dtype.is_floating_point:
        return tensor([0.0, -0.0, 0.5, 1.5, 2.5, 99.9, 127.0, 126.7, 3.25, 1e-3, 0.999]).to(dtype)
    info = torch.iinfo(dtype)
    return tensor([0, 1, 127, 255 if info.max >= 255 else 100, info.max, info.min, 2**7 + 1]
                        ).clamp(info.min, info.max).to(dtype)


@pytest.mark.parametrize("src", [F32, F16, BF16, F64, I8, I16, I32, I64, U8, BOOL], ids=dtype_id)
def test_casts(src):
    """Every dtype to every dtype bitwise as eager: truncation toward zero, integer wrap,
    fp16 rounding to nearest even, nonzero -> True."""
    x = _cast_source(src)
    fn = lambda x: tuple(x.to(d) for d in CAST_TARGETS if d != src)
    check(fn, x, exact=True)


def test_float_casts_of_special_values():
    """NaN and infinities stay themselves in float casts and are True as bool; fp16 overflows
    to inf and underflows to (signed) zero; int64 to fp32 rounds to nearest even."""
    x = tensor([NAN, INF, -INF, 7e4, 65519.0, 65520.0, -1e-9, 1e-8, 2.0**-24, 3.0 * 2**-25])
    big = tensor([2**24 + 1, 2**24 + 3, -(2**53) - 1, 2**62])
    negative = tensor([-1.7, -0.5, -127.9, 1.7])
    fn = lambda x, big, negative: (x.to(F16), x.to(F64), x.to(BOOL), x.to(F16).to(F32), big.to(F32),
                                   big.to(F64), negative.to(I8), negative.to(I64))
    check(fn, x, big, negative, exact=True)


@pytest.mark.parametrize("src", [F32, F16, BF16, F64], ids=dtype_id)
def test_a_float_cast_to_uint8_wraps_through_int64(src):
    """c10 casts a float to uint8 through int64 (TypeCast.h), so negative values wrap
    (-1.0 is 255, -3.7 is 253) and large ones keep their low byte (300 is 44, fp64
    2**40 + 3 is 3), on CPU and CUDA alike; a direct conversion saturates on a GPU and gave 0."""
    x = tensor([-1.0, -3.7, -200.0, -0.5, 255.5, 256.0, 300.0, 1000.0]).to(src)
    big = torch.tensor([-(2.0**31) - 1, -(2.0**31) - 1000, 2.0**40 + 3], dtype=F64, device=DEVICE)
    check(lambda x, big: ((x * 1).to(U8), (big * 1).to(U8) + 1), x, big, exact=True)


@pytest.mark.parametrize("src", [F32, F16, F64, I8, I32, I64, U8, BOOL], ids=dtype_id)
def test_cast_to_bfloat16(src):
    """Casts to bf16 round to nearest even from every dtype."""
    x = _cast_source(src) if src != F32 else tensor([1.0 + 2**-8 + 2**-12, 3.1, 0.1, 1e4 + 17, -2.7])
    check(lambda x: x.to(BF16), x, exact=True, groups=1)


def test_exact_rounding_of_half_precision_chains():
    """Each op of an fp16 chain rounds to fp16 as eager does, so the chain equals eager bitwise."""
    a, b, c, d = (sample(F16, 80 + i, specials=False) for i in range(4))
    fn = lambda a, b, c, d: ((a * b + c) * d - a).exp() / (b.abs() + c * c)
    check(fn, a, b, c, d, exact=True, groups=1)


# ----------------------------------------------------------------------------- errors and fallbacks

ONES, FLAGS = sample(F32, 93, shape=(3, 4)), sample(BOOL, 94, shape=(3,))
ERRORS = {
    "shape mismatch": (lambda a, b: a + b, [ONES, ONES[:, :3]], RuntimeError),
    "bool subtraction": (lambda a, b: a - b, [FLAGS, FLAGS], NotImplementedError),
    "bool negation": (lambda a: -a, [FLAGS], NotImplementedError),
    "float bitwise and": (lambda a, b: a & b, [ONES, ONES], NotImplementedError),
    "dim out of range": (lambda a: a.sum(2) + 1, [ONES], IndexError),
    # PyTorch's decomposition of index_add broadcasts the source where eager checks its shape,
    # and counts a negative index from the end where eager raises (index_copy too)
    "index_add source shape": (lambda a: (a * 2).index_add(0, tensor([0, 1]), a[:2, :1]), [ONES], RuntimeError),
}
if DEVICE == "cpu":  # on CUDA eager's index check is a device-side assert, which leaves the context unusable
    ERRORS.update({
        "index_add negative index": (lambda a: (a * 2).index_add(0, tensor([-1, 0]), a[:2]), [ONES], RuntimeError),
        "index_add negative column": (lambda a: (a * 2).index_add(1, tensor([-2, 0]), a[:, :2]), [ONES], RuntimeError),
        "index_copy negative index": (lambda a: (a * 2).index_copy(0, tensor([-1, 0]), a[:2]), [ONES], IndexError),
    })


def same_error(compiled: BaseException, eager: BaseException) -> bool:
    """The compiled call raised eager's exception type. Older TorchDynamo versions (2.11)
    re-raise errors found while tracing as ``TorchRuntimeError`` with the eager exception as
    its cause; that counts as the same error."""
    if isinstance(compiled, type(eager)):
        return True
    if type(compiled).__name__ != "TorchRuntimeError":
        return False
    chain, seen = compiled, set()
    while chain is not None and id(chain) not in seen:
        seen.add(id(chain))
        if isinstance(chain, type(eager)) and chain is not compiled:
            return True
        chain = chain.__cause__ or chain.__context__
    return str(eager).splitlines()[0] in str(compiled)


@pytest.mark.parametrize("case", list(ERRORS))
def test_errors_match_eager(case):
    """Errors eager raises are raised by the compiled function with the same exception type
    (the type eager raises on this device and PyTorch version; ``error`` is its base class)."""
    fn, args, error = ERRORS[case]
    with pytest.raises(Exception) as eager:
        fn(*args)
    assert isinstance(eager.value, (error, RuntimeError))
    with pytest.raises(Exception) as compiled:
        torchfuse.compile(fn, dynamic=False)(*args)
    assert same_error(compiled.value, eager.value), (type(compiled.value), type(eager.value))


def test_unsupported_op_and_dtype_run_through_aten(caplog):
    """An op outside the registry and a dtype kernels do not take run through ATen between
    fused groups, each with its reason logged, and the values are eager's."""
    x = sample(F32, 90)
    z = torch.complex(sample(F32, 91), sample(F32, 92))
    fn = lambda x, z: (x.sin().cumsum(1).cos(), (z * 2).real + x)
    with caplog.at_level(logging.INFO, logger="torchfuse.fusion"):
        actual, graphs = run_compiled(fn, x, z)
    assert_matches(actual, fn(x, z))
    reasons = {str(c.target): c.reason for cg in graphs for c in cg.segmentation.calls}
    assert "not in the op registry" in reasons["aten.cumsum.default"]
    assert "complex" in reasons["aten.mul.Tensor"]
    assert any("aten.mul.Tensor stays on ATen" in r.getMessage() for r in caplog.records)
    assert all(cg.stats["fallbacks"] == 0 for cg in graphs)
    groups = fused_ops(graphs)
    assert any("sin" in g for g in groups) and any("cos" in g for g in groups), groups


def test_calls_on_complex_tensors_keep_eager_kernels():
    """Kernels take no complex dtype, so calls on complex tensors are not decomposed: ATen's
    kernels give eager's values bit for bit (PyTorch's decompositions of ``sgn``, and so of
    ``abs``'s gradient, of ``silu``, ``vdot`` and the norms were an ulp away), and
    ``mse_loss``, which eager does not implement for them, raises eager's error."""
    z = torch.complex(sample(F32, 93), sample(F32, 94))

    def fn(z):
        w = z.detach().requires_grad_()
        grad, = torch.autograd.grad(w.abs().sum(), w)
        return (torch.sgn(z), torch.nn.functional.silu(z), torch.vdot(z[0], z[1]),
                torch.linalg.vector_norm(z, dim=1), torch.linalg.vector_norm(z, 1, dim=1), grad)

    torch._dynamo.reset()
    for got, want in zip(torchfuse.compile(fn, dynamic=False)(z), fn(z)):
        torch.testing.assert_close(got, want, rtol=0, atol=0, equal_nan=True)
    mse = lambda z: torch.nn.functional.mse_loss(z, z.flip(0)) * 2
    with pytest.raises(NotImplementedError):
        mse(z)
    torch._dynamo.reset()
    with pytest.raises(NotImplementedError):
        torchfuse.compile(mse, dynamic=False)(z)


# ----------------------------------------------------------------------------- normalization bad input

def _raises_like_eager(fn, *args):
    with pytest.raises(Exception) as eager:
        fn(*args)
    torch._dynamo.reset()
    with pytest.raises(Exception) as compiled:
        torchfuse.compile(fn, dynamic=False)(*args)
    assert same_error(compiled.value, eager.value), (type(compiled.value), type(eager.value))


@pytest.mark.skipif(DEVICE != "cpu", reason="on CUDA eager's out-of-range target is a device-side assert")
def test_cross_entropy_target_out_of_range_raises_eager_error():
    """A class index past the logits' width raises eager's IndexError, also with ignore_index
    and label smoothing: on the CPU ``nll_loss_forward`` is not decomposed (the decomposition
    declines with ``NotImplemented``), so PyTorch's kernel and its target check run."""
    x = sample(F32, 71, shape=(4, 10))
    t = torch.tensor([1, 2, 10, 3], device=DEVICE)
    _raises_like_eager(lambda x, t: torch.nn.functional.cross_entropy(x * 2, t), x, t)
    _raises_like_eager(lambda x, t: torch.nn.functional.cross_entropy(x * 2, t, ignore_index=1, label_smoothing=0.2),
                       x, t)


def test_cross_entropy_with_ignore_index_and_smoothing_matches_eager():
    x = sample(F32, 72, shape=(6, 10))
    t = torch.tensor([1, 2, 9, 3, 0, 2], device=DEVICE)
    fn = lambda x, t: (torch.nn.functional.cross_entropy(x * 2, t, ignore_index=2, label_smoothing=0.1),
                       torch.nn.functional.cross_entropy(x, t, reduction="none"))
    check(fn, x, t)


@pytest.mark.parametrize("kwargs", [{}, {"ignore_index": 2, "label_smoothing": 0.1}, {"reduction": "sum"},
                                    {"reduction": "none"}, {"weight": True, "ignore_index": 0}])
def test_cross_entropy_gradient_matches_eager_without_scatter(kwargs):
    """The loss gradient (``nll_loss_backward``) is built by comparing class indices with the
    targets, not by a zero fill and a scatter: it matches eager's gradient (and an fp64
    reference) for mean, sum and per-row losses, class weights, and an ignore_index that is
    also a valid class; the backward graph has no scatter."""
    from torchfuse import backend

    kwargs = dict(kwargs)
    x = torch.randn(12, 10, generator=torch.Generator().manual_seed(75)).to(DEVICE)
    t = torch.tensor([1, 2, 9, 3, 0, 2, 2, 5, 0, 7, 4, 2], device=DEVICE)
    if kwargs.pop("weight", False):
        kwargs["weight"] = torch.linspace(0.5, 2.0, 10, device=DEVICE)

    def fn(x, t):
        loss = torch.nn.functional.cross_entropy(x * 2, t, **kwargs)
        return loss if loss.dim() == 0 else (loss * torch.arange(1.0, 13.0, device=loss.device)).sum()

    def grad(f, x):
        x = x.detach().clone().requires_grad_(True)
        return torch.autograd.grad(f(x, t), x)[0]

    torch._dynamo.reset()
    got = grad(torchfuse.compile(fn, dynamic=False), x)
    want = grad(fn, x)
    ref = grad(lambda x, t: fn(x.double(), t) if "weight" not in kwargs else
               torch.nn.functional.cross_entropy(x.double() * 2, t, **{**kwargs, "weight": kwargs["weight"].double()}), x)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    assert (got.double() - ref).abs().max() <= 4 * (want.double() - ref).abs().max() + 1e-7
    backward_graphs = [g for g in backend.RECENT if g.name == "backward"]
    assert backward_graphs
    calls = [str(n.target) for n in backward_graphs[-1].segmentation.calls]
    assert not any("scatter" in c or "zeros" in c for c in calls), calls


# ----------------------------------------------------------------------------- cross-entropy forward by mask
#
# decompose.nll_loss_forward_by_mask replaces nll_loss_forward over (N, C) rows on CUDA; the tests
# below add the test's device to Tuning.decompose.nll_by_mask_devices (through the environment
# default of Options.tuning, so that every compile of the test takes it) so that the CPU runs it too. On a CPU the
# range check (_assert_async) raises RuntimeError at once where eager's kernel raises IndexError.

CE_TARGETS = [4, 2, 9, 3, 0, 2, 2, 5, 0, 7, 4, 2]


def _nll_by_mask_here(monkeypatch) -> None:
    monkeypatch.setenv("TORCHFUSE_TUNING", f"decompose.nll_by_mask_devices={torch.device(DEVICE).type}")


def _ce_inputs(dtype, seed: int, n_classes: int = 10):
    """(12, n_classes) logits of ``dtype`` whose row 0 puts probability 1 on its target 4 (eager's
    loss there is -0.0), the targets CE_TARGETS, and class weights of ``dtype``."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(len(CE_TARGETS), n_classes, generator=g) * 3
    x[0, 4] = 100.0
    weight = torch.linspace(0.5, 2.0, n_classes).to(DEVICE, dtype)
    return x.to(DEVICE, dtype), torch.tensor(CE_TARGETS, device=DEVICE), weight


def _assert_near_eager_and_reference(got, want, ref, dtype, roundings: float = 1):
    """``got`` has eager's dtype and shape, NaN where eager has NaN, and is as close to the fp64
    reference ``ref`` as eager, give or take ``roundings`` roundings of ``dtype``. (On the CPU eager's bf16
    loss rounds the sum to bf16 before dividing by the total weight; PyTorch's CUDA kernel and
    torchfuse divide in fp32 and round once, so the two can differ by one bf16 step.)"""
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, want.dtype, got.shape, want.shape)
    assert torch.equal(got.isnan(), want.isnan()), (got, want)
    keep = ~want.isnan()
    got, want, ref = got[keep].double(), want[keep].double(), ref[keep]
    eps = torch.finfo(dtype).eps
    torch.testing.assert_close(got, want, rtol=2 * eps if dtype == BF16 else 1e-5, atol=1e-6)
    assert ((got - ref).abs() <= (want - ref).abs() + roundings * eps * ref.abs() + 1e-6).all(), (got, want, ref)


def _call_targets(graphs) -> list[str]:
    return [str(c.target) for cg in graphs for c in cg.segmentation.calls]


CE_CASES = {
    "mean": {},
    "sum": {"reduction": "sum"},
    "none": {"reduction": "none"},
    "ignore_index": {"ignore_index": 2},
    "all_ignored_mean": {"ignore_index": 2, "all_ignored": True},
    "all_ignored_sum": {"ignore_index": 2, "all_ignored": True, "reduction": "sum"},
    "weight": {"weight": True},
    "weight_ignore_none": {"weight": True, "ignore_index": 0, "reduction": "none"},
    "weight_ignore_sum": {"weight": True, "ignore_index": 0, "reduction": "sum"},
    "label_smoothing": {"label_smoothing": 0.1},
    "ignore_smoothing": {"ignore_index": 2, "label_smoothing": 0.3},
    "weight_ignore_smoothing": {"weight": True, "ignore_index": 2, "label_smoothing": 0.2},
}


@pytest.mark.parametrize("dtype", [F32, BF16], ids=dtype_id)
@pytest.mark.parametrize("case", list(CE_CASES))
def test_cross_entropy_forward_by_mask_matches_eager(monkeypatch, case, dtype):
    """With ``nll_loss_forward`` decomposed into masked row sums, ``F.cross_entropy`` gives
    eager's values (and is as close as eager to an fp64 reference) for mean, sum and per-row
    losses, an ignore_index that is also a class, all targets ignored (NaN for the mean, 0 for
    the sum), class weights and label smoothing, in fp32 and bf16; per-row zero losses keep
    eager's sign (-0.0 where the target has probability 1, +0.0 where it is ignored). No
    ``nll_loss_forward`` runs."""
    _nll_by_mask_here(monkeypatch)
    kwargs = dict(CE_CASES[case])
    x, t, weight = _ce_inputs(dtype, 77)
    if kwargs.pop("all_ignored", False):
        t = torch.full_like(t, kwargs["ignore_index"])
    if kwargs.pop("weight", False):
        kwargs["weight"] = weight
    fn = lambda x, t: torch.nn.functional.cross_entropy(x, t, **kwargs)
    want = fn(x, t)
    got, graphs = run_compiled(fn, x, t)
    ref_kwargs = {**kwargs, "weight": weight.double()} if "weight" in kwargs else kwargs
    ref = torch.nn.functional.cross_entropy(x.double(), t, **ref_kwargs)
    _assert_near_eager_and_reference(got, want, ref, dtype)
    if got.dim() == 1 and "label_smoothing" not in kwargs:
        zeros = want == 0
        assert zeros.any() and torch.equal(got[zeros].signbit(), want[zeros].signbit()), (got, want)
    assert "aten.nll_loss_forward.default" not in _call_targets(graphs)


@pytest.mark.parametrize("dtype", [F32, BF16], ids=dtype_id)
@pytest.mark.parametrize("reduction", [0, 1, 2], ids=["none", "mean", "sum"])
def test_nll_loss_forward_by_mask_returns_eager_total_weight(monkeypatch, reduction, dtype):
    """``aten.nll_loss_forward`` itself returns ``(output, total_weight)`` as eager: the total
    weight is a 0-dim tensor of the input's dtype, the sum of the weights (or the count) of
    the targets not ignored, 0 for ``none``; with every target ignored it is 0 and the mean
    is NaN."""
    _nll_by_mask_here(monkeypatch)
    aten = torch.ops.aten
    x, t, weight = _ce_inputs(dtype, 78)
    logp = torch.log_softmax(x.float(), 1).to(dtype)
    ignored = torch.full_like(t, 2)

    def fn(logp, t, ignored, weight):
        return (aten.nll_loss_forward(logp * 1, t, None, reduction, 2),
                aten.nll_loss_forward(logp * 1, t, weight, reduction, 2),
                aten.nll_loss_forward(logp * 1, ignored, weight, reduction, 2))

    want = fn(logp, t, ignored, weight)
    got, graphs = run_compiled(fn, logp, t, ignored, weight)
    tol = {"rtol": 2 * torch.finfo(dtype).eps, "atol": 1e-6} if dtype == BF16 else {}
    for (out, total), (want_out, want_total) in zip(got, want):
        assert total.dtype == want_total.dtype == dtype and total.shape == want_total.shape == ()
        assert_matches(total, want_total, **tol)  # a sum of weights: the order of the terms differs
        assert_matches(out, want_out, **tol)
    assert got[0][1].item() == (0 if reduction == 0 else sum(c != 2 for c in CE_TARGETS))
    assert got[2][1].item() == 0 and (reduction != 1 or got[2][0].isnan())
    assert "aten.nll_loss_forward.default" not in _call_targets(graphs)


@pytest.mark.parametrize("dtype", [F32, BF16], ids=dtype_id)
@pytest.mark.parametrize("case", ["label_smoothing", "sum", "weight"])
def test_cross_entropy_forward_is_one_row_kernel_without_full_size_writes(monkeypatch, case, dtype):
    """The inference forward of ``cross_entropy(x, t, label_smoothing=0.1)`` (and of the sum,
    and the mean with class weights) is one reduction kernel over the rows (log-softmax's max
    and sum of exponentials, the smoothing sum, the masked sums that pick each row's target
    and weight, the range check's per-row part), which reads the (N, C) logits and writes
    per-row values only, and one small kernel reducing over N (the sums or means and the
    range check's ``all``); the only ATen call is the asynchronous check. No (N, C) tensor is
    written and nll_loss_forward does not run (before: the log-probabilities were written in
    full for PyTorch's loss kernel)."""
    _nll_by_mask_here(monkeypatch)
    x, t, weight = _ce_inputs(dtype, 79, n_classes=40)
    kwargs = dict(CE_CASES[case])
    if kwargs.pop("weight", False):
        kwargs["weight"] = weight
    fn = lambda x, t: torch.nn.functional.cross_entropy(x, t, **kwargs)
    with torch.no_grad():
        got, graphs = run_compiled(fn, x, t)
    torch.testing.assert_close(got, fn(x, t), **({"rtol": 2 * torch.finfo(dtype).eps, "atol": 1e-6} if dtype == BF16 else {}))
    (cg,) = graphs
    n, c = x.shape
    rows, final = cg.segmentation.groups
    assert rows.domain.sizes == (n, c) and rows.domain.reduced == (1,), rows.domain
    assert final.domain.reduced == (0,) and final.domain.sizes == (n,), final.domain
    assert [tuple(v.meta.shape) for v in rows.inputs if v.meta is not None].count((n, c)) == 1  # the logits
    written = [tuple(o.meta.shape) for g in (rows, final) for o in g.outputs]
    assert all(math.prod(s) <= n for s in written), written
    assert "arange" in [n.op for n in rows.nodes]  # class indices from the loop index, not loaded
    assert _call_targets(graphs) == ["aten._assert_async.msg"]
    # passes.cross_entropy.log_softmax_sums and one_hot_picks: no element's log-probability is computed;
    # the log-sum-exp meets only per-row values (the picked x - max, the sum of x - max)
    lse = [n.output for n in rows.nodes if n.op == "log"]
    after, full = set(lse), []
    for node in rows.nodes:
        if any(v in after for v in node.input_values()):
            after.update(node.outputs)
            full += [node.op for o in node.outputs if o.meta is not None and tuple(o.meta.shape) == (n, c)]
    assert len(lse) == 1 and not full, full


@pytest.mark.parametrize("case", [("mean", F32), ("weight_ignore_smoothing", F32), ("weight_ignore_none", F32),
                                  ("label_smoothing", BF16)], ids=lambda c: f"{c[0]}-{dtype_id(c[1])}")
def test_cross_entropy_by_mask_gradients_through_aot_autograd(monkeypatch, case):
    """Training: ``torch.compile(backend="torchfuse")`` on inputs that require grad (AOTAutograd's
    forward and backward graphs) gives eager's loss and gradient, as close as eager to an fp64
    reference, with the forward decomposed. (Whether the forward saves the (N, C)
    log-probabilities for the backward is the min-cut partitioner's choice: in fp32 it saves the
    per-row max and log-sum-exp and recomputes the log-probabilities, in bf16 it saves them.)"""
    from torchfuse import backend

    _nll_by_mask_here(monkeypatch)
    name, dtype = case
    kwargs = dict(CE_CASES[name])
    x, t, weight = _ce_inputs(dtype, 80)
    x[0, 4] = 2.0  # a finite gradient everywhere in fp64 too
    if kwargs.pop("weight", False):
        kwargs["weight"] = weight
    scale = torch.arange(1.0, 13.0, device=DEVICE, dtype=dtype)

    def fn(x, t, **kw):
        loss = torch.nn.functional.cross_entropy(x * 2, t, **{**kwargs, **kw})
        return loss if loss.dim() == 0 else (loss * scale.to(loss.dtype)).sum()

    def loss_and_grad(f, x):
        x = x.detach().clone().requires_grad_(True)
        loss = f(x, t)
        return loss.detach(), torch.autograd.grad(loss, x)[0]

    got_loss, got = loss_and_grad(torch.compile(fn, backend="torchfuse", dynamic=False), x)
    want_loss, want = loss_and_grad(fn, x)
    ref_kw = {"weight": weight.double()} if "weight" in kwargs else {}
    ref_loss, ref = loss_and_grad(lambda x, t: fn(x.double(), t, **ref_kw), x)
    _assert_near_eager_and_reference(got_loss, want_loss, ref_loss, dtype)
    # each gradient element is exp(log-probability) times weights: a log-sum-exp summed in another
    # order moves a log-probability by a rounding of its own size, which exp makes a relative
    # error of that size (on CUDA: 2.4 fp32 roundings where eager's was exact); below -8 the
    # element is small enough for the 1e-6 term
    _assert_near_eager_and_reference(got, want, ref, dtype, roundings=8)
    forward = [g for g in backend.RECENT if g.name == "forward"][-1]
    assert "aten.nll_loss_forward.default" not in _call_targets([forward])


@pytest.mark.skipif(DEVICE != "cpu", reason="a device-side assert on CUDA leaves the context unusable")
def test_cross_entropy_by_mask_target_out_of_range_raises_runtime_error(monkeypatch):
    """With the decomposition on the CPU, a target outside [0, C) that is not ignore_index
    raises the device-side check's RuntimeError (CUDA's error type for eager's assert; the
    CPU's own kernel raises IndexError, which is why the CPU is not on the list by default);
    an ignore_index outside [0, C) is no error and gives eager's loss."""
    _nll_by_mask_here(monkeypatch)
    x, _, _ = _ce_inputs(F32, 81)
    fn = lambda x, t: torch.nn.functional.cross_entropy(x * 2, t, ignore_index=-1, label_smoothing=0.1)
    ok = torch.tensor([1, -1, 9, 3, 0, 2, -1, 5, 0, 7, 4, 2])
    check(fn, x, ok)
    for bad in (10, -5):
        t = ok.clone()
        t[3] = bad
        torch._dynamo.reset()
        with pytest.raises(RuntimeError, match="Target out of bounds"):
            torchfuse.compile(fn, dynamic=False)(x, t)


def test_nll_loss_forward_by_mask_declines_what_eager_rejects_or_other_devices(monkeypatch):
    """The decomposition returns ``NotImplemented`` (make_fx then records PyTorch's op, with
    its checks and errors) off its devices, and for what PyTorch's kernel would
    reject or it does not cover: other ranks, int32 targets, a batch size mismatch, weights
    of another dtype or size."""
    from torchfuse import decompose

    meta = lambda *shape, dtype=F32: torch.empty(*shape, dtype=dtype, device="meta")
    x, t, w = meta(6, 10), meta(6, dtype=I64), meta(10)
    assert decompose.nll_loss_forward_by_mask(x, t, None, 1, -100) is NotImplemented  # meta is not listed
    out, total = decompose.nll_loss_forward_by_mask(x, t, w, 1, -100, devices=("meta",))
    assert out.shape == total.shape == () and out.dtype == total.dtype == F32
    for args in [(meta(2, 6, 10), meta(2, 6, dtype=I64), None), (x, meta(6, dtype=I32), None),
                 (x, meta(5, dtype=I64), None), (x, t, meta(10, dtype=F64)), (x, t, meta(9))]:
        assert decompose.nll_loss_forward_by_mask(*args, 1, -100, devices=("meta",)) is NotImplemented


@pytest.mark.parametrize("bias", [True, False])
def test_misaligned_half_precision_matmuls_are_padded_with_eager_values(monkeypatch, bias):
    """A bf16 product whose M, K or N is not a multiple of 8 (a vocabulary head) runs on
    zero-padded operands (forward and both gradients; on for CUDA, forced here on the test's
    device): the loss and gradients equal eager's to bf16 matmul precision, and the graphs
    pad each misaligned product."""
    from torchfuse import backend
    from torchfuse.config import Tuning

    tuning = Tuning().replace("decompose.mm_pad_devices", (torch.device(DEVICE).type,)).replace(
        "decompose.mm_pad_min_macs", 1)
    g = torch.Generator().manual_seed(76)
    x = torch.randn(12, 20, generator=g).to(DEVICE, BF16)
    w = torch.randn(37, 20, generator=g).to(DEVICE, BF16)
    b = torch.randn(37, generator=g).to(DEVICE, BF16)
    t = torch.arange(12, device=DEVICE) * 3 % 37

    def fn(x, w, b=None):
        return torch.nn.functional.cross_entropy(torch.nn.functional.linear(x, w, b).float(), t)

    args = [x, w, b] if bias else [x, w]
    torch._dynamo.reset()
    got_in = [a.clone().requires_grad_() for a in args]
    want_in = [a.clone().requires_grad_() for a in args]
    got = torchfuse.compile(fn, dynamic=False, tuning=tuning)(*got_in)
    want = fn(*want_in)
    torch.testing.assert_close(got, want, rtol=1e-2, atol=1e-2)
    for a, e in zip(torch.autograd.grad(got, got_in), torch.autograd.grad(want, want_in)):
        torch.testing.assert_close(a, e, rtol=2e-2, atol=2e-3)
    graphs = {cg.name: cg for cg in backend.RECENT[-2:]}
    pads = {name: sum("constant_pad_nd" in str(c.target) for c in cg.segmentation.calls) for name, cg in graphs.items()}
    # K=20 and N=37 are misaligned; the backward pads the loss gradient once for both of its
    # products (``passes.aten.merge_duplicate_pads``)
    assert pads["forward"] >= 2 and pads["backward"] >= 1, pads


def test_aligned_or_small_matmuls_are_not_padded():
    from torchfuse import decompose
    from torchfuse.config import DecomposeTuning

    a, b = torch.empty(64, 64, dtype=BF16, device="meta"), torch.empty(64, 37, dtype=BF16, device="meta")
    assert decompose._mm_padding(a, b, DecomposeTuning()) is None  # small, and the meta device is not padded
    assert decompose.mm_padded(a, b) is NotImplemented
    # on a padded device: only the operands' leading dimensions are padded: K and N, and M
    # when ``a`` is column-major
    padded = DecomposeTuning(mm_pad_min_macs=1, mm_pad_devices=("meta",))
    tokens = torch.empty(197, 64, dtype=BF16, device="meta")
    assert decompose._mm_padding(tokens, torch.empty(64, 64, dtype=BF16, device="meta"), padded) is None
    assert decompose._mm_padding(tokens, b, padded) == (0, 0, 3)
    assert decompose._mm_padding(torch.empty(197, 20, dtype=BF16, device="meta"), b[:20], padded) == (0, 4, 3)
    # a language-model head's weight gradient: grad_logits.t() (vocabulary x tokens) @ h
    grad_logits_t = torch.empty(64, 197, dtype=BF16, device="meta").t()
    assert decompose._mm_padding(grad_logits_t, torch.empty(64, 64, dtype=BF16, device="meta"), padded) == (3, 0, 0)


def test_layer_norm_with_mismatched_normalized_shape_raises_eager_error():
    x = sample(F32, 73, shape=(4, 10))
    _raises_like_eager(lambda x: torch.nn.functional.layer_norm(x + 1, (9,)), x)


@pytest.mark.parametrize("eps", [0.0, -1.0])
def test_layer_norm_eps_not_positive_gives_eager_values(eps):
    """eps <= 0 is not an error in eager: constant rows give NaN (0/0), and a negative eps
    gives NaN where the variance is below -eps; the fused kernel gives the same."""
    x = sample(F32, 74, shape=(4, 10))
    x[1] = 3.0
    check(lambda x: torch.nn.functional.layer_norm(x + 1, (10,), eps=eps), x)


def test_pads_with_zero_and_negative_zero_stay_apart():
    """Two pads of one tensor that differ only in a fill of 0.0 and -0.0 (equal as numbers,
    different bits) are two pads, not one merged pad."""
    x = tensor([[1.0, -2.0, 3.0], [0.5, 4.0, -1.5]])

    def f(x):
        y = x.sin()
        return (torch.nn.functional.pad(y, (1, 1), value=0.0) * 2,
                torch.nn.functional.pad(y, (1, 1), value=-0.0) * 2)

    got = check(f, x, exact=True)
    want = f(x)
    for g, w in zip(got, want):
        assert torch.equal(g.signbit(), w.signbit())


def test_pads_with_a_complex_fill_are_merged_by_value():
    """The pass that merges duplicate pads takes a complex fill value (``constant_pad_nd`` of
    complex tensors): it merges equal ones and keeps the graph's values."""
    from torch.fx.experimental.proxy_tensor import make_fx

    from torchfuse.passes.aten import merge_duplicate_pads

    def f(x):
        pad = [-1, 1, -1, 1]
        return (torch.constant_pad_nd(x, pad, 2.0 + 0j) * 2, torch.constant_pad_nd(x, pad, 2.0 + 0j) * 3,
                torch.constant_pad_nd(x, pad, 2.0 - 1j))

    x = torch.randn(1, 2, 3, 3, dtype=torch.complex64)
    gm = make_fx(f)(x)
    assert merge_duplicate_pads(gm) == 1
    gm.recompile()
    assert_matches(gm(x), f(x), exact=True)


def eager_outcome(fn, *args, errors=(RuntimeError,)):
    """``(eager's result, None)``, or ``(None, the exception)`` where eager raises one of
    ``errors``: the outcome a compiled call must reproduce."""
    try:
        return fn(*args), None
    except errors as e:
        return None, e


#: calls storing a number into a tensor, where eager's checked conversion may raise; each
#: case's expected outcome is eager's own, computed in the test
STORED_NUMBERS = {
    "masked_fill_half": lambda x, m: x.half().masked_fill(m, -1e30) * 2,
    "masked_fill_tensor_value": lambda x, m: x.half().masked_fill(m, torch.tensor(-1e30)) * 2,
    "masked_fill_half_tensor_value": lambda x, m: x.half().masked_fill(m, torch.tensor(-1e30, dtype=torch.half)) * 2,
    "masked_fill_fits": lambda x, m: x.half().masked_fill(m, -65504.0) * 2,
    "masked_fill_inf": lambda x, m: x.bfloat16().masked_fill(m, float("-inf")) + 1,
    "full_like_half": lambda x, m: torch.full_like(x.half(), 1e6) + x.half(),
    "full_like_one_element": lambda x, m: torch.full_like(x[:1, :1].half(), 1e6) + x[:1, :1].half(),
    "fill_bf16": lambda x, m: x.bfloat16().clone().fill_(3.4e38) + 1,
    "clamp_half": lambda x, m: x.half().clamp(max=1e6) * 2,
    "index_fill_half": lambda x, m: x.half().index_fill(0, torch.tensor([0], device=x.device), 7e4) * 2,
    "full_int8": lambda x, m: torch.full((2, 3), 200, dtype=torch.int8, device=x.device) + (x[:2, :3] > 0).to(torch.int8),
    "full_uint8_wraps": lambda x, m: torch.full((2, 3), -1, dtype=torch.uint8, device=x.device) - (x[:2, :3] > 0).to(torch.uint8),
    "threshold_half": lambda x, m: torch.nn.functional.threshold(x.half(), 0.0, 1e6) * 2,
    "threshold_half_fits": lambda x, m: torch.nn.functional.threshold(x.half(), 0.0, 6e4) * 2,
    "threshold_half_inplace": lambda x, m: torch.nn.functional.threshold(x.half() * 2, 1e6, 0.0, inplace=True) + 1,
    "hardtanh_half": lambda x, m: torch.nn.functional.hardtanh(x.half(), -1e6, 1e6) * 2,
    # where's number becomes a one-element tensor of the result's dtype (a checked fill)
    "where_int8": lambda x, m: torch.where(m, (x * 10).to(torch.int8), 200) + 1,
    "where_int32": lambda x, m: torch.where(m, (x * 10).to(torch.int32), 2**40) * 2,
    "where_float": lambda x, m: torch.where(m, 1e39, 0.0) + x,
    "where_half": lambda x, m: torch.where(m, x.half(), 1e6) * 2,
    "where_uint8_wraps": lambda x, m: torch.where(m, (x * 10).to(torch.uint8), -1) + 1,
    # alpha and addcmul's value are converted checked (addcmul's to fp32 for fp16/bf16)
    "add_alpha_int8": lambda x, m: torch.add((x * 10).to(torch.int8), m.to(torch.int8), alpha=1000) + 1,
    "sub_alpha_float": lambda x, m: torch.sub(x, x * 2, alpha=1e39) * 2,
    "add_alpha_half": lambda x, m: torch.add(x.half(), x.half(), alpha=1e6) * 2,
    "addcmul_value_int32": lambda x, m: torch.addcmul((x * 10).int(), m.int(), m.int(), value=2**31) + 1,
    "addcmul_value_half_fits_fp32": lambda x, m: torch.addcmul(x.half(), x.half(), x.half(), value=1e6) * 2,
    # the deprecated overloads take the number second
    "add_deprecated_alpha_int8": lambda x, m: torch.add((x * 10).to(torch.int8), 1000, m.to(torch.int8)) + 1,
    "addcmul_deprecated_value_int8": lambda x, m: torch.addcmul((x * 10).to(torch.int8), 1000, m.to(torch.int8),
                                                                m.to(torch.int8)) + 1,
    # a one-element fp32 fill is checked on the CPU too (only fp16/bf16's are not)
    "full_like_one_element_float": lambda x, m: torch.full_like(x[:1, :1], 1e39) + x[:1, :1],
}


@pytest.mark.filterwarnings("ignore:This overload of .* is deprecated")
@pytest.mark.parametrize("case", list(STORED_NUMBERS))
def test_a_number_that_does_not_fit_raises_as_in_eager(case):
    """A number stored into a tensor whose dtype cannot hold it (``half.masked_fill(m, -1e30)``):
    eager raises ``value cannot be converted to type ... without overflow`` where its fill,
    ``masked_fill``, ``index_fill`` and ``clamp`` convert the number (a fill of a one-element
    floating tensor does not check; a negative integer wraps in an unsigned dtype), while the
    decomposed graph would write infinities. The compiled call raises eager's error where eager
    does, and gives eager's values where eager does not."""
    fn = STORED_NUMBERS[case]
    x = torch.randn(4, 6, device=DEVICE)
    m = x > 0.5
    want, error = eager_outcome(fn, x, m)
    compiled = torchfuse.compile(fn, dynamic=False)
    if error is not None:
        with pytest.raises(RuntimeError, match="without overflow"):
            compiled(x, m)
    else:
        got = compiled(x, m)
        assert got.dtype == want.dtype and torch.equal(got, want), (got, want)


#: calls storing an int argument ``k`` that TorchDynamo makes symbolic; (inputs, k values)
SYMBOLIC_STORED_NUMBERS = {
    "clamp_int8": (lambda x, k: torch.clamp(x * 1, -k, k), torch.int8, (100, 50, 300, 90)),
    "clamp_min_int8": (lambda x, k: torch.clamp(x * 1, min=-k), torch.int8, (100, 50, 300, 90)),
    "masked_fill_half": (lambda x, k: (x * 1).masked_fill(x > 1, k), torch.float16, (100, 50, 100000, 60000)),
    "hardtanh_half": (lambda x, k: torch.nn.functional.hardtanh(x * 1, -k, k), torch.float16, (3, 5, 100000, 7)),
    "threshold_half": (lambda x, k: torch.nn.functional.threshold(x * 1, 1, k), torch.float16, (3, 5, 100000, 7)),
    "fill_uint8_negative": (lambda x, k: (x * 1).masked_fill(x > 1, -k), torch.uint8, (3, 5, 300, 7)),
}


@pytest.mark.parametrize("case", list(SYMBOLIC_STORED_NUMBERS))
def test_a_symbolic_number_that_does_not_fit_raises_as_in_eager(case):
    """The same for a Python int that TorchDynamo makes symbolic (it varies between calls: a
    quantizer's bounds): the graph is guarded on the number's side of the dtype's bounds, so a
    value that does not fit compiles again and raises eager's error, where the kernel would
    have wrapped it (int8 ``clamp(x, -300, 300)`` clamping to 44) or stored infinity; values
    that fit afterwards give eager's values again (CUDA's clamp converts its bounds unchecked:
    there, eager's values)."""
    fn, dtype, values = SYMBOLIC_STORED_NUMBERS[case]
    x = torch.tensor([-128, -100, -5, 0, 7, 100, 127] * 3, dtype=torch.float32).to(dtype)
    compiled = torchfuse.compile(fn, dynamic=None)
    for k in values:
        want, error = eager_outcome(fn, x, k)
        if error is not None:
            with pytest.raises(RuntimeError, match="without overflow"):
                compiled(x, k)
        else:
            got = compiled(x, k)
            assert got.dtype == want.dtype and torch.equal(got, want), (k, got, want)


def test_a_stored_number_from_item_compiles_and_is_not_checked():
    """An int read from a tensor (``.item()`` under ``capture_scalar_outputs``) is an unbacked
    symbol, with no value to guard on: it is stored unchecked (as PyTorch's decompositions
    store it), and the graph compiles and gives eager's values where they fit."""
    def fn(x, t):
        k = (t * 2).item()
        return torch.clamp(x * 1, -k, k)

    x = torch.tensor([-128, -60, 5, 60, 127], dtype=torch.int8, device=DEVICE)
    with torch._dynamo.config.patch(capture_scalar_outputs=True):
        compiled = torchfuse.compile(fn)
        for v in (25, 30, 45):
            t = torch.tensor(v, device=DEVICE)
            assert torch.equal(compiled(x, t), fn(x, t))


#: the cases a ``@fused`` function takes (a tensor made inside one is a constant of its trace;
#: it takes no slices or in-place writes), and a one-element fill of its own
FUSED_STORED_NUMBERS = {**{c: STORED_NUMBERS[c] for c in ("masked_fill_half", "masked_fill_fits", "masked_fill_inf",
                                                         "full_like_half", "clamp_half")},
                        "full_like_one_element": lambda x, m: torch.full_like(x.half(), 1e6) + x.half(),
                        "full_like_uint8_wraps": lambda x, m: torch.full_like(x, -1, dtype=torch.uint8) + m.to(torch.uint8),
                        "full_like_int8": lambda x, m: torch.full_like(x, 200, dtype=torch.int8) + m.to(torch.int8),
                        # the bounds are checked against the result's dtype (float), not the input's
                        "clamp_uint8_float_bounds": lambda x, m: (m.to(torch.uint8) * 3).clamp(-2.5, 1.5) * 2}


@pytest.mark.parametrize("case", FUSED_STORED_NUMBERS)
def test_a_number_that_does_not_fit_raises_in_a_fused_function_as_in_eager(case):
    """The same inside a ``@fused`` function, whose trace is decomposed as it is made: its
    decompositions check the number first, as eager's conversion does."""
    fn = FUSED_STORED_NUMBERS[case]
    x = torch.randn(*((1, 1) if case.endswith("one_element") else (4, 6)), device=DEVICE)
    m = x > 0.5
    want, error = eager_outcome(fn, x, m)
    fused = torchfuse.fusion.fused(fn, interpret=DEVICE == "cpu")
    if error is not None:
        with pytest.raises(RuntimeError, match=re.escape(str(error))):
            fused(x, m)
    else:
        got = fused(x, m)
        assert got.dtype == want.dtype and torch.equal(got, want), (got, want)


def test_a_fused_function_checks_a_number_argument_per_value():
    """A Python number passed to a ``@fused`` function is part of its trace's key: a value that
    fits runs, one that does not raises, each as in eager."""
    fill = torchfuse.fusion.fused(lambda x, v: x.masked_fill(x > 0, v) * 2, interpret=DEVICE == "cpu")
    x = torch.randn(4, 6, device=DEVICE).half()
    assert torch.equal(fill(x, -6e4), x.masked_fill(x > 0, -6e4) * 2)
    with pytest.raises(RuntimeError, match="c10::Half without overflow"):
        fill(x, -1e30)
    assert torch.equal(fill(x, float("-inf")), x.masked_fill(x > 0, float("-inf")) * 2)


def test_a_fused_fill_is_checked_by_its_element_count():
    """CPU eager fills a one-element floating tensor unchecked and checks any larger one (CUDA
    eager checks both); a ``@fused`` trace made on one size holds for the other only where the
    outcome is the same. Each call's outcome is eager's."""
    fn = lambda x: torch.full_like(x, 1e6) + x
    fill = torchfuse.fusion.fused(fn, interpret=DEVICE == "cpu")
    one, many = torch.randn(1, device=DEVICE).half(), torch.randn(5, device=DEVICE).half()
    for x in (one, many, one):
        want, error = eager_outcome(fn, x)
        if error is not None:
            with pytest.raises(RuntimeError, match=re.escape(str(error))):
                fill(x)
        else:
            assert torch.equal(fill(x), want)
    assert eager_outcome(fn, many)[1] is not None  # a larger fill is checked on every device


@pytest.mark.parametrize("shape", [(3, 0), (0, 3), (0,)], ids=str)
@pytest.mark.parametrize("call", ["max_dim", "min_last", "max_keepdim", "max_all", "torch_max_indices", "max_two"])
def test_max_and_min_over_an_empty_dim_raise_as_in_eager(call, shape):
    """A ``max``/``min`` over a dim of size 0 has no value and no index: eager raises
    ``IndexError`` (``max()`` of an empty tensor ``RuntimeError``) where a kernel would return
    -inf and an index; the compiled call raises eager's error, and returns eager's (empty)
    values where eager does (a dim that is not empty, the elementwise max of two tensors)."""
    fns = {"max_dim": lambda x: x.max(-1)[0] * 2, "min_last": lambda x: x.min(-1).indices,
           "max_keepdim": lambda x: x.max(dim=0, keepdim=True).values + 1, "max_all": lambda x: x.max(),
           "torch_max_indices": lambda x: torch.max(x, 0)[1], "max_two": lambda x: torch.max(x, x * 2)}
    fn = fns[call]
    x = torch.randn(*shape, device=DEVICE)
    want, error = eager_outcome(fn, x, errors=(IndexError, RuntimeError))
    compiled = torchfuse.compile(fn, dynamic=False)
    if error is not None:
        with pytest.raises(type(error)):
            compiled(x)
    else:
        got = compiled(x)
        assert got.shape == want.shape and got.dtype == want.dtype and torch.equal(got, want)


@pytest.mark.parametrize("call", ["softmax", "log_softmax", "F.softmax", "softmax_dtype_int", "softmax_float"])
@pytest.mark.parametrize("dtype", [I8, I64, U8, F16], ids=dtype_id)
def test_softmax_with_an_integer_result_raises_as_in_eager(call, dtype):
    """Eager implements softmax and log-softmax for floating results only
    (``"softmax_lastdim_kernel_impl" not implemented for 'Char'``); PyTorch's decomposition
    traces them for any dtype and a kernel would return rounded garbage. The compiled call
    raises eager's error where eager does, and gives eager's values where it does not."""
    import torch.nn.functional as F

    fns = {"softmax": lambda x: x.softmax(-1) + 1, "log_softmax": lambda x: torch.log_softmax(x, 1),
           "F.softmax": lambda x: F.softmax(x, -1), "softmax_dtype_int": lambda x: x.softmax(-1, dtype=torch.int32),
           "softmax_float": lambda x: x.softmax(-1, dtype=torch.float32)}
    fn = fns[call]
    x = (torch.arange(12, device=DEVICE).view(3, 4) % 5).to(dtype)
    want, error = eager_outcome(fn, x, errors=(RuntimeError, NotImplementedError))
    compiled = torchfuse.compile(fn, dynamic=False)
    if error is not None:
        with pytest.raises(type(error), match="not implemented"):
            compiled(x)
    else:  # (fp16 rows: an ulp from CPU eager's rounding, as the op tests allow)
        torch.testing.assert_close(compiled(x), want, rtol=2e-3, atol=1e-5)


_FLOATING_INPUT_CALLS = {
    "gelu": lambda x: torch.nn.functional.gelu(x) + 1, "silu": torch.nn.functional.silu,
    "mish": torch.nn.functional.mish, "softplus": torch.nn.functional.softplus,
    "hardsigmoid": torch.nn.functional.hardsigmoid, "hardswish": torch.nn.functional.hardswish,
    "logsigmoid": torch.nn.functional.logsigmoid, "celu": torch.nn.functional.celu,
    "hardshrink": torch.nn.functional.hardshrink, "glu": lambda x: torch.nn.functional.glu(x, -1),
    "softmin": lambda x: torch.nn.functional.softmin(x, -1),
    "softmin_float": lambda x: torch.nn.functional.softmin(x, -1, dtype=torch.float32),
    "lerp": lambda x: torch.lerp(x, x * 2, 0.25),
}


@pytest.mark.parametrize("call", list(_FLOATING_INPUT_CALLS))
@pytest.mark.parametrize("dtype", [I64, I8, F16], ids=dtype_id)
def test_activations_of_integer_tensors_raise_as_in_eager(call, dtype):
    """Eager implements these activations for floating inputs only (``"GeluKernelImpl" not
    implemented for 'Long'``); PyTorch's decompositions trace them for any dtype, and the
    kernels returned integers (an integer ``lerp``, a float). The compiled call raises eager's
    error where eager does, and gives eager's values where it does not."""
    fn = _FLOATING_INPUT_CALLS[call]
    x = (torch.arange(12, device=DEVICE).view(3, 4) % 5 - 2).to(dtype)
    want, error = eager_outcome(fn, x, errors=(RuntimeError, NotImplementedError))
    compiled = torchfuse.compile(fn, dynamic=False)
    if error is not None:
        with pytest.raises(type(error), match="not implemented"):
            compiled(x)
    else:
        torch.testing.assert_close(compiled(x), want, rtol=2e-3, atol=1e-5)


#: calls whose eager kernels raise for some dtypes (or mixed dtypes) while PyTorch's
#: decompositions trace them: (call, argument dtypes), with cases where eager computes beside them
_F = torch.nn.functional
_DTYPE_CHECKED_CALLS = {
    "frac": (lambda x: torch.frac(x) + 1, [(I32,), (U8,), (F16,)]),
    "frac_": (lambda x: x.frac_() * 2, [(I64,), (F32,)]),
    "logaddexp": (lambda a, b: torch.logaddexp(a, b) + 1, [(I32, I32), (I8, I8), (I32, F32), (F16, F16)]),
    "logaddexp2": (lambda a, b: torch.logaddexp2(a, b) + 1, [(U8, U8), (I64, BF16)]),
    "threshold": (lambda x: torch.nn.functional.threshold(x, 0, 1) * 1, [(BOOL,), (I32,)]),
    "log_ndtr": (lambda x: torch.special.log_ndtr(x) * 2, [(F16,), (BF16,), (I32,), (F32,)]),
    "heaviside": (lambda a, b: torch.heaviside(a, b) * 2, [(F32, F16), (F16, BF16), (F32, I32), (F32, F32), (I64, I64)]),
    "addcdiv": (lambda a, b: torch.addcdiv(a.float(), b, b), [(F32, BOOL), (F32, I32), (F32, F16)]),
    "soft_margin_loss": (lambda a: _F.soft_margin_loss(a, a) + 1, [(I32,), (F32,)]),
    "huber_loss": (lambda a: _F.huber_loss(a, a * 2) + 1, [(I8,), (F32,)]),
    "smooth_l1_loss": (lambda a: _F.smooth_l1_loss(a, a * 2) + 1, [(I64,), (F32,)]),
    "multilabel_soft_margin_loss": (lambda a: _F.multilabel_soft_margin_loss(a.view(2, 3), a.view(2, 3)), [(I32,), (F32,)]),
    # (distinct indices: which of two values written to one place wins is not defined)
    "max_unpool2d": (lambda a: _F.max_unpool2d(a.view(1, 1, 2, 3), torch.arange(5, -1, -1, device=a.device).view(1, 1, 2, 3),
                                               1) + 1, [(I32,), (F32,)]),
    "unfold": (lambda a: _F.unfold(a.view(1, 1, 2, 3), 2) + 1, [(I32,), (F32,)]),
    "dot": (lambda a: torch.dot(a, a) | True, [(BOOL,), (I32,)]),
    "mv": (lambda a: torch.mv(a.view(2, 3), a[:3]) | True, [(BOOL,), (I32,)]),
    "addmv": (lambda a: torch.addmv(a[:2], a.view(2, 3), a[:3]) | True, [(BOOL,), (I64,)]),
    "trace": (lambda a: a.view(2, 3).trace() + 1, [(BOOL,), (I32,)]),
    "all": (lambda a: (a.all(), a.view(2, 3).all(1), a.view(2, 3).all((0, 1)), a.any()),
            [(torch.uint16,), (torch.uint32,), (torch.uint64,), (U8,), (torch.float8_e4m3fn,), (torch.float8_e5m2,)]),
}


@pytest.mark.parametrize("case", [(name, dtypes) for name, (_, cases) in _DTYPE_CHECKED_CALLS.items()
                                  for dtypes in cases], ids=lambda c: f"{c[0]}-{'-'.join(map(dtype_id, c[1]))}")
def test_calls_eager_implements_for_some_dtypes_raise_as_in_eager(case):
    """``frac``, ``logaddexp``, ``unfold`` and the margin losses of integers, ``threshold``,
    ``dot``, ``mv`` and ``addmv`` of bools (of integers too on CUDA tensors) and fp16 ``log_ndtr``
    have no eager kernel (``NotImplementedError``; bool ``trace`` on CPU tensors only);
    ``heaviside`` of two dtypes and ``addcdiv`` of two integer tensors raise ``RuntimeError``;
    ``all`` of uint16, uint32, uint64 and float8 returns (its decomposition's ``logical_not`` raised). PyTorch's decompositions compute a value for each, and the kernels returned
    it. The compiled call raises eager's error where eager does, and gives eager's values where
    it does not."""
    name, dtypes = case
    fn = _DTYPE_CHECKED_CALLS[name][0]
    args = [(torch.arange(6, device=DEVICE) % 4 - 1).to(d) if d != U8 else torch.arange(6, device=DEVICE).to(d)
            for d in dtypes]
    want, error = eager_outcome(fn, *[a.clone() for a in args], errors=(RuntimeError, NotImplementedError))
    torch._dynamo.reset()
    compiled = torchfuse.compile(fn, dynamic=False)
    if error is not None:
        with pytest.raises(type(error)):
            compiled(*args)
    else:
        for got, want in zip(*(r if isinstance(r, tuple) else (r,) for r in (compiled(*args), want))):
            assert got.dtype == want.dtype
            torch.testing.assert_close(got, want, rtol=2e-3, atol=1e-5, equal_nan=True)


def test_which_stored_numbers_eager_checks_depends_on_the_device():
    """CPU eager fills a one-element floating tensor unchecked and checks a clamp's bounds;
    CUDA eager checks every fill and reads a clamp's bounds unchecked (seen on CUDA tensors
    with torch 2.11, where the suite's outcome tests compare with eager itself). The graph
    check follows the tensors' device (meta tensors stand in for CUDA ones here)."""
    from torchfuse.passes.fx import eager_raises

    def fn(x):
        return torch.full_like(x[:1, :1].half(), 1e6) + 1, x.half().clamp(max=1e6)

    found = {}

    def record(device):
        def backend(gm, example_inputs):
            found[device] = eager_raises(gm)
            return gm.forward
        return backend

    for device in ("cpu", "meta"):
        torch._dynamo.reset()
        try:
            torch.compile(fn, backend=record(device))(torch.zeros(4, 6, device=device))
        except RuntimeError:
            pass  # CPU eager's clamp raises when the graph runs as traced
    assert found == {"cpu": ["clamp with 1000000.0 for float16"], "meta": ["full_like with 1000000.0 for float16"]}


_LINEAR_INTERPOLATIONS = {
    "linear_size": ((2, 3, 7), dict(size=11, mode="linear")),
    "linear_recomputed": ((2, 3, 7), dict(scale_factor=2.3, mode="linear", recompute_scale_factor=True)),
    "bilinear_up": ((2, 3, 5, 6), dict(scale_factor=2, mode="bilinear")),
    "bilinear_size_corners": ((2, 3, 5, 6), dict(size=(13, 7), mode="bilinear", align_corners=True)),
    "bilinear_down": ((2, 3, 5, 6), dict(scale_factor=0.5, mode="bilinear")),
    "trilinear": ((1, 2, 4, 5, 6), dict(scale_factor=(1.5, 2.0, 0.7), mode="trilinear")),
}


@pytest.mark.parametrize("case", list(_LINEAR_INTERPOLATIONS))
@pytest.mark.parametrize("dtype", [F32, BF16], ids=dtype_id)
def test_linear_interpolation_weighs_neighbours_as_eager(case, dtype):
    """``F.interpolate`` in the linear modes with eager's weighted sums (``l0 * v0 + l1 * v1``):
    an infinite input stays infinite where eager's is (PyTorch's decomposition, ``v0 + (v1 -
    v0) * l1``, gave NaN), NaN where eager's weight of 0 meets an infinity; values and input
    gradients as eager's to rounding; the output in eager's memory format; fused."""
    import torch.nn.functional as F

    shape, kwargs = _LINEAR_INTERPOLATIONS[case]
    torch.manual_seed(0)
    x = torch.randn(*shape, device=DEVICE)
    x.view(-1)[::7] = INF
    x.view(-1)[3::11] = -INF
    layouts = [torch.contiguous_format] + ([torch.channels_last] if len(shape) == 4 else [])
    fn = lambda x: F.interpolate(x * 2, **kwargs)
    for layout in layouts:
        xs = x.to(dtype).contiguous(memory_format=layout)
        got, graphs = run_compiled(fn, xs)
        want = fn(xs)
        assert_all_fused(graphs)
        assert got.stride() == want.stride()
        assert torch.equal(got.isnan(), want.isnan()) and torch.equal(got.isinf(), want.isinf()), (got, want)
        if dtype == F32:
            torch.testing.assert_close(got, want, equal_nan=True, rtol=1e-5, atol=1e-5)
        else:  # CPU eager rounds some bf16 intermediates: as near float64 as eager, plus an ulp
            ref = fn(xs.double())
            finite = ref.isfinite()
            err = (got.double() - ref)[finite].abs().max().item()
            eager_err = (want.double() - ref)[finite].abs().max().item()
            assert err <= eager_err + torch.finfo(dtype).eps * ref[finite].abs().max().item(), (err, eager_err)
    finite = torch.randn(*shape, device=DEVICE).to(dtype).requires_grad_()
    out = torchfuse.compile(fn, dynamic=False)(finite)
    dy = torch.randn_like(out)
    got, = torch.autograd.grad(out, [finite], dy)
    want, = torch.autograd.grad(fn(finite), [finite], dy)
    if dtype == F32:
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    else:  # the gradients' scatter-adds in fp32, rounded once: not 2x eager's error (bf16 adds)
        exact = finite.detach().double().requires_grad_()
        ref, = torch.autograd.grad(fn(exact), [exact], dy.double())
        err, eager_err = (got.double() - ref).abs().max().item(), (want.double() - ref).abs().max().item()
        assert err <= 1.25 * eager_err + 1e-6, (err, eager_err)


@pytest.mark.parametrize("index, dim", [([-1, 0], 1), ([-5, 4, -5], 1), ([-3], 0), ([2, -1], -1)])
def test_index_fill_counts_negative_indices_from_the_end_as_eager(index, dim):
    """``index_fill`` (functional and in place, on a contiguous and a transposed input) takes
    an index in ``[-size, 0)`` from the end, as eager's kernel does; PyTorch's decomposition
    (through ``index_copy``) raised for it. The filled output keeps eager's strides."""
    x = torch.arange(15, dtype=F32, device=DEVICE).reshape(3, 5)
    idx = torch.tensor(index, device=DEVICE)

    def functional(x, idx):
        return x.index_fill(dim, idx, 1.5) * 2

    def in_place(x, idx):
        y = x * 1
        y.index_fill_(dim, idx, torch.tensor(-2.0, device=x.device))
        return y + 1

    for fn in (functional, in_place):
        for xs in (x, x.t().contiguous().t()):
            got, _ = run_compiled(fn, xs, idx)
            want = fn(xs, idx)
            assert torch.equal(got, want), (got, want)
            assert got.stride() == want.stride()


_DEVICE_ASSERTS = pytest.mark.skipif(DEVICE != "cpu", reason="on CUDA eager's index check is a device-side "
                                                               "assert, which leaves the context unusable")


@pytest.mark.parametrize("case", [pytest.param("below -size", marks=_DEVICE_ASSERTS),
                                  pytest.param("at size", marks=_DEVICE_ASSERTS), "int32 index",
                                  pytest.param("0-dim at -2", marks=_DEVICE_ASSERTS)])
def test_index_fill_out_of_range_raises_eager_error(case):
    """Indices eager rejects raise eager's ``IndexError`` (an int32 index too: eager's kernel
    requires int64); a 0-dim input takes ``-1`` and ``0`` and rejects ``-2``."""
    x = torch.arange(15, dtype=F32, device=DEVICE).reshape(3, 5)
    fn = lambda x, idx: x.index_fill(1, idx, 1.5) * 2  # noqa: E731
    idx = {"below -size": torch.tensor([-6]), "at size": torch.tensor([5]),
           "int32 index": torch.tensor([-1], dtype=I32), "0-dim at -2": torch.tensor([-2])}[case].to(DEVICE)
    if case == "0-dim at -2":
        fn = lambda x, idx: (x.sum() * 1).index_fill(0, idx, 3.0) + 1  # noqa: E731
        for ok in (-1, 0):
            good = torch.tensor([ok], device=DEVICE)
            assert torch.equal(run_compiled(fn, x, good)[0], fn(x, good))
    with pytest.raises(IndexError) as eager:
        fn(x, idx)
    with pytest.raises(IndexError) as compiled:
        run_compiled(fn, x, idx)
    assert str(eager.value).split("(): ")[-1] == str(compiled.value).split("(): ")[-1]


def test_index_fill_casts_a_tensor_value_as_eager():
    """A 0-dim tensor value of another dtype is cast to the input's dtype (float64 into
    float32, a float into int64), where the decomposition's ``index_copy`` raised."""
    idx = torch.tensor([0, -2], device=DEVICE)
    for x, v in ((torch.ones(2, 5, device=DEVICE), torch.tensor(0.1, dtype=F64, device=DEVICE)),
                 (torch.ones(2, 5, dtype=I64, device=DEVICE), torch.tensor(2.7, device=DEVICE))):
        fn = lambda x, v: (x * 2).index_fill(1, idx, v)  # noqa: E731
        got, _ = run_compiled(fn, x, v)
        want = fn(x, v)
        assert got.dtype == want.dtype and torch.equal(got, want), (got, want)


def test_select_scatter_casts_src_and_raises_eager_errors():
    """``select_scatter`` writes ``src`` cast to the input's dtype (PyTorch's decomposition
    promoted the result), and raises eager's errors where that decomposition returned a value:
    an index outside ``[-size, size)`` (the input came back unchanged) and a ``src`` whose shape
    is not the slice's (it was broadcast)."""
    x = torch.ones(4, 7, device=DEVICE)
    for dtype, src in ((F32, torch.full((4,), 0.1, dtype=F64)), (I64, torch.full((4,), 2.5)),
                       (F16, torch.full((4,), 0.1))):
        for dim, index in ((1, 2), (-1, -1)):
            fn = lambda x, s: torch.select_scatter(x * 2, s, dim, index)  # noqa: E731
            xs, s = x.to(dtype), src.to(DEVICE)
            got, _ = run_compiled(fn, xs, s)
            want = fn(xs, s)
            assert got.dtype == want.dtype and torch.equal(got, want), (got, want)
    for index, src, error in ((7, torch.zeros(4), IndexError), (-8, torch.zeros(4), IndexError),
                              (2, torch.zeros(1), RuntimeError)):
        fn = lambda x, s: torch.select_scatter(x * 2, s, 1, index)  # noqa: E731
        s = src.to(DEVICE)
        with pytest.raises(error) as eager:
            fn(x, s)
        with pytest.raises(error) as compiled:
            run_compiled(fn, x, s)
        assert str(eager.value) == str(compiled.value)


@pytest.mark.parametrize("dtype", [F32, F16, BF16, F64])
@pytest.mark.parametrize("cols", [17, 300, 5000, 65536])
def test_max_and_min_over_a_dim_return_the_element_at_their_index(dtype, cols):
    """``torch.max(x, dim)`` and ``torch.min(x, dim)`` return the element at the index they
    return: over a row of ``0.0`` and ``-0.0`` the value's sign is its (``1 / value`` tells
    them apart), where a row max alone may return either zero. Rows with NaN, infinities and
    a negative number alongside; persistent, looped and split rows (the last: chunks' partials
    combined in a second kernel)."""
    g = torch.Generator().manual_seed(cols)
    x = torch.zeros(4, cols, dtype=dtype)  # (few rows: long ones split)
    x[torch.rand(4, cols, generator=g) < 0.5] = -0.0
    x[1, 4], x[2, :3], x[3, 2] = NAN, INF, -1
    x = x.to(DEVICE)

    def fn(x):
        v, i = torch.max(x * 1, 1)
        w, j = torch.min(x * 1, 1)
        return v, i, 1 / v, w, j, 1 / w

    got, _ = run_compiled(fn, x)
    for a, b in zip(got, fn(x)):
        assert a.dtype == b.dtype and torch.equal(a.isnan(), b.isnan()), (a, b)
        assert torch.equal(torch.nan_to_num(a, 7.0), torch.nan_to_num(b, 7.0)), (a, b)


def _unpool_case(dims: int):
    """``(fn, x, indices, plane)``: a ``max_unpool{dims}d`` of a 2**dims-element input into a
    4**dims-element plane, at valid indices."""
    import torch.nn.functional as F

    unpool = {1: F.max_unpool1d, 2: F.max_unpool2d, 3: F.max_unpool3d}[dims]
    fn = lambda x, i: unpool(x * 2, i, 2)  # noqa: E731
    x = torch.arange(1.0, 2 ** dims + 1, device=DEVICE).reshape(1, 1, *[2] * dims)
    plane = 4 ** dims
    idx = (torch.tensor([0, 3, 9, 15, 20, 33, 50, 63][: 2 ** dims], device=DEVICE) % plane).reshape(x.shape)
    return fn, x, idx, plane


@pytest.mark.parametrize("dims", [1, 2, 3])
def test_max_unpool_scatters_as_eager(dims):
    """``F.max_unpool1d/2d/3d`` (PyTorch's decomposition behind torchfuse's index check)
    write each value at its index, zeros elsewhere, as eager."""
    fn, x, idx, _ = _unpool_case(dims)
    got, _ = run_compiled(fn, x, idx)
    assert torch.equal(got, fn(x, idx))


@_DEVICE_ASSERTS
@pytest.mark.parametrize("dims", [1, 2, 3])
def test_max_unpool_invalid_index_raises_eagers_error(dims):
    """An index outside the output plane raises eager's ``RuntimeError``: a negative one, which
    PyTorch's decomposition counted from the end and wrote, and one past the end, where it
    raised ``IndexError``."""
    fn, x, idx, plane = _unpool_case(dims)
    for bad in (-1, plane):
        wrong = idx.clone()
        wrong.view(-1)[1] = bad
        with pytest.raises(RuntimeError, match="Found an invalid max index"):
            fn(x, wrong)
        with pytest.raises(RuntimeError, match="Found an invalid max index"):
            run_compiled(fn, x, wrong)
