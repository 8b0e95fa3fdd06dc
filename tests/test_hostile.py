"""Hostile values, layouts, programs and caches.

Values: NaN, infinities, -0.0, subnormals and extreme magnitudes through pointwise chains and
reductions. Layouts: empty tensors, misaligned storage offsets, overlapping and zero strides,
and the switch to 64-bit index arithmetic past 2**31 (tested on the layout analysis and the
generated source, without allocating that much). Programs: inputs mutated inside the graph and
read again, and outputs that alias inputs. Caches: kernel cache files that are not valid text,
bytecode planted beside a kernel, cache entries that are directories. Recompilation: a new
sequence length reuses kernels; an unused empty input adds no graphs.

Each test compares with eager on the same inputs; where a known bug makes a test fail, it is
marked ``xfail(strict=True)`` with a reproducer in its reason, so that the fix turns it green.
"""
from __future__ import annotations

import importlib.util
import os
import py_compile
import sys

import pytest
import torch

import torchfuse
from conftest import DEVICE
from test_ops import (BF16, BOOL, F16, F32, F64, I8, I32, I64, U8, assert_all_fused, assert_matches, fused_ops,
                      make_sample, run_compiled, run_traced, tensor)
from torchfuse import backend
from torchfuse.schedulers.layout import INT32_LIMIT, analyze

pytestmark = pytest.mark.filterwarnings("ignore:.*encountered in:RuntimeWarning")

NAN, INF = float("nan"), float("inf")


def check(fn, *args, exact=False, groups=None, **options):
    """Compile ``fn``; equal to eager on ``args``; every registry op fused."""
    expected = fn(*args)
    actual, graphs = run_compiled(fn, *args, **options)
    assert_matches(actual, expected, exact=exact)
    assert_all_fused(graphs, groups=groups)
    return graphs


# ----------------------------------------------------------------------------- values

#: NaN, infinities, signed zeros, fp32 subnormals, fp32 extremes, values that overflow fp16
HOSTILE = [NAN, INF, -INF, -0.0, 0.0, 1e-45, -1e-40, 1.1754942e-38, 3.4028235e38, -3.4028235e38, 65504.0,
           65520.0, 1e-7, -2.5, 7.0, 1.0]


def hostile(dtype, shape=(4, len(HOSTILE)), seed=0) -> torch.Tensor:
    """Rows of :data:`HOSTILE` values in ``dtype``, permuted differently per row."""
    g = torch.Generator().manual_seed(seed)
    base = torch.tensor(HOSTILE, dtype=F64)
    rows = [base[torch.randperm(len(HOSTILE), generator=g)] for _ in range(shape[0])]
    return torch.stack(rows)[:, : shape[1]].to(dtype).to(DEVICE)


@pytest.mark.parametrize("dtype", [F32, F16, BF16, F64], ids=str)
def test_hostile_values_through_pointwise_chains(dtype):
    """Exactly defined ops on NaN, infinities, -0.0, subnormals and extreme values equal
    eager bit for bit (sign of zero included), in chains that keep them in registers."""
    a, b = hostile(dtype, seed=1), hostile(dtype, seed=2)
    fn = lambda a, b: ((a * 2) / 2, -a.abs(), torch.maximum(a, b) * 1, torch.minimum(a, -b) - 0.0,
                       torch.where(a > b, a, b).neg(), (a + b) - b, torch.copysign(a * 1, b), a.to(F64).to(dtype),
                       torch.clamp(a, -1.0, 1.0) + 0.0, torch.isinf(a * 0.5) | torch.isnan(b + 1))
    check(fn, a, b, exact=True)


def test_subnormals_are_not_flushed():
    """fp32 and fp16 subnormals survive loads, arithmetic and stores (no flush to zero)."""
    x32 = tensor([1e-45, -1e-45, 1e-40, -5e-39, 1.1754942e-38], dtype=F32)
    x16 = tensor([6e-8, -6e-8, 3e-5, -6.1e-5], dtype=F16)
    fn = lambda a, b: (a * 1, a + a, a * 2 - a, b * 1, b + b, (b.to(F32) * 0.5).to(F16), a.abs(), -b)
    out = check(fn, x32, x16, exact=True) and run_compiled(fn, x32, x16)[0]
    assert (out[0] != 0).all() and (out[3] != 0).all()


@pytest.mark.parametrize("dtype", [F32, F16, BF16], ids=str)
def test_hostile_values_through_reductions(dtype):
    """NaN propagates through amax/amin/sum/mean/var and argmax picks the first NaN;
    +inf - inf is NaN; fp16 sums that overflow give inf as eager (fp32 accumulation, then
    rounding); softmax of rows of -inf is NaN."""
    x = hostile(dtype, seed=3)
    clean = make_sample(dtype, 4, shape=(4, 16), specials=False) * 1000
    rows = torch.full((3, 8), -INF, dtype=dtype, device=DEVICE)
    rows[1, 3] = 0.0
    rows[2, :] = INF
    fn = lambda x, c, r: (x.amax(1), x.amin(0), x.sum(1), x.mean(0), x.argmax(1), x.argmin(0), torch.var(x, 1),
                          c.sum(1), (c * 60).sum(0), torch.softmax(r, 1), r.amax(1), torch.logsumexp(c, 1))
    check(fn, x, clean, rows)


@pytest.mark.parametrize("dtype", [F32, BF16], ids=str)
def test_gpu_row_max_combine_propagates_nan(dtype):
    """The GPU's single-reduction row max/min (``tf_row_max``: ``tl.reduce`` with a NaN-aware
    combine) run under the interpreter in place of its two-reduction host variant: amax, amin,
    argmax, softmax and logsumexp on rows with NaN, infinities and rows of -inf equal eager
    (``Tuning.runtime.interpreter_gpu_helpers``)."""
    x = hostile(dtype, shape=(3, 9), seed=5)
    rows = torch.full((2, 5), -INF, dtype=dtype, device=DEVICE)
    rows[1, 2] = 1.0
    fn = lambda x, r: (x.amax(1), x.amin(1), x.argmax(1), torch.softmax(r, 1), r.amax(1), torch.logsumexp(x, 1),
                       (x * 2).amax(1) - 1)
    check(fn, x, rows, tuning="runtime.interpreter_gpu_helpers=tf_row_*")


@pytest.mark.parametrize("dtype", [I8, I32, I64, U8], ids=str)
def test_integer_extremes_wrap_as_eager(dtype):
    """Integer minimum and maximum: negation, abs, add and mul wrap as eager's two's
    complement; sums accumulate in int64 without overflow; amax/argmax find the extremes."""
    info = torch.iinfo(dtype)
    x = tensor([info.min, info.max, 0, 1, -1 if info.min < 0 else 2, info.min + 1, info.max - 1, 7], dtype=dtype)
    y = tensor([info.max, info.max, info.min, -1 if info.min < 0 else 255, 3, 2, 2, info.min], dtype=dtype)
    fn = lambda x, y: (x + y, x * y, x - y, x * 3, x.sum(0), (x * 2).amax(0), x.argmax(0), torch.maximum(x, y),
                       x.to(F16), x.to(BF16), x.to(F32) * 2, (x > y).sum(0))
    extra = (lambda x, y: (-x, x.abs())) if info.min < 0 else (lambda x, y: ())
    check(lambda x, y: fn(x, y) + extra(x, y), x, y, exact=True)


def test_int64_values_beyond_2_to_53_keep_their_bits():
    """int64 arithmetic past float64's 53 bits is done in integers, not through floats."""
    x = tensor([2**62 + 1, -(2**62) - 3, 2**53 + 1, 9007199254740993], dtype=I64)
    check(lambda x: (x + 1, x * 2 - x, x // 3, x % 1000003, x.amax(0), x.sum(0)), x, exact=True,
          interpret_integer_division=True)


# ----------------------------------------------------------------------------- empty tensors

EMPTY_SHAPES = [(0,), (0, 5), (5, 0), (3, 0, 4)]


@pytest.mark.parametrize("shape", EMPTY_SHAPES, ids=str)
def test_empty_tensors(shape):
    """Pointwise chains and reductions over tensors with a size-0 dim: empty results keep
    eager's shapes and dtypes; reductions over an empty dim give their identity (0, 1, -0 sum,
    NaN mean, False any, True all)."""
    x = torch.randn(shape, device=DEVICE)
    i = torch.zeros(shape, dtype=I32, device=DEVICE)
    last = len(shape) - 1
    fn = lambda x, i: ((x * 2).sin(), x.sum(last), x.mean(last), (x > 0).any(last), (x > 0).all(last),
                       x.prod(last), i.sum(0), (x + i).exp().sum(), torch.var_mean(x, last))
    expected = fn(x, i)
    actual, graphs = run_compiled(fn, x, i)
    assert_matches(actual, expected)
    assert all(cg.stats["fallbacks"] == 0 for cg in graphs)


def test_empty_reduction_without_identity_raises_as_eager():
    """amax over an empty dim has no identity. PyTorch's own tracer (fake tensors) rejects
    the program before any backend sees it, with a different exception type than eager's
    kernel; torchfuse must raise exactly what ``torch.compile(backend="eager")`` raises and
    never return a value."""
    x = torch.randn(4, 0, device=DEVICE)
    fn = lambda x: (x * 2).amax(1)
    with pytest.raises(Exception):
        fn(x)
    torch._dynamo.reset()
    with pytest.raises(Exception) as reference:
        torch.compile(fn, backend="eager", dynamic=False)(x)
    torch._dynamo.reset()
    with pytest.raises(Exception) as compiled:
        torchfuse.compile(fn, dynamic=False)(x)
    assert type(compiled.value) is type(reference.value)
    assert str(reference.value).splitlines()[0] in str(compiled.value)


def test_backward_through_empty_tensors():
    x = torch.randn(0, 6, device=DEVICE, requires_grad=True)
    w = torch.randn(6, device=DEVICE, requires_grad=True)
    fn = lambda x, w: (torch.softmax(x * w, 1).sum(0) + w.sigmoid()).sum()
    out, _ = run_traced(fn, x, w)
    gx, gw = torch.autograd.grad(out, [x, w])
    x2, w2 = x.detach().requires_grad_(), w.detach().requires_grad_()
    ex, ew = torch.autograd.grad(fn(x2, w2), [x2, w2])
    assert_matches((out, gx, gw), (fn(x, w), ex, ew))


# ----------------------------------------------------------------------------- layouts

def _misaligned(dtype, shape, offset=1):
    flat = make_sample(dtype, 11, shape=(offset + torch.Size(shape).numel(),), specials=False)
    return flat[offset:].view(shape)


@pytest.mark.parametrize("dtype", [F16, F32, I8, BOOL], ids=str)
def test_misaligned_storage_offsets(dtype):
    """Inputs starting one element past an aligned address (no 16-byte vector loads) give
    eager's values; a compiled function called first with aligned, then with misaligned
    inputs of the same shape (Triton specializes on pointer alignment) is right both times."""
    aligned = make_sample(dtype, 12, shape=(6, 40), specials=False)
    bad = _misaligned(dtype, (6, 40))
    assert bad.data_ptr() % 16 != 0
    fn = lambda x: ((x * 1).to(F32).sum(1), x.to(F32).amax(0), (x * 1) if x.dtype != BOOL else x & True)
    compiled = torchfuse.compile(fn, dynamic=False, interpret_integer_division=True)
    for x in (aligned, bad, aligned):
        assert_matches(compiled(x), fn(x))


OVERLAPPING_AND_ZERO = {
    "overlapping_rows": lambda: make_sample(F32, 20, shape=(40,)).as_strided((6, 8), (3, 1)),
    "overlapping_cols": lambda: make_sample(F32, 21, shape=(40,)).as_strided((8, 6), (1, 3)),
    "zero_stride_rows": lambda: make_sample(F32, 22, shape=(8,)).as_strided((6, 8), (0, 1)),
    "all_zero_strides": lambda: make_sample(F32, 23, shape=(1,)).as_strided((5, 7, 3), (0, 0, 0)),
    "zero_stride_reduced_dim": lambda: make_sample(F32, 24, shape=(6,)).as_strided((6, 9), (1, 0)),
}


@pytest.mark.parametrize("case", list(OVERLAPPING_AND_ZERO))
def test_overlapping_and_zero_strides(case):
    """Inputs whose elements share memory (overlapping rows, zero strides) are read right by
    pointwise kernels and reductions along either dim."""
    x = OVERLAPPING_AND_ZERO[case]()
    fn = lambda x: ((x * 2).exp(), x.sum(-1), x.amax(0), torch.softmax(x, -1), x - x.mean(0, keepdim=True))
    check(fn, x)


# ----------------------------------------------------------------------------- 64-bit indexing

def test_index_arithmetic_switches_to_64_bit_at_2_to_31():
    """The layout analysis asks for 64-bit offsets exactly when an offset or the iteration
    space may pass 2**31 - 1: element counts, and strides times sizes of a small tensor
    (an expanded or as_strided view over a little storage)."""
    assert INT32_LIMIT == 2**31 - 1
    contiguous = lambda n: analyze([n], [], [[1], [1]], 1)
    assert not contiguous(2**31 - 2).layout.index64
    assert contiguous(2**31 - 1).layout.index64
    assert contiguous(2**31).layout.index64
    # 2 x 3 elements, one dim 2**31 elements apart: the offset 2**31 needs 64 bits
    strided = lambda s: analyze([2, 3], [], [[s, 1], [3, 1]], 1)
    assert not strided(2**30).layout.index64
    assert strided(2**31 - 1).layout.index64
    assert strided(2**31).layout.index64
    # an expanded input (stride 0) never addresses far, but its iteration space can be large
    assert not analyze([2**15, 2**15], [1], [[0, 0], [1, 0]], 0).layout.index64
    assert analyze([2**16, 2**16], [1], [[0, 0], [1, 0]], 0).layout.index64
    # reductions: rows x reduced extent counts
    assert analyze([2**20, 2**11], [1], [[2**11, 1], [1, 0]], 0).layout.index64


def _plan_source(fn, args, strides: list[tuple], **options):
    """The kernel source torchfuse plans for ``fn``'s first group when its tensor inputs
    have ``strides`` (sizes as traced), with ``options``. Nothing runs and nothing large is
    allocated."""
    from torch.fx.experimental.proxy_tensor import make_fx

    from torchfuse.config import Options
    from torchfuse.decompose import decomposition_table
    from torchfuse.runtime.executor import GroupRunner

    gm = make_fx(lambda *a: (fn(*a),), decomposition_table=decomposition_table(), tracing_mode="fake")(*args)
    compiled = backend.compile_graph(gm, list(args), Options.from_env(interpret=DEVICE == "cpu", **options))
    runner = next(s for s in compiled.steps if isinstance(s, GroupRunner))
    shapes = [torch.Size(a.shape) for a in args]
    plan = runner.make_plan({}, shapes, tuple(strides))
    return plan, plan.kernel.source.text


def test_huge_strides_give_64_bit_program_offsets():
    """A small tensor whose strides reach past 2**31 (as a view into a big buffer would have)
    gets a kernel whose offsets are computed from an int64 program id; the same tensor with
    small strides keeps 32-bit arithmetic."""
    x = torch.empty(4, 3, device=DEVICE)
    fn = lambda x: (x * 2).sin()
    small_plan, small = _plan_source(fn, [x], [(3, 1)])
    huge_plan, huge = _plan_source(fn, [x], [(2**31, 1)])
    assert "tl.program_id(0).to(tl.int64)" in huge and "tl.program_id(0).to(tl.int64)" not in small
    assert huge_plan.kernel.source.key != small_plan.kernel.source.key
    assert 2**31 in huge_plan.scalars  # the stride is a runtime argument, passed as is


def test_huge_reduction_strides_give_64_bit_reduction_indices():
    x = torch.empty(3, 40, device=DEVICE)
    fn = lambda x: torch.softmax(x, -1)
    plan, text = _plan_source(fn, [x], [(1, 2**26)])  # column-major, 40 * 2**26 > 2**31
    assert plan.config.scheduler.startswith("reduction")
    assert ".to(tl.int64)" in text


def test_64_bit_argmax_takes_indices_past_2_to_31():
    """With 64-bit indices a row may hold more than 2**31 elements: the masked lanes' index
    that argmax's smallest matching index is taken against is int64's largest, not int32's
    (which returned 2147483647 for a maximum at 2**31 + 100). The generated source of a row
    reached through a huge stride says so, and with the switch to 64 bits forced on small rows
    every reduction scheduler returns eager's indices."""
    x = torch.empty(3, 40, device=DEVICE)
    _, text = _plan_source(lambda x: (x * 2).argmax(-1), [x], [(1, 2**26)])
    assert "9223372036854775807" in text and "2147483647" not in text

    def fn(x):
        y = x * 2
        return y.argmax(-1), y.argmin(-1), torch.max(y, -1), torch.min(y, 0)

    import torchfuse.schedulers.layout as layout
    limit = layout.INT32_LIMIT
    layout.INT32_LIMIT = 8  # every kernel below computes its indices in 64 bits
    try:
        for shape in [(5, 37), (5, 9000), (1, 5000)]:  # persistent, looped, split (interpreter)
            g = torch.Generator().manual_seed(shape[1])
            x = torch.randint(-3, 4, shape, generator=g).float().to(DEVICE)
            x[0, -1] = NAN
            check(fn, x, exact=True)
    finally:
        layout.INT32_LIMIT = limit


# ----------------------------------------------------------------------------- mutation and aliasing

def _run_both(fn, *inputs):
    eager_in = [t.clone() for t in inputs]
    compiled_in = [t.clone() for t in inputs]
    expected = fn(*eager_in)
    before = list(backend.RECENT)
    actual = torchfuse.compile(fn, dynamic=False)(*compiled_in)
    graphs = [g for g in backend.RECENT if all(g is not b for b in before)]
    return actual, expected, compiled_in, eager_in, graphs


def test_input_mutated_read_and_mutated_again():
    """An input updated in place, read, updated again and read again: every read sees the
    value eager's read sees, and the input ends as in eager."""
    def fn(x, y):
        x.add_(1)
        a = x * y
        x.mul_(a.sigmoid())
        b = x.sum(1, keepdim=True)
        x.sub_(b)
        return a, b, x * 2

    x, y = make_sample(F32, 30, shape=(5, 7), specials=False), make_sample(F32, 31, shape=(5, 7), specials=False)
    actual, expected, ins, eager_ins, graphs = _run_both(fn, x, y)
    assert_matches(actual, expected)
    assert_matches(ins, eager_ins)
    assert fused_ops(graphs) and all(cg.stats["fallbacks"] == 0 for cg in graphs)


def test_mutation_through_a_view_is_seen_by_the_base():
    def fn(x):
        row = x[1]
        row.mul_(10)
        col = x[:, 2]
        col.copy_(x.sum(1))
        return x.exp().amax(1), x

    x = make_sample(F32, 32, shape=(4, 6), specials=False)
    actual, expected, ins, eager_ins, _ = _run_both(fn, x)
    assert_matches(actual, expected)
    assert_matches(ins, eager_ins)
    assert actual[1] is ins[0], "the returned input is the caller's tensor, as in eager"


def test_two_inputs_that_alias_one_storage():
    """Two arguments that are views of one buffer: an update through one is seen through
    the other, as in eager."""
    def fn(a, b):
        a.mul_(2)
        return b * 1 + a.sum()

    base_e = make_sample(F32, 33, shape=(12,), specials=False)
    base_c = base_e.clone()
    expected = fn(base_e[:8], base_e[4:])
    actual = torchfuse.compile(fn, dynamic=False)(base_c[:8], base_c[4:])
    assert_matches(actual, expected)
    assert_matches(base_c, base_e)


def test_inputs_that_overlap_differently_on_a_later_call_get_eagers_values():
    """Two views of one buffer, one of them written: TorchDynamo guards that they overlap,
    not where, and AOTAutograd's graph holds the offsets it traced (``aot_eager`` returns the
    first call's sums on the third call). A call whose views sit at other offsets runs the
    graph eagerly, with one warning: every call, inputs and outputs, is eager's."""
    import warnings

    def fn(x, y):
        x.mul_(2)
        return y.sum(1)

    compiled = torchfuse.compile(fn)
    caught = []
    for shift in (4, 4, 2, 0, 2, 4):
        base_e = torch.arange(20.0, device=DEVICE).view(10, 2)
        base_c = base_e.clone()
        expected = fn(base_e[:6], base_e[shift:shift + 6])
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            actual = compiled(base_c[:6], base_c[shift:shift + 6])
        caught += [m for m in w if "overlap differently" in str(m.message)]
        assert_matches(actual, expected, exact=True)
        assert_matches(base_c, base_e, exact=True)
    assert len(caught) == 1 and caught[0].filename == __file__


def test_overlapping_inputs_at_new_offsets_keep_eagers_gradients():
    """The same with a buffer that requires grad: the eager run of the graph is
    differentiated as eager's is."""
    def fn(x, y):
        x.mul_(3)
        return (y * y).sum()

    compiled = torchfuse.compile(fn)
    for shift in (3, 1):
        grads = []
        for f in (fn, compiled):
            w = torch.arange(12.0, device=DEVICE).requires_grad_(True)
            base = w * 1
            f(base[:6], base[shift:shift + 6]).backward()
            grads.append(w.grad)
        assert_matches(grads[1], grads[0], exact=True)


OVERLAPPING_OUTPUTS = {
    "unfold": lambda x: (x * 1).unfold(0, 7, 6),
    "unfold, transpose, reshape": lambda x: (x * 2).unfold(0, 6, 4).transpose(0, 1).reshape(6, -1),
    "as_strided": lambda x: (x + 1).as_strided((4, 5), (3, 1)),
    "expand": lambda x: (x * 3)[:5].unsqueeze(0).expand(3, 5),
}


@pytest.mark.parametrize("case", sorted(OVERLAPPING_OUTPUTS))
def test_an_output_whose_windows_overlap_gets_eagers_gradient(case):
    """A compiled function returning overlapping windows of an intermediate (framing a signal
    with a hop shorter than the window): AOTAutograd copied the incoming gradient into the
    output's overlapping strides, losing one of each two overlapping elements (``x.grad[6]``
    214 for eager's 213; ``aot_eager`` too), where PyTorch cannot tell the overlap cheaply
    (``unfold``, ``as_strided``); ``expand``'s it always handled."""
    fn = OVERLAPPING_OUTPUTS[case]
    x = torch.arange(23, dtype=F64, device=DEVICE).requires_grad_(True)
    out = fn(x)
    g = torch.arange(out.numel(), dtype=F64, device=DEVICE).reshape(out.shape) + 100
    (want,) = torch.autograd.grad(out, x, g)
    got_out = torchfuse.compile(fn, dynamic=False)(x)
    assert got_out.stride() == out.stride()
    (got,) = torch.autograd.grad(got_out, x, g)
    assert_matches(got, want, exact=True)


def test_a_graph_without_inputs_sharing_memory_is_not_wrapped():
    """The check costs nothing where no two inputs share a storage."""
    from torchfuse.backend import _with_overlap_check

    def compiled(*args):
        return args

    assert _with_overlap_check(compiled, None, [torch.zeros(2), torch.zeros(2), 3], None) is compiled


VIEWS = {"flatten(0, 1)": lambda x: x.flatten(0, 1), "flatten(1, 2)": lambda x: x.flatten(1, 2),
         "reshape(-1)": lambda x: x.reshape(-1), "transpose(0, 1)": lambda x: x.transpose(0, 1)}


@pytest.mark.parametrize("view", sorted(VIEWS))
def test_a_view_of_a_written_input_at_dynamic_sizes_has_eagers_strides(view, monkeypatch):
    """``x.add_(1); return x.flatten(0, 1)`` on an input that is every other element of a
    buffer: once its sizes are dynamic (the second size of a call), AOTAutograd rebuilds the
    returned view with the strides of its functional graph's contiguous copy, so the view
    reads the buffer's neighbours (``aot_eager`` and Inductor do the same; found by the
    two-size fuzzer). Calls where the written input has gaps run eagerly, with one warning;
    dense inputs (contiguous, transposed) stay compiled. Every call's output, its strides and
    the input are eager's."""
    import warnings

    def fn(x):
        x.add_(1)
        return VIEWS[view](x)

    def make(n, layout):
        base = torch.arange(4.0 * n, device=DEVICE)
        if layout == "strided":
            return base.view(2, n, 2)[..., ::2]
        return base.view(2, n, 2) if layout == "contiguous" else base.view(2, n, 2).permute(2, 1, 0)

    wrappers = []
    original = backend._with_alias_check

    def spy(*args):
        wrappers.append(original(*args))
        return wrappers[-1]

    monkeypatch.setattr(backend, "_with_alias_check", spy)
    compiled = torchfuse.compile(fn)
    caught = []
    calls = [(3, "strided"), (5, "strided"), (7, "strided"), (6, "contiguous"), (8, "transposed"), (9, "strided")]
    for n, layout in calls:
        x_e, x_c = make(n, layout), make(n, layout)
        expected = fn(x_e)
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            actual = compiled(x_c)
        caught += [m for m in w if "view of an input it writes to" in str(m.message)]
        assert actual.stride() == expected.stride(), (n, layout)
        assert_matches(actual, expected, exact=True)
        assert_matches(x_c, x_e, exact=True)
        x_c.mul_(2), x_e.mul_(2)  # a view: later writes to the input reach it
        assert_matches(actual, expected, exact=True)
    assert len(caught) == 1 and caught[0].filename == __file__
    # the first call's graph has no size symbols (views replayed) and is returned as it is;
    # of the dynamic graph's five calls, the three strided ones ran eagerly
    assert sum(getattr(w, "eager_calls", 0) for w in wrappers) == 3, [getattr(w, "eager_calls", None) for w in wrappers]


def test_the_view_check_where_inputs_do_not_map_one_to_one():
    """AOTAutograd's metadata indexes inputs merged into one base (two views of one tensor)
    and parameters a graph holds (``install_free_tensors``) otherwise than the arguments a
    call receives: the check then looks at every tensor argument, and calls keep eager's
    values (it raised ``AttributeError``/``IndexError`` when it indexed the arguments by the
    metadata)."""
    import torch._dynamo

    def fn(x, y):
        y.mul_(2)
        return x.flatten(0, 1)

    compiled = torchfuse.compile(fn, dynamic=True)
    for n in (3, 4):
        x_e, x_c = torch.arange(2.0 * n, device=DEVICE).view(2, n, 1), torch.arange(2.0 * n, device=DEVICE).view(2, n, 1)
        assert_matches(compiled(x_c, x_c[0]), fn(x_e, x_e[0]), exact=True)
        assert_matches(x_c, x_e, exact=True)

    class WithBuffer(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("b", torch.ones(2, device=DEVICE))

        def forward(self, x):
            x.add_(self.b)
            return x.flatten(0, 1)

    model = WithBuffer()
    with torch._dynamo.config.patch(install_free_tensors=True):
        compiled = torchfuse.compile(model, dynamic=True)
        for n, strided in [(5, False), (6, True)]:
            make = lambda: (torch.arange(4.0 * n, device=DEVICE).view(n, 4)[:, ::2] if strided
                            else torch.arange(2.0 * n, device=DEVICE).view(n, 2))
            x_e, x_c = make(), make()
            actual, expected = compiled(x_c), model(x_e)
            assert actual.stride() == expected.stride()
            assert_matches(actual, expected, exact=True)


def _wrapped_by(monkeypatch, wrapper: str) -> list:
    """Patch ``backend.<wrapper>`` (which returns a compiled callable, or a wrapper around it)
    to record, per call, whether it wrapped; returns that list."""
    wrapped = []
    original = getattr(backend, wrapper)

    def spy(compiled, *args):
        result = original(compiled, *args)
        wrapped.append(result is not compiled)
        return result

    monkeypatch.setattr(backend, wrapper, spy)
    return wrapped


def test_a_graph_returning_no_view_of_a_written_input_is_not_wrapped(monkeypatch):
    """The check costs nothing where no output views an input the graph writes to (here:
    a copy of it), at dynamic sizes too."""
    import torch._dynamo

    def fn(x):
        x.add_(1)
        return x.flatten(0, 1) * 2

    wrapped = _wrapped_by(monkeypatch, "_with_alias_check")
    x = torch.arange(12.0, device=DEVICE).view(1, 6, 2)[..., ::2]
    torchfuse.compile(fn, dynamic=True)(x)
    assert wrapped == [False], wrapped


def _jagged(lens=(3, 5, 2), width=8, requires_grad=False):
    return torch.nested.nested_tensor([torch.randn(n, width, device=DEVICE) for n in lens], layout=torch.jagged,
                                      requires_grad=requires_grad)


def test_a_jagged_nested_tensor_is_fused(recwarn):
    """A jagged nested tensor reaches AOTAutograd's graphs as its values, its offsets and its
    ragged size, a nested int with no integer value: reading the size symbols from it raised
    ``AttributeError`` at every graph's first call, which then ran through ATen as traced."""
    def fn(x):
        return (x * 2 + 1).relu()

    compiled = torchfuse.compile(fn)
    for lens in [(3, 5, 2), (3, 5, 2), (4, 1, 6, 2)]:
        x = _jagged(lens)
        before = list(backend.RECENT)
        actual, expected = compiled(x), fn(x)
        assert torch.equal(actual.offsets(), expected.offsets())
        assert_matches(actual.values(), expected.values(), exact=True)
        graphs = [g for g in backend.RECENT if all(g is not b for b in before)]
        assert all(g.traced is None for g in graphs)
    x = _jagged(requires_grad=True)
    x_e = x.detach().clone().requires_grad_()
    compiled(x).values().sum().backward()
    fn(x_e).values().sum().backward()
    assert_matches(x.grad.values(), x_e.grad.values(), exact=True)
    assert not [w for w in recwarn if "torchfuse" in str(w.message)], [str(w.message) for w in recwarn]


def test_a_graph_writing_no_input_is_not_wrapped_where_inputs_do_not_map_one_to_one(monkeypatch):
    """A jagged nested tensor's inner tensors do not map one to one to the call's arguments:
    a graph returning a view of it, and writing to no input, ran eagerly ("returns a view of
    an input it writes to")."""
    def fn(x):
        return x.unflatten(-1, (2, 4))

    wrapped = _wrapped_by(monkeypatch, "_with_alias_check")
    x = _jagged()
    actual, expected = torchfuse.compile(fn)(x), fn(x)
    assert wrapped == [False], wrapped
    assert_matches(actual.values(), expected.values(), exact=True)


def test_outputs_alias_inputs_and_each_other():
    """Returned views of inputs are views (writes through them reach the input), a value
    returned twice is one tensor, and a mutated input returned is the caller's tensor."""
    def fn(x, y):
        y.add_(1)
        z = x * 2
        return x.t(), x[1:, ::2], z, z, y, z.view(-1)[3:]

    x, y = make_sample(F32, 34, shape=(4, 6), specials=False), make_sample(F32, 35, shape=(3,), specials=False)
    actual, expected, ins, eager_ins, _ = _run_both(fn, x, y)
    assert_matches(actual, expected)
    assert_matches(ins, eager_ins)
    xt, xs, z1, z2, yy, zv = actual
    assert xt.data_ptr() == ins[0].data_ptr() and xt.stride() == (1, 6)
    assert xs.data_ptr() == ins[0].data_ptr() + 6 * 4 and xs.stride() == (6, 2)
    assert z1.data_ptr() == z2.data_ptr() and yy is ins[1]
    assert zv.data_ptr() == z1.data_ptr() + 3 * 4
    xs.fill_(-7)
    assert (ins[0][1:, ::2] == -7).all()


OUTPUT_VIEWS = {"y[:, :3]": lambda y: y[:, :3], "y.t()": lambda y: y.t(), "y.detach()": lambda y: y.detach(),
                "y.detach()[:, :3]": lambda y: y.detach()[:, :3], "y[1]": lambda y: y[1]}


def _write_through_second_output(fn, compiled: bool, grad_mode: bool):
    """Call ``fn`` (returning ``y`` and a second output on y's memory), write through the
    second output in place, then differentiate something that saved ``y``: ``x``'s or
    ``p``'s gradient, or the error autograd raised."""
    x = torch.linspace(-1.0, 1.0, 8, device=DEVICE).view(2, 4).requires_grad_(grad_mode)
    f = torchfuse.compile(fn, dynamic=False) if compiled else fn
    with torch.set_grad_enabled(grad_mode):
        y, d = f(x)
    p = torch.ones(2, 4, device=DEVICE, requires_grad=True)
    loss = y.sum() if y.requires_grad else (p * y).sum()  # exp's backward, or mul's, saved y
    versions = y._version
    with torch.no_grad():
        d.mul_(10.0)
    try:
        loss.backward()
        outcome = (x if y.requires_grad else p).grad
    except RuntimeError as e:
        outcome = "modified by an inplace operation" in str(e)
    return y._version - versions, outcome


# with grad enabled only detached outputs can be written (AOTAutograd rebuilds the views that need a gradient)
WRITE_CASES = [(v, g) for v in sorted(OUTPUT_VIEWS) for g in (False, True) if not g or v.startswith("y.detach()")]


@pytest.mark.parametrize("view,grad_mode", WRITE_CASES, ids=[f"{v}-{'grad' if g else 'no_grad'}" for v, g in WRITE_CASES])
def test_a_write_through_an_output_is_seen_by_the_output_it_shares_memory_with(view, grad_mode):
    """An output on the memory of another (``y.detach()[:, :3]`` beside ``y``; any view under
    no_grad) shares its version counter as eager's does: a write through it raises y's
    version, and a backward that saved ``y`` raises eager's error instead of reading the
    written values (``x.grad`` was ``[10, 10, 10, 1]`` where the gradient is ``[1, 1, 1, 1]``)."""
    def fn(x):
        y = x.exp()
        return y, OUTPUT_VIEWS[view](y)

    expected = _write_through_second_output(fn, False, grad_mode)
    actual = _write_through_second_output(fn, True, grad_mode)
    assert expected == (1, True)  # eager's: the write is seen, the backward refuses
    assert actual == expected


@pytest.mark.parametrize("split", ["chunk", "split", "tensor_split"])
def test_a_saved_piece_of_a_split_input_keeps_the_inputs_version_counter(split):
    """A piece of a split of an input (an ``operator.getitem`` of a list of views) saved for the
    backward was not seen as a view of the input: it was saved as a tensor of its own, without
    the input's version counter, so a write into the input before the backward gave a silent
    wrong gradient (``w.grad`` 100 where the gradient is 1) where eager raises."""
    pieces = {"chunk": lambda x: x.chunk(2), "split": lambda x: torch.split(x, [1, 1]),
              "tensor_split": lambda x: torch.tensor_split(x, 2)}[split]

    def f(x, w):
        a, b = pieces(x)
        return ((a @ w) * b).sum()

    for fn in (f, torchfuse.compile(f, dynamic=False)):
        w = torch.tensor([[1.0, 2.0], [3.0, 4.0]], device=DEVICE, requires_grad=True)
        x = torch.ones(2, 2, device=DEVICE)
        loss = fn(x, w)
        x.mul_(10)
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            loss.backward()


REINTERPRETED = {
    "int16_bits": (lambda a, b: (a.view(torch.int16)[:2, ::4] * b).sum(), F32, (2, 3)),
    "complex_real": (lambda a, b: (a.real * b).sum(), torch.complex64, (4, 6)),
    # an fp16 input at an odd offset, which as a whole cannot be viewed as fp32
    "odd_offset_fp32": (lambda a, b: (a[:, 1:3].view(torch.float32) * b).sum(), torch.float16, (4, 1)),
}


@pytest.mark.parametrize("case", sorted(REINTERPRETED))
def test_a_saved_view_of_an_input_with_another_dtype_keeps_its_dtype(case):
    """A forward that saves a view of its input with another dtype (``x.view(torch.int16)``,
    ``z.real`` of a complex ``z``) for the backward: the saved view is rebuilt on the input
    with the view's dtype, so the gradient is eager's (it read the input's floats as int16
    sizes and strides: wrong values, or an out-of-bounds error for ``z.real``), and a write to
    the input before the backward raises eager's error, also where the input as a whole cannot
    be viewed with the view's dtype (an fp16 input at an odd offset)."""
    fn, dtype, shape = REINTERPRETED[case]
    if dtype == torch.float16:
        x = make_sample(F32, 47, shape=(17,), specials=False).half()[1:].view(4, 4)
    elif dtype != F32:
        x = make_sample(F32, 47, shape=(4, 12), specials=False).view(dtype)[:, :6]
    else:
        x = make_sample(F32, 47, shape=(4, 6), specials=False)
    w = make_sample(F32, 48, shape=shape, specials=False)
    grads = []
    for f in (fn, torchfuse.compile(fn, dynamic=False)):
        b = w.clone().requires_grad_()
        grads.append(torch.autograd.grad(f(x, b), [b])[0])
        b = w.clone().requires_grad_()
        loss = f(x, b)
        with torch.no_grad():
            x.mul_(2.0)
            x.div_(2.0)
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            loss.backward()
    assert torch.equal(grads[1], grads[0])


def test_outputs_on_one_memory_with_other_dtypes_keep_theirs():
    """Outputs that reinterpret an earlier output (``y.view(torch.int32)``, ``y.view(torch.uint8)``
    beside ``y``; ``z.real`` before ``z``) have their own dtypes and eager's values (they came back
    with the earlier output's dtype, or raised where the element sizes differ), and under
    no_grad a write through ``y`` is seen through them, as eager's views."""
    def fn(x):
        y = x * 2
        return y, y.view(torch.int32), y.view(torch.uint8)

    def complex_fn(z):
        z = z * 2
        return z.real, z

    x = make_sample(F32, 49, shape=(2, 4), specials=False)
    z = make_sample(F32, 50, shape=(3, 2), specials=False).view(torch.complex64)
    for f, arg in ((fn, x), (complex_fn, z)):
        expected = f(arg)
        actual = torchfuse.compile(f, dynamic=False)(arg)
        for a, e in zip(actual, expected):
            assert a.dtype == e.dtype and a.shape == e.shape and a.stride() == e.stride()
            assert torch.equal(a, e)
    with torch.no_grad():
        y, bits, raw = torchfuse.compile(fn, dynamic=False)(x)
        y.fill_(1.0)
    assert (bits == 0x3F800000).all() and torch.equal(raw, y.view(torch.uint8))


def test_a_saved_conjugate_of_an_input_keeps_its_bit():
    """A complex weight times complex data that needs no gradient: the forward saves the data's
    conjugate (a view with the conjugate bit), which is rebuilt on the input with that bit, so
    the weight's gradient is eager's (it was eager's conjugate)."""
    x = make_sample(F32, 51, shape=(3, 8), specials=False).view(torch.complex64)
    w0 = make_sample(F32, 52, shape=(3, 8), specials=False).view(torch.complex64)
    fn = lambda x, w: (x * w).real.sum()
    grads = []
    for f in (fn, torchfuse.compile(fn, dynamic=False)):
        w = w0.clone().requires_grad_()
        grads.append(torch.autograd.grad(f(x, w), [w])[0])
    assert torch.equal(grads[1], grads[0])


def test_outputs_with_conjugate_and_negative_bits_keep_them():
    """Outputs on one memory that differ only in their conjugate or negative bits (``y.conj()``
    beside ``y``, ``y.conj().imag`` beside ``y.imag``) keep eager's values and bits: ``y`` after
    ``y.conj()`` came back conjugated, and ``y.conj()`` after ``y`` not."""
    def conj_first(z):
        y = z * 2
        return y.conj(), y

    def plain_first(z):
        y = z * 2
        return y, y.conj(), y.conj().imag, y.imag

    z = make_sample(F32, 53, shape=(3, 4), specials=False).view(torch.complex64)
    for fn in (conj_first, plain_first):
        expected = fn(z)
        actual = torchfuse.compile(fn, dynamic=False)(z)
        for a, e in zip(actual, expected):
            assert torch.equal(a, e) and a.is_conj() == e.is_conj() and a.dtype == e.dtype


def test_outputs_on_one_memory_under_no_grad_are_views_of_the_first():
    """Under no_grad, a returned view of a returned value is a view of it (``_base``), as in eager."""
    def fn(x):
        y = x.exp()
        return y, y.view(-1), y[0]

    with torch.no_grad():
        y, flat, row = torchfuse.compile(fn, dynamic=False)(torch.randn(2, 3, device=DEVICE))
    assert flat._base is y and row._base is y
    row.fill_(0.0)
    assert (y[0] == 0).all() and y._version == flat._version == 1


def test_a_graph_without_outputs_sharing_memory_is_not_wrapped(monkeypatch):
    """The version-counter fix costs nothing where no two outputs share memory."""
    wrapped = _wrapped_by(monkeypatch, "_with_shared_version_counters")
    with torch.no_grad():
        torchfuse.compile(lambda x: (x.exp(), x.sin().t()), dynamic=False)(torch.randn(2, 3, device=DEVICE))
    assert wrapped == [False]


def test_an_input_made_in_inference_mode_is_copied_where_the_forward_saves_it():
    """``layer_norm(x) * w`` with ``x`` made under ``torch.inference_mode()``: eager saves the
    normalized values for ``w``'s gradient; the partitioner saves ``x`` and recomputes, and
    autograd refuses to save an inference tensor (PyTorch's min-cut partitioner, and so
    Inductor, raise). The forward saves a copy; the gradient is eager's."""
    import torch.nn.functional as F

    def fn(x, w):
        return F.layer_norm(x, (8,)) * w

    with torch.inference_mode():
        x = make_sample(F32, 38, shape=(6, 8), specials=False)
    grads = []
    for f in (fn, torchfuse.compile(fn, dynamic=False)):
        w = make_sample(F32, 39, shape=(8,), specials=False).requires_grad_()
        f(x, w).square().sum().backward()
        grads.append(w.grad)
    assert_matches(grads[1], grads[0])


@pytest.mark.parametrize("written", ["data", "weight"])
def test_an_input_written_between_forward_and_backward_raises_as_in_eager(written):
    """``relu(x @ w)`` saves a view of ``x`` (its transpose) for ``w``'s gradient; an in-place
    write to ``x`` before the backward (the next batch copied into the same buffer) makes
    eager's backward raise. The runtime's views were tensors of their own, so the write went
    unseen and the gradient was computed from the written values. The same for a weight
    changed under ``no_grad`` (saved as itself); a backward with nothing written between is
    eager's."""
    def fn(x, w):
        return (x @ w).relu()

    for f in (fn, torchfuse.compile(fn, dynamic=False)):
        x = make_sample(F32, 40, shape=(4, 8), specials=False)
        w = make_sample(F32, 41, shape=(8, 8), specials=False).requires_grad_()
        if written == "weight":
            x.requires_grad_()
        y = f(x, w)
        with torch.no_grad():
            (x if written == "data" else w).mul_(2)
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            y.sum().backward()
    grads = []
    for f in (fn, torchfuse.compile(fn, dynamic=False)):
        w = make_sample(F32, 41, shape=(8, 8), specials=False).requires_grad_()
        f(make_sample(F32, 40, shape=(4, 8), specials=False), w).sum().backward()
        grads.append(w.grad)
    assert_matches(grads[1], grads[0])


def test_a_backward_that_retains_the_graph_after_a_plain_one():
    """A step whose backward keeps the graph (``retain_graph=True``, or ``autograd.grad`` with
    ``create_graph=True``) after steps whose backward did not: AOTAutograd compiles the
    backward at the first one with donated buffers and then refused the later one ("compiled
    with non-empty donated buffers"), where eager runs it. Gradients as eager's, twice."""
    import torch.nn.functional as F

    def fn(x, w):
        return F.gelu(x @ w).sum(-1)

    grads = []
    for f in (fn, torchfuse.compile(fn, dynamic=False)):
        x = make_sample(F32, 42, shape=(4, 8), specials=False)
        w = make_sample(F32, 43, shape=(8, 8), specials=False).requires_grad_()
        f(x, w).sum().backward()
        y = f(x, w).square().sum()
        first = torch.autograd.grad(y, [w], retain_graph=True)[0]
        second = torch.autograd.grad(y, [w], create_graph=True)[0]
        grads.append((w.grad, first, second))
    assert_matches(grads[1], grads[0])


def test_a_forward_saving_no_input_that_needs_no_gradient_is_not_wrapped(monkeypatch):
    """The inference-tensor check costs nothing where the forward saves no such input."""
    wrapped = _wrapped_by(monkeypatch, "_saving_inputs_as_eager")
    w = torch.randn(8, device=DEVICE, requires_grad=True)
    torchfuse.compile(lambda x, w: (x.exp() * w).sum(), dynamic=False)(torch.randn(8, device=DEVICE), w).backward()
    torchfuse.compile(lambda w: (w.exp() * 2).sum(), dynamic=False)(w).backward()
    assert wrapped == [True, False]


def test_mutated_input_requiring_grad_is_differentiated_like_eager():
    def fn(x, w):
        h = x * w
        h.mul_(2)
        return torch.softmax(h, -1).sum(0)

    x = make_sample(F32, 36, shape=(4, 9), specials=False)
    w = make_sample(F32, 37, shape=(9,), specials=False)
    we = w.clone().requires_grad_()
    ge = torch.autograd.grad(fn(x, we).square().sum(), [we])
    wc = w.clone().requires_grad_()
    out = torchfuse.compile(fn, dynamic=False)(x, wc)
    gc = torch.autograd.grad(out.square().sum(), [wc])
    assert_matches(gc, ge)


# ----------------------------------------------------------------------------- the kernel cache

def _kernel_files(cache) -> list:
    return sorted((cache / "kernels").rglob("*.py"))


def _fresh_process_state():
    """Forget loaded kernels and compiled graphs, as a new process would."""
    from torchfuse.runtime import compile as rc

    torch._dynamo.reset()
    rc._loaded.clear()
    for name in [m for m in sys.modules if m.startswith("torchfuse_kernel_")]:
        del sys.modules[name]


def _compile_once(cache, x):
    _fresh_process_state()  # a kernel loaded by an earlier test would never reach this cache
    fn = lambda x: (x * 3).cos() + 1
    out = torchfuse.compile(fn, cache_dir=str(cache))(x)
    torch.testing.assert_close(out, fn(x))
    return fn


def test_cache_file_that_is_not_text_is_rewritten(tmp_path):
    x = torch.randn(32, device=DEVICE)
    fn = _compile_once(tmp_path, x)
    (path,) = _kernel_files(tmp_path)
    path.write_bytes(b"\xff\xfe\x00\x9c not utf-8")
    _fresh_process_state()
    torch.testing.assert_close(torchfuse.compile(fn, cache_dir=str(tmp_path))(x), fn(x))
    assert "@triton.jit" in path.read_text()


def test_bytecode_planted_beside_a_kernel_never_runs(tmp_path):
    x = torch.randn(32, device=DEVICE)
    fn = _compile_once(tmp_path / "cache", x)
    (path,) = _kernel_files(tmp_path / "cache")
    text, stat = path.read_text(), os.stat(path)
    marker = tmp_path / "executed"
    payload = f"open({str(marker)!r}, 'w').write('planted')\n"
    assert len(payload) + 1 < len(text)
    planted = payload + "#" * (len(text) - len(payload) - 1) + "\n"  # same size: the .pyc header matches
    assert len(planted) == len(text)
    path.write_text(planted)
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    py_compile.compile(str(path), cfile=importlib.util.cache_from_source(str(path)), doraise=True,
                       invalidation_mode=py_compile.PycInvalidationMode.TIMESTAMP)
    path.write_text(text)
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    _fresh_process_state()
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torchfuse.compile(fn, cache_dir=str(tmp_path / "cache"))(x)
    assert not marker.exists(), "bytecode that is not the verified source ran"


def test_cache_entry_that_is_a_directory_falls_back_to_a_private_dir(tmp_path):
    """A directory where the kernel file should be (cannot be replaced by a file): the kernel
    runs from the private directory instead, with eager's values."""
    x = torch.randn(32, device=DEVICE)
    fn = _compile_once(tmp_path, x)
    (path,) = _kernel_files(tmp_path)
    path.unlink()
    path.mkdir()
    (path / "inner").write_text("not a kernel")
    _fresh_process_state()
    torch.testing.assert_close(torchfuse.compile(fn, cache_dir=str(tmp_path))(x), fn(x))
    assert path.is_dir()
    assert backend.RECENT[-1].stats["fallbacks"] == 0


def test_files_of_another_version_are_never_loaded(tmp_path):
    """Another torchfuse or Triton version generates other text, hence other names: its
    files sit beside this version's and are neither loaded nor changed."""
    x = torch.randn(32, device=DEVICE)
    fn = _compile_once(tmp_path, x)
    (path,) = _kernel_files(tmp_path)
    other_text = path.read_text().replace("import triton\n", "import triton  # another version\n", 1)
    other_text += f"\nopen({str(tmp_path / 'loaded')!r}, 'w')\n"
    from torchfuse.runtime.cache import sha256_text

    key = sha256_text(other_text)
    other = tmp_path / "kernels" / key[:2] / f"{key}.py"
    other.parent.mkdir(parents=True, exist_ok=True)
    other.write_text(other_text)
    _fresh_process_state()
    torch.testing.assert_close(torchfuse.compile(fn, cache_dir=str(tmp_path))(x), fn(x))
    assert not (tmp_path / "loaded").exists() and other.read_text() == other_text
    assert backend.RECENT[-1].store.hits == 1


def test_kernels_subdirectory_blocked_runs_from_a_private_dir(tmp_path):
    (tmp_path / "kernels").write_text("a file where the kernels directory should be")
    x = torch.randn(32, device=DEVICE)
    _compile_once(tmp_path, x)
    assert backend.RECENT[-1].stats["fallbacks"] == 0
    assert (tmp_path / "kernels").is_file()


# ----------------------------------------------------------------------------- recompilation

def _loaded_keys() -> set:
    from torchfuse.runtime.compile import _loaded

    return {k.source.key for k in _loaded.values()}


def test_new_sequence_length_reuses_kernels():
    """(batch, sequence, hidden) programs: new sequence lengths and batch sizes reuse the
    kernels compiled for the first call. TorchDynamo re-traces once, at the first call whose
    sizes differ, marking those sizes dynamic; here batch and sequence both change then, so
    no later size >= 2 re-traces. (Size 1 is specialized by TorchDynamo and by the kernel
    key, since a size-1 dim broadcasts.)"""
    def fn(x, w):
        h = torch.nn.functional.layer_norm(x, (x.shape[-1],)) * w
        return torch.softmax(h @ h.transpose(1, 2), -1).sum(1), h.amax(1)

    w = torch.randn(16, device=DEVICE)
    g = torchfuse.compile(fn)
    g(torch.randn(2, 5, 16, device=DEVICE), w)
    keys = _loaded_keys()
    g(torch.randn(3, 6, 16, device=DEVICE), w)  # Dynamo's re-trace with dynamic sizes
    assert _loaded_keys() == keys, "the dynamic re-trace generated new kernels"
    graphs = len(backend.RECENT)
    for batch, seq in ((2, 9), (4, 7), (5, 13)):
        x = torch.randn(batch, seq, 16, device=DEVICE)
        assert_matches(g(x, w), fn(x, w))
    assert _loaded_keys() == keys, "a new sequence length generated new kernels"
    assert len(backend.RECENT) == graphs, "a new sequence length compiled a new graph"


def test_unused_empty_input_causes_no_recompiles():
    """An unused input of size 0 next to inputs whose batch size changes: one re-trace at the
    first size change (as without it), then neither graphs nor kernels are added."""
    def fn(x, unused):
        return (x * 2).softmax(-1)

    g = torchfuse.compile(fn)
    e = torch.empty(0, device=DEVICE)
    g(torch.randn(3, 8, device=DEVICE), e)
    g(torch.randn(4, 8, device=DEVICE), e)
    keys, graphs = _loaded_keys(), len(backend.RECENT)
    for batch in (5, 7, 11):
        x = torch.randn(batch, 8, device=DEVICE)
        assert_matches(g(x, torch.empty(0, device=DEVICE)), fn(x, e))
    assert _loaded_keys() == keys and len(backend.RECENT) == graphs


@pytest.mark.parametrize("scale", [3.0, 0.0, -0.0, float("inf"), float("nan")])
def test_zero_dim_input_of_a_pointwise_kernel_is_loaded_once_a_thread(scale):
    """A 0-d input of a pointwise kernel is loaded as a one-element block
    (``Tuning.pointwise.scalar_loads``), so the division computed from it alone runs once a thread;
    values equal eager's, signs of zero, infinities and NaN included, in fp32 and bf16."""
    def f(x, s):
        return x * (s / 3.0 + 1.0) - s

    for dtype in (torch.float32, torch.bfloat16):
        x = torch.tensor([1.5, -2.0, 0.0, -0.0, 7.25, float("inf")] * 50, device=DEVICE).to(dtype)
        s = torch.tensor(scale, device=DEVICE).to(dtype)
        torch._dynamo.reset()
        got = torchfuse.compile(f, dynamic=False)(x, s)
        want = f(x, s)
        assert torch.equal(got.isnan(), want.isnan())
        keep = ~want.isnan()
        assert torch.equal(got[keep], want[keep]) and torch.equal(got[keep].signbit(), want[keep].signbit())
    _, text = _plan_source(f, (x, s), [(1,), ()])
    assert "+ tl.zeros([1], tl.int32))" in text, text
    _, text = _plan_source(f, (x, s), [(1,), ()], tuning="pointwise.scalar_loads=False")
    assert "tl.zeros([1]" not in text


@pytest.mark.parametrize("fn", [lambda x: x - torch.tensor(True), lambda x: x - (x > 0), lambda x: torch.rsub(x, x > 0),
                                lambda x: (x > 0) - (x < 0)], ids=["tensor_true", "bool_block", "rsub", "both_bool"])
def test_subtraction_with_a_bool_operand_raises_eagers_error(fn):
    """Eager refuses ``-`` with a bool tensor operand (``NotImplementedError`` in torch 2.14,
    ``RuntimeError`` in 2.11); PyTorch's fake tensors do not check it while tracing, so a fused
    subtraction would return a value where eager raises. The subtraction is left to ATen, which
    raises eager's error."""
    x = torch.randn(3, 4, device=DEVICE)
    with pytest.raises((NotImplementedError, RuntimeError)) as eager:
        fn(x)
    torch._dynamo.reset()
    with pytest.raises(eager.type) as compiled:
        torchfuse.compile(fn)(x)
    # (torch 2.11's fake tensors check two bool operands themselves: TorchDynamo then raises
    # while tracing, its RuntimeError quoting eager's message)
    assert str(eager.value).split(".")[0] in str(compiled.value)


_NEGATIVE_VIEWS = {
    "conj_imag": (lambda x: x.conj().imag * 1, lambda: torch.tensor([1 + 2j, 3 - 4j, -5 + 0.5j], device=DEVICE)),
    "conj_imag_sum": (lambda x: (x.conj().imag + x.real).sum(), lambda: torch.tensor([1 + 2j, 3 - 4j], device=DEVICE)),
    "conj_input": (lambda z: z.imag.exp() * 2, lambda: torch.tensor([1 + 2j, 3 - 4j], device=DEVICE).conj()),
    "neg_view_input": (lambda z: (z * 3).sum() + z.abs().amax(), lambda: torch._neg_view(torch.tensor([1.0, -2.0, 3.5], device=DEVICE))),
    "neg_view_in_graph": (lambda x: torch._neg_view(x * 2)[1:] + 1, lambda: torch.tensor([1.0, -2.0, 3.5], device=DEVICE)),
    "neg_view_input_written": (lambda z: z.mul_(2) * 3, lambda: torch._neg_view(torch.tensor([1.0, -2.0, 3.5], device=DEVICE))),
}


@pytest.mark.parametrize("case", list(_NEGATIVE_VIEWS))
def test_a_lazily_negated_view_is_read_negated(case):
    """ATen's negative bit (``x.conj().imag``, ``torch._neg_view``, a complex input with its
    conjugate bit) leaves the negation to the reader; a kernel reads memory, and gave
    ``x.conj().imag * 1`` the wrong sign. Two calls (the second replays recorded views) equal
    eager's values."""
    fn, make = _NEGATIVE_VIEWS[case]
    torch._dynamo.reset()
    compiled = torchfuse.compile(fn, dynamic=False)
    for _ in range(2):
        x, y = make(), make()
        want, got = fn(x), compiled(y)
        assert got.dtype == want.dtype
        torch.testing.assert_close(got, want, rtol=0, atol=0)
        torch.testing.assert_close(y, x, rtol=0, atol=0)  # (an input written in place)
