"""Slices of a ``@fused`` function's arguments and concatenations (``fd.ops.cat``, ``torch.cat``):
rotary position embeddings (RoPE) as one kernel, values and gradients against eager, layouts,
the other argument views (chunk, unbind, select, narrow, a step), refusals, and the function
as one op inside ``torch.compile``."""
from __future__ import annotations

import warnings

import pytest
import torch

import torchfuse
from conftest import DEVICE
from torchfuse.fusion import DefinitionError, DefinitionTypeError, Fusion, fused
from torchfuse.fusion import trace as trace_module

F16, BF16, F32 = torch.float16, torch.bfloat16, torch.float32


def sample(shape, dtype=F32, seed=0):
    g = torch.Generator().manual_seed(seed + 7 * len(shape) + sum(shape))
    return torch.randn(shape, generator=g).to(dtype).to(DEVICE)


def rotate(q, cos, sin):
    d = q.shape[-1] // 2
    q1, q2 = q[..., :d], q[..., d:]
    return q * cos + torch.cat((-q2, q1), dim=-1) * sin


def _leaves(*tensors):
    return [t.detach().clone().requires_grad_() for t in tensors]


@pytest.mark.parametrize("dtype", [F32, F16, BF16])
def test_fused_rope_is_one_kernel_with_eager_values_and_gradients(dtype):
    """RoPE over the two halves of the last dim: one kernel, eager's values bit for bit at
    several sizes (the same ops in the same order, each rounded as eager rounds it), and
    eager's gradients: the query's bit for bit in fp32 (each element is one product plus
    zeros); cos and sin sum over batch and heads, where the reduction order differs, so they
    are compared at the dtype's tolerance, as are fp16/bf16 gradients."""
    rope = fused(rotate, interpret=DEVICE == "cpu")
    for shape in [(2, 3, 5, 8), (3, 4, 7, 6), (4, 5, 3, 12)]:  # (one signature: no size 1, none equal)
        q, cos, sin = sample(shape, dtype), sample(shape[-2:], dtype, 1), sample(shape[-2:], dtype, 2)
        assert torch.equal(rope(q, cos, sin), rotate(q, cos, sin))
    assert len(rope.fusions) == 1 and len(next(iter(rope.fusions.values()))) == 1  # one trace serves them all
    assert rope.fusion_for(q, cos, sin).num_kernels(DEVICE) == 1
    leaves, ref = _leaves(q, cos, sin), _leaves(q, cos, sin)
    out, want = rope(*leaves), rotate(*ref)
    g = sample(out.shape, dtype, 3)
    assert torch.equal(out, want)
    got_grads = torch.autograd.grad(out, leaves, g)
    want_grads = torch.autograd.grad(want, ref, g)
    if dtype == F32:
        assert torch.equal(got_grads[0], want_grads[0])
    for got, expected in zip(got_grads, want_grads):
        torch.testing.assert_close(got, expected)



def test_fused_rope_runs_as_a_generated_function_from_its_second_call_with_a_set_of_sizes():
    """The halves ``q[..., :d]`` and ``q[..., d:]`` are ATen views whose bounds are
    expressions of the argument's sizes (``D // 2``): they are evaluated when the call's
    straight-line function is written, once per set of sizes, not on every call; the values
    at each size are eager's."""
    rope = fused(rotate, interpret=DEVICE == "cpu")
    for shape in [(2, 3, 5, 8), (3, 4, 7, 6), (2, 3, 5, 8)]:
        q, cos, sin = sample(shape), sample(shape[-2:], seed=1), sample(shape[-2:], seed=2)
        for _ in range(2):
            assert torch.equal(rope(q, cos, sin), rotate(q, cos, sin))
    stats = rope.fusion_for(q, cos, sin).program(DEVICE).compiled.stats
    assert stats["graph_function"] == "one generated straight-line function per set of sizes (2 so far)", stats


@pytest.mark.parametrize("dtype", [F32, BF16])
def test_fused_rope_backward_is_one_kernel_at_each_size(dtype):
    """The derived backward of RoPE (``rotate_half``'s gradient scatters into zeros) is traced
    at each set of sizes and given the ATen graph passes: one kernel, the query's gradient
    eager's bit for bit (each element is one product plus zeros, as eager's), for a query that
    requires grad and tables that do not; a size seen before reuses its trace."""
    rope = fused(rotate, interpret=DEVICE == "cpu")
    for shape in [(2, 3, 5, 8), (3, 4, 7, 6), (2, 3, 5, 8)]:
        q = sample(shape, dtype).requires_grad_()
        cos, sin = sample(shape[-2:], dtype, 1), sample(shape[-2:], dtype, 2)
        g = sample(shape, dtype, 3)
        (got,) = torch.autograd.grad(rope(q, cos, sin), [q], g)
        (want,) = torch.autograd.grad(rotate(q, cos, sin), [q], g)
        assert torch.equal(got, want)
    (op,) = rope._ops.values()
    assert [p.num_kernels for p in op._derived.values()] == [1, 1]


def _halves(x):
    d = x.shape[-1] // 2
    return x[..., :d] * x[..., d:]


def _thirds(x):
    a, b, c = x.chunk(3, -1)
    return a * c + b


@pytest.mark.parametrize("fn,shapes", [(_halves, [(2, 4), (2, 3), (2, 2), (2, 6), (2, 3)]),
                                       (_thirds, [(2, 9), (2, 7), (2, 6)])])
def test_fused_views_of_size_one_broadcast_as_eagers(fn, shapes):
    """A view whose size the arguments' make 1 at a call (``D // 2`` of 3, the last third of
    7) broadcasts against the other operand as in eager: values and gradients are eager's at
    each size, in any order (such a trace serves its own sizes alone)."""
    f = fused(fn, interpret=DEVICE == "cpu")
    for shape in shapes:
        x = sample(shape).requires_grad_()
        out, want = f(x), fn(x)
        assert out.shape == want.shape and torch.equal(out, want), shape
        g = sample(want.shape, seed=1)
        assert torch.equal(torch.autograd.grad(out, x, g)[0], torch.autograd.grad(want, x, g)[0]), shape


def _tail(x):
    return x[:, 1:] * 2


def _partial_rope(q, cos, sin, r):
    qr, qp = q[..., :r], q[..., r:]
    d = r // 2
    return torch.cat((qr * cos + torch.cat((-qr[..., d:], qr[..., :d]), -1) * sin, qp), -1)


def test_fused_calls_with_an_empty_argument_view_run_unfused():
    """A call where a view the function takes is empty (``x[:, 1:]`` of one column; partial
    rotary embeddings with the whole head rotated) runs the function as written, as a call
    with an empty argument does: eager's values and gradients, before and after calls that
    fuse; inside ``torch.compile`` too, under ``fullgraph=True`` once called outside with
    such arguments; ``fusion_for`` says why there is no fusion."""
    f = fused(_tail, interpret=DEVICE == "cpu")
    for shape in [(3, 1), (3, 4), (3, 1), (2, 5)]:
        x = sample(shape).requires_grad_()
        out, want = f(x), _tail(x)
        assert out.shape == want.shape and torch.equal(out, want), shape
        if want.numel():
            g = sample(want.shape, seed=1)
            assert torch.equal(torch.autograd.grad(out, x, g)[0], torch.autograd.grad(want, x, g)[0])
    with pytest.raises(DefinitionError, match="a view it takes of these arguments has no elements"):
        f.fusion_for(sample((3, 1)))
    rope = fused(_partial_rope, interpret=DEVICE == "cpu")
    q, cos, sin = sample((2, 3, 8)), sample((3, 8), seed=1), sample((3, 8), seed=2)
    assert torch.equal(rope(q, cos, sin, 8), _partial_rope(q, cos, sin, 8))
    compiled = torch.compile(lambda x: f(x) + 1, backend="torchfuse", dynamic=True)
    for shape in [(3, 4), (3, 1), (3, 5)]:
        x = sample(shape)
        assert torch.equal(compiled(x), _tail(x) + 1), shape
    # called outside first with the empty view, as a fullgraph caller must: traced inline there
    g = fused(_tail, interpret=DEVICE == "cpu")
    x = sample((2, 1))
    assert torch.equal(g(x), _tail(x))
    for dynamic in (None, True):
        torch._dynamo.reset()
        whole = torch.compile(lambda x: g(x) * 3, backend="torchfuse", fullgraph=True, dynamic=dynamic)
        assert torch.equal(whole(x), _tail(x) * 3)

def test_fused_rope_of_a_transposed_query_reads_it_through_its_strides():
    """A query laid out ``[B, T, H, D]`` and transposed to ``[B, H, T, D]`` (as attention
    projections give it): the halves are views with the argument's strides, no copy is made,
    and values and gradients are eager's."""
    rope = fused(rotate, interpret=DEVICE == "cpu")
    q = sample((2, 5, 3, 8)).transpose(1, 2)
    cos, sin = sample((5, 8), seed=1), sample((5, 8), seed=2)
    assert torch.equal(rope(q, cos, sin), rotate(q, cos, sin))
    (leaf,) = _leaves(sample((2, 5, 3, 8)))
    (ref,) = _leaves(leaf)
    out, want = rope(leaf.transpose(1, 2), cos, sin), rotate(ref.transpose(1, 2), cos, sin)
    assert torch.equal(out, want)
    (got,) = torch.autograd.grad(out.square().sum(), [leaf])
    (expected,) = torch.autograd.grad(want.square().sum(), [ref])
    torch.testing.assert_close(got, expected)


def test_fused_rope_of_an_odd_size_is_refused_and_even_sizes_still_run():
    """An odd last dim splits into halves of two sizes, whose concatenation a fusion does not
    hold: the call with it is refused (its sizes do not bind the even trace's halves, and its
    own trace concatenates unequal shapes), and even sizes keep their trace."""
    rope = fused(rotate, interpret=DEVICE == "cpu")
    q, cos, sin = sample((1, 2, 3, 8)), sample((3, 8), seed=1), sample((3, 8), seed=2)
    assert torch.equal(rope(q, cos, sin), rotate(q, cos, sin))
    odd = sample((1, 2, 3, 9)), sample((3, 9), seed=1), sample((3, 9), seed=2)
    with pytest.raises(DefinitionError, match=r"cat of tensors of shapes .*one shape"):
        rope(*odd)
    assert torch.equal(rope(q, cos, sin), rotate(q, cos, sin))


def test_fused_rope_is_one_op_inside_torch_compile_with_dynamic_sizes():
    """Under ``torch.compile`` the function is one op (no graph break with ``fullgraph``), the
    halves are views TorchDynamo takes of the argument, and new sequence lengths and head
    sizes reuse the graph; values and gradients are eager's."""
    rope = fused(rotate, interpret=DEVICE == "cpu")
    q, cos, sin = sample((2, 2, 5, 8)), sample((5, 8), seed=1), sample((5, 8), seed=2)
    rope(q, cos, sin)  # (a first call outside registers the op)

    def attention_input(q, cos, sin):
        return rope(q, cos, sin) * 2

    compiled = torch.compile(attention_input, backend="torchfuse", dynamic=True, fullgraph=True)
    trace_module.OUTSIDE_GRAPH_CALLS = []
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", RuntimeWarning)  # no group may fall back to ATen
            for t, d in [(5, 8), (7, 8), (6, 12)]:
                q, cos, sin = _leaves(sample((2, 2, t, d)), sample((t, d), seed=1), sample((t, d), seed=2))
                ref = _leaves(q, cos, sin)
                out, want = compiled(q, cos, sin), rotate(*ref) * 2
                assert torch.equal(out, want)
                (got,) = torch.autograd.grad(out.sum(), [q])
                (expected,) = torch.autograd.grad(want.sum(), [ref[0]])
                assert torch.equal(got, expected)
        assert trace_module.OUTSIDE_GRAPH_CALLS == []
    finally:
        trace_module.OUTSIDE_GRAPH_CALLS = None
    assert len(rope.fusions) == 1


def test_fused_argument_views_chunk_unbind_select_narrow_and_steps():
    """Each view of an argument (chunk, unbind, select, narrow, a slice with a step, and chains
    with a transpose and a new dim) is an input of the one fusion, one kernel: values are
    eager's bit for bit, and gradients too, each view's added into its argument's."""
    def views(x, y):
        a, b = x.chunk(2, dim=-1)
        first, second = y.unbind(0)
        return (a * b + x[..., ::2] - x.narrow(-1, 1, 3) * first[:, None, :]
                + second.transpose(0, 1)[:, None, :] * x[:, 1, 3:][:, None, :])

    f = fused(views, interpret=DEVICE == "cpu")
    x, y = sample((3, 4, 6)), sample((2, 3, 3), seed=1)
    assert torch.equal(f(x, y), views(x, y))
    assert f.fusion_for(x, y).num_kernels(DEVICE) == 1
    leaves, ref = _leaves(x, y), _leaves(x, y)
    got = torch.autograd.grad(f(*leaves).square().sum(), leaves)
    want = torch.autograd.grad(views(*ref).square().sum(), ref)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w)


def rope_of_float(q, cos, sin):  # (HuggingFace's rotate_half of q.float(), rounded back)
    qf = q.float()
    d = qf.shape[-1] // 2
    return (qf * cos + torch.cat((-qf[..., d:], qf[..., :d]), dim=-1) * sin).to(q.dtype)


def rope_interleaved(q, cos, sin):  # (GPT-J's rotate_every_two: pairs of neighbours)
    rotated = torch.stack((-q[..., 1::2], q[..., ::2]), dim=-1).flatten(-2)
    return q * cos + rotated * sin


@pytest.mark.parametrize("fn, shapes", [
    (rope_of_float, [((2, 3, 5, 8), BF16), ((5, 8), F32), ((5, 8), F32)]),
    (rope_interleaved, [((2, 3, 5, 8), BF16), ((5, 8), BF16), ((5, 8), BF16)]),
    (lambda x, y: (lambda a, b: a * b)(*(x * y).chunk(2, -1)), [((3, 8), F32), ((8,), F32)]),
    (lambda x, w: (x * w)[..., 3], [((4, 8), F16), ((8,), F32)]),  # w's element as a 1-element slice: fp32
    (lambda x, w: (x * w)[..., -1] + 1, [((4, 8), F16), ((8,), F32)]),
    (lambda x, w: (x.sigmoid() * w)[:, 1], [((4, 3, 6), F32), ((3, 6), F32)]),
    (lambda x, w: (x.exp() * w)[:, 1], [((4, 3, 6), F32), ((4, 1, 6), F32)]),  # w broadcast along the dim
    (lambda x: (lambda a, b, c: a * b + c)(*x.tanh().unbind(1)), [((4, 3, 6), F32)]),
    (lambda x, y: (x + y)[:, ::2] * 3, [((4, 9), BF16), ((4, 9), BF16)]),
    (lambda x: (x.float() * 2)[..., 1:][..., ::2].sin(), [((3, 9), F16)]),
], ids=["rope_of_float", "rope_interleaved", "chunk", "select_promotes", "select_last", "select_middle", "select_broadcast", "unbind",
        "step", "chained"])
def test_fused_views_of_elementwise_values_are_views_of_their_arguments(fn, shapes):
    """A slice, ``select`` or ``split`` piece of a value computed elementwise from the
    arguments is computed from the same views of the arguments, and a concatenation read
    through a reshape that merges its dims further (GPT-J's ``stack(...).flatten(-2)``) keeps
    its readers in its kernel: one kernel, eager's values, dtype and shape bit for bit (the
    ops run on the same elements), and eager's gradients."""
    args = [sample(shape, dtype, seed=k) for k, (shape, dtype) in enumerate(shapes)]
    f = fused(fn, interpret=DEVICE == "cpu")
    got, want = f(*args), fn(*args)
    assert got.dtype == want.dtype and got.shape == want.shape and torch.equal(got, want)
    assert f.fusion_for(*args).num_kernels(DEVICE) == 1
    leaves, ref = _leaves(*args), _leaves(*args)
    g = sample(want.shape, want.dtype, seed=9)
    for a, b in zip(torch.autograd.grad(f(*leaves), leaves, g), torch.autograd.grad(fn(*ref), ref, g)):
        torch.testing.assert_close(a, b)


def test_fd_ops_cat_in_a_hand_written_fusion():
    """``fd.ops.cat`` of three tensors of one shape along a middle dim: ``torch.cat``'s values
    in one kernel, the pointwise reader included; tensors of other shapes or dtypes are
    refused with what the fusion takes."""
    with Fusion("cat3", interpret=DEVICE == "cpu") as fd:
        a, b, c = (fd.define_tensor([-1, -1, -1], F32, name=n) for n in "abc")
        w = fd.define_tensor([1, -1, 1], F32, name="w")
        fd.add_output(fd.ops.cat([a, fd.ops.neg(b), c * 2.0], dim=1) * w)
    xs = [sample((2, 3, 4), seed=k) for k in range(3)]
    w = sample((1, 9, 1), seed=4)
    (out,) = fd.execute([*xs, w])
    assert torch.equal(out, torch.cat([xs[0], -xs[1], xs[2] * 2.0], dim=1) * w)
    assert fd.num_kernels(DEVICE) == 1
    with Fusion("unequal") as bad:
        x, y = bad.define_tensor([-1, 4]), bad.define_tensor([-1, 5])
        with pytest.raises(DefinitionError, match="does not have the shape of operand 'tensors\\[0\\]'.*one shape only"):
            bad.ops.cat([x, y], dim=1)
        z = bad.define_tensor([-1, 4], F16)
        with pytest.raises(DefinitionTypeError, match="has dtype torch.float16.*cast them to one dtype"):
            bad.ops.cat([x, z], dim=0)
        bad.add_output(x + 1)


def test_fused_refuses_slices_of_computed_values_and_unequal_concatenations():
    """What a fusion cannot hold is refused at the first call, saying what it takes: a slice
    of a value the function computes other than elementwise from its arguments (after a
    reduction, a concatenation, a random draw), a ``select`` that makes a 0-dim result of
    one, and a concatenation of tensors of different shapes."""
    @fused
    def slice_after_a_reduction(x):
        return (x - x.amax(-1, keepdim=True))[..., :2] + 1

    with pytest.raises(DefinitionError, match=r"x\[a:b\] \(aten.slice.Tensor\) takes a view of a value the function "
                                              "computes.*of the function's arguments only"):
        slice_after_a_reduction(sample((3, 4)))

    @fused
    def chunk_of_a_concatenation(x):
        a, b = torch.cat((x, x * 2), -1).float().chunk(2, -1)
        return a * b

    with pytest.raises(DefinitionError, match=r"chunk or split \(aten.split_with_sizes.default\) takes a view"):
        chunk_of_a_concatenation(sample((3, 4), torch.bfloat16))

    @fused
    def slice_of_dropout(x):
        return torch.nn.functional.dropout(x, 0.5)[..., :2] * 2

    with pytest.raises(DefinitionError, match=r"x\[a:b\] \(aten.slice.Tensor\) takes a view"):
        slice_of_dropout(sample((3, 4)))

    @fused
    def element_of_a_product(x, w):  # (a 0-dim result: its operands' elements would promote as numbers)
        return (x * w)[2]

    with pytest.raises(DefinitionError, match=r"x\[i\] \(aten.select.int\) takes a view"):
        element_of_a_product(sample((8,), F16), sample((8,), seed=1))

    @fused
    def unequal(x):
        return torch.cat((x[..., :1], x[..., 1:]), dim=-1) * 2

    with pytest.raises(DefinitionError, match=r"cat of tensors of shapes \[\[3, 1\], \[3, 3\]\]"):
        unequal(sample((3, 4)))

    @fused
    def returns_a_view(x):
        return x[..., :2]

    with pytest.raises(DefinitionError, match="returns a view of an argument"):
        returns_a_view(sample((3, 4)))


def test_fused_gradients_where_view_sizes_are_functions_of_argument_sizes():
    """The derived backward of a function whose outputs have a view's size (``N - 1``,
    ``D // 2``) or whose arguments are related only through views (``qkv[..., :D]`` with
    ``cos`` of size ``D``): eager's gradients at several sizes, every argument's."""
    def difference(x, w):
        return (x[:, 1:] - x[:, :-1]) * w[:, ::2]

    def qkv_rope(qkv, cos, sin):
        d = cos.shape[-1]
        return rotate(qkv[..., :d], cos, sin) * qkv[..., d:2 * d], qkv[..., 2 * d:] * 2

    for fn, shapes in [(difference, [[(3, 6), (3, 9)], [(4, 9), (4, 15)], [(2, 5), (2, 7)]]),
                       (qkv_rope, [[(2, 5, 3, 24), (3, 8), (3, 8)], [(2, 3, 4, 12), (4, 4), (4, 4)]])]:
        f = fused(fn, interpret=DEVICE == "cpu")
        for shape in shapes:
            args = [sample(s, seed=k) for k, s in enumerate(shape)]
            leaves, ref = _leaves(*args), _leaves(*args)
            out, want = f(*leaves), fn(*ref)
            out, want = (out, want) if isinstance(out, tuple) else ((out,), (want,))
            assert all(torch.equal(o, w) for o, w in zip(out, want))
            g = [sample(o.shape, seed=5 + k) for k, o in enumerate(out)]
            for got, expected in zip(torch.autograd.grad(out, leaves, g), torch.autograd.grad(want, ref, g)):
                torch.testing.assert_close(got, expected)


def test_fused_views_lined_up_by_one_op_are_one_op_inside_torch_compile():
    """Two views whose sizes only the call makes equal (``N - 1`` and ``(W + 1) // 2``), read
    by one op: the trace's guard that they are equal is the fusion's size check, not a
    decision on sizes, so the function is one op under ``fullgraph`` at new sizes, with
    eager's values and gradients."""
    def difference(x, w):
        return (x[:, 1:] - x[:, :-1]) * w[:, ::2]

    f = fused(difference, interpret=DEVICE == "cpu")
    f(sample((3, 6)), sample((3, 9), seed=1))
    assert all(not t.guards and t.exact is None for ts in f.fusions.values() for t in ts)
    compiled = torch.compile(lambda x, w: f(x, w) + 1, backend="torchfuse", dynamic=True, fullgraph=True)
    for n in (6, 8, 11):
        leaves = _leaves(sample((3, n)), sample((3, 2 * n - 3), seed=1))
        ref = _leaves(*leaves)
        out, want = compiled(*leaves), difference(*ref) + 1
        assert torch.equal(out, want)
        for got, expected in zip(torch.autograd.grad(out.sum(), leaves), torch.autograd.grad(want.sum(), ref)):
            torch.testing.assert_close(got, expected)


def test_fused_arguments_whose_sizes_the_function_relates():
    """An argument whose size the trace computes from another's (``x[..., 1:] * y`` makes
    x's last size y's plus one; ``cat((x, y), -1) * w`` makes w's twice x's) is a size of its
    own that each call binds and checks: eager's values and gradients at several sizes, one
    kernel, and a call whose sizes eager rejects raises eager's error with the call's sizes."""
    def shifted(x, y):
        return x[..., 1:] * y

    def concatenated(x, y, w):
        return torch.cat((x, y), -1) * w

    f, g = fused(shifted, interpret=DEVICE == "cpu"), fused(concatenated, interpret=DEVICE == "cpu")
    for n in (6, 9):
        leaves = _leaves(sample((3, n)), sample((3, n - 1), seed=1))
        ref = _leaves(*leaves)
        out, want = f(*leaves), shifted(*ref)
        assert torch.equal(out, want)
        grad = sample(out.shape, seed=2)
        for got, expected in zip(torch.autograd.grad(out, leaves, grad), torch.autograd.grad(want, ref, grad)):
            assert torch.equal(got, expected)
        args = sample((3, n)), sample((3, n), seed=1), sample((2 * n,), seed=2)
        assert torch.equal(g(*args), concatenated(*args))
        assert g.fusion_for(*args).num_kernels(DEVICE) == 1
    with pytest.raises(RuntimeError, match=r"size of tensor a \(5\) must match the size of tensor b \(3\)"):
        f(sample((3, 6)), sample((3, 3), seed=1))


def test_fused_functions_with_conditions_on_sizes_are_one_op_under_fullgraph():
    """A trace whose Python decided on sizes (``chunk``'s piece sizes, a transposed argument's
    view strides, an ``if`` on a size) or that holds for its exact sizes (arguments with gaps)
    is chosen by plain comparisons of sizes, which TorchDynamo traces as guards: once traced
    outside, each is one op under ``fullgraph=True`` with dynamic sizes, with eager's values
    and gradients, on both sides of an ``if``."""
    def swiglu(x):
        gate, up = x.chunk(2, -1)
        return torch.nn.functional.silu(gate) * up

    def halves(gate, up):
        return torch.nn.functional.silu(gate) * up

    def scaled(x):
        y = x.exp()
        if x.shape[-1] > 8:
            y = y * 2
        return y

    llama = lambda b, t, h, d, seed: sample((b, t, h, d), seed=seed).transpose(1, 2)  # [B, H, T, D], dense
    cases = [(swiglu, [lambda: (sample((3, 16)),), lambda: (sample((5, 24), seed=1),)]),
             (halves, [lambda: sample((3, 32)).chunk(2, -1)]),
             (scaled, [lambda: (sample((3, 16)),), lambda: (sample((5, 6), seed=1),)]),
             (rotate, [lambda: (llama(2, 5, 3, 8, 0), sample((5, 8), seed=1), sample((5, 8), seed=2)),
                       lambda: (llama(3, 7, 2, 12, 3), sample((7, 12), seed=4), sample((7, 12), seed=5))])]
    for fn, makers in cases:
        f = fused(fn, interpret=DEVICE == "cpu")
        for make in makers:
            f(*make())  # traced outside first, as for any signature
        compiled = torch.compile(lambda *a: f(*a) + 1, backend="torchfuse", dynamic=True, fullgraph=True)
        for make in makers:
            # leaves with the arguments' strides (chunk's halves have gaps, which the signature keys)
            leaves = [torch.empty_strided(t.shape, t.stride(), device=DEVICE).copy_(t).requires_grad_()
                      for t in make()]
            ref = _leaves(*leaves)
            out, want = compiled(*leaves), fn(*ref) + 1
            assert torch.equal(out, want), fn.__name__
            for got, expected in zip(torch.autograd.grad(out.sum(), leaves), torch.autograd.grad(want.sum(), ref)):
                torch.testing.assert_close(got, expected)
        torch._dynamo.reset()
