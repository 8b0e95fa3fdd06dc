"""``linear`` calls that read one input computed as one matrix product
(:func:`torchfuse.passes.fx.grouped_linears`): values and gradients against eager, how many
products the compiled graphs keep, and the calls the rewrite must leave alone."""
from __future__ import annotations

import copy

import pytest
import torch

import torchfuse
from test_ops import DEVICE
from torchfuse.config import Tuning
from test_training_graphs import pool  # noqa: F401  (the stand-in CUDA graph pool)

#: the rewrite on the device the tests run on (on a GPU only by default)
HERE = Tuning().replace("graph_passes.linear_group_devices", (torch.device(DEVICE).type,))
OFF = Tuning().replace("graph_passes.linear_group_devices", ())


def _products(name: str) -> int:
    """Matrix products (``mm``, ``addmm``, ``bmm``) the last compiled graph ``name`` calls."""
    from torchfuse import backend

    graph = [g for g in backend.RECENT if g.name == name][-1]
    return sum(1 for c in graph.segmentation.calls if any(k in str(c.target) for k in ("mm.", "addmm.", "bmm.")))


def _compile(model, tuning, **kw):
    torch._dynamo.reset()
    return torch.compile(model, backend="torchfuse", options={"tuning": tuning, **kw}, dynamic=False)


class Attention(torch.nn.Module):
    """Self-attention with separate query, key and value projections (BERT's, T5's), and an
    MLP whose two input projections read one input (LLaMA's gate and up)."""

    def __init__(self, d=32, heads=4, bias=True):
        super().__init__()
        self.heads = heads
        self.q, self.k, self.v, self.o = (torch.nn.Linear(d, d, bias=bias) for _ in range(4))
        self.gate, self.up = torch.nn.Linear(d, 48, bias=False), torch.nn.Linear(d, 48, bias=False)
        self.down = torch.nn.Linear(48, d, bias=False)
        self.norm = torch.nn.LayerNorm(d)

    def forward(self, x):
        b, s, d = x.shape
        h = self.norm(x)
        q, k, v = (p(h).view(b, s, self.heads, -1).transpose(1, 2) for p in (self.q, self.k, self.v))
        a = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.o(a.transpose(1, 2).reshape(b, s, d))
        h = self.norm(x)
        return x + self.down(torch.nn.functional.silu(self.gate(h)) * self.up(h))


@pytest.mark.parametrize("bias", [True, False])
def test_projections_of_one_input_train_as_eager_with_fewer_products(bias):
    """Two training steps (gradients accumulated over both, then an optimizer step): loss,
    gradients and weights equal eager's; the forward calls 2 products where it called 7
    (query, key and value in one, gate and up in one, the output and down projections), the
    backward 4 where it called 14."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(Attention(bias=bias)).to(DEVICE)
    mine = copy.deepcopy(model)
    x = torch.randn(2, 8, 32, device=DEVICE)
    compiled = _compile(mine, HERE)
    for m, f in ((model, model), (mine, compiled)):
        for _ in range(2):
            f(x).square().mean().backward()
    for p, q in zip(model.parameters(), mine.parameters()):
        assert q.grad.shape == p.grad.shape and q.grad.is_contiguous()
        torch.testing.assert_close(q.grad, p.grad)
    # each parameter's gradient has a storage of its own, as eager's
    storages = {q.grad.untyped_storage().data_ptr() for q in mine.parameters()}
    assert len(storages) == len(list(mine.parameters()))
    assert _products("forward") == 4 and _products("backward") == 8
    # the same model without the rewrite: one product per projection, two in its backward
    _compile(copy.deepcopy(model), OFF)(x).sum().backward()
    assert _products("forward") == 7 and _products("backward") == 14


def test_rewrite_is_counted_in_explain():
    """``explain`` counts the calls folded into another's product under the pass's name, with
    the tuning field that turns it off: key and value into the query's product, up into gate's."""
    torch.manual_seed(0)
    result = torchfuse.explain(Attention().to(DEVICE), torch.randn(2, 8, 32, device=DEVICE),
                               options={"tuning": HERE}, verbose=False)
    assert result.captures[0].rewrites["grouped_linears"] == 3
    assert "grouped_linears x3 (option tuning graph_passes.linear_group_devices)" in result.summary()


def test_returned_projection_keeps_eager_strides():
    """A projection the graph returns (a key cached for decoding, as HuggingFace's caches hold
    them) is a tensor of its own with eager's strides, not a column block of the shared product;
    values and gradients equal eager's."""
    torch.manual_seed(0)
    q, k = torch.nn.Linear(16, 16).to(DEVICE), torch.nn.Linear(16, 24).to(DEVICE)

    def f(x):
        key = k(x).view(2, 5, 4, 6).transpose(1, 2)
        return (q(x).sum(-1, keepdim=True) * k(x)[..., :16]).sum(), key

    x = torch.randn(2, 5, 16, device=DEVICE, requires_grad=True)
    got_loss, got_key = _compile(f, HERE)(x)
    loss, key = f(x)
    assert got_key.shape == key.shape and got_key.stride() == key.stride()
    torch.testing.assert_close(got_key, key)
    torch.testing.assert_close(got_loss, loss)
    torch.testing.assert_close(torch.autograd.grad(got_loss + got_key.sum(), x)[0],
                               torch.autograd.grad(loss + key.sum(), x)[0])


def test_projection_written_in_place_is_left_alone():
    """A projection written in place (a split's parts may not be, under autograd) keeps its own
    product; the others are grouped; values and gradients equal eager's, with no fallback."""
    torch.manual_seed(0)
    lin = [torch.nn.Linear(16, 16).to(DEVICE) for _ in range(3)]

    def f(x):
        a, b, c = (m(x) for m in lin)
        a.mul_(0.5)
        return (a * b + c).sum()

    x = torch.randn(4, 16, device=DEVICE, requires_grad=True)
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        got = _compile(f, HERE)(x)
    want = f(x)
    torch.testing.assert_close(got, want)
    assert _products("forward") == 2
    torch.testing.assert_close(torch.autograd.grad(got, x)[0], torch.autograd.grad(want, x)[0])


@torch.library.custom_op("torchfuse_test::halve_in_place", mutates_args=("w",))
def _halve_in_place(w: torch.Tensor) -> torch.Tensor:
    w.mul_(0.5)
    return w.sum()


@_halve_in_place.register_fake
def _(w):
    return w.new_empty(())


IN_PLACE_FORMS = {
    "foreach": lambda w, x: torch._foreach_mul_([w], 0.5),
    "foreach_input": lambda w, x: torch._foreach_add_([x], 1.0),
    "custom_op": lambda w, x: _halve_in_place(w),
    "method": lambda w, x: w.mul_(0.5),
    "foreach_keyword": lambda w, x: torch._foreach_mul_(self=[w], scalar=0.5),
    "out_tuple": lambda w, x: torch.sort(w * 0.5, out=(w, torch.empty(w.shape, dtype=torch.long, device=w.device))),
}


class _WriteBetween(torch.nn.Module):
    def __init__(self, write: str):
        super().__init__()
        self.write = write
        self.lin = torch.nn.ModuleList(torch.nn.Linear(8, 8) for _ in range(3))
        for m in self.lin:  # the weights as buffers, so that a training graph may write them
            w = m.weight.detach().clone()
            del m.weight
            m.register_buffer("weight", w)

    def forward(self, x):
        a = self.lin[0](x)
        IN_PLACE_FORMS[self.write](self.lin[1].weight, x)
        return a + self.lin[1](x) + self.lin[2](x)


@pytest.mark.parametrize("write", list(IN_PLACE_FORMS))
@pytest.mark.parametrize("grad", [False, True], ids=["frozen", "training"])
def test_a_write_between_projections_keeps_them_apart(write, grad):
    """A projection after an in-place write of its weight or its input reads the written
    values, whatever form the write takes: an in-place foreach op (a list of tensors, by
    position or keyword), a custom op whose schema marks its argument written (it returns
    another tensor), ``out=`` a tuple (``torch.sort``), a method.
    Outputs, the written tensors and gradients equal eager's over three calls, in training
    and in frozen inference (the graphs that group projections)."""
    torch.manual_seed(0)
    ref = _WriteBetween(write).to(DEVICE)
    model = copy.deepcopy(ref)
    compiled = _compile(model, HERE, freeze=not grad)
    for _ in range(3):
        x = torch.randn(4, 8, device=DEVICE)
        x_ref = x.clone()
        with torch.set_grad_enabled(grad):
            got, want = compiled(x), ref(x_ref)
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(x, x_ref)
        torch.testing.assert_close(model.lin[1].weight, ref.lin[1].weight)
        if grad:
            got.square().sum().backward()
            want.square().sum().backward()
            for m, r in zip(model.lin, ref.lin):
                torch.testing.assert_close(m.bias.grad, r.bias.grad, rtol=1e-5, atol=1e-5)


def test_a_user_triton_kernel_is_taken_to_write_every_tensor_it_takes():
    """The write detection on TorchDynamo's node of a user's Triton kernel (which it traces on
    CUDA only; built by hand here): every tensor among the kernel's arguments."""
    from torch._higher_order_ops.triton_kernel_wrap import triton_kernel_wrapper_mutation

    from torchfuse.passes.fx import written_inputs

    graph = torch.fx.Graph()
    a, b = graph.placeholder("a"), graph.placeholder("b")
    call = graph.call_function(triton_kernel_wrapper_mutation, (), {
        "kernel_idx": 0, "constant_args_idx": 0, "grid": [(1, 1, 1)], "tma_descriptor_metadata": {},
        "kwargs": {"p": a, "q": b, "n": 8}})
    assert written_inputs(call) == [a, b]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="TorchDynamo traces a user's Triton kernel on CUDA only")
def test_a_user_triton_kernel_writing_a_projection_keeps_it_apart():
    """Frozen inference: a user's Triton kernel that halves a projection's result in place (a
    kernel may write any tensor it takes) leaves that projection its own product; values equal
    eager's."""
    import triton
    import triton.language as tl

    @triton.jit
    def halve(p, n, BLOCK: tl.constexpr):
        offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(p + offsets, tl.load(p + offsets, mask=offsets < n) * 0.5, mask=offsets < n)

    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.ModuleList(torch.nn.Linear(8, 8) for _ in range(2))

        def forward(self, x):
            a, b = self.lin[0](x), self.lin[1](x)
            halve[(1,)](b, b.numel(), BLOCK=64)
            return a * 2 + b

    torch.manual_seed(0)
    ref = Model().to(DEVICE)
    compiled = _compile(copy.deepcopy(ref), HERE, freeze=True)
    x = torch.randn(4, 8, device=DEVICE)
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), ref(x))


def test_grad_mode_between_projections_keeps_them_apart():
    """Projections on either side of a ``torch.no_grad()`` block are not one product (one of
    them has no gradient); values and the gradient equal eager's."""
    torch.manual_seed(0)
    a, b = torch.nn.Linear(16, 16).to(DEVICE), torch.nn.Linear(16, 16).to(DEVICE)

    def f(x):
        y = a(x)
        with torch.no_grad():
            z = b(x)
        return (y * z).sum()

    x = torch.randn(4, 16, device=DEVICE)
    got = _compile(f, HERE)(x)
    want = f(x)
    torch.testing.assert_close(got, want)
    got.backward()
    ga = a.weight.grad.clone()
    a.weight.grad = None
    want.backward()
    torch.testing.assert_close(ga, a.weight.grad)
    assert b.weight.grad is None


def test_bias_and_no_bias_are_separate_products():
    """Calls with and without a bias, or with weights of another dtype, are not grouped
    together; calls of one kind are."""
    torch.manual_seed(0)
    w = [torch.randn(8, 16, device=DEVICE) for _ in range(4)]
    bias = torch.randn(8, device=DEVICE)
    w64 = torch.randn(8, 16, device=DEVICE, dtype=torch.float64)
    F = torch.nn.functional

    def f(x):
        return (F.linear(x, w[0]) + F.linear(x, w[1]) + F.linear(x, w[2], bias) + F.linear(x, w[3], bias),
                F.linear(x.double(), w64))

    x = torch.randn(4, 16, device=DEVICE)
    for g, e in zip(_compile(f, HERE)(x), f(x)):
        torch.testing.assert_close(g, e)
    assert _products("inference") == 3


def test_autocast_projections_and_dynamic_batch():
    """Under autocast (fp16 on CUDA, bf16 on the CPU) and with a batch size marked dynamic:
    the projections are grouped and values and gradients equal eager's within half precision."""
    torch.manual_seed(0)
    model = Attention().to(DEVICE)
    mine = copy.deepcopy(model)
    dtype = torch.float16 if DEVICE == "cuda" else torch.bfloat16
    torch._dynamo.reset()
    compiled = torch.compile(mine, backend="torchfuse", options={"tuning": HERE})
    for batch in (2, 3):
        x = torch.randn(batch, 8, 32, device=DEVICE)
        torch._dynamo.mark_dynamic(x, 0)
        with torch.autocast(DEVICE, dtype=dtype):
            want, got = model(x), compiled(x)
        torch.testing.assert_close(got, want, atol=2e-2, rtol=2e-2)
        want.float().square().mean().backward()
        got.float().square().mean().backward()
        for p, q in zip(model.parameters(), mine.parameters()):
            torch.testing.assert_close(q.grad, p.grad, atol=2e-2, rtol=2e-2)
        assert _products("forward") == 4


def test_frozen_inference_groups_the_weights_once():
    """With ``freeze=True`` under ``torch.no_grad()``: the weights are concatenated once, with
    the frozen weights (no concatenation runs per call), and outputs equal eager's. Unfrozen
    inference keeps one product per call: each call would copy every grouped weight, which a
    call with few rows (a decoder's step) pays for in full."""
    from torchfuse import backend

    torch.manual_seed(0)
    model = Attention().to(DEVICE).eval()
    x = torch.randn(2, 8, 32, device=DEVICE)
    with torch.no_grad():
        want = model(x)
        calls = {}
        for tuning in (OFF, HERE):
            compiled = _compile(model, tuning, freeze=True)
            torch.testing.assert_close(compiled(x), want)
            torch.testing.assert_close(compiled(x), want)
            graph = [g for g in backend.RECENT if g.name == "inference"][-1]
            calls[tuning] = (_products("inference"), len(graph.segmentation.groups),
                             sum("cat" in str(c.target) for c in graph.segmentation.calls))
        # the same fusion groups with and without the rewrite, no concatenation left per call
        assert calls[HERE] == (4, calls[OFF][1], 0) and calls[OFF][0] == 7
        torch.testing.assert_close(_compile(model, HERE)(x), want)
        assert _products("inference") == 7


@pytest.mark.skipif(torch.cuda.is_available(), reason="the stand-in pool of CPU tests; CUDA runs the real one below")
def test_reduce_overhead_gradients_stay_in_the_pool(pool):
    """Under ``mode="reduce-overhead"`` (the stand-in pool on a CPU): gradients accumulated over
    two micro-batches a step equal eager's, and the backward's gradients stay returned in the
    pool (none is found held at the next step, which would copy them from then on: views of one
    storage were)."""
    from torchfuse import backend

    torch.manual_seed(0)
    eager = Attention()
    model = copy.deepcopy(eager)
    torch._dynamo.reset()
    compiled = torchfuse.compile(model, mode="reduce-overhead", tuning=HERE, interpret=True)
    xs = [torch.randn(2, 8, 32) for _ in range(6)]
    for step in range(3):
        for f in (eager, compiled):
            for x in xs[2 * step: 2 * step + 2]:
                f(x).square().mean().backward()
        for p, q in zip(eager.parameters(), model.parameters()):
            torch.testing.assert_close(q.grad, p.grad)
        eager.zero_grad()
        model.zero_grad()
    bw = [g for g in backend.RECENT if g.name == "backward"][-1]
    assert "gradients returned in the pool" in bw.stats["cudagraph"], bw.stats["cudagraph"]
    assert _products("backward") == 8


@pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA graphs need a GPU")
def test_reduce_overhead_training_replays_on_cuda():
    """Under ``mode="reduce-overhead"`` on a GPU, fp16 autocast with a GradScaler: five steps'
    losses and weights equal eager's within half precision, and the graphs stay captured with
    their gradients in the pool. (SGD, whose step is linear in the gradient: Adam's normalized
    step turns the rounding noise of a gradient that is zero in exact arithmetic, as the key
    projection's bias has, into whole steps of either sign.)"""
    from torchfuse import backend

    torch.manual_seed(0)
    eager = Attention().cuda()
    model = copy.deepcopy(eager)
    torch._dynamo.reset()
    compiled = torchfuse.compile(model, mode="reduce-overhead", tuning=HERE)
    runs = []
    for m, f in ((eager, eager), (model, compiled)):
        opt = torch.optim.SGD(m.parameters(), lr=0.1)
        scaler = torch.amp.GradScaler("cuda")
        torch.manual_seed(1)
        losses = []
        for _ in range(5):
            with torch.autocast("cuda", dtype=torch.float16):
                loss = f(torch.randn(4, 16, 32, device="cuda")).float().square().mean()
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            opt.zero_grad(set_to_none=True)
            losses.append(loss.item())
        runs.append(losses)
    torch.testing.assert_close(runs[1], runs[0], atol=2e-3, rtol=2e-3)
    for p, q in zip(eager.parameters(), model.parameters()):
        torch.testing.assert_close(q, p, atol=2e-3, rtol=2e-3)
    fw, bw = [g for g in backend.RECENT if g.name == "forward"][-1], [g for g in backend.RECENT if g.name == "backward"][-1]
    assert "captured" in fw.stats["cudagraph"] and "not captured" not in fw.stats["cudagraph"], fw.stats["cudagraph"]
    assert "gradients returned in the pool" in bw.stats["cudagraph"], bw.stats["cudagraph"]


# ------------------------------------------------------------------ what the rewrite must keep

D = 16


def _lins(n=3):
    torch.manual_seed(0)
    return [torch.nn.Linear(D, D).to(DEVICE) for _ in range(n)]


def _written_between(kind):
    q, k = (m.requires_grad_(False) for m in _lins(2))  # (the write would fail eager's backward)

    def f(x):
        x = x * 1.0
        a = q(x)
        if kind == "relu_inplace":
            torch.nn.functional.relu(x, inplace=True)
        elif kind == "add_out":
            torch.add(x, 1, out=x)
        else:
            x.mul_(-1)
        return a * k(x)
    return f, (torch.randn(2, 5, D, device=DEVICE),)


def _written_output(kind):
    q, k = _lins(2)

    def f(x):
        a, b = q(x), k(x)
        if kind == "imul":
            a *= 2
        elif kind == "iadd":
            a += 1
        else:
            a = torch.nn.functional.relu(a, inplace=True)
        return a * b
    return f, (torch.randn(3, D, device=DEVICE, requires_grad=True),)


def _layouts(kind):
    q, k = _lins(2)

    def f(x):
        a, b = q(x), k(x)
        if kind == "as_strided":
            return a.as_strided((2, 5, 4), (5 * D, D, 1)) * 1.0 + b[..., :4]
        return (a.view(-1) * b.view(-1)).sum()  # merges dims a column block cannot merge
    return f, (torch.randn(2, 5, D, device=DEVICE, requires_grad=True),)


def _empty_batch(_):
    q, k = _lins(2)
    k2 = torch.nn.Linear(D, 8).to(DEVICE)
    return (lambda x: (q(x), k2(x))), (torch.randn(0, 5, D, device=DEVICE),)


CASES = {"relu_inplace": _written_between, "add_out": _written_between, "mul_": _written_between,
         "imul": _written_output, "iadd": _written_output, "relu_of_output": _written_output,
         "as_strided": _layouts, "view_merging_dims": _layouts, "empty_batch": _empty_batch}


@pytest.mark.parametrize("kind", list(CASES))
def test_writes_strides_and_empty_results_as_eager(kind):
    """The input written in place between the calls (by ``F.relu(..., inplace=True)`` or an
    ``out=`` argument as well as a method), a result written in place through an operator, a
    result read by ``as_strided`` or viewed with its dims merged, an empty batch: values,
    strides of what is returned and input gradients equal eager's, with no fallback."""
    import warnings

    f, inputs = CASES[kind](kind)
    want = f(*[t.detach().clone().requires_grad_(t.requires_grad) for t in inputs])
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        got = _compile(f, HERE)(*inputs)
    for g, w in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)):
        assert g.shape == w.shape and g.stride() == w.stride()
        torch.testing.assert_close(g, w)
    x = inputs[0]
    if x.requires_grad:
        gx = torch.autograd.grad(got.sum(), x)[0]
        xe = x.detach().clone().requires_grad_()
        torch.testing.assert_close(gx, torch.autograd.grad(f(xe).sum(), xe)[0])


def test_gradients_are_none_or_of_their_own_as_eager():
    """A projection read only through ``detach`` gives its weight no gradient (``None``, as
    eager), not a zero block; with two of three projections frozen, the third's gradient is a
    storage of its own size (``torch.save`` writes it alone)."""
    q, k, v = _lins(3)
    x = torch.randn(4, D, device=DEVICE)
    _compile(lambda x: (k(x) * q(x).detach()).sum(), HERE)(x).backward()
    assert q.weight.grad is None and q.bias.grad is None and k.weight.grad is not None
    for m in (q, k):
        m.requires_grad_(False)
    _compile(lambda x: (q(x) * k(x) * v(x)).sum(), HERE)(x).backward()
    want = torch.autograd.grad((q(x) * k(x) * v(x)).sum(), v.weight)[0]
    torch.testing.assert_close(v.weight.grad, want)
    assert v.weight.grad.untyped_storage().nbytes() == v.weight.numel() * v.weight.element_size()
    assert v.bias.grad.untyped_storage().nbytes() == v.bias.numel() * v.bias.element_size()


def test_gradients_viewing_a_whole_product_keep_eager_strides_at_dynamic_sizes():
    """A returned gradient that views all of a product's result (``k``'s of ``q @ k.T``: the
    transpose of a ``bmm``) stays that view at dynamic sizes, as at static ones: eager's
    strides, and no copy."""
    def f(q, k):
        return (q @ k.transpose(-1, -2)).sum()

    torch._dynamo.reset()
    compiled = torch.compile(f, backend="torchfuse")
    for n in (5, 9, 12):  # the second size compiles again with dynamic sizes
        q, k = (torch.randn(2, n, 4, device=DEVICE, requires_grad=True) for _ in range(2))
        want = torch.autograd.grad(f(q, k), (q, k))
        got = torch.autograd.grad(compiled(q, k), (q, k))
        for g, w in zip(got, want):
            torch.testing.assert_close(g, w, rtol=0, atol=0)
            assert g.stride() == w.stride(), (n, g.stride(), w.stride())


def test_a_frozen_projection_beside_a_trainable_one_needs_no_gradient():
    """A frozen ``linear`` (weight and bias need no gradient) reading the same input as a
    trainable one returns a result that needs no gradient, as in eager: a buffer it updates
    stays a leaf over training steps, and a loss of the frozen result alone gives the trainable
    weight no gradient (``None``), so AdamW's weight decay leaves that weight unchanged."""
    q, k = _lins(2)
    k.requires_grad_(False)
    x = torch.randn(4, D, device=DEVICE)

    def f(x, stat):
        y, z = q(x), k(x)
        stat.mul_(0.9).add_(z.mean(0) * 0.1)
        return y.square().sum(), z

    want_stat, stat = torch.zeros(D, device=DEVICE), torch.zeros(D, device=DEVICE)
    compiled = _compile(f, HERE)
    for _ in range(2):
        loss, z = compiled(x, stat)
        assert not z.requires_grad and z.grad_fn is None and stat.grad_fn is None
        loss.backward()
        f(x, want_stat)
    torch.testing.assert_close(stat, want_stat)
    q.zero_grad(set_to_none=True)
    scale = torch.ones(D, device=DEVICE, requires_grad=True)
    (compiled(x, stat)[1] * scale).sum().backward()
    assert q.weight.grad is None and q.bias.grad is None and scale.grad is not None


def test_functorch_transforms_compile_without_a_warning():
    """``torch.func.grad`` over ``functional_call``: its wrapped values have no storage; the
    graph compiles without the rewrite and without a warning, values equal eager's."""
    import warnings

    model = Attention().to(DEVICE)
    params = {k: v.detach() for k, v in model.named_parameters()}
    x = torch.randn(2, 8, 32, device=DEVICE)

    def loss(p, x):
        return torch.func.functional_call(model, p, (x,)).square().mean()

    want = torch.func.grad(loss)(params, x)
    torch._dynamo.reset()
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        got = torch.compile(torch.func.grad(loss), backend="torchfuse", options={"tuning": HERE})(params, x)
    for name in want:
        torch.testing.assert_close(got[name], want[name])


# ------------------------------------------------------------------ random programs

USES = ("plain", "detach", "view_merge", "transpose", "mul_", "as_strided", "returned", "returned_view", "unused")
WRITES = (None, "add_", "relu_inplace", "out")


def _linear_programs():
    """Hypothesis strategy: 2 to 4 ``linear`` calls of one input, each with its own width, bias,
    frozen or trainable weight and use of its result (:data:`USES`), an optional in-place write
    to the input after the first call (:data:`WRITES`), and an input that may need a gradient."""
    from hypothesis import strategies as st

    member = st.fixed_dictionaries({"width": st.sampled_from([4, 6, 8]), "bias": st.booleans(),
                                    "frozen": st.booleans(), "use": st.sampled_from(USES)})
    return st.fixed_dictionaries({
        "k": st.sampled_from([4, 8]), "lead": st.sampled_from([(3,), (2, 3), (0, 3), (2, 1, 3)]),
        "members": st.lists(member, min_size=2, max_size=4), "write": st.sampled_from(WRITES),
        "x_grad": st.booleans(), "seed": st.integers(0, 2 ** 16)})


def _build(spec):
    """The program of ``spec`` and its tensors: ``(f, x, params, returned)``; ``f(x, params)``
    returns the loss (which always needs a gradient) and the results it returns; ``returned``
    names the parameters of the calls whose result is only returned (and ``x``, which reaches
    those results)."""
    g = torch.Generator().manual_seed(spec["seed"])
    members = [dict(m) for m in spec["members"]]
    if spec["write"]:
        members[0]["frozen"] = True  # the write would fail eager's backward of the first call
    x_grad = spec["x_grad"] and spec["write"] != "out"  # (eager's out= takes no tensor that needs one)
    params = {"extra": torch.randn(1, generator=g).to(DEVICE).requires_grad_()}
    for i, m in enumerate(members):
        params[f"w{i}"] = torch.randn(m["width"], spec["k"], generator=g).to(DEVICE).requires_grad_(not m["frozen"])
        if m["bias"]:
            params[f"b{i}"] = torch.randn(m["width"], generator=g).to(DEVICE).requires_grad_(not m["frozen"])
    x = torch.randn(*spec["lead"], spec["k"], generator=g).to(DEVICE).requires_grad_(x_grad)
    F = torch.nn.functional

    def f(x, p):
        x = x * 1.0
        loss, outs = p["extra"].sum() * 0.5, []
        for i, m in enumerate(members):
            y = F.linear(x, p[f"w{i}"], p.get(f"b{i}"))
            if i == 0 and spec["write"] == "add_":
                x.add_(1.0)
            elif i == 0 and spec["write"] == "relu_inplace":
                F.relu(x, inplace=True)
            elif i == 0 and spec["write"] == "out":
                torch.mul(x, -1.0, out=x)
            use = m["use"]
            if use == "plain":
                loss = loss + (y * y).sum()
            elif use == "detach":
                loss = loss + y.detach().sum()
            elif use == "view_merge":
                loss = loss + y.view(-1).sin().sum()
            elif use == "transpose":
                loss = loss + (y.transpose(0, -1) * 2).sum()
            elif use == "mul_":
                y.mul_(2)
                loss = loss + y.cos().sum()
            elif use == "as_strided":
                loss = loss + y.as_strided((1, m["width"]), (m["width"], 1)).sum() if y.numel() else loss
            elif use == "returned":
                outs.append(y)
            elif use == "returned_view":
                outs.append(y.unsqueeze(0).transpose(0, 1))
        return (loss, *outs)
    returned = {f"{kind}{i}" for i, m in enumerate(members) if m["use"] in ("returned", "returned_view")
                for kind in "wb"}
    if returned:
        returned.add("x")
    return f, x, params, returned


def _check_linear_program(spec, tuning=HERE):
    import warnings

    f, x, params, returned = _build(spec)
    names = [n for n, t in (("x", x), *params.items()) if t.requires_grad]
    leaves = [x if n == "x" else params[n] for n in names]
    want = f(x, params)
    want_grads = torch.autograd.grad(want[0], leaves, allow_unused=True)
    torch._dynamo.reset()
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        got = torch.compile(f, backend="torchfuse", options={"tuning": tuning}, dynamic=False)(x, params)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        # (a dim of size 1 has any stride: AOTAutograd rebuilds returned views with its own)
        assert g.shape == w.shape and all(a == b for a, b, n in zip(g.stride(), w.stride(), w.shape) if n > 1)
        assert g.requires_grad == w.requires_grad
        torch.testing.assert_close(g, w)
    got_grads = torch.autograd.grad(got[0], leaves, allow_unused=True)
    for name, g, w in zip(names, got_grads, want_grads):
        if w is None and name in returned and g is not None:
            # a result only returned gets a zero gradient from AOTAutograd (docs/semantics.md)
            assert not g.any()
            continue
        assert (g is None) == (w is None), (name, g, w)
        if g is not None:
            torch.testing.assert_close(g, w)


def test_random_programs_of_grouped_linears_equal_eager(pytestconfig):
    """Random programs of linear calls of one input (:func:`_linear_programs`): results, their
    strides, the loss and which inputs get a gradient and its value equal eager's, with no
    fallback."""
    from test_fuzz import _fuzz

    def check(spec):
        _check_linear_program(spec)

    _fuzz(pytestconfig, max(12, pytestconfig.getoption("fuzz_examples") // 8), check, _linear_programs())
