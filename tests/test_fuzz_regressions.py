"""Programs the differential fuzzer (tests/test_fuzz.py) once reported, kept as tests.

Each was shrunk by hypothesis and pasted from its printed ``test_source``. A program may have
exposed a torchfuse bug (then fixed) or a flaw of the fuzzer's own check (then fixed in
``check_program``); either way it must keep passing.
"""
from __future__ import annotations

import pytest
import torch

from test_fuzz import check_program, make_input


def test_exp_in_float32_cast_to_float64():
    """``exp`` in fp32, then a cast to fp64: torchfuse's and CPU eager's fp32 ``exp`` differ by
    one fp32 ulp, which the fuzzer compared at fp64's tolerance (found with
    ``--fuzz-examples 2000 --fuzz-seed 11``). The check now uses the tolerance of the least
    precise dtype a value passes through."""
    def program(x0, x1, x2):
        v0 = x0.abs()
        v1 = x0.abs()
        v2 = torch.exp(x0)
        v3 = v2.to(torch.float64)
        return (v3,)

    check_program(program, [make_input((1, 1), torch.float32, 'contiguous', seed=0, specials=False, grad=True),
                            make_input((1, 1), torch.float32, 'contiguous', seed=0, specials=False, grad=True),
                            make_input((1, 1), torch.float32, 'contiguous', seed=0, specials=False, grad=True)])


def test_normalized_equal_values_where_eager_is_inexact():
    """Seven equal values (an expanded input) normalized over their dim: exactly 0 in float64
    and in torchfuse, -3.8e-5 in CPU eager, whose mean of the seven is one fp32 ulp off and
    which ``rsqrt(var + 1e-5)`` scales by 316 (found with ``--fuzz-examples 1500 --fuzz-seed
    53``). The check now accepts a value no farther from the float64 result than eager's."""
    def program(x0):
        v0 = x0.abs()
        v1 = ((x0 - x0.mean(dim=0, keepdim=True)) * torch.rsqrt(x0.var(dim=0, keepdim=True, correction=0) + 1e-5))
        return (v1,)

    check_program(program, [make_input((7, 1), torch.float32, 'expanded', seed=9, specials=True, grad=True)])


def test_the_float64_fallback_still_rejects_a_wrong_value():
    """The float64 fallback of the fuzzer's check accepts only values nearer the exact result
    than eager's: a value off by 1e-3 where eager is exact fails."""
    import pytest

    from test_fuzz import assert_same

    exact = torch.tensor([1.0, 2.0], dtype=torch.float64)
    eager = torch.tensor([1.0, 2.0])
    with pytest.raises(AssertionError):
        assert_same([torch.tensor([1.0, 2.001])], [eager], "output", reference=lambda: [exact])
    assert_same([torch.tensor([1.0, 2.0])], [torch.tensor([1.0, 2.0005])], "output", reference=lambda: [exact])


def test_a_quotient_by_a_cancelled_sum_under_a_gpus_launch_configurations(monkeypatch):
    """Rows of mean-centred values divided by their own sum, which is 0 in exact arithmetic and
    rounding noise in float32 (-2.9e-11 in float64, 1.95e-3 in CPU eager, 0 in the kernel
    under an H200's launch configurations, whose summation order differs): eager's quotients
    (-1.3e7, inf) and the kernel's (-inf, 1.3e7) are equally far from float64's, and so are
    the gradients (NaN in eager where float64 has 0, finite where float64 has NaN): the check
    accepts both (found with ``--fuzz-examples 1500 --fuzz-seed 223 --gpu-launch-configs
    132``). The other outputs, well conditioned, are still compared as usual."""
    monkeypatch.setenv("TORCHFUSE_LAUNCH_CONFIGS_FOR_SM_COUNT", "132")

    def program(x0, x1, x2):
        v1 = (x2 - x2.mean(-1, keepdim=True)) * 3
        v2 = (x2 * 2).sum((0,))
        v6 = (v1 / v1.sum(dim=1, keepdim=True))
        return (v6, v1, v2,)

    check_program(program, [make_input((1, 1), torch.float32, 'contiguous', seed=0, specials=True, grad=True),
                            make_input((1, 1), torch.float32, 'contiguous', seed=0, specials=True, grad=True),
                            make_input((7, 7), torch.float32, 'offset', seed=1, specials=True, grad=True)])


def test_the_float64_fallback_accepts_any_value_only_where_eager_is_meaningless():
    """Where eager is off from the float64 value by at least half its magnitude, or disagrees
    with it about NaN, any value passes; where eager is off by less (10%), a value farther off
    still fails."""
    from test_fuzz import assert_same

    exact = torch.tensor([1e10, 100.0], dtype=torch.float64)
    assert_same([torch.tensor([-float("inf"), 100.0])], [torch.tensor([-1.3e7, 100.0])], "output",
                reference=lambda: [exact])
    # eager NaN where float64 is a number, or a number where float64 is NaN: either passes
    assert_same([torch.tensor([5.0, 7.0])], [torch.tensor([float("nan"), 3.0])], "output",
                reference=lambda: [torch.tensor([0.0, float("nan")], dtype=torch.float64)])
    with pytest.raises(AssertionError):
        assert_same([torch.tensor([1e10, 150.0])], [torch.tensor([1e10, 110.0])], "output", reference=lambda: [exact])


def test_normalized_equal_values_made_from_a_comparison():
    """The same cancellation on values made from a comparison (``sin`` of a bool tensor is
    float32 by default): the float64 reference runs with float64 as the default dtype, so it
    is exact there too (``--fuzz-examples 1500 --fuzz-seed 53``, after the check above)."""
    def program(x0, x1):
        v0 = x1 < x0
        v1 = torch.sin(v0)
        v2 = x0.abs()
        v3 = ((v1 - v1.mean(dim=0, keepdim=True)) * torch.rsqrt(v1.var(dim=0, keepdim=True, correction=0) + 1e-5))
        return (v3,)

    check_program(program, [make_input((1,), torch.int8, 'contiguous', seed=151, specials=True, grad=False),
                            make_input((7,), torch.float32, 'contiguous', seed=0, specials=True, grad=True)])


def test_constant_read_twice_by_one_op_in_a_training_graph():
    """``zeros_like`` read by two results, twice by one (``v2 + v2``), in a graph with a leaf
    requiring grad: a copy of the constant with no reader was left as an ATen call whose
    template tensor had been freed, and the launch raised ``Expected a proper Tensor but got
    None`` (the new fuzzer's shared constants, ``--fuzz-examples 400 --fuzz-seed 1``)."""
    def program(x0, x1):
        v0 = x1.abs()
        v1 = v0.squeeze(0)
        v2 = torch.zeros_like(v1)
        v3 = v2 + x0
        v4 = v2 + v2
        return (v4, v3,)

    check_program(program, [make_input((1, 1, 1, 1), torch.int8, 'contiguous', seed=0, specials=True, grad=False),
                            make_input((1, 1, 1, 0), torch.float32, 'contiguous', seed=0, specials=True, grad=True)],
                  bitwise=(0, 1), nan_signs=())


def test_buffer_updated_before_a_shared_constant():
    """An int8 input updated in place (``x0.sub_(3)``), then a constant read twice by one op:
    the same crash, through TorchDynamo (the fuzzer's in-place updates)."""
    def program(x0, x1):
        x0.sub_(3)
        v0 = x1 + x1
        v1 = torch.zeros_like(v0)
        v2 = v1 * v1
        v3 = v0 - v1
        return (v3, v2,)

    check_program(program, [make_input((1, 1, 1, 1), torch.int8, 'contiguous', seed=0, specials=True, grad=False),
                            make_input((1, 1, 1, 0), torch.bfloat16, 'offset', seed=256, specials=True, grad=False)],
                  bitwise=(0, 1), nan_signs=(), mutates=True)


def test_masked_index_of_an_empty_tensor_has_eagers_shape():
    """``_unsafe_masked_index`` of an empty tensor: eager fills a tensor whose indexed empty
    dims have size 1 and whose later dims have size 0, and indexes that ((3, 0, 0) here, where
    the decomposition gave (3, 1, 0))."""
    def program(x0, x1):
        v0 = x1.abs()
        v1 = v0.squeeze(0)
        v2 = torch.ops.aten._unsafe_masked_index(v1, torch.tensor([False, False, True], device=v1.device).reshape((3, 1, 1)), [torch.tensor([0, -2, -1], device=v1.device)], 0.1)
        return (v2, v1,)

    check_program(program, [make_input((1, 1, 1, 1), torch.int8, 'contiguous', seed=0, specials=True, grad=False),
                            make_input((1, 1, 1, 0), torch.int8, 'contiguous', seed=357, specials=True, grad=False)])


def test_floor_division_of_a_number_by_a_tensor():
    """``torch.div(1.7, x, rounding_mode='floor')`` next to an unused permute: the graph's
    planning raised ``KeyError`` for a value no step produced (a constant left out of every
    group), and the number is read in the tensors' dtype."""
    def program(x0, x1):
        v0 = x1.abs()
        v1 = v0.squeeze(0)
        v2 = x0.permute(2, 0, 3, 1)
        v3 = torch.div(1.7, x0, rounding_mode='floor')
        return (v3, v1,)

    check_program(program, [make_input((1, 1, 1, 1), torch.int8, 'contiguous', seed=0, specials=True, grad=False),
                            make_input((1, 1, 1, 0), torch.int8, 'contiguous', seed=357, specials=True, grad=False)],
                  bitwise=(0,), nan_signs=())


def test_gradient_of_a_floor_division_is_not_defined_by_either():
    """A floor division of a leaf that requires grad: eager has no derivative for it, and
    torchfuse's backward must raise too (the fuzzer's check then compares nothing more)."""
    def program(x0, x1):
        v0 = x1 // x0
        v1 = x1 / x0
        return (v1, v0.sin(),)

    check_program(program, [make_input((2, 3), torch.float32, 'contiguous', seed=1, specials=False, grad=False),
                            make_input((2, 3), torch.float32, 'contiguous', seed=2, specials=False, grad=True)])


def test_an_input_updated_by_a_zero_dim_tensor_of_another_dtype():
    """``x0.mul_(x2)`` of 0-dim fp16 and fp64 inputs: TorchDynamo restarts its analysis from
    inside the backend (``TensorifyScalarRestartAnalysis``), which the fallback for graphs
    AOTAutograd cannot trace must let through (``--fuzz-examples 5000 --fuzz-seed 7``)."""
    def program(x0, x1, x2):
        v0 = torch.log1p(x0.abs())
        v1 = x1.abs()
        v2 = torch.full_like(v1, 3)
        v3 = v2 + x1
        v4 = v2 * v0
        v5 = v2 * x1
        x0.mul_(x2)
        v6 = torch.minimum(x0, v1)
        return (v6, v3, v4, v5, v2, v0,)

    check_program(program, [make_input((), torch.float16, 'transposed', seed=1, specials=False, grad=False),
                            make_input((), torch.int8, 'strided', seed=1, specials=False, grad=False),
                            make_input((), torch.float64, 'offset', seed=334, specials=False, grad=False)],
                  mutates=True)


def test_an_input_saved_for_the_backward_then_updated_in_place():
    """``clamp(min=x1)`` saves ``x1`` for its gradient, then ``x1.add_(2)``: eager's forward
    runs and its backward raises (a saved tensor was modified in place); AOTAutograd raises
    while tracing, so the graph runs eagerly and behaves the same (``--fuzz-examples 5000
    --fuzz-seed 7``)."""
    def program(x0, x1):
        v0 = x0.clamp(min=x1)
        x1.add_(2)
        return (v0,)

    check_program(program, [make_input((1, 1), torch.float32, 'contiguous', seed=0, specials=True, grad=True),
                            make_input((1, 1), torch.float16, 'contiguous', seed=0, specials=True, grad=False)],
                  mutates=True)



def test_an_input_updated_by_a_tensor_that_requires_grad():
    """``x1.mul_(x0)`` with ``x0`` requiring grad: eager differentiates ``x0.abs()``, while
    AOTAutograd's min-cut partitioner saves ``x1`` for the backward and its copy back then
    changes ``x1``'s version, so the backward raises, with ``aot_eager`` as with torchfuse
    (PyTorch's; the fuzzer's check accepts it only where ``aot_eager`` fails too). Found with
    ``--fuzz-examples 5000 --fuzz-seed 7``."""
    def program(x0, x1):
        v0 = x0.abs()
        x1.mul_(x0)
        return (v0,)

    inputs = [make_input((1, 1), torch.float32, 'contiguous', seed=0, specials=True, grad=True),
              make_input((1, 1), torch.float16, 'contiguous', seed=0, specials=True, grad=False)]
    check_program(program, inputs, bitwise=(0,), nan_signs=(), mutates=True)
    from test_fuzz import _aot_eager_backward_raises

    assert _aot_eager_backward_raises(program, inputs, [0], [0], [torch.ones(1, 1)])


def test_sub_with_alpha_where_eager_overflows_on_one_path_only():
    """``torch.sub(x, x, alpha=2)`` of fp16 60000: CPU eager's scalar path rounds ``2 * x`` to
    fp16 (inf), its vectorized path and CUDA eager compute ``x - 2 * x`` in fp32 (-60000), as
    torchfuse does; the normalization after it then gives NaN in eager and 1.0 in torchfuse,
    and 0.99996 in float64 (found with ``--fuzz-examples 400 --fuzz-seed 151``). Where eager
    has NaN and the float64 value is a number, the check now accepts a value within the
    tolerance of that number."""
    def program(x0):
        v0 = torch.sub(x0, x0, alpha=2)
        v1 = x0.abs()
        v2 = x0.abs()
        v3 = x0.abs()
        v4 = (v0 / v0.sum(dim=0, keepdim=True))
        return (v4,)

    check_program(program, [make_input((5,), torch.float16, 'contiguous', seed=0, specials=True, grad=False)])


def test_an_input_updated_by_sub_with_alpha_where_eager_overflows():
    """The same ``sub`` added to its input in place: eager's input becomes -inf, torchfuse's 0,
    as in float64 (found with ``--fuzz-examples 400 --fuzz-seed 151``). An input's value after
    the call is now checked against the float64 program's too, as outputs are."""
    def program(x0):
        v0 = torch.sub(x0, x0, alpha=2)
        v1 = x0.abs()
        v2 = x0.abs()
        x0.add_(v0)
        return (v2,)

    check_program(program, [make_input((5,), torch.float16, 'contiguous', seed=0, specials=True, grad=False)],
                  mutates=True)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA eager's semantics of a 0-dim operand")
def test_floor_division_by_a_zero_dim_operand_of_another_dtype_follows_cuda_eager():
    """``div(x, y, rounding_mode="floor")`` and ``remainder`` of an fp16 tensor by a 0-dim fp32
    tensor near it (found with ``--fuzz-examples 600 --fuzz-seed 157``): CUDA eager rounds a
    0-dim CUDA operand to fp16 as it loads it (quotient exactly 1) and reads a 0-dim CPU
    operand as a scalar at fp32 (quotient just below 1); torchfuse gives eager's values in
    both cases. CPU eager reads a 0-dim CPU tensor as a scalar, so on CPU tensors the two differ
    by design and the fuzzer's CPU run reports it."""
    def program(x, y):
        return torch.div(x, y, rounding_mode="floor"), torch.remainder(x, y), x / y

    x = torch.tensor([1.8799], dtype=torch.float16, device="cuda")
    for y in (torch.tensor(1.8802, device="cuda"), torch.tensor(1.8802)):
        compiled = torch.compile(program, backend="torchfuse")
        for got, want in zip(compiled(x, y), program(x, y)):
            torch.testing.assert_close(got, want, rtol=0, atol=0)
        torch._dynamo.reset()


def test_a_full_reduction_read_again_over_four_dims():
    """The sum of a 4-D tensor added back to it and to a transposed one in the same kernel:
    the reduction's result was named ``r3``, the name of the fourth reduced dim's index, so the
    loads and stores after it computed their addresses from the sum and went out of bounds
    (a heap corruption under Triton's interpreter; found with ``--fuzz-examples 3000
    --fuzz-seed 181``). Generated names can no longer take the form of a kernel's index or
    parameter names."""
    def program(x0, x1, x2):
        v0 = torch.zeros_like(x0)
        v1 = v0 + x2
        v2 = v0 + v0
        v3 = v0 + v0
        v4 = x0.sum()
        v5 = v4 + x0
        v6 = v4 + x1
        return (v6, v1, v2, v3, v5,)

    check_program(program, [make_input((2, 2, 2, 2), torch.int8, 'contiguous', seed=0, specials=True, grad=False),
                            make_input((2, 2, 2, 2), torch.float32, 'transposed', seed=0, specials=True, grad=True),
                            make_input((1, 1, 1, 1), torch.float32, 'contiguous', seed=0, specials=True, grad=True)])


@pytest.mark.skipif(torch.cuda.is_available(), reason="the checks are the interpreter's")
def test_interpreted_accesses_outside_the_kernels_tensors_are_errors():
    """The tests' interpreter checks each load and store against the kernel's tensor
    arguments (tests/interpreter_bounds.py): a store one element past the end raises, naming
    the kernel, where the interpreter would have written to the heap."""
    import triton
    import triton.language as tl

    import conftest

    assert conftest.BOUNDS_CHECKED

    @triton.jit
    def past_the_end(X, N, BLOCK: tl.constexpr):
        i = tl.arange(0, BLOCK)
        tl.store(X + i, tl.load(X + i, mask=i < N, other=0.0) + 1, mask=i < N + 1)

    x = torch.zeros(8)
    with pytest.raises(Exception, match="store out of bounds in past_the_end: 1 of 9 lanes"):
        past_the_end[(1,)](x, 8, BLOCK=16)
    y = torch.zeros(8)

    @triton.jit
    def inside(X, N, BLOCK: tl.constexpr):
        i = tl.arange(0, BLOCK)
        tl.store(X + i, tl.load(X + i, mask=i < N, other=0.0) + 1, mask=i < N)

    inside[(1,)](y, 8, BLOCK=16)
    assert torch.equal(y, torch.ones(8))


def test_remainder_by_a_subnormal_divisor():
    """``2 % -3e-39`` (a padded constant over a subnormal special): -1.2e-39 in CPU eager's
    scalar loop, NaN in torchfuse under the interpreter, whose ``libdevice.fmod`` stand-in ran
    PyTorch's vectorized CPU ``fmod``, which divides (2 / -3e-39 overflows) where a GPU's
    ``fmod`` is exact (found with ``--fuzz-examples 3000 --fuzz-seed 233``). The stand-in now
    computes C's exact ``fmod``. On an H200 the same program gave NaN too: Triton links
    libdevice with flush-to-zero, so its fp32 ``fmod`` read the divisor as 0; fp32 remainders
    and ``fmod`` now run in fp64 (every fp32 value normal there, the result exact)."""
    def program(x0, x1):
        v0 = x0.abs()
        v1 = x0.abs()
        v2 = torch.nn.functional.pad(x0, (0, 2), value=2)
        v3 = torch.nn.functional.pad(x0, (0, 2), value=2)
        v4 = v2 % x1
        return (v4, v2, v3,)

    check_program(program, [make_input((1, 1), torch.float32, 'contiguous', seed=0, specials=True, grad=True),
                            make_input((5, 3), torch.float32, 'contiguous', seed=0, specials=True, grad=True)],
                  bitwise=(0, 1, 2), nan_signs=(1, 2))
    # the stand-in itself, on a block as the interpreter passes it: exact where PyTorch's
    # vectorized kernel is not
    from torchfuse.runtime.interpreter_math import fmod

    a, b = torch.full((64,), 2.0), torch.full((64,), -3e-39)
    want = torch.tensor(2.0, dtype=torch.float64).fmod(torch.tensor(-3e-39).double()).float()
    assert torch.equal(fmod(a, b), want.expand(64)) and want.item() != 0
    for dtype in (torch.float16, torch.bfloat16):
        x, y = torch.randn(64).to(dtype) * 100, torch.randn(64).to(dtype)
        assert torch.equal(fmod(x, y), torch.fmod(x.double(), y.double()).to(dtype))


def test_remainder_by_a_subnormal_divisor_where_eager_is_wrong():
    """The same remainder over 25 elements: CPU eager's vectorized ``fmod`` gives NaN where the
    exact remainder (float64's, and torchfuse's) is -1.2e-39 (found with the same seed after the
    fix above). The bitwise check now leaves out elements where eager and the float64 program
    disagree on NaN, and requires torchfuse to agree with the float64 program there."""
    def program(x0, x1):
        v0 = x0.abs()
        v1 = x0.abs()
        v2 = torch.nn.functional.pad(x0, (-1, 1), value=2)
        v3 = torch.nn.functional.pad(x0, (-1, 1), value=2)
        v4 = v2 % x1
        return (v4, v2, v3,)

    check_program(program, [make_input((1, 1), torch.float32, 'contiguous', seed=0, specials=True, grad=True),
                            make_input((5, 5), torch.float32, 'contiguous', seed=0, specials=True, grad=True)],
                  bitwise=(0, 1, 2), nan_signs=(1, 2))


def test_masked_index_of_an_empty_tensor_whose_backward_pytorch_cannot_run():
    """``_unsafe_masked_index`` of a ``[1, 1, 0]`` tensor: eager returns ``[1, 0, 0]``, its
    meta function says ``[1, 1, 0]``, so AOTAutograd cannot fit the tangent to the shape it
    traced and the backward raises under ``torch.compile(backend="aot_eager")`` as under
    torchfuse (found with ``--fuzz-examples 1500 --fuzz-seed 271 --gpu-launch-configs 132``).
    The forward is still compared with eager; a backward that PyTorch's own AOTAutograd cannot
    run is no longer reported against torchfuse."""
    def program(x0):
        v0 = x0.abs()
        v5 = torch.ops.aten._unsafe_masked_index(x0, torch.tensor([False], device=x0.device).reshape((1, 1, 1)),
                                                  [torch.tensor([0], device=x0.device)], 2)
        return (v5,)

    check_program(program, [make_input((1, 1, 0), torch.float32, 'contiguous', seed=0, specials=True, grad=True)],
                  bitwise=(0,))


def test_a_view_detached_twice_at_symbolic_sizes():
    """``v1 / v1.transpose(1, 2)`` of a permuted input, compiled with symbolic sizes: the
    backward's group that reads both views leaves them as ATen views for the next group, and
    the second view is read by a copy of the first, which finalization detached again (found
    by the two-size fuzzer, ``--fuzz-examples 1200 --fuzz-seed 5``). That second detachment
    made a second view of the same name, and the next group's domain, aligned before it, was
    reused for inputs it no longer had: the backward failed on its first call (``KeyError``)
    and ran on ATen. The view is now made once, and a group whose inputs changed is aligned
    again."""
    def program(x0):
        v1 = x0.permute(2, 1, 0)
        v2 = v1.transpose(1, 2)
        v3 = v1 / v2
        return (v3,)

    check_program(program, [make_input((3, 3, 1), torch.float32, 'contiguous', seed=0, specials=True, grad=True)],
                  first_sizes=[make_input((2, 2, 1), torch.float32, 'contiguous', seed=0, specials=True, grad=True)])


def test_a_view_detached_twice_is_one_aten_view():
    """The same backward at symbolic sizes, through the finalization: each view that leaves
    its group is one ATen call, read by every reader outside (no two values of one name)."""
    import torchfuse
    import torchfuse.backend as backend

    def program(x0):
        v1 = x0.permute(2, 1, 0)
        return (v1 / v1.transpose(1, 2),)

    x = make_input((3, 3, 1), torch.float32, 'contiguous', seed=0, grad=True)
    before = list(backend.RECENT)
    out = torchfuse.compile(program, dynamic=True, interpret_integer_division=True)(x)[0]
    out.sum().backward()
    (bwd,) = [g for g in backend.RECENT if all(g is not b for b in before) and g.name == "backward"]
    names = [v.name for step in bwd.segmentation.steps for v in getattr(step, "outputs", ())]
    assert len(names) == len(set(names)), names


def test_an_exponential_of_integers_is_not_exact():
    """``torch.exp(x1) % x0`` with ``x1`` int8: ``exp`` promotes the integers to float32, whose
    value is rounded (an ulp apart between correct implementations: 32 at ``exp(20)``), so
    ``%`` of it may differ by anything below the divisor (found by the two-size fuzzer,
    ``--fuzz-examples 8000 --fuzz-seed 29``: 0.125 of 0.9 apart). The fuzzer took a unary op
    of an integer operand as exact, so ``%`` could read it; it now asks whether the op's
    result is a float."""
    from test_fuzz import UNARY, unary_keeps_exact

    keeps = UNARY["exp"][2]
    assert not unary_keeps_exact(keeps, torch.int8, torch.float32)
    assert not unary_keeps_exact(keeps, torch.int8, None)
    assert unary_keeps_exact(UNARY["abs"][2], torch.int8, torch.int8)
    assert unary_keeps_exact(UNARY["neg"][2], torch.float32, torch.float32)
