"""Eager's values where PyTorch's kernels round, read numbers and sign NaNs in their own ways,
on the device the tensors are on (CPU tensors under the interpreter, CUDA tensors with a GPU):

* division with a rounding mode of fp16/bf16 tensors (the quotient rounded to their dtype),
  by tensors, one-element tensors and Python numbers;
* Python numbers read in the tensors' dtype (``remainder``, ``fmod``, ``pow``'s exponent) or,
  for ``add``/``sub``, rounded on CPU tensors only; ``alpha`` as one fused multiply-add;
* negation and NaN signs, -0.0 constants (a negated Python zero);
* ``_unsafe_masked_index`` with negative indices.

Eager is the reference everywhere, compared bit for bit (signed zeros included; NaN compared
by its sign, not its payload). Rows are 64 elements long, whole vectors of PyTorch's CPU
kernels, whose scalar loop for a short row's last elements rounds some values differently
(``alpha * b``, a bf16 NaN's sign); tests/test_semantics.py covers the rest of the rules.
"""
from __future__ import annotations

import pytest
import torch

import torchfuse
from torchfuse import backend
from test_ops import (BF16, DEVICE, F16, F32, F64, assert_all_fused, assert_matches, dtype_id, make_sample,
                      run_compiled, tensor)

pytestmark = pytest.mark.filterwarnings("ignore:.*encountered in:RuntimeWarning")

NAN, INF = float("nan"), float("inf")
SHAPE = (4, 64)
LONG = (64, 512)  # for differences too rare to show in SHAPE's elements
_INT = {2: torch.int16, 4: torch.int32, 8: torch.int64}


def assert_same_bits(actual, expected, nan_signs: bool = False, ulps: int = 0) -> None:
    """Bitwise equal, except NaNs: NaN where eager has NaN, with eager's sign bit when
    ``nan_signs`` (only sign operations define it: arithmetic gives the device's NaN, which
    in bf16 on CPU tensors is 0xFFFF in PyTorch's vector loop and 0x7FC0 in its scalar one).
    ``ulps``: the largest distance in units in the last place allowed (same sign only)."""
    if isinstance(expected, (tuple, list)):
        assert len(actual) == len(expected)
        for a, e in zip(actual, expected):
            assert_same_bits(a, e, nan_signs, ulps)
        return
    assert actual.dtype == expected.dtype and actual.shape == expected.shape, (actual, expected)
    if not expected.dtype.is_floating_point:
        assert torch.equal(actual, expected), (actual, expected)
        return
    a, e = actual.detach().cpu().contiguous(), expected.detach().cpu().contiguous()
    nan = e.isnan()
    assert torch.equal(a.isnan(), nan), (a, e)
    signs = a.signbit() != e.signbit()
    if not nan_signs:
        signs &= ~nan
    assert not signs.any(), f"sign bits differ at {signs.nonzero()}"
    bits = _INT[a.element_size()]
    distance = (a.view(bits)[~nan].long() - e.view(bits)[~nan].long()).abs()
    assert not (distance > ulps).any(), (a, e)


def check_bits(fn, *args, nan_signs: bool = False, ulps: int = 0, **options):
    expected = fn(*args)
    actual, graphs = run_compiled(fn, *args, **options)
    assert_same_bits(actual, expected, nan_signs, ulps)
    assert_all_fused(graphs)


def wide(dtype, seed, scale, shape=SHAPE, **kw):
    """Samples of ``dtype`` spread over +-``scale`` (quotients far from zero), with specials."""
    x = make_sample(F64, seed, shape=shape, **kw).cpu()
    special = x.isnan() | x.isinf() | (x == 0)
    return torch.where(special, x, x * scale).to(dtype).to(DEVICE)


# ----------------------------------------------------------------------------- rounding modes

@pytest.mark.parametrize("dtype", [F32, F16, BF16], ids=dtype_id)
@pytest.mark.parametrize("mode", ["trunc", "floor"])
def test_division_with_a_rounding_mode_rounds_as_eager(mode, dtype):
    """``div(a, b, rounding_mode)``: fp16/bf16 quotients rounded to the tensors' dtype before
    the truncation (both devices' kernels divide in ``scalar_t``), floor division's steps as
    each device's ``div_floor_floating`` rounds them; by a one-element tensor (PyTorch's CPU
    kernel computes in fp32 then) and by Python numbers (a multiplication by the reciprocal on
    a GPU), a number as the dividend (read in the tensors' dtype)."""
    a = make_sample(F64, 1, shape=(64, 64)).cpu()
    a = torch.where(a.isfinite() & (a != 0), a * 60, a).to(dtype).to(DEVICE)  # quotients up to 2**10
    b = make_sample(F64, 2, shape=(64, 64), nonzero=True).cpu()
    b = torch.where(b.isfinite(), b * 3, b).to(dtype).to(DEVICE)
    one = tensor([[0.7]]).to(dtype)

    def fn(a, b, one):
        return (torch.div(a, b, rounding_mode=mode), torch.div(a, one, rounding_mode=mode),
                torch.div(a, 0.7, rounding_mode=mode), torch.div(a, -2.3, rounding_mode=mode),
                torch.div(a, 1e-3, rounding_mode=mode), torch.div(a, 0.0, rounding_mode=mode),
                torch.div(b.abs() + 1, a, rounding_mode=mode))

    check_bits(fn, a, b, one)


def test_floor_division_operator_by_a_number():
    """``x // 0.1`` and ``x // 3`` (the operator's path: ``floor_divide``) in bf16."""
    x = wide(BF16, 3, 40.0)
    check_bits(lambda x: (x // 0.1, x // 3, x // -0.7, 5.5 // (x.abs() + 1)), x)


# ----------------------------------------------------------------------------- numbers

@pytest.mark.parametrize("dtype", [F32, F16, BF16, F64], ids=dtype_id)
def test_remainder_and_fmod_read_a_number_in_the_tensors_dtype(dtype):
    """``x % 1.7`` and ``fmod(x, 0.1)``: eager converts the number to fp16/bf16 before the
    fp32 arithmetic (on a GPU too); where the result wraps, the fp32 number is off by the
    difference times the quotient."""
    x = wide(dtype, 4, 30.0)
    fn = lambda x: (x % 1.7, torch.remainder(x, -2.3), torch.fmod(x, 0.1), torch.fmod(x, -1e-3), x % 3,
                    torch.copysign(x, -1e-30))
    check_bits(fn, x)


@pytest.mark.parametrize("dtype", [F32, F64, F16, BF16], ids=dtype_id)
def test_lerp_by_a_number_is_one_fused_multiply_add(dtype):
    """``lerp(a, b, w)``: ``fma(w, b - a, a)``, or ``fma(w - 1, b - a, b)`` for ``|w| >= 0.5``,
    in fp32 for fp16/bf16, as PyTorch's kernels round it (the reference decomposition rounds the
    product first: 6% of fp32 elements an ulp or more apart at w = 0.1, 2% of fp16 ones);
    Adam's moving averages are such calls."""
    shape = SHAPE if dtype in (F32, F64) else LONG  # (fp16/bf16 differ in 1 element of 800)
    a = wide(dtype, 6, 10.0, shape)
    b = a + make_sample(dtype, 7, shape=shape).nan_to_num(0.0, 1.0, -1.0)
    fn = lambda a, b: (torch.lerp(a, b, 0.1), torch.lerp(a, b, 0.5002), torch.lerp(a, b, 0.9),
                       torch.lerp(a, b, 1.7), a.clone().lerp_(b, -0.3), torch.lerp(a, b, 1e-3),
                       torch.lerp(a, b, 4), torch.lerp(a, b, -5))  # (int weights too)
    check_bits(fn, a, b)


@pytest.mark.parametrize("dtype", [F32, F64, F16, BF16], ids=dtype_id)
def test_addcmul_addcdiv_and_lerp_by_a_tensor_round_as_eagers_kernels(dtype):
    """``addcmul``, ``addcdiv`` and a tensor-weighted ``lerp`` as PyTorch's kernels compute them
    (in fp32 for fp16/bf16, rounded once): ``addcmul`` and ``lerp`` with one fused multiply-add
    each (their reference decompositions round the product first: a quarter of fp32 ``addcmul``
    elements an ulp apart); ``addcdiv`` as each device's kernel orders it. ``torch.addcdiv`` with
    ``value=`` is not among them: TorchDynamo rewrites it for every backend (docs/semantics.md)."""
    shape = SHAPE if dtype in (F32, F64) else LONG  # (fp16/bf16 addcmul: 1 element of 2000)
    a, b = wide(dtype, 11, 10.0, shape), wide(dtype, 12, 10.0, shape)
    c = wide(dtype, 13, 10.0, shape).nan_to_num(1.0, 3.0, -3.0)
    c = torch.where(c.abs() < 0.25, torch.ones_like(c), c)
    w = make_sample(F64, 14, shape=shape).nan_to_num(0.5, 1.5, -0.5).to(dtype).to(DEVICE)

    def fn(a, b, c, w):
        return (torch.addcmul(a, b, c), torch.addcmul(a, b, c, value=0.3), torch.addcmul(a, b, c, value=-3),
                a.addcmul(b, c, value=1.7), torch.addcdiv(a, b, c), a.addcdiv(b, c, value=0.3),
                a.addcdiv(b, c, value=-3), torch.lerp(a, b, w), a.clone().lerp_(b, w), torch.lerp(a, b, w * 3))

    check_bits(fn, a, b, c, w)


def test_addcmul_addcdiv_and_lerp_keep_eagers_output_strides():
    """Their results have eager's strides whatever their operands' layouts (channels-last,
    permuted, broadcast), which the formulas' last ops (``where``, the fused multiply-add) do not
    give by themselves: a broadcast ``self`` with a channels-last operand, for one."""
    base = make_sample(F32, 17, shape=(2, 3, 4, 5)).nan_to_num(0.0, 1.0, -1.0)
    layouts = [base, base.to(memory_format=torch.channels_last), base.permute(3, 2, 1, 0).contiguous().permute(3, 2, 1, 0),
               base[:1, :, :1].expand(2, 3, 4, 5)]
    fn = lambda a, b, c: (torch.lerp(a, b, c), torch.addcmul(a, b, c), torch.addcmul(a, b, c, value=0.5),
                          torch.lerp(a, b, 0.3), torch.addcdiv(a, b, c.abs() + 1), a.addcdiv(b, c.abs() + 1, value=0.5))
    contiguous, channels_last, permuted, broadcast = layouts
    for a in (contiguous, channels_last, broadcast):
        for b in (channels_last, broadcast):
            for c in (channels_last, permuted):
                torch._dynamo.reset()
                actual, _ = run_compiled(fn, a, b, c)
                for got, want in zip(actual, fn(a, b, c)):
                    assert got.stride() == want.stride(), (a.stride(), b.stride(), c.stride(), got.stride(), want.stride())
                    torch.testing.assert_close(got, want, rtol=0, atol=0)


@pytest.mark.parametrize("dtype", [F32, F64, F16], ids=dtype_id)
def test_pytorchs_fma_prim_is_one_fused_multiply_add(dtype):
    """PyTorch's ``prims.fma``, which TorchDynamo (torch 2.14) writes for ``x.add_(y, alpha=t)``
    with a 0-dim tensor ``t`` and for ``addcdiv_``/``addcmul_`` with a ``value``, is fused as one
    fused multiply-add, which is what eager's ``add`` computes (the prim's own ATen
    implementation rounds the product). The reference is ``addcmul`` with ``value`` 1, a fused
    multiply-add on both devices."""
    from torch._inductor import inductor_prims  # noqa: F401  (defines torch.ops.prims.fma)

    x, y = wide(dtype, 15, 10.0), wide(dtype, 16, 10.0)
    t = torch.tensor(0.3711, dtype=dtype, device=DEVICE)
    actual, graphs = run_compiled(lambda x, y, t: torch.ops.prims.fma(y, t, x), x, y, t)
    assert_same_bits(actual, torch.addcmul(x, y, t))
    assert_all_fused(graphs)
    if dtype == F16:  # a 0-dim fp32 multiplier (a tensor lr): read unrounded, as a Scalar value
        t = torch.tensor(-0.0103, device=DEVICE)  # not an fp16 value
        torch._dynamo.reset()
        actual, graphs = run_compiled(lambda x, y, t: torch.ops.prims.fma(y, t, x), x, y, t)
        assert_same_bits(actual, torch.addcmul(x.float(), y.float(), t).half())
        assert_all_fused(graphs)


@pytest.mark.parametrize("dtype", [F32, F16, BF16], ids=dtype_id)
def test_a_symbolic_number_is_read_as_a_constant_one_is(dtype):
    """A Python int that TorchDynamo makes symbolic (``dynamic=True``, or a second call with
    another value) reaches the kernel as an argument: it is read by the op's rule as a
    constant is (rounded to fp16/bf16 for ``%``, ``fmod`` and floor division; by the device
    for ``+`` and ``-``), and divided by as a number (its reciprocal on a GPU). 2049 and 4097
    are not fp16 numbers (fp16 holds 2048 and 4096)."""
    x = wide(dtype, 5, 3000.0)
    x[0, :4] = torch.tensor([4097.0, -2049.0, 6e4, -5000.0], dtype=dtype)

    def fn(x, k):
        return (x % k, torch.fmod(x, k), x // k, torch.div(x, k, rounding_mode="trunc"), x / k, x + k, x - k,
                k - x, x * k, torch.remainder(x, -k), x // -k)

    compiled = torchfuse.compile(fn, dynamic=None, interpret_integer_division=True)
    assert_same_bits(compiled(x, 8), fn(x, 8))
    before = list(backend.RECENT)
    for k in (2049, 3, 4097, 7):  # the first recompiles with k symbolic (x's sizes stay static)
        assert_same_bits(compiled(x, k), fn(x, k))
    graphs = [g for g in backend.RECENT if all(g is not b for b in before)]
    assert_all_fused(graphs)
    assert len(graphs) == 1 and len(graphs[0].symbols) == 1, "k was not one symbolic number"


@pytest.mark.parametrize("dtype", [F32, F16, BF16], ids=dtype_id)
def test_a_symbolic_pow_exponent_takes_eagers_special_cases(dtype):
    """``x ** (k - 2)`` with ``k`` an int TorchDynamo makes symbolic: the exponent reaches the
    kernel as an argument and takes eager's special cases at run time (2: ``x * x``, 1, 0).
    On CUDA tensors PyTorch's reference of ``pow`` guards on the exponent's special values
    instead, so each of them is a graph of its own there; the values must match either way."""
    x = wide(dtype, 5, 3000.0).abs() + 1

    def fn(x, k):
        return x ** ((k % 5) - 2)  # exponents 2, 1, 0, 0 (1 at the first call)

    compiled = torchfuse.compile(fn, dynamic=None)
    assert_same_bits(compiled(x, 8), fn(x, 8))
    before = list(backend.RECENT)
    for k in (2049, 3, 4097, 7):
        assert_same_bits(compiled(x, k), fn(x, k))
    graphs = [g for g in backend.RECENT if all(g is not b for b in before)]
    assert_all_fused(graphs)
    if DEVICE == "cpu":
        assert len(graphs) == 1 and len(graphs[0].symbols) == 1, "k was not one symbolic number"


@pytest.mark.parametrize("dtype", [F32, F16, BF16], ids=dtype_id)
def test_a_number_beyond_the_dtypes_range_is_read_as_infinite(dtype):
    """``xlogy(x, 1e40)``, ``xlogy(1e40, x)`` and ``xlog1py(x, 1e40)`` of fp32 tensors (1e300
    for fp16/bf16, whose computation is fp32): eager reads the number as inf, and PyTorch's
    references wrap it in a checked ``prims.scalar_tensor``, which raised "value cannot be
    converted to type float without overflow". A number that rounds to fp32's largest finite
    value stays finite."""
    x = torch.tensor([-2.0, 0.0, 0.5, 3.0, float("nan")], device=DEVICE).to(dtype)
    big = 1e40 if dtype == F32 else 1e300
    fn = lambda x: (torch.xlogy(x, big), torch.xlogy(big, x.abs()), torch.special.xlog1py(x, big))
    check_bits(fn, x)
    if dtype == F32:
        check_bits(lambda x: torch.xlogy(x, 3.4028235e38 * (1 + 1e-10)), x)


@pytest.mark.parametrize("dtype", [F32, F16, BF16], ids=dtype_id)
def test_pow_reads_its_exponent_in_the_tensors_dtype(dtype):
    """``x ** 2.7``: eager rounds an exponent it does not special-case to fp16/bf16 first
    (``exp_scalar.to<scalar_t>()``); 2.7 in bf16 is 2.703125. fp16/bf16 results, rounded from
    fp32, match bit for bit. fp32 on CUDA: eager's ``powf`` is nvcc's and the kernel's is
    libdevice's through LLVM, not the same instructions; both must be within the CUDA C
    Programming Guide's bound for ``powf`` (4 ulps) of the exact power of the fp32 operands."""
    x = make_sample(dtype, 5, shape=SHAPE, domain=(0.1, 6.0), specials=False)
    exponents = (2.7, 1.3, -0.7, 0.3)
    fn = lambda x: tuple(x ** e for e in exponents)
    if not (DEVICE == "cuda" and dtype == F32):
        check_bits(fn, x)
        return
    actual, graphs = run_compiled(fn, x)
    assert_all_fused(graphs)
    exact = tuple(x.double() ** float(torch.tensor(e, dtype=F32)) for e in exponents)
    for result in (actual, fn(x)):
        assert_same_bits(result, tuple(e.float() for e in exact), ulps=4)


@pytest.mark.parametrize("exponent", [1e10, -7e4, 65519.0, 3.4e38, float("inf")])
@pytest.mark.parametrize("dtype", [F16, BF16], ids=dtype_id)
def test_pow_of_an_exponent_beyond_the_dtype_as_eager(dtype, exponent):
    """``x ** e`` of fp16/bf16 ``x`` with a finite ``e`` beyond the dtype's range: eager
    converts ``e`` to the dtype and raises ("cannot be converted ... without overflow"), on CPU
    and CUDA tensors alike, and so does torchfuse (the op stays on ATen; the kernel had
    returned 0 and inf); an infinite exponent gives eager's values."""
    x = torch.tensor([0.5, 2.0, 1.0], dtype=dtype, device=DEVICE)
    fn = lambda x: torch.pow(x * 1, exponent)  # noqa: E731
    try:
        want = fn(x)
    except RuntimeError as e:
        assert "overflow" in str(e)
        torch._dynamo.reset()
        with pytest.raises(RuntimeError, match="overflow"):
            torchfuse.compile(fn, dynamic=False)(x)
        return
    torch._dynamo.reset()
    got = torchfuse.compile(fn, dynamic=False)(x)
    torch.testing.assert_close(got, want, rtol=0, atol=0, equal_nan=True)


@pytest.mark.parametrize("dtype", [F32, F64, F16, BF16], ids=dtype_id)
def test_alpha_is_one_fused_multiply_add(dtype):
    """``add(a, b, alpha=s)`` is ``fma(b, s, a)``, rounded once: CUDA's ``AddFunctor`` as nvcc
    contracts it, the CPU's vector ``fmadd`` (with ``s`` rounded to fp16/bf16 first there);
    ``sub`` is ``add`` with ``-s``; a number operand with an alpha too."""
    a, b = wide(dtype, 6, 50.0), wide(dtype, 7, 50.0)
    fn = lambda a, b: (torch.add(a, b, alpha=0.3), torch.sub(a, b, alpha=-2.3), torch.add(a, b, alpha=49.0),
                       torch.add(a, 2.5, alpha=0.3), torch.sub(a, 0.1, alpha=3.0))
    check_bits(fn, a, b)


@pytest.mark.parametrize("dtype", [F16, BF16], ids=dtype_id)
def test_numbers_added_to_half_tensors_follow_the_device(dtype):
    """A Python float added to, subtracted from or subtracting fp16/bf16 tensors: rounded to
    their dtype first on CPU tensors (``iter.scalar_value<scalar_t>``), an fp32 value on a GPU
    (``opmath_gpu_kernel_with_scalars``); multiplications and divisions read fp32 on both."""
    x = wide(dtype, 8, 20.0)
    fn = lambda x: (x + 0.1, x - 1.7, 2.3 - x, x + 1e-3, x * 0.1, x / 0.7, (x + 0.1) * 3.3 - 0.7)
    check_bits(fn, x)


@pytest.mark.parametrize("dtype", [F16, BF16], ids=dtype_id)
def test_a_wider_zero_dim_tensor_is_read_as_each_device_reads_it(dtype):
    """A 0-dim fp32 tensor (a learned scale, a temperature) with fp16/bf16 tensors: PyTorch's
    CPU kernels of ``mul`` and ``div`` (rounding modes too) read it unrounded in fp32 when it is
    the second operand (``original_scalar_value``), its CUDA kernels load it as the tensors'
    dtype; as the first operand, and in ``lerp``, ``addcmul`` and ``addcdiv``, both devices
    round it to the tensors' dtype first (their decompositions computed from the fp32 value).
    (``addcdiv`` with ``value=`` is not among them: TorchDynamo rewrites it into a division,
    a multiplication and an addition, each rounded, for every backend.)"""
    x, y = wide(dtype, 9, 20.0), wide(dtype, 10, 20.0)
    s = torch.tensor(1.7132, device=DEVICE)  # not a value of fp16 or bf16
    w = torch.tensor(0.3711, device=DEVICE)

    def fn(x, y, s, w):
        return (x * s, x / s, torch.div(x, s, rounding_mode="trunc"), torch.div(x, s, rounding_mode="floor"),
                s * x, s / (y.abs() + 1), torch.lerp(x, y, w), torch.addcmul(x, y, s, value=0.5),
                torch.addcdiv(x, y, s), x * s.expand(1, 1))

    check_bits(fn, x, y, s, w)


def test_threshold_of_integer_tensors_converts_its_numbers_as_eager():
    """``threshold`` of an integer tensor converts its threshold and value to the tensor's
    dtype first, truncating, as eager's kernel does (``threshold(x, -1.7, 5)`` replaces -1,
    ``value=2.9`` writes 2); PyTorch's decomposition compared and selected in floating point
    (-1 was kept). Such a call runs as ATen's kernel; an int threshold and value still fuse."""
    x = tensor([-3, -2, -1, 0, 1, 2, 7, -8], dtype=torch.int32)
    for threshold, value in ((-1.7, 5), (0.5, 2.9), (-2.0, 4)):
        def fn(x):
            return torch.nn.functional.threshold(x, threshold, value) * 3

        actual, _ = run_compiled(fn, x)
        assert torch.equal(actual, fn(x)), (threshold, value, actual, fn(x))
    check_bits(lambda x: torch.nn.functional.threshold(x, -1, 5) * 3, x)


# ----------------------------------------------------------------------------- NaN signs, -0.0

def _nans(dtype) -> torch.Tensor:
    """Rows of NaNs of both signs (quiet and signalling payloads), infinities and zeros."""
    bits = {F32: [0x7FC00000, -0x00400000, 0x7F800001, -0x007FFFFF, 0x7FC12345],
            F64: [0x7FF8000000000000, -0x0008000000000000, 0x7FF0000000000001, -0x000FFFFFFFFFFFFF],
            F16: [0x7E00, -0x0200, 0x7C01, -0x03FF, 0x7E15],
            BF16: [0x7FC0, -0x0040, 0x7F81, -0x007F, 0x7FC5]}[dtype]
    nan = torch.tensor(bits, dtype=_INT[torch.finfo(dtype).bits // 8]).view(dtype)
    values = torch.cat([nan, torch.tensor([INF, -INF, 0.0, -0.0, 1.5, -2.0], dtype=dtype)])
    return values.repeat(SHAPE[0] * SHAPE[1] // values.numel() + 1)[: SHAPE[0] * SHAPE[1]].reshape(SHAPE).to(DEVICE)


@pytest.mark.parametrize("dtype", [F32, F64, F16, BF16], ids=dtype_id)
def test_negation_gives_eagers_nan_sign(dtype):
    """``-x`` of NaNs, zeros and infinities, bit for bit as eager but for NaN payloads: on CPU
    tensors every sign flips (NaN's too: times -1 left a NaN's sign alone); on a GPU a NaN
    comes out as the device's arithmetic makes it (not flipped). Alone, and between other ops
    (the negation of a loaded value and of one computed in registers)."""
    x = _nans(dtype)
    check_bits(lambda x: (-x, torch.neg(torch.where(x != x, x, -x)), torch.where(x == x, -x, -x)), x, nan_signs=True)


@pytest.mark.parametrize("dtype", [F32, F64, F16, BF16], ids=dtype_id)
def test_a_negated_python_zero_keeps_its_sign(dtype):
    """``torch.where(c, -s, s)`` with ``s = 0.0``: the -0.0 constant is built from its bit
    pattern (a GPU's ``0 - 0.0`` for a negated constant is +0.0)."""
    c = (make_sample(F32, 9, shape=SHAPE) > 0)
    x = make_sample(dtype, 10, shape=SHAPE)
    s = 0.0
    fn = lambda c, x: (torch.where(c, -s, s).to(x.dtype) + x * 0, torch.where(c, x, -s), torch.full_like(x, -s),
                       x.clamp(min=-s) * 0 - s)
    check_bits(fn, c, x)


# ----------------------------------------------------------------------------- derivatives

def _edges(dtype, extra=()):
    values = torch.tensor([NAN, INF, -INF, 0.0, -0.0, 1.0, 0.25, 0.5, -0.5, 1.5, 1e-7, 1 - 1e-7, -3.0, 3.0, 2.9,
                           -2.9, *extra], dtype=torch.float64)
    return values.repeat(SHAPE[0] * SHAPE[1] // values.numel() + 1)[: SHAPE[0] * SHAPE[1]].reshape(SHAPE).to(dtype).to(DEVICE)


@pytest.mark.parametrize("eps", [None, -0.1, 0.0, 1e-6, 0.2])
@pytest.mark.parametrize("dtype", [F32, F64, F16, BF16], ids=dtype_id)
def test_logits_gradient_is_atens(dtype, eps):
    """``logit_backward`` as ATen's kernels compute it: NaN outside [0, 1]; with ``eps``, 0
    outside [eps, 1 - eps] and NaN at a NaN input (PyTorch's decomposition gave 0); a negative
    ``eps`` is none. CPU eager's loops disagree with each other and with the CUDA kernel at
    two places, where on CPU tensors the values are checked against the CUDA kernel's rule
    instead: at 0 and 1 its scalar loop multiplies the gradient by inf where its vector loop
    and CUDA divide by ``x * (1 - x)`` (the sign at -0.0 differs; checked: infinite or NaN),
    and with ``eps`` its vector loop gives 0 at a NaN input where its scalar loop and CUDA
    give NaN (checked: NaN); and it compares with ``eps`` in the input's dtype where CUDA
    compares in fp32 (in bf16 ``1 - 1e-6`` rounds to 1: at ``x = 1`` CUDA's gradient is 0,
    checked: 0)."""
    x = _edges(dtype)
    g = make_sample(dtype, 11, shape=SHAPE)
    fn = lambda g, x: torch.ops.aten.logit_backward(g, x, eps)
    actual, _ = run_compiled(fn, g, x)
    expected = fn(g, x)
    if DEVICE == "cpu":
        with_eps = eps is not None and eps >= 0
        edge = ((x == 0) | (x == 1)) if not with_eps or eps == 0 else torch.zeros_like(x, dtype=torch.bool)
        nan = x.isnan() if with_eps else torch.zeros_like(edge)
        assert not actual[edge].isfinite().any() and actual[nan].isnan().all()
        rounded = torch.zeros_like(edge)
        if with_eps:  # outside the bounds in fp32 (CUDA's), inside them in the input's dtype (CPU's)
            acc = torch.promote_types(dtype, F32)
            lo, hi = torch.tensor(eps, dtype=acc), 1 - torch.tensor(eps, dtype=acc)
            lo_x, hi_x = torch.tensor(eps, dtype=dtype), 1 - torch.tensor(eps, dtype=dtype)
            rounded = ((x.to(acc) < lo) | (x.to(acc) > hi)) & ~((x < lo_x) | (x > hi_x)) & ~nan
            assert (actual[rounded] == 0).all()
        skip = edge | nan | rounded
        actual, expected = actual.masked_fill(skip, 0.0), expected.masked_fill(skip, 0.0)
    assert_same_bits(actual, expected, ulps=1 if dtype in (F16, BF16) else 0)


@pytest.mark.parametrize("dtype", [F32, F64, F16, BF16], ids=dtype_id)
def test_hardsigmoids_gradient_multiplies_by_fp32_one_sixth(dtype):
    """``hardsigmoid_backward`` multiplies by fp32's 1/6 in every dtype, as ATen's kernels do
    (dividing by 6 is an ulp off in fp32 and 3e-8 relative off in fp64)."""
    x = _edges(dtype)
    g = make_sample(dtype, 12, shape=SHAPE)
    check_bits(lambda g, x: torch.ops.aten.hardsigmoid_backward(g, x), g, x)


# ----------------------------------------------------------------------------- indexing

@pytest.mark.parametrize("dtype", [F32, BF16, torch.int64], ids=dtype_id)
def test_masked_index_wraps_negative_indices(dtype):
    """``aten._unsafe_masked_index`` (the decomposition of ``slice_scatter``, reflection-pad
    gradients): where the mask is set, an index in ``[-size, 0)`` counts from the end, as
    eager's ``clamp`` then ``_unsafe_index``; beyond the range it is clamped, as eager; where
    the mask is clear, any index reads nothing (``fill``)."""
    x = (make_sample(F32, 11, shape=(5, 7), specials=False) * 10).to(dtype)
    rows = tensor([[-1], [-5], [2], [7], [0], [-7]])
    cols = tensor([-2, 0, 6, -7, 9, 3, -1])
    mask = tensor([[True], [True], [True], [False], [True], [True]]) & (cols < 8)
    fn = lambda x, m, r, c: torch.ops.aten._unsafe_masked_index(x * 2, m, [r, c], -1) + 1
    expected = fn(x, mask, rows, cols)
    actual, _ = run_compiled(fn, x, mask, rows, cols)
    assert_matches(actual, expected, exact=True)
    one_dim = lambda x, m, i: torch.ops.aten._unsafe_masked_index(x[0], m, [i], 0.5).sin()
    i32 = tensor([-1, -7, 3, 12, -3], dtype=torch.int32)
    m = tensor([True, True, True, False, True])
    actual, _ = run_compiled(one_dim, x.float(), m, i32)
    assert_matches(actual, one_dim(x.float(), m, i32))


# ----------------------------------------------------------------------------- the GPU side

_GPU_PROBE = '''
@triton.jit
def probe(x_ptr, y_ptr, o_ptr, h_ptr, d_ptr, n, XBLOCK: tl.constexpr):
    i = tl.arange(0, XBLOCK)
    m = i < n
    x = tl.load(x_ptr + i, mask=m, other=0)
    y = tl.load(y_ptr + i, mask=m, other=1)
    h = tl.load(h_ptr + i, mask=m, other=0).to(tl.float32)
    d = tl.load(d_ptr + i, mask=m, other=0)
    tl.store(o_ptr + i, tf_neg(x), mask=m)
    tl.store(o_ptr + XBLOCK + i, tf_div_floor_half(h, y, tl.bfloat16), mask=m)
    tl.store(o_ptr + 2 * XBLOCK + i, tf_div_floor_half_by_one_element(h, y, tl.float16), mask=m)
    tl.store(o_ptr + 3 * XBLOCK + i, libdevice.trunc(tf_quotient_by_one_element(tl.math.div_rn(x, y), tl.bfloat16)), mask=m)
    tl.store(o_ptr + 4 * XBLOCK + i, tf_div_floor_by_number(x, 1.7, tl.full([], 0.5882353, tl.float32), tl.float16, True), mask=m)
    tl.store(o_ptr + 5 * XBLOCK + i, x + tf_by_device(0.1, 0.10009765625), mask=m)
    tl.store(o_ptr + 6 * XBLOCK + i, libdevice.fma(y, tf_by_device(0.3, 0.30078125), x), mask=m)
    tl.store(o_ptr + 7 * XBLOCK + i, tl.where(x > 0, NEGATIVE_ZERO_F32, x), mask=m)
    tl.store(o_ptr + 8 * XBLOCK + i, tl.where(x > 0, NEGATIVE_ZERO_BF16, h.to(tl.bfloat16)).to(tl.float32), mask=m)
    dd = tf_neg(d) + tl.where(d > 0, NEGATIVE_ZERO_F64, d)
    tl.store(d_ptr + i, tf_div_floor_by_number(dd, tl.full([], 1.7, tl.float64), tl.full([], 0.5882352941176471,
                                               tl.float64), tl.float64, False), mask=m)
'''


def test_device_helpers_compile_for_a_gpu(tmp_path):
    """The GPU side of the device-dependent helpers (``HEADER_ON_DEMAND``), which CPU tensors
    never run, and the -0.0 constants, compile for an H200 (sm_90; Triton compiles without
    one) in every dtype form the emitters write them; the PTX holds fused multiply-adds and
    the -0.0 constants' bit patterns. In a process of its own: under the interpreter Triton's
    language module is patched."""
    import os
    import subprocess
    import sys

    pytest.importorskip("triton.backends.compiler")
    from torchfuse.codegen.triton import HEADER, HEADER_ON_DEMAND
    from torchfuse.ir.ops import literal

    kernel = HEADER + "\n\n" + HEADER_ON_DEMAND + _GPU_PROBE.replace(
        "NEGATIVE_ZERO_F32", literal(-0.0, F32)).replace("NEGATIVE_ZERO_BF16", literal(-0.0, BF16)).replace(
        "NEGATIVE_ZERO_F64", literal(-0.0, F64))
    (tmp_path / "gpu_probe.py").write_text(kernel)
    (tmp_path / "compile_probe.py").write_text(
        "import sys, triton\n"
        "from triton.backends.compiler import GPUTarget\n"
        "from triton.compiler import ASTSource\n"
        "import gpu_probe\n"
        "signature = {'x_ptr': '*fp32', 'y_ptr': '*fp32', 'o_ptr': '*fp32', 'h_ptr': '*bf16', 'd_ptr': '*fp64', 'n': 'i32'}\n"
        "src = ASTSource(fn=gpu_probe.probe, signature=signature, constexprs={'XBLOCK': 128})\n"
        "print(triton.compile(src, target=GPUTarget('cuda', 90, 32)).asm['ptx'])\n")
    env = {k: v for k, v in os.environ.items() if k not in ("TRITON_INTERPRET", "TORCHFUSE_INTERPRET")}
    env["PYTHONPATH"] = str(tmp_path)
    done = subprocess.run([sys.executable, str(tmp_path / "compile_probe.py")], capture_output=True, text=True,
                          env=env, cwd=tmp_path, timeout=300)
    if done.returncode != 0 and ("ptxas" in done.stderr and "not found" in done.stderr):
        pytest.skip("no ptxas in this Triton")
    assert done.returncode == 0, done.stderr[-3000:]
    ptx = done.stdout
    assert "fma.rn.f32" in ptx and "0f80000000" in ptx and "0d8000000000000000" in ptx


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("dtype", [F32, F16, BF16], ids=dtype_id)
def test_soft_margin_loss_rounds_each_step_as_aten(dtype, reduction):
    """``soft_margin_loss`` and its gradient one op at a time in the input's dtype, as ATen
    computes them: where fp16's ``exp(-x * y)`` overflows, eager's loss is ``inf`` (and its
    gradient NaN), which PyTorch's fp32 decomposition turned into finite values (30.6 for
    ``x = -8.48, y = 3.61``). 16-bit elementwise results to an ulp (the interpreter's ``exp``
    and ``log1p`` are NumPy's), the rest to rounding, with eager's infinities and NaNs."""
    import torch.nn.functional as F

    x = wide(dtype, 13, 12.0, specials=False)
    y = wide(dtype, 14, 4.0, specials=False)
    # away from fp32 exp's overflow at 88.7, where an ulp of the device's exp decides inf
    y = torch.where(((x.double() * y.double()).abs() - 88.7).abs() < 2, y / 4, y)

    def fn(x, y):
        return F.soft_margin_loss(x, y, reduction=reduction)

    expected = fn(x, y)
    if dtype == F16:
        assert not expected.isfinite().all()  # the overflow this checks
    actual, graphs = run_compiled(fn, x, y)
    assert_all_fused(graphs)
    check = (lambda a, e: assert_same_bits(a, e, ulps=1)) if dtype != F32 else assert_matches
    if reduction == "none":
        check(actual, expected)
    else:
        assert_matches(actual, expected)
    g = make_sample(dtype, 15, shape=SHAPE if reduction == "none" else (), specials=False)
    grad = lambda g, x, y: torch.ops.aten.soft_margin_loss_backward(g, x, y, {"none": 0, "mean": 1, "sum": 2}[reduction])
    actual, graphs = run_compiled(grad, g, x, y)
    assert_all_fused(graphs)
    check(actual, grad(g, x, y))


# ----------------------------------------------------------------------------- loss gradients

_REDUCTIONS = {"none": 0, "mean": 1, "sum": 2}
LOSS_SHAPE = (3, 64)  # 192 elements: the mean's 2 / 192 and 1 / 192 are not exact in any dtype


def _loss_operands(dtype, seed, scale):
    x = make_sample(F64, seed, shape=LOSS_SHAPE, specials=False).cpu() * scale
    y = make_sample(F64, seed + 1, shape=LOSS_SHAPE, specials=False).cpu() * scale
    return x.to(dtype).to(DEVICE), y.to(dtype).to(DEVICE)


@pytest.mark.parametrize("reduction", list(_REDUCTIONS))
@pytest.mark.parametrize("dtype", [F32, F16, BF16], ids=dtype_id)
def test_mse_loss_rounds_each_step_as_aten(dtype, reduction):
    """``mse_loss`` squares the difference rounded to the inputs' dtype and rounds the square,
    as ATen's kernels (CPU and CUDA) do, then reduces: bit for bit (PyTorch's decomposition,
    once in fp32, put a third of fp16 elements an ulp from eager's); with ``x`` fp16 and ``y``
    fp32 it promotes as eager. (An fp32 sum of 192 squares is eager's to the summation order.)"""
    import torch.nn.functional as F

    x, y = _loss_operands(dtype, 27, 10.0)
    summed = reduction != "none"
    check_bits(lambda x, y: F.mse_loss(x, y, reduction=reduction), x, y, ulps=4 if summed and dtype == F32 else 0)
    check_bits(lambda x, y: F.mse_loss(x, y.float(), reduction=reduction), x, y, ulps=4 if summed else 0)


@pytest.mark.parametrize("reduction", list(_REDUCTIONS))
@pytest.mark.parametrize("dtype", [F32, F16, BF16], ids=dtype_id)
def test_mse_loss_gradient_rounds_each_step_as_aten(dtype, reduction):
    """``mse_loss``'s gradient ``alpha * (x - y) * grad`` one step at a time in the input's
    dtype, ``alpha`` (2, or 2 / numel) converted to it, as ATen's kernels compute it: bit for
    bit, and where fp16's ``2 * (x - y)`` overflows eager's gradient is infinite (PyTorch's
    decomposition, in fp32, gave 40000 where eager gives ``inf``)."""
    x, y = _loss_operands(dtype, 21, 2e4 if dtype == F16 else 10.0)
    shape = LOSS_SHAPE if reduction == "none" else ()
    g = make_sample(dtype, 23, shape=shape, specials=False, domain=(0.25, 1.0))
    grad = lambda g, x, y: torch.ops.aten.mse_loss_backward(g, x, y, _REDUCTIONS[reduction])
    expected = grad(g, x, y)
    if dtype == F16 and reduction != "mean":
        assert expected.isinf().any()  # the overflow this checks
    actual, graphs = run_compiled(grad, g, x, y)
    assert_all_fused(graphs)
    assert_same_bits(actual, expected)


@pytest.mark.parametrize("dtype", [F32, F16, BF16], ids=dtype_id)
def test_mean_loss_gradients_round_one_over_numel_as_aten(dtype):
    """The mean's ``scale / numel`` of the MSE, smooth L1 and Huber gradients reaches the
    kernel as ATen's kernels convert their double: to fp32, then to fp16/bf16 (c10's 16-bit
    types are made from a float; 8283 elements put the direct fp16 rounding of ``2 / 8283`` an
    ulp from it), and for a symbolic size computed in double in the graph (a float division in
    the kernel differed from eager in up to 13% of the elements). Bit for bit, static and
    dynamic sizes. (Smooth L1's ``beta`` is a power of two, where CPU eager's division first
    rounds as CUDA's division last but for 16-bit subnormal steps, and CPU eager's bf16 kernel
    keeps ``1 / numel`` in fp32: its 16-bit cases run on a GPU only, docs/semantics.md.)"""
    A = torch.ops.aten
    losses = [lambda g, x, y: A.mse_loss_backward(g, x, y, 1),
              lambda g, x, y: A.huber_loss_backward(g, x, y, 1, 0.7)]
    if DEVICE == "cuda" or dtype == F32:
        losses.append(lambda g, x, y: A.smooth_l1_loss_backward(g, x, y, 1, 0.5))
    for k, fn in enumerate(losses):
        x = torch.full((8283,), 0.25, dtype=dtype, device=DEVICE)
        x[1::2] = 0.5
        zero = torch.zeros((), dtype=dtype, device=DEVICE)
        one = torch.ones((), dtype=dtype, device=DEVICE)
        assert_same_bits(torchfuse.compile(fn, dynamic=False)(one, x, zero.expand(8283)), fn(one, x, zero.expand(8283)))
        compiled = torchfuse.compile(fn, dynamic=True)
        for n in (192, 320):  # multiples of 64: CPU eager's vector loop takes every element
            x, y = wide(dtype, 60 + k, 2.0, shape=(n, 3)), wide(dtype, 63 + k, 1.0, shape=(n, 3))
            g = wide(dtype, 66 + k, 1.0, shape=(), specials=False).abs() + 0.5
            assert_same_bits(compiled(g, x, y), fn(g, x, y))


@pytest.mark.parametrize("loss", ["smooth_l1", "huber"])
@pytest.mark.parametrize("dtype", [F32, F16, BF16], ids=dtype_id)
def test_smooth_l1_and_huber_gradients_keep_eagers_nans(dtype, loss):
    """Smooth L1's and Huber's gradients where the difference is NaN are NaN, as eager's
    kernels give them (neither branch's comparison holds); PyTorch's smooth L1 decomposition
    multiplied by ``sign(x)``, 0 for NaN. Differences at exactly +-beta, infinities and
    ordinary values equal eager's to rounding (CPU eager's vector loop divides by beta first,
    CUDA's last, as torchfuse)."""
    import torch.nn.functional as F

    x, y = _loss_operands(dtype, 25, 2.0)
    x[0, :4] = torch.tensor([NAN, 0.5, -0.5, INF], dtype=dtype)
    y[0, :4] = torch.tensor([0.0, 0.0, 0.0, 1.0], dtype=dtype)
    y[1, 0] = NAN
    x.requires_grad_()
    for param in (1.0, 0.5):
        fn = (lambda x, y: F.smooth_l1_loss(x, y, beta=param, reduction="sum")) if loss == "smooth_l1" else \
            (lambda x, y: F.huber_loss(x, y, delta=param, reduction="sum"))
        expected, = torch.autograd.grad(fn(x, y), [x])
        assert expected[0, 0].isnan() and expected[1, 0].isnan()
        out, graphs = run_compiled(fn, x, y)
        actual, = torch.autograd.grad(out, [x])
        assert_matches(actual, expected)


@pytest.mark.parametrize("loss", ["mse_loss", "smooth_l1_loss", "huber_loss", "soft_margin_loss"])
def test_mean_losses_of_empty_inputs_compile(loss):
    """The mean of a loss over no element is NaN and its gradient empty, as eager's; the
    gradients' ``1 / numel`` (a Python division by zero in PyTorch's decompositions) made
    AOTAutograd reject the graph, which then ran unfused with a warning."""
    import warnings

    import torch.nn.functional as F

    fn = getattr(F, loss)
    x = torch.zeros(0, 5, device=DEVICE, requires_grad=True)
    y = torch.zeros(0, 5, device=DEVICE)
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message="torchfuse")
        out, graphs = run_compiled(fn, x, y)
        grad, = torch.autograd.grad(out, [x])
    assert out.isnan() and grad.shape == x.shape
    assert graphs


def test_binary_cross_entropy_matches_eager():
    """``binary_cross_entropy`` with its range check (an ``_assert_async`` whose ``all`` joins
    the loss's reduction): values and gradients as eager's, fused."""
    import torch.nn.functional as F

    p = make_sample(F32, 27, shape=LOSS_SHAPE, specials=False, domain=(0.01, 0.99)).requires_grad_()
    t = make_sample(F32, 28, shape=LOSS_SHAPE, specials=False, domain=(0.0, 1.0))
    for reduction in _REDUCTIONS:
        fn = lambda p, t: F.binary_cross_entropy(p, t, reduction=reduction)
        out, graphs = run_compiled(fn, p, t)
        assert_all_fused(graphs)
        assert_matches(out, fn(p, t))
        g = torch.ones_like(out)
        assert_matches(torch.autograd.grad(out, [p], g)[0], torch.autograd.grad(fn(p, t), [p], g)[0])


@pytest.mark.parametrize("reduction", list(_REDUCTIONS))
@pytest.mark.parametrize("dtype", [F64, F16, BF16], ids=dtype_id)
def test_binary_cross_entropy_rounds_each_step_as_aten(dtype, reduction):
    """``binary_cross_entropy`` and its gradient one step at a time in the input's dtype, as
    ATen's kernels compute them, with the gradient's fp32 ``EPSILON`` (1e-12) converted to the
    dtype: 0 in fp16, where eager's gradient at a probability of 0 or 1 equal to its target is
    NaN (PyTorch's decomposition, in fp32, gave 0 there and put a third of fp16 elements an ulp
    from eager's), and fp32's 1e-12 in fp64 (the decomposition's double 1e-12 was 4e-9 relative
    from eager's gradient where the clamp holds). Bit for bit, with and without a weight."""
    import torch.nn.functional as F

    p = make_sample(F64, 31, shape=LOSS_SHAPE, specials=False, domain=(0.001, 0.999)).cpu()
    t = make_sample(F64, 32, shape=LOSS_SHAPE, specials=False, domain=(0.0, 1.0)).cpu()
    p[0, :6] = torch.tensor([0.0, 1.0, 0.0, 1.0, 1e-30, 1 - 1e-13], dtype=F64)
    t[0, :6] = torch.tensor([0.0, 1.0, 1.0, 0.0, 1.0, 0.0], dtype=F64)
    p, t = p.to(dtype).to(DEVICE), t.to(dtype).to(DEVICE)
    w = make_sample(dtype, 33, shape=LOSS_SHAPE, specials=False, domain=(0.25, 1.0))
    for weight in (None, w):
        fn = lambda p, t: F.binary_cross_entropy(p, t, weight=weight, reduction=reduction)
        if reduction == "none" and dtype != F64:  # the elementwise loss: the interpreter's log to an ulp
            actual, graphs = run_compiled(fn, p, t)
            assert_all_fused(graphs)
            assert_same_bits(actual, fn(p, t), ulps=1 if DEVICE == "cpu" else 0)
        g = make_sample(dtype, 34, shape=LOSS_SHAPE if reduction == "none" else (), specials=False, domain=(0.25, 1.0))
        grad = lambda g, p, t: torch.ops.aten.binary_cross_entropy_backward(g, p, t, weight, _REDUCTIONS[reduction])
        expected = grad(g, p, t)
        if dtype == F16:
            assert expected[0, :2].isnan().all()  # eager's 0 / 0 that this checks
        actual, graphs = run_compiled(grad, g, p, t)
        assert_all_fused(graphs)
        assert_same_bits(actual, expected)


@pytest.mark.skipif(DEVICE != "cpu", reason="on CUDA eager's range check is a device-side assert, which leaves "
                                            "the context unusable")
@pytest.mark.parametrize("bad", [1.5, -0.25, NAN], ids=["above", "below", "nan"])
def test_binary_cross_entropy_raises_eagers_errors(bad):
    """An input or a target outside [0, 1] (NaN included) raises eager's error, which PyTorch's
    decomposition leaves out; so does an integer target."""
    import torch.nn.functional as F

    fn = lambda p, t: F.binary_cross_entropy(p, t)
    p = torch.tensor([0.5, bad, 0.25], device=DEVICE)
    t = torch.tensor([0.0, 1.0, 1.0], device=DEVICE)
    with pytest.raises(RuntimeError, match="between 0 and 1"):
        fn(p, t)
    with pytest.raises(RuntimeError, match="between 0 and 1"):
        run_compiled(fn, p, t)
    # a target outside [0, 1] raises eager's error too
    with pytest.raises(RuntimeError, match="target should be between 0 and 1"):
        fn(t, p)
    with pytest.raises(RuntimeError, match="target should be between 0 and 1"):
        run_compiled(fn, t, p)
    target = torch.tensor([0, 1, 1], device=DEVICE)
    with pytest.raises(RuntimeError, match="expected Float"):
        fn(p.clamp(0, 1).nan_to_num(), target)
    with pytest.raises(RuntimeError, match="expected Float"):
        run_compiled(fn, p.clamp(0, 1).nan_to_num(), target)


def test_casts_to_half_dtypes_round_through_fp32():
    """fp64 and 32/64-bit integers to fp16/bf16: eager rounds through fp32 (``c10::Half`` and
    ``c10::BFloat16`` are made from a ``float``), twice; a direct conversion rounds once and
    differs just above a tie (fp64 ``2049 + 2**-30`` is fp16 2048 in eager, 2050 directly) and
    just below fp16's overflow threshold (65520 - 2**-20: inf in eager). In a cast, in a copy
    into an fp16 buffer, after a reduction, and for a symbolic int read as a bf16 number."""
    x = torch.tensor([2.0 ** -25 * (1 + 2 ** -40), 1 + 2 ** -11 + 2 ** -40, 2049 + 2 ** -30, 65520 - 2 ** -20,
                      1 + 2 ** -8 + 2 ** -40, -(1 + 2 ** -8 + 2 ** -40), 3e38 * 1.0000001], dtype=F64, device=DEVICE)
    i = torch.tensor([2 ** 24 + 2 ** 16 + 1, -(2 ** 24 + 2 ** 16 + 1), 2 ** 40 + 2 ** 32 + 1, 65519, 65520,
                      2 ** 31 - 1, 7], dtype=torch.int64, device=DEVICE)
    check_bits(lambda x, i: ((x * 1.0).half(), (x * 1.0).bfloat16(), (i + 0).bfloat16(), (i + 0).half(),
                             (i.int() + 0).bfloat16(), torch.zeros(7, dtype=F16, device=x.device).copy_(x * 1.0),
                             x.reshape(7, 1).sum(-1).half()), x, i)
    # fmod reads its number in the tensors' dtype: an int fp32 does not hold, rounded twice (on
    # CPU tensors Triton's interpreter converts ints to bf16 through fp32 whatever the kernel says)
    b = torch.tensor([3e7, -5e8, 1.5e9, 7.0], dtype=BF16, device=DEVICE)
    fn = lambda b, k: torch.fmod(b, k)
    compiled = torchfuse.compile(fn, dynamic=None)
    for k in (3, 2 ** 24 + 2 ** 16 + 1, 2 ** 24 + 2 ** 16 + 3):  # symbolic from the second call on
        assert_same_bits(compiled(b, k), fn(b, k))


#: a child process's definitions: ``ptx_of``, a kernel storing ``store`` compiled for sm_90 with
#: the options torchfuse launches with (Triton's ahead-of-time compiler: no GPU needed)
_PTX_PRELUDE = r'''
import json, sys, tempfile, importlib.util
import torch, triton
from triton.backends.compiler import GPUTarget
from torchfuse.codegen import helpers
from torchfuse.runtime.compile import triton_options


def ptx_of(params, store, signature):
    """The PTX of a kernel ``k(params)`` storing ``store`` at ``out + i``."""
    text = helpers.kernel_header() + helpers.helpers_on_demand() + (
        f"\n@triton.jit\ndef k({params}, XBLOCK: tl.constexpr):\n"
        f"    i = tl.arange(0, XBLOCK)\n    tl.store(out + i, {store})\n")
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as fh:
        fh.write(text)
    spec = importlib.util.spec_from_file_location("ptx_kernel", fh.name)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    source = triton.compiler.ASTSource(fn=mod.k, signature={**signature, "XBLOCK": "constexpr"},
                                       constexprs={"XBLOCK": 128})
    return triton.compile(source, target=GPUTarget("cuda", 90, 32), options=triton_options(False)).asm["ptx"]


def instructions(ptx, keep):
    """The distinct instructions of ``ptx`` whose line satisfies ``keep``."""
    return sorted({line.split()[0] for line in ptx.splitlines()
                   if line.strip() and not line.strip().startswith("//") and keep(line)})
'''


def _run_ptx_script(body: str) -> dict:
    """Run ``_PTX_PRELUDE + body`` in a child process (Triton's interpreter, which the suite runs
    on a CPU, patches ``triton.language``); returns the JSON it prints last."""
    import json
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k not in ("TRITON_INTERPRET", "TORCHFUSE_INTERPRET")}
    out = subprocess.run([sys.executable, "-c", _PTX_PRELUDE + body], capture_output=True, text=True, env=env,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


_CAST_KERNEL = r'''
from torchfuse.ir.emit import convert, runtime_number_operand


def conversions(params, store, signature):
    """The cvt instructions of a kernel storing ``store``."""
    return instructions(ptx_of(params, store, signature), lambda line: line.strip().startswith("cvt"))


ptr = {torch.int64: "*i64", torch.int32: "*i32", torch.bfloat16: "*bf16", torch.float16: "*fp16"}
found = {}
for src in (torch.int64, torch.int32):
    for dst in (torch.bfloat16, torch.float16):
        found[f"{src}->{dst}"] = conversions("inp, out", convert("tl.load(inp + i)", src, dst),
                                             {"inp": ptr[src], "out": ptr[dst]})
# a symbolic int read as a bf16 number (fmod's rule), from an int64 kernel argument
number = runtime_number_operand("k", torch.float32, torch.bfloat16, "common")
found["int64 number->torch.bfloat16"] = [c for c in conversions("out, k", f"(i * {number}).to(tl.bfloat16)",
                                                                {"out": "*bf16", "k": "i64"}) if "s64" in c]
json.dump(found, sys.stdout)
'''


def test_an_integer_cast_to_half_keeps_its_fp32_step_on_a_gpu():
    """On a GPU, Triton folds an integer's conversion to fp32 and then to fp16/bf16 into one
    conversion (``cvt.rn.bf16.s64``), which rounds once where eager rounds twice (int64
    ``2**24 + 2**16 + 1`` is bf16 16908288 that way, 16777216 in eager, on an H200); the
    emitted cast keeps both, and so does a symbolic int read as a bf16 number. Compiled for
    sm_90 by Triton's ahead-of-time compiler, which needs no GPU (:func:`_run_ptx_script`)."""
    found = _run_ptx_script(_CAST_KERNEL)
    assert len(found) == 5, found
    assert found.pop("int64 number->torch.bfloat16") == ["cvt.rn.f32.s64"]  # not cvt.rn.bf16.s64
    for cast, conversions in found.items():
        source = "s64" if "int64" in cast else "s32"
        half = "bf16" if "bfloat16" in cast else "f16"
        assert conversions == sorted([f"cvt.rn.f32.{source}", f"cvt.rn.{half}.f32"]), (cast, conversions)


# --------------------------------------------------- composite kernels' formulas on each device

A = torch.ops.aten


@pytest.mark.parametrize("dtype", [F32, F16, BF16, F64], ids=dtype_id)
@pytest.mark.parametrize("op", ["tanh", "sigmoid", "hardswish"])
def test_activation_gradients_round_as_the_devices_kernels(op, dtype):
    """``tanh_backward``, ``sigmoid_backward`` and ``hardswish_backward`` bit for bit as eager's
    kernels on this device: CUDA's compute fp16/bf16 in their own dtype, every step rounded, and
    contract ``1 - y * y`` into one fused multiply-add in fp32; sigmoid's multiplies ``grad * (1 -
    y)`` first; hardswish's divides by 3 (a GPU's division by the number 3 multiplies by its
    reciprocal). On an H100, PyTorch's decompositions were an ulp apart in 47% of fp16 and 72%
    of fp32 tanh gradients; on a CPU (AVX512), in 45% of fp32 tanh and 33% of fp32 sigmoid
    gradients of these inputs. Mixed dtypes promote as eager's (PyTorch's decompositions)."""
    x = wide(dtype, 31, 4.0, shape=LONG)
    grad = wide(dtype, 32, 4.0, shape=LONG)
    if op == "hardswish":
        check_bits(lambda g, x: A.hardswish_backward(g, x), grad, x)
        if dtype != F64:  # a wider gradient: eager promotes
            check_bits(lambda g, x: A.hardswish_backward(g, x), grad.double(), x)
        return
    y = torch.tanh(x) if op == "tanh" else torch.sigmoid(x)
    backward = A.tanh_backward if op == "tanh" else A.sigmoid_backward
    check_bits(lambda g, y: backward(g, y), grad, y)


_ACTIVATIONS = {
    "gelu_tanh": lambda x, g: torch.nn.functional.gelu(x, approximate="tanh"),
    "gelu_tanh_backward": lambda x, g: A.gelu_backward(g, x, approximate="tanh"),
    "silu": lambda x, g: torch.nn.functional.silu(x),
    "silu_backward": lambda x, g: A.silu_backward(g, x),
    "mish_backward": lambda x, g: A.mish_backward(g, x),
    "glu_backward": lambda x, g: A.glu_backward(g[:, ::2], x, -1),
}


@pytest.mark.skipif(DEVICE != "cuda", reason="CPU eager's exp and tanh are another library's than the "
                                              "interpreter's (Sleef's vector code): only CUDA eager's are libdevice's")
@pytest.mark.parametrize("dtype", [F32, F16, BF16], ids=dtype_id)
@pytest.mark.parametrize("op", sorted(_ACTIVATIONS))
def test_activations_as_cuda_kernels(op, dtype):
    """GELU's tanh form, SiLU and their gradients, and Mish's gradient bit for bit as CUDA
    eager's kernels: SiLU divides by ``1 + exp(-x)`` (PyTorch's decomposition multiplies by the
    sigmoid), and nvcc's fused multiply-adds are kept (``fma(kappa, x**3, x)`` inside GELU,
    ``fma(x, 1 - s, 1)`` in SiLU's gradient, ``fma(-t, t, 1)``); GLU's gradient multiplies by the
    output's gradient before the first half (PyTorch's decomposition after)."""
    x = wide(dtype, 33, 4.0, shape=LONG)
    grad = wide(dtype, 34, 4.0, shape=LONG)
    check_bits(_ACTIVATIONS[op], x, grad)


def _exact_row_sums(dtype, seed):
    """(grad, output) of 64 rows of 256: multiples of 1/8 and of 1/64 small enough that every
    product and every row sum is exact in fp32, so that no order of summation changes a bit."""
    g = torch.Generator().manual_seed(seed)
    grad = torch.randint(-16, 17, (64, 256), generator=g).double() / 8
    out = torch.randint(0, 64, (64, 256), generator=g).double() / 64
    return grad.to(dtype).to(DEVICE), out.to(dtype).to(DEVICE)


def _cuda_formula(op, dtype, a, b):
    """What ATen's CUDA kernel of ``op`` computes (from its source), step by step on the CPU,
    each product and sum here exact in float64 before it is rounded as the kernel rounds it."""
    f = lambda t: t.double()
    if op == "softmax_backward":
        tmp = f((a * b))  # eager's separate multiply, rounded to the dtype
        total = tmp.sum(-1, keepdim=True)
        return (tmp - f(b) * total).float().to(dtype)  # one fused multiply-add in fp32
    if op == "log_softmax_backward":
        total = f(a).sum(-1, keepdim=True)
        return (f(a) - f(torch.exp(b.float())) * total).float().to(dtype)
    # the difference rounded to the tensors' dtype, the rest in fp32 (each fp32 operation here
    # is one IEEE operation) and rounded once
    z = (a.float() - b.float()).abs().to(dtype).float()
    if op == "smooth_l1_loss":
        return torch.where(z < 1, (z * 0.5 * z) / torch.ones_like(z), z - 0.5).to(dtype)
    d = torch.tensor(0.7).to(dtype).float()
    return torch.where(z < d, z * 0.5 * z, d * (z - 0.5 * d)).to(dtype)


_CUDA_KERNEL_OPS = {
    "softmax_backward": lambda g, o: A._softmax_backward_data(g, o, -1, g.dtype),
    "log_softmax_backward": lambda g, o: A._log_softmax_backward_data(g, o, -1, g.dtype),
    "smooth_l1_loss": lambda a, b: torch.nn.functional.smooth_l1_loss(a, b, reduction="none"),
    "huber_loss": lambda a, b: torch.nn.functional.huber_loss(a, b, reduction="none", delta=0.7),
}


@pytest.mark.parametrize("dtype", [F32, F16, BF16], ids=dtype_id)
@pytest.mark.parametrize("op", sorted(_CUDA_KERNEL_OPS))
def test_cuda_kernels_formulas(op, dtype, monkeypatch):
    """Softmax's and log-softmax's gradients and the smooth L1 and Huber losses as ATen's CUDA
    kernels compute them: softmax's backward rounds ``grad * output`` to the tensors' dtype
    first (a separate multiply in ``softmax_backward_cuda_out``), both backward ops end with one
    fused multiply-add in fp32, and the losses round the difference to the tensors' dtype, then
    compute in fp32 and round once (seen on an H200: rounding every step was an ulp off). On a GPU
    against CUDA eager; on a CPU, where CPU tensors take PyTorch's decompositions, the CUDA
    branch (``kernel_device`` replaced) against the kernels' formulas computed step by step.
    Rows whose sums are exact, so that summation order cannot change a bit."""
    from torchfuse import kernel_formulas

    fn = _CUDA_KERNEL_OPS[op]
    if op.endswith("backward"):
        grad, out = _exact_row_sums(dtype, 41)
        args = (grad, torch.log(out.float() + 1 / 64).to(dtype) if op.startswith("log") else out)
    else:
        args = (wide(dtype, 42, 4.0, shape=LONG), wide(dtype, 43, 4.0, shape=LONG))
    if DEVICE == "cuda":
        check_bits(fn, *args)
        return
    monkeypatch.setattr(kernel_formulas, "kernel_device", lambda device: "cuda")
    actual, graphs = run_compiled(fn, *args)
    assert_same_bits(actual, _cuda_formula(op, dtype, *args))
    assert_all_fused(graphs)


@pytest.mark.parametrize("reduction", ["none", "mean"])
@pytest.mark.parametrize("dtype", [F32, F16, BF16], ids=dtype_id)
def test_huber_loss_gradient_rounds_as_each_devices_kernel(dtype, reduction, monkeypatch):
    """``huber_loss_backward`` bit for bit as this device's ATen kernel: every step in the
    tensors' dtype, CUDA's ``norm * grad * delta`` outside +-delta, the CPU's vector loop
    ``norm * (+-delta) * grad``, both ``norm * x * grad`` inside (on an H100, PyTorch's
    decomposition, in fp32 rounded once, differed from eager in 37% of fp16 and 17% of bf16 elements). On
    a CPU also the CUDA branch (``kernel_device`` replaced) against that kernel's steps, run
    here in the dtype."""
    from torchfuse import kernel_formulas

    x, y = wide(dtype, 44, 2.0, shape=LONG), wide(dtype, 45, 2.0, shape=LONG)
    g = wide(dtype, 46, 4.0, shape=LONG if reduction == "none" else ())
    fn = lambda g, x, y: A.huber_loss_backward(g, x, y, _REDUCTIONS[reduction], 0.7)
    check_bits(fn, g, x, y)
    if DEVICE == "cuda":
        return
    monkeypatch.setattr(kernel_formulas, "kernel_device", lambda device: "cuda")
    norm = torch.tensor(1 / x.numel() if reduction == "mean" else 1.0).to(dtype).item()
    d = torch.tensor(0.7).to(dtype).item()
    diff = x - y
    outside = g * norm * d
    expected = torch.where(diff < -d, -outside, torch.where(diff > d, outside, diff * norm * g))
    cuda_branch = lambda g, x, y: A.huber_loss_backward(g, x, y, _REDUCTIONS[reduction], 0.7)  # traced anew
    actual, graphs = run_compiled(cuda_branch, g, x, y)
    assert_same_bits(actual, expected)
    assert_all_fused(graphs)


@pytest.mark.parametrize("dtype", [F16, BF16], ids=dtype_id)
def test_half_logsumexp_rounds_each_step_as_eager(dtype):
    """fp16/bf16 ``logsumexp`` bit for bit as ATen's composite: ``x - max``, its ``exp``, the sum,
    its ``log`` and the added max each rounded to the dtype (PyTorch's decomposition computed
    in fp32 and rounded once: a 16-bit step from eager's in 10-15% of bf16 results over rows of 6). Rows of
    infinities, a keepdim reduction over two dims, and the gradient, which reads the result."""
    x = wide(dtype, 54, 3.0, shape=(64, 6), specials=False)
    x[0] = -INF
    x[1, 2] = INF
    check_bits(lambda x: torch.logsumexp(x, -1), x)
    check_bits(lambda x: torch.logsumexp(x.view(8, 8, 6), (0, 2), keepdim=True), x)
    g = wide(dtype, 55, 1.0, shape=(64,), specials=False)
    grads = []
    for f in (lambda x: torch.logsumexp(x, -1), torchfuse.compile(lambda x: torch.logsumexp(x, -1), dynamic=False)):
        xr = x[2:].clone().requires_grad_()
        grads.append(torch.autograd.grad(f(xr), [xr], g[2:])[0])
    assert_same_bits(grads[1], grads[0])


_FTZ_KERNEL = r'''
from torchfuse.ir.ops import REGISTRY
import torchfuse.ir.ops_pointwise  # noqa: F401 (fills the registry)

found = {}
for name in ("sqrt", "rsqrt", "exp", "expm1", "tanh", "erfc"):
    store = REGISTRY[name].emit(["tl.load(inp + i)"], torch.float32, {})
    ptx = ptx_of("inp, out", store, {"inp": "*fp32", "out": "*fp32"})
    found[name] = instructions(ptx, lambda line: ".ftz" in line or "sqrt" in line)
json.dump(found, sys.stdout)
'''


def test_math_functions_keep_subnormals_and_round_square_roots_on_a_gpu():
    """Generated kernels call libdevice without flush-to-zero, and ``sqrt`` is the correctly
    rounded one: with Triton's defaults, libdevice flushed subnormal inputs and results of
    ``expm1``, ``sin``, ``tanh``, ``rsqrt`` and others to zero, and ``sqrt`` was
    ``sqrt.approx`` (an ulp from eager's in 8% of fp32 elements on an H100). Compiled for sm_90
    with Triton's ahead-of-time compiler (:func:`_run_ptx_script`):
    the only ``.ftz`` instructions left are the approximations inside libdevice's ``expf`` and
    ``tanhf`` (``ex2.approx.ftz``, ``rcp.approx.ftz``), whose results equalled CUDA eager's bit
    for bit on an H100."""
    found = _run_ptx_script(_FTZ_KERNEL)
    assert found.pop("sqrt") == ["sqrt.rn.f32"]
    assert found.pop("rsqrt") == ["rsqrt.approx.f32"]
    for name, instructions in found.items():
        assert set(instructions) <= {"ex2.approx.ftz.f32", "rcp.approx.ftz.f32"}, (name, instructions)


@pytest.mark.parametrize("reduction", ["none", "mean"])
def test_huber_loss_of_mixed_dtypes_has_the_inputs_dtype(reduction):
    """ATen's ``huber_loss`` stores the loss in a tensor like its input: fp16 input and fp32
    target give an fp16 loss, computed in fp32 (PyTorch's decomposition returned fp32)."""
    x, t = wide(F16, 35, 4.0, shape=LONG), wide(F32, 36, 4.0, shape=LONG)
    for a, b in ((x, t), (t, x)):
        check_bits(lambda a, b: torch.nn.functional.huber_loss(a, b, reduction=reduction, delta=0.7), a, b)


def test_huber_loss_of_a_wider_target_on_cuda_converts_it_to_the_inputs_dtype(monkeypatch):
    """CUDA's ``huber_kernel_cuda`` runs in its output's dtype, the input's: an fp32 target is
    converted to fp16 before the difference (70000 becomes ``inf``; seen on an H200, where the
    promoted fp32 loss put NaN and finite values where eager's were not). On a CPU, the CUDA
    branch (``kernel_device`` replaced) against the kernel's formula on the converted target."""
    from torchfuse import kernel_formulas

    x, t = wide(F16, 35, 4.0, shape=LONG), wide(F32, 36, 4.0, shape=LONG)
    t[0, :2] = 70000.0  # beyond fp16's range: inf once converted
    fn = lambda a, b: torch.nn.functional.huber_loss(a, b, reduction="none", delta=0.7)
    if DEVICE == "cuda":
        check_bits(fn, x, t)
        return
    monkeypatch.setattr(kernel_formulas, "kernel_device", lambda device: "cuda")
    actual, graphs = run_compiled(fn, x, t)
    expected = _cuda_formula("huber_loss", F16, x, t.to(F16))
    assert torch.isinf(expected[0, :2]).all() or torch.isnan(expected[0, :2]).all()
    assert_same_bits(actual, expected)
    assert_all_fused(graphs)


def test_log_ndtr_is_eagers_own():
    """``special.log_ndtr`` runs as ATen's: its kernels switch to the ``erfcx`` form below -1,
    PyTorch's decomposition below 1, so on [-1, 1) 40% of fp32 and fp64 values were a few ulps
    from eager's. Bit for bit, with the gradient (autograd's formula, fused)."""
    def f(x):
        return torch.special.log_ndtr(x) * 2

    for dtype in (torch.float32, torch.float64):
        x = torch.linspace(-3, 3, 241, dtype=dtype, device=DEVICE)
        check_bits(f, x)
        x = x.clone().requires_grad_()
        (g,) = torch.autograd.grad(f(x).sum(), x)
        (gc,) = torch.autograd.grad(torchfuse.compile(f, dynamic=False)(x).sum(), x)
        torch.testing.assert_close(gc, g, rtol=4 * torch.finfo(dtype).eps, atol=0)


def test_linspace_logspace_affine_grid_and_hann_window_are_eagers_own():
    """``linspace``, ``logspace`` and ``hann_window`` run as ATen's: PyTorch's decompositions compute
    from the unconverted numbers in double or fp32, where eager converts start and end to the
    dtype and steps in it (uint8 ``linspace(-5, 5, 4)`` gave [251, 255, 1, 5] for eager's [251,
    169, 87, 5]; an int8 one that overflows returned values where eager raises; floats an ulp
    off; an fp16 Hann window rounded once where eager rounds each step), and ``affine_grid``'s
    decomposition builds its grid with them. Bit for bit."""
    import torch.nn.functional as F

    def grids(x, theta):
        return (torch.linspace(-0.9, 0.9, 10, device=DEVICE) + x,
                torch.linspace(-5, 5, 4, dtype=torch.uint8, device=DEVICE) + x.to(torch.uint8),
                torch.linspace(-200, 200, 5, dtype=torch.uint8, device=DEVICE),
                torch.linspace(0.1, 255.3, 100, dtype=BF16, device=DEVICE) + x.to(BF16),
                torch.logspace(-2, 3, 7, device=DEVICE) * (x + 1),
                torch.logspace(0.5, 2.5, 9, base=3.0, dtype=F16, device=DEVICE) + x.to(F16),
                F.affine_grid(theta, [2, 3, 5, 7], align_corners=False) + x,
                torch.hann_window(16, dtype=F16, device=DEVICE) + x.to(F16),
                torch.hann_window(15, periodic=False, dtype=BF16, device=DEVICE) + x.to(BF16))

    x = torch.zeros((), device=DEVICE)
    theta = torch.tensor([[[0.9, 0.1, 0.05], [-0.2, 1.1, 0.3]]], device=DEVICE).repeat(2, 1, 1)
    check_bits(grids, x, theta)

    def overflowing(x):
        return torch.linspace(0, 300, 5, dtype=torch.int8, device=DEVICE) + x.to(torch.int8)

    with pytest.raises(RuntimeError, match="overflow"):
        overflowing(x)
    with pytest.raises(RuntimeError, match="overflow"):
        torchfuse.compile(overflowing, dynamic=False)(x)
