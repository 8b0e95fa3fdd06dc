"""Graph rewrites before the IR (:mod:`torchfuse.passes`) and their order (:mod:`torchfuse.pipeline`)."""
from __future__ import annotations

import pytest
import torch

import torchfuse
from test_ops import DEVICE
from torchfuse.config import Tuning
from torchfuse.passes.fx import dense_attention_masks, dense_last_dim


@pytest.mark.parametrize("shape,expand", [((2, 1, 1, 8), (2, 1, 8, 8)), ((2, 1, 1, 8), (2, 3, 8, 8)),
                                          ((1, 8), (8, 8)), ((8,), (4, 8))])
def test_dense_last_dim_keeps_values_and_broadcast_dims(shape, expand):
    torch.manual_seed(0)
    mask = (torch.rand(shape) > 0.3).expand(expand)
    dense = dense_last_dim(mask)
    assert dense.shape == mask.shape and dense.stride(-1) == 1
    assert torch.equal(dense, mask)
    # broadcast leading dims stay broadcast: no copy per head
    for d in range(mask.dim() - 1):
        if mask.stride(d) == 0 and mask.shape[d] != 1:
            assert dense.stride(d) == 0


def test_dense_last_dim_leaves_dense_masks_alone():
    mask = torch.rand(2, 1, 8, 8) > 0.5
    assert dense_last_dim(mask) is mask


@pytest.mark.parametrize("as_kwarg", [True, False])
def test_attention_mask_rewritten_in_captured_graph(as_kwarg):
    """A padding mask broadcast over the key dimension (stride 0, as HuggingFace builds it under
    tracing) is made dense before attention; values equal eager's."""
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 2, 8, 16) for _ in range(3))
    pad = torch.tensor([[True] * 8, [True] * 5 + [False] * 3])
    rewritten = []

    def backend(gm, inputs):
        rewritten.append(dense_attention_masks(gm, devices=("cpu",)))
        return gm

    def f(q, k, v, pad):
        mask = pad[:, None, None, :].expand(2, 1, 8, 8)
        mask = mask.transpose(-1, -2)  # key padding along the last dim's stride 0
        if as_kwarg:
            return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, mask)

    torch._dynamo.reset()
    got = torch.compile(f, backend=backend, fullgraph=True)(q, k, v, pad)
    assert rewritten == [1]
    torch.testing.assert_close(got, f(q, k, v, pad))


def test_pads_of_one_tensor_seen_through_permutes_are_merged():
    """``pad(G)`` and ``pad(G.t().t())`` with the same padding are one copy (the padded
    products pad a gradient once per product otherwise); a pad of a different view, padding
    or value stays. Outputs equal the unmerged graph's."""
    from torch.fx.experimental.proxy_tensor import make_fx

    from torchfuse.passes.aten import merge_duplicate_pads

    aten = torch.ops.aten

    def f(g):
        return (aten.constant_pad_nd(g, [0, 3]), aten.constant_pad_nd(g.t().t(), [0, 3]),
                aten.constant_pad_nd(g.t(), [0, 3]), aten.constant_pad_nd(g, [0, 3], 1.0),
                aten.constant_pad_nd(g, [0, 2]))

    g = torch.randn(4, 5)
    gm = make_fx(f)(g)
    want = gm(g)
    assert merge_duplicate_pads(gm) == 1
    pads = [n for n in gm.graph.nodes if n.target is aten.constant_pad_nd.default]
    assert len(pads) == 4
    for a, b in zip(gm(g), want):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    assert merge_duplicate_pads(gm) == 0


def test_concatenation_of_one_nonempty_tensor_is_a_copy():
    """``cat([empty, k])`` (a key-value cache's first update) becomes ``clone(k)``, contiguous
    as the concatenation is, and the empty tensor goes; a concatenation of two non-empty
    tensors, or one whose empty input promotes the dtype, stays. Outputs equal eager's."""
    from torch.fx.experimental.proxy_tensor import make_fx

    from torchfuse.passes.concat import cat_of_one

    aten = torch.ops.aten

    def f(k, v):
        empty = k.new_zeros(2, 3, 0, 4)
        kt = k.transpose(1, 2)  # a permuted view, as HuggingFace's keys are
        return (aten.cat([empty, kt], 2), aten.cat([kt, torch.zeros(0)], 2), aten.cat([kt, v], 2),
                aten.cat([empty.double(), kt], 2))

    k, v = torch.randn(2, 5, 3, 4), torch.randn(2, 3, 5, 4)
    want = f(k, v)
    gm = make_fx(f, tracing_mode="fake")(k, v)
    assert cat_of_one(gm) == 2
    cats = [n for n in gm.graph.nodes if n.target is aten.cat.default]
    assert len(cats) == 2
    for got, w in zip(gm(k, v), want):
        assert got.dtype == w.dtype and got.stride() == w.stride()
        torch.testing.assert_close(got, w, rtol=0, atol=0)
    assert cat_of_one(gm) == 0


def test_concatenation_of_equal_tensors_is_a_select():
    """``cat`` of two to four tensors of one shape becomes selects over the stacked shape,
    through the reshapes that made its inputs (a split projection's gradients, viewed back
    from heads, and ``unsqueeze`` as ``stack`` makes them), with the concatenation's values,
    shape and strides to the bit (signed zeros, infinities and NaN too); unequal shapes,
    mixed dtypes and more inputs than the limit stay concatenations."""
    from torch.fx.experimental.proxy_tensor import make_fx

    from torchfuse.passes.concat import equal_cats_as_selects

    aten = torch.ops.aten

    def f(q, k, v, w):
        heads = [t.permute(0, 2, 1, 3).contiguous().view(2, 5, 12) for t in (q * 0.5, k, v)]
        stacked = [t.unsqueeze(0) for t in (q, k, v)]
        return (aten.cat(heads, -1), aten.cat(stacked, 0), aten.cat([q, k], 1), aten.cat([q, w], 2),
                aten.cat([q, k.double()], 0), aten.cat([q, k, v, q, k], 3))

    q, k, v = (torch.randn(2, 3, 5, 4) for _ in range(3))
    q[0, 0, 0, :3] = torch.tensor([-0.0, float("inf"), float("nan")])
    w = torch.randn(2, 3, 6, 4)
    want = f(q, k, v, w)
    gm = make_fx(f, tracing_mode="fake")(q, k, v, w)
    assert equal_cats_as_selects(gm, 4) == 3
    left = [n for n in gm.graph.nodes if n.target is aten.cat.default]
    assert len(left) == 3  # unequal shapes, mixed dtypes, five inputs
    # the head views were looked through: the selects stack the heads' tensors themselves
    assert not any(n.target is aten.view.default and n.args[1] == [2, 5, 12] for n in gm.graph.nodes)
    bits = {torch.float32: torch.int32, torch.float64: torch.int64}
    for got, w_ in zip(gm(q, k, v, w), want):
        assert got.dtype == w_.dtype and got.shape == w_.shape and got.stride() == w_.stride()
        assert torch.equal(got.view(bits[got.dtype]), w_.view(bits[w_.dtype]))
    assert equal_cats_as_selects(gm, 4) == 0


def _rotate_half(x):
    d = x.shape[-1] // 2
    return torch.cat((-x[..., d:], x[..., :d]), dim=-1)


def _rope_of_projection(x, w, cos, sin):  # (HuggingFace Llama's: heads of a projection, transposed)
    q = (x @ w).view(2, 5, 3, 8).transpose(1, 2)
    return q * cos + _rotate_half(q) * sin


def _rope_interleaved(q, cos, sin):  # (GPT-J's rotate_every_two)
    return q * cos + torch.stack((-q[..., 1::2], q[..., ::2]), dim=-1).flatten(-2) * sin


@pytest.mark.parametrize("fn, shapes", [
    (_rope_of_projection, [(2, 5, 16), (16, 24), (5, 8), (5, 8)]),
    (_rope_interleaved, [(2, 3, 5, 8), (5, 8), (5, 8)]),
], ids=["projection", "interleaved"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
def test_pointwise_readers_of_a_concatenation_fuse_with_it(fn, shapes, dtype):
    """RoPE's ``q * cos + rotate_half(q) * sin``: the concatenation's readers are applied over
    its stacked shape (the other operands split by views), so the select and the products
    are one fusion group, where the view merging the stacked dims made them two, with the
    concatenation written out between. Values, shapes and strides (the transposed heads'
    layout) equal eager's bit for bit; gradients equal eager's."""
    from torchfuse import backend

    args = [torch.randn(s, device=DEVICE, dtype=dtype) for s in shapes]
    torch._dynamo.reset()
    compiled = torchfuse.compile(fn, dynamic=False)
    got, want = compiled(*args), fn(*args)
    assert got.shape == want.shape and got.stride() == want.stride() and torch.equal(got, want)
    graph = [g for g in backend.RECENT if g.name == "inference"][-1]
    assert len(graph.segmentation.groups) == 1, graph.segmentation.groups
    leaves, ref = [a.clone().requires_grad_() for a in args], [a.clone().requires_grad_() for a in args]
    g = torch.randn_like(want)
    for a, b in zip(torch.autograd.grad(compiled(*leaves), leaves, g), torch.autograd.grad(fn(*ref), ref, g)):
        torch.testing.assert_close(a, b)


def test_summed_scatters_into_zeros_are_a_concatenation():
    """A sum of ``slice_scatter``s into zeros whose pieces tile a dim (the backward of slices
    of one tensor: RoPE's halves) becomes the pieces' concatenation plus 0.0, the sum's values
    to the bit (a negative zero comes out +0.0, as from the sum; infinities and NaN as they
    are), shape and strides, also where each scatter has zeros of its own (a graph traced
    without common-subexpression elimination); a gradient summed first and then added the
    scatters one by one (``x`` also read whole) becomes that sum plus the concatenation plus
    0.0, its values to the bit too (signed zeros on both sides); pieces that leave a gap,
    overlap, an integer sum, a sum with another term between the scatters, or a head of
    another dtype stay."""
    from torch.fx.experimental.proxy_tensor import make_fx

    from torchfuse.passes.concat import summed_scatters_as_cat

    aten = torch.ops.aten

    def f(a, b, c, i, h):
        z = torch.zeros(2, 3, 12)
        three = (aten.slice_scatter(z, a, 2, 8, 12) + aten.slice_scatter(z, b, 2, 0, 4)) + aten.slice_scatter(z, c, 2, 4, 8)
        gap = aten.slice_scatter(z, a, 2, 0, 4) + aten.slice_scatter(z, b, 2, 8, 12)
        zi = torch.zeros(2, 3, 8, dtype=torch.int64)
        ints = aten.slice_scatter(zi, i, 2, 0, 4) + aten.slice_scatter(zi, i, 2, 4, 8)
        own = aten.slice_scatter(torch.zeros(2, 3, 8), a, 2, 4, 8) + aten.slice_scatter(torch.zeros(2, 3, 8), b, 2, 0, 4)
        z8 = torch.zeros(2, 3, 8)
        chain = (h * 2 + aten.slice_scatter(z8, a, 2, 4, 8)) + aten.slice_scatter(torch.zeros(2, 3, 8), b, 2, 0, 4)
        between = ((h + aten.slice_scatter(z8, a, 2, 4, 8)) + c.repeat(1, 1, 2)) + aten.slice_scatter(z8, b, 2, 0, 4)
        mixed = (h.half() + aten.slice_scatter(z8, a, 2, 4, 8)) + aten.slice_scatter(z8, b, 2, 0, 4)
        return three, gap, ints, own, chain, between, mixed

    a, b, c = (torch.randn(2, 3, 4) for _ in range(3))
    a[0, 0, :3] = torch.tensor([-0.0, float("inf"), float("nan")])
    i = torch.randint(-5, 5, (2, 3, 4))
    h = torch.randn(2, 3, 8)
    h[0, 0, :4] = -0.0  # against a's -0.0 (at 4) and b's (at 0, below)
    h[0, 0, 4:6] = torch.tensor([-0.0, 1.0])
    b[0, 0, :2] = torch.tensor([-0.0, 2.0])
    want = f(a, b, c, i, h)
    gm = make_fx(f, tracing_mode="fake")(a, b, c, i, h)
    assert summed_scatters_as_cat(gm) == 3
    assert sum(n.target is aten.slice_scatter.default for n in gm.graph.nodes) == 8  # gap, ints, between, mixed
    for got, w in zip(gm(a, b, c, i, h), want):
        assert got.dtype == w.dtype and got.shape == w.shape and got.stride() == w.stride()
        bits = torch.int32 if w.dtype == torch.float32 else w.dtype
        assert torch.equal(got.view(bits), w.view(bits))


def test_pointwise_values_read_through_slices_are_computed_from_sliced_operands():
    """A pointwise value that only slices and selects read (RoPE's backward slices ``g * sin``)
    becomes the same op of its operands' slices, through a chain of such values: values,
    dtypes, shapes and strides to the bit, a 1-dim operand's select taken as a 1-element slice
    (an fp32 weight then still promotes an fp16 tensor), broadcast operands left whole; a
    value also read whole, or a view of one that is returned, stays."""
    from torch.fx.experimental.proxy_tensor import make_fx

    from torchfuse.passes.concat import views_of_pointwise_values

    aten = torch.ops.aten

    def f(x, w, b, h):
        y = (x * w).exp()  # read by slices only, through a chain
        z = h * w  # fp16 times an fp32 vector: fp32, read by a select only
        kept = x + b
        return y[..., :4] * 2, y[..., 4:] - 1, y[:, 1].neg(), z[..., 2] * 3, kept[..., :2] * 2, kept

    x, h = torch.randn(3, 4, 8), torch.randn(3, 4, 8).half()
    w, b = torch.randn(8), torch.randn(4, 1)
    want = f(x, w, b, h)
    gm = make_fx(f, tracing_mode="fake")(x, w, b, h)
    assert views_of_pointwise_values(gm) == 3  # exp, then x * w beneath it; h * w
    assert sum(n.target is aten.add.Tensor for n in gm.graph.nodes) == 1  # kept: also returned whole
    for got, w_ in zip(gm(x, w, b, h), want):
        assert got.dtype == w_.dtype and got.shape == w_.shape and got.stride() == w_.stride()
        assert torch.equal(got, w_)


def test_concatenation_passes_leave_what_they_must_not_change():
    """Sums of scatters into fp16 zeros of fp32 pieces (the scatter converts each piece, a
    concatenation would promote) and into a fill of -0.0 (which keeps a piece's -0.0) stay
    sums; a slice of a pointwise value read by ``as_strided`` or returned through a view (both
    see its place in its storage) stays a slice: values, dtypes and storage offsets are
    eager's."""
    from torch.fx.experimental.proxy_tensor import make_fx

    from torchfuse.passes.concat import summed_scatters_as_cat, views_of_pointwise_values

    def scatters(a, b):
        half, neg = torch.zeros(2, 8, dtype=torch.float16), torch.full((2, 8), -0.0)
        return (half.slice_scatter(a, 1, 0, 4) + half.slice_scatter(b, 1, 4, 8),
                neg.slice_scatter(a, 1, 0, 4) + neg.slice_scatter(b, 1, 4, 8))

    a = torch.tensor([[-0.0, 1.0, -0.0, 2.0]] * 2)
    want = scatters(a, -a)
    gm = make_fx(scatters, tracing_mode="fake")(a, -a)
    assert summed_scatters_as_cat(gm) == 0
    for got, w in zip(gm(a, -a), want):
        assert got.dtype == w.dtype
        assert torch.equal(got.view(torch.int16 if w.dtype == torch.float16 else torch.int32),
                           w.view(torch.int16 if w.dtype == torch.float16 else torch.int32))

    def views(x):
        return torch.as_strided(x.exp()[2:], (4,), (1,), 0) * 1, x.sin()[1:].unsqueeze(0)

    x = torch.randn(4, 4)
    want = views(x)
    gm = make_fx(views, tracing_mode="fake")(x)
    assert views_of_pointwise_values(gm) == 0
    for got, w in zip(gm(x), want):
        assert torch.equal(got, w) and got.storage_offset() == w.storage_offset()


@pytest.mark.parametrize("form", ["permute_and_direct", "channels_last_after_cat", "channels_last_select"])
def test_concatenation_readers_that_cannot_move_are_left_alone(form):
    """A value read both directly and through a transpose of a square concatenation (moved
    over the stacked shape, they would broadcast wrongly), and a channels-last copy (defined
    for rank 4 only) after a concatenation or read by a select: the passes leave them, with no
    warning, and values equal eager's."""
    import warnings

    def permute_and_direct(a, b):
        c = torch.cat([a, b], dim=1)
        return c * (c + c.t())

    def channels_last_after_cat(a, b):
        return (torch.cat([a, b], 1) * 2).contiguous(memory_format=torch.channels_last) + 1

    def channels_last_select(a, b):
        return a.contiguous(memory_format=torch.channels_last)[:, 0] * b[:, 0]

    fn = {"permute_and_direct": permute_and_direct, "channels_last_after_cat": channels_last_after_cat,
          "channels_last_select": channels_last_select}[form]
    shape = (4, 2) if form == "permute_and_direct" else (2, 3, 4, 4)
    args = [torch.randn(shape, device=DEVICE) for _ in range(2)]
    torch._dynamo.reset()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = torchfuse.compile(fn, dynamic=False)(*args)
    assert not [w for w in caught if "graph pass" in str(w.message)], [str(w.message) for w in caught]
    want = fn(*args)
    assert got.stride() == want.stride() and torch.equal(got, want)


def test_concatenation_with_a_data_dependent_size_is_left_alone():
    """A concatenation of a static tensor and one of data-dependent rows (``x[mask]`` under
    ``capture_dynamic_output_shape_ops``) stays a concatenation without the pass failing (its
    sizes are not compared, which would guard on the unbacked one): a later concatenation of
    equal static tensors in the graph is still made a select, and values equal eager's for
    none, some and all rows selected."""
    from conftest import data_dependent_capture
    from torchfuse import backend

    def f(x, thr):
        y = x[x[:, 0] > thr]
        return torch.cat([x, y], 0) * 2, torch.cat([x, x * 3], 1).exp()

    x = torch.randn(6, 4, device=DEVICE)
    with data_dependent_capture() as caught:
        compiled = torchfuse.compile(f)
        for thr in (0.0, 10.0, -10.0):
            for got, want in zip(compiled(x, thr), f(x, thr)):
                torch.testing.assert_close(got, want, rtol=1e-6, atol=0)
    assert not [w for w in caught if "graph pass" in str(w.message)], [str(w.message) for w in caught]
    graph = [g for g in backend.RECENT if g.name == "inference"][-1]
    assert sum("cat" in str(c.target) for c in graph.segmentation.calls) == 1


def test_split_projection_backward_fuses_its_concatenation():
    """A projection split into query, key and value (GPT-2's attention): through
    ``torchfuse.compile`` with gradients, values and gradients equal eager's, the backward's
    concatenation of the three gradients runs in a fusion group (nothing concatenates on ATen),
    and its kernel loads each gradient only on the lanes of its branch."""
    from torchfuse import backend

    def f(x, w):
        q, k, v = (x @ w).split(8, dim=-1)
        heads = [t.view(2, 6, 2, 4).transpose(1, 2) for t in (q, k, v)]
        a = torch.nn.functional.scaled_dot_product_attention(*heads)
        return a.transpose(1, 2).reshape(2, 6, 8)

    x = torch.randn(2, 6, 8, device=DEVICE, requires_grad=True)
    w = torch.randn(8, 24, device=DEVICE, requires_grad=True)
    torch._dynamo.reset()
    got = torchfuse.compile(f, dynamic=False)(x, w)
    want = f(x, w)
    torch.testing.assert_close(got, want)
    g = torch.randn_like(want)
    gx, gw = torch.autograd.grad(got, (x, w), g)
    ex, ew = torch.autograd.grad(want, (x, w), g)
    torch.testing.assert_close(gx, ex)
    torch.testing.assert_close(gw, ew)
    bwd = [c for c in backend.RECENT if c.name == "backward"][-1]
    assert not any("cat" in str(c.target) for c in bwd.segmentation.calls)
    sources = [p.kernel.source.text for s in bwd.steps if hasattr(s, "plans") for p in s.plans.values()
               if p.kernel is not None and "_where" in p.kernel.source.name]
    assert sources and all("mask=xmask & lanes" in text for text in sources), sources


def test_stacked_tensors_reduced_in_one_kernel():
    """A stack of three computed tensors read by row and column reductions (the selects then sit
    in reduction kernels, whose tiles load every branch): values equal eager's."""
    def f(a, b, c):
        s = torch.stack([a * 2, b, c.neg()], 0)
        return s.sum(1), s.sum(-1), (s * 3).amax(0)

    for shape in [(6, 8), (33, 5)]:
        a, b, c = (torch.randn(*shape, device=DEVICE) for _ in range(3))
        torch._dynamo.reset()
        got = torchfuse.compile(f, dynamic=False)(a, b, c)
        for g, e in zip(got, f(a, b, c)):
            torch.testing.assert_close(g, e)


def test_concatenation_of_one_tensor_in_a_compiled_training_graph():
    """Through ``torchfuse.compile`` with gradients: values and gradients equal eager's, and no
    concatenation is left on ATen in the forward graph."""
    from torchfuse import backend

    def f(x, w):
        k = (x @ w).view(2, 6, 2, 4).transpose(1, 2)
        cache = torch.cat([torch.zeros(2, 2, 0, 4, device=x.device), k], dim=-2)
        return cache * 2, (cache.sin() * k).sum()

    x = torch.randn(12, 8, device=DEVICE, requires_grad=True)
    w = torch.randn(8, 8, device=DEVICE, requires_grad=True)
    torch._dynamo.reset()
    got = torchfuse.compile(f, dynamic=False)(x, w)
    want = f(x, w)
    for g, e in zip(got, want):
        torch.testing.assert_close(g, e)
    gx, gw = torch.autograd.grad(got[1] + got[0].sum(), (x, w))
    ex, ew = torch.autograd.grad(want[1] + want[0].sum(), (x, w))
    torch.testing.assert_close(gx, ex)
    torch.testing.assert_close(gw, ew)
    forward = [g for g in backend.RECENT if g.name == "forward"][-1]
    assert not any("cat" in str(c.target) for c in forward.segmentation.calls)


#: the fused cross-entropy forward on the device the tests run on (on a GPU only by default)
NLL_HERE = Tuning().replace("decompose.nll_by_mask_devices", (torch.device(DEVICE).type,))


# ----------------------------------------------------------------------------- scalars

def test_scalar_read_by_two_groups_is_computed_in_each():
    """A one-element result (``-a / b`` of two 0-d inputs) read at two places that merge one
    after the other is recomputed at each (``segment.duplicate_scalars``) rather than written
    by a one-element kernel of its own; values equal eager's."""
    from torchfuse import backend

    def f(x, a, b):
        s = -(a / b)
        return x * s + 1, x.sum(-1) * s

    x = torch.randn(6, 40, device=DEVICE)
    a, b = torch.tensor(3.0, device=DEVICE), torch.tensor(7.0, device=DEVICE)
    torch._dynamo.reset()
    got = torchfuse.compile(f, dynamic=False)(x, a, b)
    for g, w in zip(got, f(x, a, b)):
        torch.testing.assert_close(g, w, rtol=1e-6, atol=1e-6)
    groups = [g for g in backend.RECENT if g.name == "inference"][-1].segmentation.groups
    assert groups and all(g.domain.sizes for g in groups), [str(g) for g in groups]  # no 0-d kernel


# ----------------------------------------------------------------------------- one-hot picks, log-softmax sums

@pytest.fixture
def rewrites(monkeypatch):
    """Counts of the rewrites :func:`one_hot_picks` and :func:`log_softmax_sums` made in the
    graphs compiled while the test runs, by pass name."""
    from torchfuse.passes import cross_entropy

    made: dict[str, int] = {}
    for name in ("one_hot_picks", "log_softmax_sums"):
        def spy(gm, *args, _real=getattr(cross_entropy, name), _name=name):
            done = _real(gm, *args)
            made[_name] = made.get(_name, 0) + done
            return done
        monkeypatch.setattr(cross_entropy, name, spy)
    return made


def _assert_bitwise_eager(got, want):
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, want.dtype, got.shape, want.shape)
    assert torch.equal(got.isnan(), want.isnan()), (got, want)
    same = ~want.isnan()
    assert torch.equal(got[same], want[same]), (got, want)
    assert torch.equal(got[same].signbit(), want[same].signbit()), (got, want)


# picked values: NaN, infinities, -0.0, a value whose chain gives exactly 0, ordinary values
PICK_V = [float("nan"), float("inf"), -float("inf"), -0.0, 0.0, 1.25, -3.5, 2.0]
PICK_P = [0, 1, 2, 3, 4, 5, 6, -1]  # the last row picks nothing


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("chain", ["shift_round", "scale_divide", "exp_log_neg", "keepdim"])
def test_one_hot_pick_applies_the_pointwise_work_to_the_picked_value(rewrites, chain, dtype):
    """``sum(where(arange(n) == p, h(v), 0), -1)`` becomes ``h`` of the picked ``v``, made once:
    bit for bit the values of the same graph compiled without the rewrite (NaN, infinities, the
    sign of zeros, a row that picks nothing), and eager's, bit for bit where ``h`` is arithmetic
    and casts, within an ulp where it has ``exp`` and ``log`` (the interpreter's differ from
    PyTorch's). The picked value sits at column ``p`` of a row of ordinary numbers."""
    n = 8
    g = torch.Generator().manual_seed(5)
    v = (torch.randn(8, n, generator=g) * 4).to(dtype)
    for row, (value, col) in enumerate(zip(PICK_V, PICK_P)):
        v[row, col % n] = value
    v = v.to(DEVICE)
    p = torch.tensor(PICK_P, device=DEVICE)
    c = torch.tensor([0.5, -1.0, 2.0, 0.0, -0.0, 3.0, 1.0, 4.0], device=DEVICE).to(dtype)[:, None]

    def h(u):
        if chain == "shift_round":  # cross-entropy's picked log-probability
            return (u.float() - c.float() - 0.25).to(dtype).float()
        if chain == "scale_divide":
            return (u * 3 - c) / (c + 2)
        return -torch.log(torch.exp(u.float() - 1.0) + 0.5)

    def fn(v, p):
        hit = torch.arange(n, device=v.device) == p[:, None]
        return torch.where(hit, h(v), 0).sum(-1, keepdim=chain == "keepdim")

    torch._dynamo.reset()
    got = torchfuse.compile(fn, dynamic=False)(v, p)
    assert rewrites.get("one_hot_picks") == 1
    torch._dynamo.reset()
    _assert_bitwise_eager(got, torchfuse.compile(fn, dynamic=False, tuning="graph_passes.one_hot_picks=False")(v, p))
    want = fn(v, p)
    if chain in ("shift_round", "scale_divide"):
        _assert_bitwise_eager(got, want)
    else:
        torch.testing.assert_close(got, want, rtol=1e-6, atol=0, equal_nan=True)


@pytest.mark.parametrize("form", ["reciprocal", "read_twice", "not_one_hot"])
def test_one_hot_pick_leaves_what_it_must_not_move(rewrites, form):
    """Eager's values where the pick must stop: ``1 / v`` stays per element (the sum of
    ``where`` turns a picked ``-0.0`` into ``+0.0``, and ``1 / +0.0`` is ``+inf`` where eager
    has ``-inf``); a chain value that is also returned is not recomputed (no rewrite: the kernel
    computes it for every element anyway); a comparison that is not against ``arange`` is no
    pick (no rewrite)."""
    n = 8
    v = torch.randn(8, n, device=DEVICE)
    v[3, 3] = -0.0
    p = torch.tensor(PICK_P, device=DEVICE)

    def fn(v, p):
        hit = torch.arange(n, device=v.device) == p[:, None]
        if form == "reciprocal":
            return torch.where(hit, 2 / v + 1, 0).sum(-1)
        if form == "read_twice":
            y = v * 2 + 1
            return torch.where(hit, y, 0).sum(-1), y
        return torch.where(v > p[:, None], v * 2, 0).sum(-1)

    torch._dynamo.reset()
    got = torchfuse.compile(fn, dynamic=False)(v, p)
    want = fn(v, p)
    if form == "not_one_hot":  # a sum of many values: the order of the additions differs
        torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-6)
    else:
        for g_, w_ in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)):
            _assert_bitwise_eager(g_, w_)
    if form == "reciprocal":
        assert want[3].item() == -float("inf")
    else:
        assert rewrites.get("one_hot_picks", 0) == 0


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("keepdim", [False, True])
def test_log_softmax_row_sum_is_taken_from_the_shifted_input(rewrites, dtype, keepdim):
    """``log_softmax(x, -1).sum(-1)`` is computed as ``sum(x - max) - n * lse`` rounded once:
    within eager's rounding of eager's value, never further than eager from the fp64 sum of the
    same log-probabilities, with eager's infinities and NaN (a ``-inf`` logit: ``-inf``; a NaN
    or ``+inf`` logit, or a row of ``-inf``: NaN); rows of 1000 classes and of 3."""
    g = torch.Generator().manual_seed(9)
    for n in (1000, 3):
        x = (torch.randn(6, n, generator=g) * 5).to(dtype)
        x[1, 1] = -float("inf")
        x[2, 0] = float("nan")
        x[3, 2] = float("inf")
        x[4] = -float("inf")
        x[5] = x[5] * 1000 if dtype != torch.float16 else x[5] * 100
        x = x.to(DEVICE)
        fn = lambda x: torch.log_softmax(x, -1).sum(-1, keepdim=keepdim)
        torch._dynamo.reset()
        got, want = torchfuse.compile(fn, dynamic=False)(x), fn(x)
        ref = torch.log_softmax(x.double(), -1).sum(-1, keepdim=keepdim)
        assert got.dtype == want.dtype and got.shape == want.shape
        assert torch.equal(got.isnan(), want.isnan()) and torch.equal(got.isinf(), want.isinf()), (got, want)
        assert torch.equal(got[got.isinf()], want[want.isinf()])
        ok = want.isfinite()
        eps = torch.finfo(dtype).eps
        torch.testing.assert_close(got[ok], want[ok], rtol=2 * eps, atol=0)
        err, eager_err = (got[ok].double() - ref[ok]).abs(), (want[ok].double() - ref[ok]).abs()
        assert (err <= eager_err + eps * ref[ok].abs()).all(), (got, want, ref)
    assert rewrites.get("log_softmax_sums") == 2


def test_sum_of_a_log_softmax_over_another_dim_is_kept(rewrites):
    """A log-softmax over dim 0 summed over the last dim is not a row sum of it: left alone,
    eager's values."""
    x = torch.randn(5, 7, device=DEVICE)
    fn = lambda x: torch.log_softmax(x, 0).sum(-1)
    torch._dynamo.reset()
    torch.testing.assert_close(torchfuse.compile(fn, dynamic=False)(x), fn(x), rtol=1e-6, atol=1e-6)
    assert rewrites.get("log_softmax_sums", 0) == 0


@pytest.mark.parametrize("persistent_max", [8192, 1024])
def test_cross_entropy_rewrites_follow_the_row_length(rewrites, persistent_max):
    """Rows of 2048 classes: reduced persistently (the default limit of 8192 elements), the two
    rewrites are not made (slower there on an H200, ``Tuning.graph_passes.picks_max_persistent_row``);
    reduced in a loop (``persistent_max_elements=1024``), both are. The loss equals eager's
    within a bf16 rounding either way."""
    x = (torch.randn(6, 2048) * 3).to(DEVICE, torch.bfloat16)
    t = torch.tensor([5, 2047, 0, -100, 77, 1024], device=DEVICE)
    fn = lambda x, t: torch.nn.functional.cross_entropy(x, t, label_smoothing=0.1, reduction="none")
    torch._dynamo.reset()
    got = torchfuse.compile(fn, dynamic=False, persistent_max_elements=persistent_max, tuning=NLL_HERE)(x, t)
    torch.testing.assert_close(got, fn(x, t), rtol=2 * torch.finfo(torch.bfloat16).eps, atol=1e-6)
    rewritten = 1 if persistent_max < 2048 else 0
    assert (rewrites.get("one_hot_picks", 0), rewrites.get("log_softmax_sums", 0)) == (rewritten, rewritten)


@pytest.mark.parametrize("dtype,n", [(torch.uint8, 300), (torch.int8, 200), (torch.int16, 40000)])
def test_one_hot_pick_with_an_index_narrower_than_the_row(rewrites, dtype, n):
    """An index of a narrow integer type against a row longer than its range: the pick's range
    check compares true values (in int64), as ``arange(n) == p`` does after promotion, so valid
    indices pick their value (a check in the index's own dtype wraps ``n``: 300 is 44 in uint8,
    and every pick counted as out of range gave 0). Eager's values bit for bit."""
    g = torch.Generator().manual_seed(3)
    v = torch.randn(3, n, generator=g).to(DEVICE)
    hi = torch.iinfo(dtype).max
    p = torch.tensor([hi, 100, -1 if dtype.is_signed else 3], dtype=dtype, device=DEVICE)
    fn = lambda v, p: torch.where(torch.arange(n, device=v.device) == p[:, None], v * 2, 0).sum(-1)
    torch._dynamo.reset()
    got = torchfuse.compile(fn, dynamic=False)(v, p)
    _assert_bitwise_eager(got, fn(v, p))
    assert got[0] != 0 and rewrites.get("one_hot_picks") == 1


@pytest.mark.parametrize("dtype,wider", [(torch.bfloat16, torch.float32), (torch.float32, torch.float64)])
def test_log_softmax_sum_into_a_wider_dtype_is_kept(rewrites, dtype, wider):
    """``log_softmax(x).sum(-1, dtype=wider)`` sums the rounded log-probabilities in the wider
    dtype, so the rewrite (which computes in fp32 and rounds once) is not made: the result is
    the wider sum of the rounded log-probabilities."""
    g = torch.Generator().manual_seed(4)
    x = (torch.randn(4, 1000, generator=g) * 3).to(DEVICE, dtype)
    fn = lambda x: torch.log_softmax(x, -1).sum(-1, dtype=wider)
    torch._dynamo.reset()
    got, want = torchfuse.compile(fn, dynamic=False)(x), fn(x)
    assert got.dtype == want.dtype == wider
    # the log-probabilities as PyTorch's decomposition (and its CUDA kernel) rounds them: fp32,
    # then the input's dtype (the CPU's bf16 kernel rounds differently, up to 0.05% off)
    rounded = torch.log_softmax(x.float(), -1).to(dtype).to(wider).sum(-1)
    torch.testing.assert_close(got, rounded, rtol=1e-6, atol=0)
    torch.testing.assert_close(got, want, rtol=1e-3, atol=0)
    assert rewrites.get("log_softmax_sums", 0) == 0


def test_explain_lists_the_cross_entropy_rewrites_with_their_option():
    """``explain`` names both rewrites and the option that turns them off; with
    ``cross_entropy_rewrites=False`` neither is made and the loss is the same within a bf16
    rounding."""
    x = (torch.randn(8, 100) * 3).to(DEVICE, torch.bfloat16)
    t = torch.randint(0, 100, (8,), device=DEVICE)
    fn = lambda x, t: torch.nn.functional.cross_entropy(x, t, label_smoothing=0.1)
    torch._dynamo.reset()
    with torch.no_grad():
        text = torchfuse.explain(fn, x, t, tuning=NLL_HERE).summary()
    assert ("log_softmax_sums x1 (option cross_entropy_rewrites), one_hot_picks x1 (option cross_entropy_rewrites)"
            in text), text
    assert ", 2 graph rewrite(s), " in text.splitlines()[0], text  # the headline counts them
    torch._dynamo.reset()
    with torch.no_grad():
        off = torchfuse.explain(fn, x, t, cross_entropy_rewrites=False, tuning=NLL_HERE).summary()
    assert "one_hot_picks" not in off and "log_softmax_sums" not in off and "graph rewrite" not in off, off
    torch._dynamo.reset()
    a = torchfuse.compile(fn, dynamic=False, tuning=NLL_HERE)(x, t)
    torch._dynamo.reset()
    b = torchfuse.compile(fn, dynamic=False, cross_entropy_rewrites=False, tuning=NLL_HERE)(x, t)
    torch.testing.assert_close(a, b, rtol=2 * torch.finfo(torch.bfloat16).eps, atol=0)
    torch.testing.assert_close(a, fn(x, t), rtol=2 * torch.finfo(torch.bfloat16).eps, atol=0)


# ----------------------------------------------------------------------------- the pipeline's order

def test_run_passes_runs_in_order_counts_and_guards():
    """:func:`torchfuse.pipeline.run_passes`: the passes that apply run in the listed order;
    a guarded pass's rewrites are added to the counts under its name, and its failure warns and
    the rest run; an unguarded pass's failure propagates."""
    from torchfuse import Options
    from torchfuse.pipeline import GraphPass, PassContext, run_passes

    gm = torch.fx.symbolic_trace(lambda x: x + 1)
    order = []

    def make(name, result, applies=True, guarded=True):
        def run(graph_module, options):
            order.append(name)
            if isinstance(result, Exception):
                raise result
            return result
        return GraphPass(name, run, lambda context: applies, guarded)

    counts = {"b": 1}
    passes = (make("a", 2), make("skipped", 5, applies=False), make("b", 3), make("c", ValueError("broken")),
              make("d", 0), make("e", 7, guarded=False))
    with pytest.warns(RuntimeWarning, match="graph pass c failed"):
        run_passes(passes, gm, PassContext(Options(), "forward"), counts)
    assert order == ["a", "b", "c", "d", "e"] and counts == {"a": 2, "b": 4}
    with pytest.raises(ValueError, match="unguarded"):
        run_passes((make("f", ValueError("unguarded"), guarded=False),), gm, PassContext(Options(), "forward"), {})


@pytest.mark.parametrize("options, grad, names", [
    ({}, True, ["dense_attention_masks", "linear_interpolations", "grouped_linears", "channels_last_convolutions"]),
    ({"channels_last_training": False}, True, ["dense_attention_masks", "linear_interpolations", "grouped_linears"]),
    ({}, False, ["dense_attention_masks", "linear_interpolations"]),
    ({"cudagraphs": True}, False, ["dense_attention_masks", "linear_interpolations", "channels_last_convolutions"]),
    ({"freeze": True}, False, ["dense_attention_masks", "linear_interpolations", "grouped_linears",
                               "fold_conv_batchnorm", "conv_bias_epilogues", "channels_last_convolutions"]),
    ({"freeze": True, "channels_last_training": False}, True, ["dense_attention_masks", "linear_interpolations",
                                                               "grouped_linears"]),
])
def test_fx_passes_that_apply(options, grad, names):
    """Which FX-level passes run on a captured graph: freezing's only under ``freeze`` with
    gradients off, channels-last for training graphs, frozen graphs and CUDA-graph inference,
    grouped linear products for training and frozen graphs."""
    from torchfuse import Options
    from torchfuse.pipeline import FX_PASSES, PassContext

    context = PassContext(Options(**options), "captured", grad)
    assert [p.name for p in FX_PASSES if p.applies(context)] == names


def test_aten_passes_that_apply():
    """cuDNN's epilogues before freezing on inference graphs only; gradient views given their
    own storage in backward graphs only; the cross-entropy rewrites
    after merging pads, log-softmax sums first, both off with ``cross_entropy_rewrites=False``."""
    from torchfuse import Options
    from torchfuse.pipeline import ATEN_PASSES, ATEN_PASSES_BEFORE_FREEZING, PassContext, describe

    def names(passes, graph, **options):
        return [p.name for p in passes if p.applies(PassContext(Options(**options), graph))]

    assert names(ATEN_PASSES_BEFORE_FREEZING, "inference") == ["conv_relu_epilogues"]
    assert names(ATEN_PASSES_BEFORE_FREEZING, "forward") == []
    assert names(ATEN_PASSES_BEFORE_FREEZING, "inference", conv_epilogues=False) == []
    assert names(ATEN_PASSES, "backward") == ["resolved_negative_views", "merge_duplicate_pads", "cat_of_one",
                                              "summed_scatters_as_cat", "views_of_pointwise_values", "equal_cats_as_selects",
                                              "scalar_copies_from_device", "separate_gradient_views",
                                              "lifted_scalar_constants", "log_softmax_sums", "one_hot_picks"]
    assert names(ATEN_PASSES, "forward", cross_entropy_rewrites=False) == [
        "resolved_negative_views", "merge_duplicate_pads", "cat_of_one", "summed_scatters_as_cat",
        "views_of_pointwise_values", "equal_cats_as_selects", "scalar_copies_from_device", "lifted_scalar_constants"]
    text = describe()
    assert (text.index("FX level") < text.index("fold_conv_batchnorm") < text.index("AOTAutograd")
            < text.index("conv_relu_epilogues") < text.index("one_hot_picks") < text.index("IR level"))


def test_a_scalar_constant_made_by_the_models_code_is_fused_as_a_fill():
    """``torch.where(mask, torch.tensor(0.0, device=..., dtype=...), min)`` (HuggingFace's
    additive attention mask) runs no module constant and no ``lift_fresh_copy`` on ATen: the
    constant is a fill in the fusion group, and values and gradients are eager's. A constant on
    another device than the graph's inputs stays as it is."""
    from torch.fx.experimental.proxy_tensor import make_fx

    from torchfuse import backend
    from torchfuse.passes.aten import lifted_scalar_constants

    def additive_mask(x, mask):
        bias = torch.where(mask, torch.tensor(0.0, device=mask.device, dtype=x.dtype), torch.finfo(x.dtype).min)
        return (x + bias).softmax(-1)

    for dtype in (torch.float32, torch.bfloat16):
        backend.RECENT.clear()
        x = torch.randn(4, 8, device=DEVICE, dtype=dtype, requires_grad=True)
        mask = torch.rand(4, 8, device=DEVICE) > 0.3
        got = torch.compile(additive_mask, backend="torchfuse")(x, mask)
        (gx,) = torch.autograd.grad(got.float().sum(), [x])
        want = additive_mask(x, mask)
        (ex,) = torch.autograd.grad(want.float().sum(), [x])
        torch.testing.assert_close(got, want)
        torch.testing.assert_close(gx, ex)
        forward = next(g for g in backend.RECENT if g.name == "forward")
        assert [str(n.target) for n in forward.segmentation.calls] == []
        assert len(forward.segmentation.groups) == 1

    # a boolean of the constant with a boolean block; the constant as an operand of training ops
    # (made on the inputs' device: a CPU constant beside CUDA inputs stays as it is, below)
    for fn, grad in ((lambda x: (torch.tensor(2.0, device=x.device) == 0) | (x >= 0), False),
                     (lambda x: torch.xlogy(x, torch.tensor(0.7, dtype=x.dtype, device=x.device)), True),
                     (lambda x: torch.pow(torch.tensor(2.0, dtype=x.dtype, device=x.device), x), True)):
        backend.RECENT.clear()
        x = torch.rand(4, 8, device=DEVICE, dtype=torch.float64, requires_grad=grad)
        got, want = torch.compile(fn, backend="torchfuse")(x), fn(x)
        torch.testing.assert_close(got, want)
        if grad:
            torch.testing.assert_close(torch.autograd.grad(got.sum(), [x]), torch.autograd.grad(want.sum(), [x]))
        assert all(not g.segmentation.calls and g.stats["fallbacks"] == 0 for g in backend.RECENT)

    gm = make_fx(additive_mask)(torch.randn(4, 8), torch.rand(4, 8) > 0.3)
    assert lifted_scalar_constants(gm) == 1
    assert not any(n.op == "get_attr" or n.target is torch.ops.aten.lift_fresh_copy.default for n in gm.graph.nodes)
    x, mask = torch.randn(4, 8), torch.rand(4, 8) > 0.3
    torch.testing.assert_close(gm(x, mask), additive_mask(x, mask), rtol=0, atol=0)
    on_meta = make_fx(lambda x: x + torch.tensor(2.0))(torch.randn(3, device="meta"))
    assert lifted_scalar_constants(on_meta) == 0  # a CPU constant with inputs on another device


def test_a_cpu_constant_copied_into_a_device_tensor_gets_a_device_source():
    """``aten.copy(dst, 0-dim CPU constant)`` into a CUDA tensor (T5's decoder start token
    written into the shifted labels, ``shifted[..., 0] = start``) reads ``aten.full([], value)``
    on the device instead: the copy stays, with its layout, and nothing is copied from host
    memory. CPU destinations, CPU sources that are inputs rather than constants, and sources
    with dims stay as they are. The values the rewrite relies on (a copy from the CPU scalar
    and one from ``full`` of its ``item()``, dtype to dtype) are checked eagerly on the CPU."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.proxy_tensor import make_fx

    from torchfuse.passes.aten import scalar_copies_from_device

    aten = torch.ops.aten

    def shift(ids):  # as TorchDynamo traces it: a lifted constant copied into a strided view
        return aten.unsqueeze.default(aten.copy.default(aten.select.int(ids, 1, 0), torch.tensor(3)), 1)

    with FakeTensorMode():
        ids = torch.empty(4, 8, dtype=torch.int64, device="cuda")
        rows = torch.empty(8, dtype=torch.int64)
        start = torch.empty((), dtype=torch.int64)
    gm = make_fx(shift, tracing_mode="fake")(ids)
    copy = next(n for n in gm.graph.nodes if n.target is aten.copy.default)
    before = copy.meta["val"]
    with before.fake_mode:  # as AOTAutograd runs the passes: the constant is read as a real tensor
        assert scalar_copies_from_device(gm) == 1
    src = copy.args[1]
    assert src.target is aten.full.default and src.args[1] == 3 and src.kwargs["device"].type == "cuda"
    assert src.kwargs["dtype"] == torch.int64
    assert copy.meta["val"].stride() == before.stride() == (8,)  # the copy keeps dst's layout
    assert not any(n.target is aten.lift_fresh_copy.default for n in gm.graph.nodes)
    on_cpu = make_fx(shift)(torch.zeros(4, 8, dtype=torch.int64))
    assert scalar_copies_from_device(on_cpu) == 0
    copy_of = lambda d, s: aten.copy.default(aten.select.int(d, 0, 0), s)  # noqa: E731
    assert scalar_copies_from_device(make_fx(copy_of, tracing_mode="fake")(ids, rows)) == 0  # a source with dims
    assert scalar_copies_from_device(make_fx(copy_of, tracing_mode="fake")(ids, start)) == 0  # an input's value
    values = {torch.float16: 65504.0, torch.bfloat16: -3.3895e38, torch.float32: 1 / 3, torch.float64: 1 / 7,
              torch.int64: 2**53 + 1, torch.int32: -7, torch.bool: True, torch.uint8: 255}
    for src_dtype, value in values.items():
        cpu_scalar = torch.tensor(value, dtype=src_dtype)
        full = aten.full.default([], cpu_scalar.item(), dtype=src_dtype)
        for dst_dtype in values:
            dst = torch.empty(3, 5, dtype=dst_dtype).t()
            torch.testing.assert_close(aten.copy.default(dst, full), aten.copy.default(dst, cpu_scalar), rtol=0,
                                       atol=0, equal_nan=True)


# ----------------------------------------------------------------------------- the joint graph

class PowerIteration(torch.nn.Module):
    """A weight scaled by its largest singular value, estimated by a power iteration whose
    vectors are buffers updated in place under ``no_grad`` (``torch.nn.utils.spectral_norm``'s
    scheme); ``out=`` writes the buffers, ``copy_`` does too."""

    def __init__(self, out: bool):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(4, 5))
        self.out = out
        self.register_buffer("u", torch.nn.functional.normalize(torch.randn(4), dim=0))
        self.register_buffer("v", torch.nn.functional.normalize(torch.randn(5), dim=0))

    def forward(self, x):
        normalize = torch.nn.functional.normalize
        with torch.no_grad():
            if self.out:
                v = normalize(torch.mv(self.w.t(), self.u), dim=0, eps=1e-12, out=self.v)
                u = normalize(torch.mv(self.w, v), dim=0, eps=1e-12, out=self.u)
            else:
                self.v.copy_(normalize(torch.mv(self.w.t(), self.u), dim=0))
                self.u.copy_(normalize(torch.mv(self.w, self.v), dim=0))
                u, v = self.u, self.v
            u, v = u.clone(), v.clone()
        sigma = torch.dot(u, torch.mv(self.w, v))
        return x @ (self.w / sigma).t()


@pytest.mark.parametrize("out", [True, False], ids=["out", "copy_"])
@pytest.mark.parametrize("fuse", [True, False], ids=["fused", "unfused"])
def test_a_buffer_the_forward_writes_is_not_read_again_by_the_backward(out, fuse):
    """The min-cut partitioner recomputed in the backward a vector the forward computed from a
    buffer's old contents, reading the new ones the forward had written (``w.grad`` 0.27 off);
    the values the forward computes from inputs it writes are now saved. Three steps, the
    buffers and gradients against eager's."""
    import copy

    torch.manual_seed(0)
    model = PowerIteration(out).to(DEVICE)
    ref = copy.deepcopy(model)
    compiled = torchfuse.compile(model, fuse=fuse)
    for step in range(3):
        x, r = torch.randn(3, 5, device=DEVICE), torch.randn(3, 4, device=DEVICE)
        (compiled(x) * r).sum().backward()
        (ref(x) * r).sum().backward()
        torch.testing.assert_close(model.w.grad, ref.w.grad, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(model.u, ref.u)
        torch.testing.assert_close(model.v, ref.v)


def test_a_backward_read_of_an_input_the_forward_writes_reads_a_copy():
    """A backward node reading such an input (here through a view) reads a copy of it made at
    the forward's start, which the partitioner saves; forward nodes computing from it are
    marked to be saved, not recomputed."""
    from torch.utils.checkpoint import CheckpointPolicy

    from torchfuse.passes.joint import protect_inputs_written_by_forward

    aten = torch.ops.aten
    g = torch.fx.Graph()
    buf, x, tangent = g.placeholder("primals_1"), g.placeholder("primals_2"), g.placeholder("tangents_1")
    scaled = g.call_function(aten.mul.Tensor, (x, buf))
    new = g.call_function(aten.add.Tensor, (buf, 1.0))
    grad = g.call_function(aten.mul.Tensor, (tangent, g.call_function(aten.t.default, (buf,))))
    g.call_function(aten.copy_.default, (buf, new))
    g.output((scaled, grad))
    joint = torch.fx.GraphModule(torch.nn.Module(), g)
    assert protect_inputs_written_by_forward(joint) == 3
    assert scaled.meta["recompute"] == new.meta["recompute"] == CheckpointPolicy.MUST_SAVE
    (view,) = [a for a in grad.args if a is not tangent]
    assert view.target is aten.t.default and view.args[0].target is aten.clone.default
    assert view.args[0].args[0] is buf and view.args[0].meta["recompute"] == CheckpointPolicy.MUST_SAVE
    b, x_, t_ = torch.randn(3, 3), torch.randn(3, 3), torch.randn(3, 3)
    before = b.clone()
    outs = joint(b, x_, t_)
    torch.testing.assert_close(outs[1], t_ * before.t())
    torch.testing.assert_close(b, before + 1)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["fp16", "bf16"])
def test_a_tanh_gelu_saves_its_16_bit_input_not_an_fp32_intermediate(dtype):
    """GELU's tanh form computes in fp32 through a fused multiply-add, an op the min-cut
    partitioner did not know it could recompute: the forward saved an fp32 intermediate of the
    GELU's shape (twice its input's bytes) for the backward. Written as ``aten.addcmul`` for
    the partitioner, it is recomputed from the 16-bit input as eager's backward is; the
    gradients stay eager's."""
    import torch.nn.functional as F

    torch.manual_seed(0)
    x = torch.randn(64, 32, device=DEVICE).to(dtype).requires_grad_()
    w1 = (torch.randn(32, 96, device=DEVICE) / 6).to(dtype).requires_grad_()
    w2 = (torch.randn(96, 32, device=DEVICE) / 10).to(dtype).requires_grad_()

    def f(x, w1, w2):
        return (F.gelu(x @ w1, approximate="tanh") @ w2).float().square().sum()

    saved = []

    def pack(t):
        saved.append((t.dtype, tuple(t.shape)))
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        loss = torchfuse.compile(f)(x, w1, w2)
    grads = torch.autograd.grad(loss, (x, w1, w2))
    assert saved and (torch.float32, (64, 96)) not in saved, saved
    assert (dtype, (64, 96)) in saved, saved
    expected = torch.autograd.grad(f(x, w1, w2), (x, w1, w2))
    for actual, want in zip(grads, expected):
        torch.testing.assert_close(actual, want, rtol=2e-2, atol=2e-2)
