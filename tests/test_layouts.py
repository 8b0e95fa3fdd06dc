"""Memory layouts: non-contiguous, transposed, expanded, channels-last and offset inputs,
size-0 and size-1 dims, broadcasting, views of results and in-place updates. Every test
compares values with eager, requires the ops fused, and checks that each output has eager's
strides (so code after the compiled function sees the same layout).
"""
from __future__ import annotations

import pytest
import torch

import torchfuse

from test_ops import (BOOL, F16, F32, I32, assert_all_fused, assert_matches, fused_ops, make_sample,
                      run_compiled, run_graph)

pytestmark = pytest.mark.filterwarnings("ignore:.*encountered in:RuntimeWarning")


def rand(*shape, seed=0, dtype=F32):
    return make_sample(dtype, seed, shape=shape, specials=False)


def outputs(x):
    return x if isinstance(x, (tuple, list)) else (x,)


def strides(t: torch.Tensor) -> tuple:
    """The strides of ``t``'s dims longer than 1. A size-1 dim's stride never addresses
    memory, and PyTorch's meta functions (which lay out every ``torch.compile`` backend's
    outputs) pick other values there than eager kernels: (2, 3, 1, 1) channels-last gives
    strides (3, 1, 3, 3) under ``aot_eager`` too, (3, 1, 1, 1) in eager."""
    return tuple(st for st, n in zip(t.stride(), t.shape) if n > 1)


def check_layout(fn, *args, groups=None, **options):
    """Values, dtypes and strides of every output equal eager's; everything fused (a program
    whose results are all empty may have nothing to compute: no compiled graph then)."""
    expected = fn(*args)
    actual, graphs = run_compiled(fn, *args, **options)
    assert_matches(actual, expected)
    for a, e in zip(outputs(actual), outputs(expected)):
        assert strides(a) == strides(e), (a.stride(), e.stride())
    if graphs or any(e.numel() for e in outputs(expected)):
        assert_all_fused(graphs, groups=groups)
    return graphs


def _overlapping():
    base = rand(40, seed=9)
    return base.as_strided((5, 6), (3, 1))  # rows overlap in memory


LAYOUTS = {
    "contiguous": lambda: rand(6, 10),
    "transposed": lambda: rand(10, 6).t(),
    "strided_slice": lambda: rand(6, 20)[:, ::2],
    "storage_offset": lambda: rand(8, 13)[2:, 3:],
    "expanded_rows": lambda: rand(1, 10).expand(6, 10),
    "expanded_cols": lambda: rand(6, 1).expand(6, 10),
    "overlapping": _overlapping,
    "size_one_dims": lambda: rand(1, 10).t().contiguous().t(),
    "zero_size": lambda: rand(0, 10),
    "zero_size_transposed": lambda: rand(10, 0).t(),
}


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_pointwise_input_layouts(layout):
    """A pointwise chain over an input of each layout, with a contiguous partner operand."""
    a = LAYOUTS[layout]()
    b = rand(*a.shape, seed=1)
    check_layout(lambda a, b: ((a * b + 1).sin(), torch.where(a > 0, a, b) * 2), a, b)


ND_LAYOUTS = {
    "channels_last": lambda: rand(2, 3, 4, 5).to(memory_format=torch.channels_last),
    "channels_last_3d": lambda: rand(2, 3, 2, 3, 4).to(memory_format=torch.channels_last_3d),
    "permuted": lambda: rand(4, 5, 3).permute(2, 0, 1),
    "size_one_middle": lambda: rand(3, 1, 5),
    "channels_last_size_one": lambda: rand(2, 3, 1, 1).to(memory_format=torch.channels_last),
    "sliced_3d": lambda: rand(4, 6, 10)[1:, ::2, 3:],
}


@pytest.mark.parametrize("layout", list(ND_LAYOUTS))
def test_nd_input_layouts(layout):
    """Rank-3 to rank-5 inputs: the output takes eager's layout (channels-last stays
    channels-last, permutations are preserved), mixed with a contiguous operand."""
    a = ND_LAYOUTS[layout]()
    b = rand(*a.shape, seed=2)
    check_layout(lambda a, b: (a.sigmoid() * 2, a * b, a.abs() + b.t() if a.dim() == 2 else a - b), a, b)


BROADCASTS = {
    "row_and_column": ((4, 1), (1, 6)),
    "vector_and_matrix": ((6,), (4, 6)),
    "rank_three": ((3, 1, 5), (4, 1)),
    "scalar_tensor": ((), (4, 6)),
    "both_zero_dim": ((), ()),
    "zero_size_broadcast": ((0, 1), (1, 6)),
}


@pytest.mark.parametrize("shapes", list(BROADCASTS.values()), ids=list(BROADCASTS))
def test_broadcasting(shapes):
    """Operands of different shapes broadcast as in eager, inside one group."""
    sa, sb = shapes
    a, b = rand(*sa, seed=3), rand(*sb, seed=4)
    check_layout(lambda a, b: ((a + b) * a, torch.maximum(a, b) - 1), a, b)


REDUCTION_LAYOUTS = {
    "transposed_inner": (lambda: rand(12, 5).t(), lambda x: (x.sum(1), x.amax(1), *torch.var_mean(x, 1))),
    "transposed_outer": (lambda: rand(12, 5).t(), lambda x: (x.sum(0), x.argmax(0))),
    "channels_last_stats": (lambda: rand(2, 6, 3, 4).to(memory_format=torch.channels_last),
                            lambda x: torch.var_mean(x, (0, 2, 3), keepdim=True)),
    "channels_last_softmax": (lambda: rand(2, 6, 3, 4).to(memory_format=torch.channels_last),
                              lambda x: torch.softmax(x, 1)),
    "expanded": (lambda: rand(5, 1).expand(5, 7), lambda x: (x.sum(1), x.sum(0), x.argmax(1))),
    "storage_offset": (lambda: rand(9, 11)[3:, 2:], lambda x: (x.mean(1), x.amin(0))),
    "strided": (lambda: rand(6, 24)[:, ::3], lambda x: (x.sum(1, keepdim=True), torch.log_softmax(x, 1))),
    "permuted_multi_dim": (lambda: rand(4, 5, 6).permute(1, 2, 0), lambda x: (x.sum((0, 2)), x.amax((1, 2)))),
}


@pytest.mark.parametrize("case", list(REDUCTION_LAYOUTS))
def test_reduction_input_layouts(case):
    """Reductions read non-contiguous, channels-last and expanded inputs and write eager's
    output layout."""
    make, fn = REDUCTION_LAYOUTS[case]
    check_layout(fn, make())


RESULT_VIEWS = {
    "transpose": lambda a: (a * 2).t(),
    "view": lambda a: (a + 1).view(2, 30),
    "permute_3d": lambda a: (a.sin()).view(6, 5, 2).permute(2, 0, 1),
    "unsqueeze_expand": lambda a: (a - 1).unsqueeze(0).expand(3, 6, 10),
    "result_and_its_view": lambda a: ((a * 3), (a * 3)[:, 1:]),
    "input_returned": lambda a: (a, a.exp()),
    "diagonal": lambda a: (a * 2).diagonal(),
}


@pytest.mark.parametrize("case", list(RESULT_VIEWS))
def test_views_of_results(case):
    """A view of a fused result returned from the graph is a view with eager's strides."""
    check_layout(RESULT_VIEWS[case], rand(6, 10, seed=5))


def test_layout_changing_copies():
    """contiguous(), memory_format conversions and copy_ (with a dtype change and a broadcast)
    write the layout eager writes."""
    t, x4 = rand(5, 4).t(), rand(2, 3, 4, 5, seed=1)
    cl = rand(2, 3, 4, 5, seed=2).to(memory_format=torch.channels_last)
    half, row = make_sample(F16, 3, shape=(3, 4)), rand(4, seed=4)

    def fn(t, x4, cl, half, row):
        copied = torch.empty_like(half)
        copied.copy_(x4[0, :, 0, :4] * 100)
        broadcast = torch.empty(3, 4, device=row.device)
        broadcast.copy_(row)
        channels_last = torch.channels_last
        return (t.contiguous(), x4.to(memory_format=channels_last), (x4 + 1).clone(memory_format=channels_last),
                cl.contiguous(), x4.to(F16, memory_format=channels_last), copied, broadcast)

    graphs = check_layout(fn, t, x4, cl, half, row)
    found = {op for g in fused_ops(graphs) for op in g}
    assert {"clone", "cast", "copy"} <= found, found


def test_layout_ops_inside_groups():
    """permute, expand, unsqueeze, squeeze, size-1 reshapes and alias only relabel dims:
    each sits inside the group of its neighbours."""
    x, col, row = rand(4, 6), rand(4, seed=1), rand(1, 4, 6, seed=2)
    fn = lambda x, col, row: (x.permute(1, 0).exp() + 1, col.unsqueeze(1).expand(4, 6) * x,
                              (row * 2).squeeze(0) + x, (x * 2).reshape(4, 1, 6).cos(),
                              torch.ops.aten.alias(x * 3) - 1)
    graphs = check_layout(fn, x, col, row)
    found = {op for g in fused_ops(graphs) for op in g}
    assert {"permute", "expand", "unsqueeze", "squeeze", "reshape", "alias"} <= found, found


def test_broadcast_in_dim_inside_group():
    """``prims.broadcast_in_dim`` (from PyTorch's reference decompositions) fuses like expand;
    compiled from the raw ATen graph, since AOTAutograd rejects it at the user level."""
    v, x = rand(6, seed=1), rand(4, 6)
    fn = lambda v, x: (torch.ops.prims.broadcast_in_dim(v, [4, 6], [1]) * x + 1,)
    actual, graphs = run_graph(fn, v, x)
    assert_matches(actual, (v.expand(4, 6) * x + 1,))
    assert_all_fused(graphs, groups=1)
    assert "broadcast_in_dim" in fused_ops(graphs)[0]


def test_constants_inside_groups():
    """full, full_like and scalar_tensor constants are generated in the kernel."""
    x = rand(4, 6)
    i = make_sample(I32, 3, shape=(4, 6))
    fn = lambda x, i: (x + torch.full((4, 6), 2.5, device=x.device), x * torch.full_like(x, 3.0),
                       i + torch.ones_like(i), torch.where(x > 0, x, 0.0),
                       torch.maximum(x, torch.zeros(6, device=x.device)))
    graphs = check_layout(fn, x, i)
    found = {op for g in fused_ops(graphs) for op in g}
    assert {"full", "full_like", "scalar_tensor"} <= found, found


def test_arange_inside_groups():
    """An integer arange is computed from the loop index inside the kernel (no ATen call, no
    load): along the inner or the outer dim of a pointwise group over a transposed input,
    with a start and a step, as int32, alone, and read by persistent, looped and split
    reductions (whose reduced index starts at each loop step's or chunk's offset)."""
    x, i, y = rand(4, 6), make_sample(I32, 4, shape=(4, 6)), make_sample(I32, 5, shape=(10000,))
    dev = x.device
    fn = lambda x, i, y: (x.t() + torch.arange(3, 15, 2, device=dev)[:, None],
                          x * torch.arange(4, device=dev)[:, None] + torch.arange(6, device=dev),
                          i + torch.arange(-2, 4, dtype=torch.int32, device=dev),
                          torch.arange(-4, 8, 3, device=dev),
                          (x * torch.arange(6, device=dev)).sum(1),
                          (y * torch.arange(10000, device=dev)).sum())
    graphs = check_layout(fn, x, i, y)
    found = [op for g in fused_ops(graphs) for op in g]
    assert found.count("arange") == 7, found
    from test_ops import schedulers_used
    assert "reduction.split" in schedulers_used(graphs)
    loop = lambda x: ((x * torch.arange(300, 0, -1, device=x.device)).sum(1), (x * 2).amax(1))
    graphs = check_layout(loop, rand(6, 300, seed=6), persistent_max_elements=64)
    assert "reduction.loop" in schedulers_used(graphs)


def test_float_arange_runs_through_aten():
    """A float arange (whose rounding of ``start + i * step`` is PyTorch's to define) stays on
    ATen, with its reason."""
    from test_ops import aten_calls

    x = rand(4, 6)
    fn = lambda x: (x + torch.arange(0.5, 6.5, device=x.device), x * torch.arange(6, dtype=x.dtype, device=x.device))
    actual, graphs = run_compiled(fn, x)
    assert_matches(actual, fn(x))
    reasons = sorted(c.reason for c in aten_calls(graphs))
    assert reasons == ["arange does not support dtype torch.float32", "symbolic or non-integer start or step"], reasons


def test_new_layout_on_second_call():
    """The same compiled function called with a contiguous, then a transposed, then a
    channels-last input gives eager's values and layout each time."""
    import torchfuse
    from torchfuse import backend

    fn = lambda x: (x * 2 + 1).relu()
    compiled = torchfuse.compile(fn, dynamic=False)
    before = list(backend.RECENT)
    for x in (rand(2, 3, 4, 5), rand(2, 3, 5, 4, seed=1).transpose(2, 3),
              rand(2, 3, 4, 5, seed=2).to(memory_format=torch.channels_last)):
        out = compiled(x)
        assert_matches(out, fn(x))
        assert strides(out) == strides(fn(x))
    graphs = [g for g in backend.RECENT if all(g is not b for b in before)]
    assert graphs and all(cg.stats["fallbacks"] == 0 for cg in graphs)


def test_inplace_updates_of_inputs():
    """In-place ops on an input and on a strided view of an input update it as eager does."""
    x, y = rand(4, 6), rand(4, 12, seed=1)

    def fn(x, y):
        x.mul_(2).add_(1)
        y[:, ::2].sub_(x)
        return x.sin()

    ex, ey = x.clone(), y.clone()
    expected = fn(ex, ey)
    ax, ay = x.clone(), y.clone()
    actual, graphs = run_compiled(fn, ax, ay)
    assert_matches((actual, ax, ay), (expected, ex, ey))
    assert_all_fused(graphs)


@pytest.mark.parametrize("shape", [(2, 3, 0, 5), (0, 3, 4, 5)], ids=["empty_spatial", "empty_batch"])
def test_empty_channels_last_results_keep_eagers_strides(shape):
    """Empty channels-last results: a pointwise chain and a centring by the per-channel mean.
    Fake tensors give ``x * 2 + 1`` of a (2, 3, 0, 5) channels-last tensor the strides
    (15, 5, 5, 1), where eager's are (0, 1, 15, 3); ops with empty results run on ATen."""
    x = rand(*shape).to(memory_format=torch.channels_last)
    check_layout(lambda x: (x * 2 + 1, x - x.mean((0, 2, 3), keepdim=True)), x)


@pytest.mark.parametrize("dtype", [F16, BOOL, I32], ids=str)
def test_zero_and_one_sized_outputs_of_each_dtype(dtype):
    """Empty and single-element results of mixed-dtype chains."""
    a, b = make_sample(dtype, 5, shape=(0, 3)), make_sample(dtype, 6, shape=(1, 1))
    fn = lambda a, b: (a.to(F32) * 2, (b.to(F32) + 1).sum(1), torch.where(b.to(BOOL), 1.0, 2.0))
    check_layout(fn, a, b)


ACTIVATIONS = {"elu": torch.nn.functional.elu, "celu": torch.nn.functional.celu, "selu": torch.nn.functional.selu,
               "softplus": torch.nn.functional.softplus, "hardtanh": torch.nn.functional.hardtanh,
               "relu6": torch.nn.functional.relu6, "hardsigmoid": torch.nn.functional.hardsigmoid,
               "hardswish": torch.nn.functional.hardswish}


@pytest.mark.parametrize("name", sorted(ACTIVATIONS))
def test_activation_gradients_are_laid_out_as_their_incoming_gradient(name):
    """These activations' gradients take ``grad_output``'s layout, as ATen's kernels do (PyTorch's
    decompositions end in a ``where`` over a mask of the forward's input and took its layout):
    ``k``'s gradient through ``act(k).transpose(1, 2) @ v`` is transposed as eager's, and the
    relayout is fused into the gradient's kernel (no copy on ATen)."""
    from torchfuse import backend

    act = ACTIVATIONS[name]

    def f(k, v):
        return torch.bmm(act(k).transpose(1, 2), v).sum()

    k, v = rand(2, 8, 4, seed=1).requires_grad_(), rand(2, 8, 4, seed=2)
    (want,) = torch.autograd.grad(f(k, v), k)
    before = list(backend.RECENT)
    (got,) = torch.autograd.grad(torchfuse.compile(f, dynamic=False)(k, v), k)
    graphs = [g for g in backend.RECENT if all(g is not b for b in before)]
    assert got.stride() == want.stride()
    assert_matches(got, want)
    calls = [str(c.target) for g in graphs for c in g.segmentation.calls]
    assert graphs and not any("copy_strided" in c for c in calls), calls


def test_a_lerp_relaid_out_to_eagers_strides_is_fused():
    """``lerp`` of a contiguous and a transposed tensor: its formula's result is copied to the
    strides eager's kernel gives (``prims.copy_strided``), now a fused copy, not an ATen call."""
    def f(a, b):
        return torch.lerp(a, b, 0.7)

    graphs = check_layout(f, rand(6, 4), rand(4, 6, seed=3).t())
    assert not any("copy_strided" in str(c.target) for g in graphs for c in g.segmentation.calls)


@pytest.mark.parametrize("shape,fmt,shifts,dims", [
    ((2, 4, 8, 8), torch.channels_last, -2, 2),                    # Swin's cyclic shift on NCHW
    ((2, 4, 8, 8), torch.channels_last, (1, -3), (2, 3)),
    ((2, 4, 8, 8), torch.channels_last, 8, 3),                     # a whole turn: contiguous in eager
    ((2, 4, 1, 8), torch.channels_last, (2, 2), (-2, -1)),
    ((2, 4, 3, 4, 4), torch.channels_last_3d, 1, 2),
    ((2, 4, 8, 8), torch.channels_last, 3, None),                  # flattened: contiguous
], ids=["cl-one-dim", "cl-two-dims", "cl-whole-turn", "cl-size-1", "cl3d", "cl-flat"])
def test_roll_keeps_eagers_memory_format(shape, fmt, shifts, dims):
    """``torch.roll`` of a channels-last tensor: eager's CPU kernel (a ``cat`` of two slices)
    returns it channels-last, where PyTorch's decomposition (``index_select``) is contiguous."""
    x = rand(*shape).contiguous(memory_format=fmt)

    def fn(t):
        return torch.roll(t * 2, shifts, dims) + 1

    expected = fn(x)
    actual, _ = run_compiled(fn, x)
    assert_matches(actual, expected)
    assert actual.stride() == expected.stride(), (actual.stride(), expected.stride())
