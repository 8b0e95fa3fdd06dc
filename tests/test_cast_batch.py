"""Casts of graph inputs (autocast's weight casts) run as one multi-tensor copy
(``torchfuse.runtime.executor.CastBatch``), with eager's values."""
from __future__ import annotations

import pytest
import torch

import torchfuse
from torchfuse import backend
from torchfuse.runtime.executor import CastBatch
from torchfuse.segment import BATCHED_CAST

from test_ops import DEVICE

#: bf16 matrix products: eager and compiled call the same library, which may still pick
#: another algorithm for another call; one bf16 rounding step apart at most
BF16_TOL = dict(rtol=1.6e-2, atol=1e-5)


def _mlp(x, w1, b1, w2):
    h = torch.relu(x.to(torch.bfloat16) @ w1.to(torch.bfloat16) + b1.to(torch.bfloat16))
    return (h @ w2.to(torch.bfloat16)).float()


@pytest.mark.parametrize("dynamic", [False, True])
def test_input_casts_feeding_matmuls_are_batched(dynamic):
    torch.manual_seed(0)
    w1, b1, w2 = torch.randn(16, 32, device=DEVICE), torch.randn(32, device=DEVICE), torch.randn(32, 4, device=DEVICE)
    compiled = torchfuse.compile(_mlp, dynamic=dynamic)
    for batch in (8, 5):
        x = torch.randn(batch, 16, device=DEVICE)
        torch.testing.assert_close(compiled(x, w1, b1, w2), _mlp(x, w1, b1, w2), **BF16_TOL)
    g = backend.RECENT[-1]
    batches = [r for r in g.runners if isinstance(r, CastBatch)]
    assert len(batches) == 1 and len(batches[0].src) == 3
    assert sum(n.reason == BATCHED_CAST for n in g.segmentation.calls) == 3


def test_autocast_training_weight_casts_are_batched():
    """Under autocast a linear layer's weight and bias are cast each step; gradients are the
    same as eager's."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 4)).to(DEVICE)
    ref = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 4)).to(DEVICE)
    ref.load_state_dict(model.state_dict())
    x = torch.randn(8, 16, device=DEVICE)
    compiled = torchfuse.compile(model, dynamic=False)
    for m in (compiled, ref):
        with torch.autocast(DEVICE, torch.bfloat16):
            m(x).float().square().mean().backward()
    for p, q in zip(model.parameters(), ref.parameters()):
        torch.testing.assert_close(p.grad, q.grad, **BF16_TOL)
    fw = [g for g in backend.RECENT if g.name == "forward"][-1]
    assert any(isinstance(r, CastBatch) for r in fw.runners)


def test_a_single_cast_or_a_returned_cast_stays_fused():
    """One cast alone gains nothing from batching, and a cast the graph returns is its output:
    both stay fusion groups."""
    x, y = torch.randn(8, 16, device=DEVICE), torch.randn(16, 4, device=DEVICE)
    compiled = torchfuse.compile(lambda x, y: (x.to(torch.bfloat16), x.to(torch.bfloat16) @ y.to(torch.bfloat16)),
                                 dynamic=False)
    a, b = compiled(x, y)
    torch.testing.assert_close(a, x.to(torch.bfloat16), rtol=0, atol=0)
    torch.testing.assert_close(b, x.to(torch.bfloat16) @ y.to(torch.bfloat16), **BF16_TOL)
    g = backend.RECENT[-1]
    assert not any(isinstance(r, CastBatch) for r in g.runners)


def test_returned_casts_are_batched_at_the_end():
    """Casts whose results the graph only returns (autocast's fp32 weight gradients) run as
    one copy after the last of them; values equal eager's."""
    torch.manual_seed(0)
    x, y = (torch.randn(8, 16, device=DEVICE, dtype=torch.bfloat16), torch.randn(16, 8, device=DEVICE, dtype=torch.bfloat16))

    def f(x, y):
        return (x @ y).float(), (y @ x).float(), torch.relu(x).sum()

    got = torchfuse.compile(f, dynamic=False)(x, y)
    for a, b in zip(got, f(x, y)):
        torch.testing.assert_close(a, b, **BF16_TOL)
    g = backend.RECENT[-1]
    from torchfuse.segment import BATCHED_CAST_LATE
    late = [n for n in g.segmentation.calls if n.reason == BATCHED_CAST_LATE]
    assert len(late) == 2
    batch = [r for r in g.runners if isinstance(r, CastBatch)]
    assert len(batch) == 1 and g.runners.index(batch[0]) == max(g.segmentation.steps.index(n) for n in late)


@pytest.mark.parametrize("view", ["t", "reshape", "identity"])
def test_returned_casts_of_views_are_batched(view):
    """A returned cast of a view (autocast's weight gradient ``mm(...).t()`` cast to fp32)
    joins the batched copy: the view runs as an ATen view, the cast in the batch; values and
    strides equal eager's."""
    torch.manual_seed(0)
    x, y = (torch.randn(8, 16, device=DEVICE, dtype=torch.bfloat16), torch.randn(16, 8, device=DEVICE, dtype=torch.bfloat16))
    make_view = {"t": lambda t: t.t(), "reshape": lambda t: t.reshape(4, -1), "identity": lambda t: t}[view]

    def f(x, y):
        return make_view(x @ y).float(), make_view(y @ x).float(), (x @ y).sum()

    from torchfuse.segment import BATCHED_CAST_LATE

    torch._dynamo.reset()
    got = torchfuse.compile(f, dynamic=False)(x, y)
    for a, b in zip(got, f(x, y)):
        torch.testing.assert_close(a, b, **BF16_TOL)
        assert a.stride() == b.stride() and a.dtype == b.dtype
    g = backend.RECENT[-1]
    late = [n for n in g.segmentation.calls if n.reason == BATCHED_CAST_LATE]
    assert len(late) == 2 and len([r for r in g.runners if isinstance(r, CastBatch)]) == 1
    assert not any(n.op == "cast" for grp in g.segmentation.groups for n in grp.nodes)


def test_cast_after_a_flattening_reshape_joins_the_group_before_it():
    """Autocast's linear layers flatten (batch, sequence, hidden) and cast to bf16 before the
    matrix product. The cast moves above the reshape (they commute) and joins the LayerNorm's
    group instead of running as a kernel of its own; values equal eager's."""
    torch.manual_seed(0)
    w = torch.randn(64, device=DEVICE)
    m = torch.randn(64, 8, device=DEVICE).to(torch.bfloat16)

    def f(x):
        y = torch.nn.functional.layer_norm(x, (64,), w, w)
        return y.view(-1, 64).to(torch.bfloat16) @ m

    x = torch.randn(2, 16, 64, device=DEVICE)
    torch.testing.assert_close(torchfuse.compile(f, dynamic=False)(x), f(x), **BF16_TOL)
    groups = backend.RECENT[-1].segmentation.groups
    with_cast = [g for g in groups if any(n.op == "cast" for n in g.nodes)]
    assert len(with_cast) == 1 and any(n.op == "var_mean" for n in with_cast[0].nodes), [g.name for g in groups]


def test_cast_of_an_input_before_a_reshape_joins_the_group_after_it():
    """A causal-LM loss converts the bf16 logits to fp32 and flattens them for the
    cross-entropy. The cast moves below the reshape and joins the log-softmax kernel, which
    reads the bf16 logits itself: no group writes an fp32 copy of them. In the backward the
    bf16 logits gradient, cast after the reshape back to (batch, sequence, vocabulary), is
    written by the loss-gradient kernel directly. Loss and gradient equal eager's."""
    torch.manual_seed(0)
    t = torch.randint(0, 37, (16,), device=DEVICE)

    def f(logits):
        return torch.nn.functional.cross_entropy(logits.float().view(-1, 37), t)

    x = torch.randn(2, 8, 37, device=DEVICE).to(torch.bfloat16)
    got_x, want_x = x.clone().requires_grad_(), x.clone().requires_grad_()
    before = list(backend.RECENT)
    got = torchfuse.compile(f, dynamic=False)(got_x)
    want = f(want_x)
    torch.testing.assert_close(got, want)
    (g,), (e,) = torch.autograd.grad(got, got_x), torch.autograd.grad(want, want_x)
    assert g.dtype == torch.bfloat16 and g.shape == x.shape
    torch.testing.assert_close(g, e, **BF16_TOL)
    graphs = {cg.name: cg for cg in backend.RECENT if all(cg is not b for b in before)}
    for name in ("forward", "backward"):
        for group in graphs[name].segmentation.groups:
            for o in group.outputs:
                copy = o.producer is not None and o.producer.op == "cast" and o.meta.dtype == torch.float32
                assert not copy, f"{name}: {group.name} writes an fp32 copy of the logits ({o.name})"
    assert len(graphs["backward"].segmentation.groups) == 1, [gr.name for gr in graphs["backward"].segmentation.groups]


@pytest.mark.parametrize("dynamic", [False, True])
def test_batch_norm_running_statistics_are_written_in_one_batch(dynamic):
    """Training-mode BatchNorm writes its running mean, running variance and batch counter
    back to the module's buffers; the compiled forward graph keeps those writes as ``copy_``
    calls and runs them as one multi-tensor copy per dtype pair (InputWriteBatch). Buffers and
    outputs match an eager copy of the model after each of three steps, at two batch sizes.
    The layers' batch-counter increments, independent one-element adds, run as one kernel."""
    import copy

    from torchfuse.runtime.executor import InputWriteBatch

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.BatchNorm2d(8), torch.nn.ReLU(),
                                torch.nn.BatchNorm2d(8, momentum=0.3)).to(DEVICE)
    reference = copy.deepcopy(model)
    compiled = torchfuse.compile(model, dynamic=dynamic)
    before = list(backend.RECENT)
    for batch in (4, 4, 6):
        x = torch.randn(batch, 3, 10, 10, device=DEVICE)
        out, expected = compiled(x), reference(x)
        torch.testing.assert_close(out, expected)
        out.sum().backward()
        expected.sum().backward()
        for (name, a), b in zip(model.named_buffers(), reference.buffers()):
            torch.testing.assert_close(a, b, msg=name)
    forward = [g for g in backend.RECENT if g.name == "forward" and all(g is not b for b in before)]
    assert forward, [(g.name, type(g).__name__) for g in backend.RECENT]
    for g in forward:
        batches = [r for r in g.runners if isinstance(r, InputWriteBatch)]
        assert len(batches) == 1 and g.input_writes_batched == 6
        # float32 statistics in one copy, the int64 counters in another
        assert sorted(len(dst) for dst, _ in batches[0].batches) == [2, 4]
        # the two counter increments (one element each, sharing no input) are one kernel
        counters = [grp for grp in g.segmentation.groups
                    if all(o.meta.dtype == torch.int64 and o.meta.numel() == 1 for o in grp.outputs)]
        assert len(counters) == 1 and len(counters[0].outputs) == 2, [grp.name for grp in g.segmentation.groups]
