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

from test_ops import (BF16, DEVICE, F16, F32, F64, assert_all_fused, assert_matches, dtype_id, make_sample,
                      run_compiled, tensor)

pytestmark = pytest.mark.filterwarnings("ignore:.*encountered in:RuntimeWarning")

NAN, INF = float("nan"), float("inf")
SHAPE = (4, 64)
_INT = {2: torch.int16, 4: torch.int32, 8: torch.int64}


def assert_same_bits(actual, expected, nan_signs: bool = False) -> None:
    """Bitwise equal, except NaNs: NaN where eager has NaN, with eager's sign bit when
    ``nan_signs`` (only sign operations define it: arithmetic gives the device's NaN, which
    in bf16 on CPU tensors is 0xFFFF in PyTorch's vector loop and 0x7FC0 in its scalar one)."""
    if isinstance(expected, (tuple, list)):
        assert len(actual) == len(expected)
        for a, e in zip(actual, expected):
            assert_same_bits(a, e, nan_signs)
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
    assert torch.equal(a.view(bits)[~nan], e.view(bits)[~nan]), (a, e)


def check_bits(fn, *args, nan_signs: bool = False, **options):
    expected = fn(*args)
    actual, graphs = run_compiled(fn, *args, **options)
    assert_same_bits(actual, expected, nan_signs)
    assert_all_fused(graphs)


def wide(dtype, seed, scale, **kw):
    """Samples of ``dtype`` spread over +-``scale`` (quotients far from zero), with specials."""
    x = make_sample(F64, seed, shape=SHAPE, **kw).cpu()
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


@pytest.mark.parametrize("dtype", [F32, F16, BF16], ids=dtype_id)
def test_pow_reads_its_exponent_in_the_tensors_dtype(dtype):
    """``x ** 2.7``: eager rounds an exponent it does not special-case to fp16/bf16 first
    (``exp_scalar.to<scalar_t>()``); 2.7 in bf16 is 2.703125."""
    x = make_sample(dtype, 5, shape=SHAPE, domain=(0.1, 6.0), specials=False)
    check_bits(lambda x: (x ** 2.7, x ** 1.3, x ** -0.7, torch.pow(x, 0.3)), x)


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
