"""Fall back, never fail, at run time: a graph whose first call raises runs through ATen.

A failure is planted in the runtime (a fusion group's launch, an ATen call), and the values
must equal eager's, with a warning naming a reproducer script that exists. Input writes
(BatchNorm's running statistics) must happen once, and an error the program itself raises
(eager raises it too) must propagate unchanged.
"""
from __future__ import annotations

import os
import re
import warnings

import pytest
import torch

import torchfuse
from conftest import DEVICE
from test_ops import F32, assert_all_fused, assert_matches, make_sample, run_compiled
from torchfuse.runtime import executor

pytestmark = pytest.mark.filterwarnings("ignore:.*encountered in:RuntimeWarning")


class Planted(RuntimeError):
    pass


def _fail(*args, **kwargs):
    raise Planted("planted launch failure")


def _reproducer_of(records) -> str:
    messages = [str(w.message) for w in records if "first call" in str(w.message)]
    assert len(messages) == 1, [str(w.message) for w in records]
    m = re.search(r"reproducer: (\S+)$", messages[0])
    assert m and os.path.isfile(m.group(1)), messages[0]
    assert "Planted" in messages[0]
    return m.group(1)


def test_a_failed_launch_on_the_first_call_runs_the_graph_through_aten(monkeypatch):
    """A fusion group that raises while launching (not while compiling) on the first call: the
    call, and the next, give eager's values; the warning names an existing reproducer."""
    x, y = make_sample(F32, 1), make_sample(F32, 2)
    fn = lambda x, y: ((x * y).sin() + 1, (x - y).sum(-1))
    monkeypatch.setattr(executor.GroupRunner, "__call__", _fail)
    compiled = torchfuse.compile(fn, dynamic=False)
    with warnings.catch_warnings(record=True) as records:
        warnings.simplefilter("always")
        got = compiled(x, y)
    assert_matches(got, fn(x, y))
    path = _reproducer_of(records)
    assert "def forward" in open(path).read()
    monkeypatch.undo()  # the graph keeps running through ATen, without launching
    x2 = make_sample(F32, 3)
    assert_matches(compiled(x2, y), fn(x2, y))


def test_a_failed_aten_call_on_the_first_call_runs_the_graph_through_aten(monkeypatch):
    """An ATen call between fusion groups (a matrix product) that raises on the first call."""
    x, w = make_sample(F32, 4, shape=(8, 16)), make_sample(F32, 5, shape=(16, 4))
    fn = lambda x, w: ((x.relu() @ w) * 2).tanh()
    original = executor._call_runner

    def failing(node, slots):
        run = original(node, slots)
        if "mm" in str(node.target):
            def run(env, sym_key=None, sym_values=None):
                raise Planted("planted ATen failure")
        return run

    monkeypatch.setattr(executor, "_call_runner", failing)
    with warnings.catch_warnings(record=True) as records:
        warnings.simplefilter("always")
        got = torchfuse.compile(fn, dynamic=False)(x, w)
    assert_matches(got, fn(x, w))
    _reproducer_of(records)


def test_a_constant_read_by_several_outputs_does_not_crash():
    """``z = zeros_like(x)`` read by three outputs, twice by one op (``z + z``): each reader got
    a copy of the constant, and a second copy for ``z + z`` was left with no reader and ran as
    an ATen call after its template tensor was freed (``Expected a proper Tensor but got None``)."""
    def fn(x):
        z = torch.zeros_like(x)
        return x + z, x - z, z + z

    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        x = make_sample(dtype, 6)
        with warnings.catch_warnings():
            warnings.simplefilter("error", RuntimeWarning)  # no run-time fallback either
            got, graphs = run_compiled(fn, x)
        assert_matches(got, fn(x), exact=True)
        assert_all_fused(graphs)


def test_a_registry_constant_outside_any_group_is_rebuilt_from_its_metadata():
    """A constant node left as a step of its own (no group reads it) runs from its metadata:
    its ATen call's template argument is read for metadata only and may be freed by then."""
    from torch.fx.experimental.proxy_tensor import make_fx

    from torchfuse.config import Options
    from torchfuse.ir.from_fx import graph_from_fx
    from torchfuse.ir.graph import Node, Value
    from torchfuse.segment import segment

    x = make_sample(F32, 7)
    gm = make_fx(lambda x: ((x * 2).sin(),))(x)
    options = Options.from_env(interpret=DEVICE == "cpu")  # a GPU compiles the kernel
    graph = graph_from_fx(gm, options)
    template = graph.inputs[0]
    zero = Value(name="unread", meta=template.meta)
    node = Node(op="full_like", inputs=[], attrs={"value": 0}, outputs=[zero], target=torch.ops.aten.full_like.default,
                args=(template, 0), kwargs={}, source="planted")
    zero.producer = node
    graph.nodes.append(node)  # after the group that reads the template for the last time
    compiled = executor.CompiledGraph(segment(graph, options), options)
    assert any(isinstance(st, Node) and st.op == "full_like" for st in compiled.steps)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        got = compiled([x])
    assert_matches(got[0], (x * 2).sin())


class _Norm(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.bn = torch.nn.BatchNorm1d(6)

    def forward(self, x):
        return (self.bn(x * 2) + 1).relu()


def test_input_writes_happen_once_when_the_first_call_falls_back(monkeypatch):
    """A training graph that updates BatchNorm's running statistics (writes to its inputs)
    and whose fusion groups fail on the first call: the ATen run updates them once, as eager."""
    torch.manual_seed(0)
    eager, compiled_model = _Norm().to(DEVICE), _Norm().to(DEVICE)
    compiled_model.load_state_dict(eager.state_dict())
    x = make_sample(F32, 8, shape=(5, 6), specials=False)
    monkeypatch.setattr(executor.GroupRunner, "__call__", _fail)
    compiled = torchfuse.compile(compiled_model, dynamic=False)
    with warnings.catch_warnings(record=True) as records:
        warnings.simplefilter("always")
        got = compiled(x)
    want = eager(x)
    assert_matches(got, want)
    _reproducer_of(records)
    for name in ("running_mean", "running_var", "num_batches_tracked"):
        assert_matches(getattr(compiled_model.bn, name), getattr(eager.bn, name))


def test_a_failure_after_an_input_write_is_not_run_again(monkeypatch):
    """Once an input write has run, the first call's failure propagates: running the graph
    again would update the running statistics twice."""
    torch.manual_seed(0)
    model = _Norm().to(DEVICE)
    x = make_sample(F32, 9, shape=(5, 6), specials=False)
    original = executor._call_runner

    def failing(node, slots):
        run = original(node, slots)
        if node.target is torch.ops.aten.copy_.default:
            def run(env, sym_key=None, sym_values=None):
                raise Planted("planted failure of an input write")
        return run

    monkeypatch.setattr(executor, "_call_runner", failing)
    monkeypatch.setattr(executor.InputWriteBatch, "__call__", _fail)
    before = [t.clone() for t in (model.bn.running_mean, model.bn.num_batches_tracked)]
    with warnings.catch_warnings(record=True) as records:
        warnings.simplefilter("always")
        with pytest.raises(Planted):
            torchfuse.compile(model, dynamic=False)(x)
    assert not [w for w in records if "first call" in str(w.message)]
    # the planted failure wrote nothing, and nothing ran the graph again through ATen
    assert_matches([model.bn.running_mean, model.bn.num_batches_tracked], before, exact=True)


@pytest.mark.skipif(DEVICE == "cuda", reason="on CUDA an out-of-range class index is a device-side "
                    "assert that ends the process's CUDA context, in eager as well")
def test_the_programs_own_error_propagates_and_the_graph_stays_compiled():
    """An error eager raises too (an out-of-range class index) is raised as eager raises it, with
    no fallback warning; a later valid call runs the compiled kernels."""
    logits = make_sample(F32, 10, shape=(4, 5))
    fn = lambda z, t: torch.nn.functional.cross_entropy(z.sin(), t)
    bad, good = torch.tensor([0, 1, 9, 2]), torch.tensor([0, 1, 4, 2])
    with pytest.raises(IndexError) as eager_error:
        fn(logits, bad)
    compiled = torchfuse.compile(fn, dynamic=False)
    with warnings.catch_warnings(record=True) as records:
        warnings.simplefilter("always")
        with pytest.raises(IndexError) as compiled_error:
            compiled(logits, bad)
    assert str(compiled_error.value) == str(eager_error.value)
    assert not [w for w in records if "first call" in str(w.message)]
    from torchfuse import backend

    graph = backend.RECENT[-1]
    assert graph.traced is None
    assert_matches(compiled(logits, good), fn(logits, good))


def test_a_graph_aotautograd_rejects_runs_eagerly():
    """``x // y`` with ``y`` requiring grad: AOTAutograd cannot trace the joint graph (floor
    division has no derivative) and raised at the first call; the graph now runs eagerly, with a
    warning: the forward gives eager's values and the backward raises eager's error."""
    x, y = make_sample(F32, 12, specials=False) + 5, make_sample(F32, 13, specials=False)
    y.requires_grad_(True)
    fn = lambda x, y: ((y // x).sin(), y / x)
    with warnings.catch_warnings(record=True) as records:
        warnings.simplefilter("always")
        got = torchfuse.compile(fn, dynamic=False)(x, y)
    assert any("AOTAutograd rejected this graph" in str(w.message) for w in records)
    assert_matches(got, fn(x, y))
    with pytest.raises(RuntimeError, match="floor_divide"):
        got[0].sum().backward()
    with pytest.raises(RuntimeError, match="floor_divide"):
        fn(x, y)[0].sum().backward()


@pytest.mark.parametrize("plain_first", [True, False])
def test_a_backward_with_batched_gradients_runs_through_aten(plain_first):
    """``torch.autograd.grad(..., is_grads_batched=True)`` (``jacobian(..., vectorize=True)``
    calls it) runs the backward under vmap, with batched gradients that have no storage: a
    kernel launch raised "Cannot access data pointer", on a later call (after a plain backward)
    out of the program. Such a call runs the traced graph; plain calls stay fused."""
    from torchfuse import backend

    x, w = make_sample(F32, 14, shape=(3, 16), specials=False), make_sample(F32, 15, shape=(16,), specials=False)
    fn = lambda x, w: torch.nn.functional.layer_norm(x * w, (16,)).tanh()
    v = make_sample(F32, 16, shape=(5, 3, 16), specials=False)
    compiled = torchfuse.compile(fn, dynamic=False)

    def grads(f):
        x1 = x.clone().requires_grad_(True)
        y = f(x1, w)
        plain = torch.autograd.grad(y, x1, v[0], retain_graph=True)[0] if plain_first else None
        return plain, torch.autograd.grad(y, x1, v, is_grads_batched=True)[0]

    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # no run-time fallback either
        plain, batched = grads(compiled)
    plain_eager, batched_eager = grads(fn)
    assert_matches(batched, batched_eager, rtol=1e-5, atol=1e-5)
    if plain_first:
        assert_matches(plain, plain_eager, rtol=1e-5, atol=1e-5)
    graph = backend.RECENT[-1]
    assert graph.name == "backward" and graph.traced is None


class _Encoder(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj, self.norm = torch.nn.Linear(8, 8), torch.nn.LayerNorm(8)

    def forward(self, h):
        return self.norm(torch.nn.functional.gelu(self.proj(h)))


class _MaskedEncoder(torch.nn.Module):
    """Wav2Vec2's training pattern: frames picked by a boolean mask get a learned embedding
    (``h[mask] = emb``, whose gradient needs ``nonzero``), then an encoder."""

    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Parameter(torch.randn(8))
        self.encoder = _Encoder()

    def forward(self, x, mask):
        h = x * 2
        h[mask] = self.emb
        return self.encoder(h).square().mean()


@pytest.mark.parametrize("fullgraph", [False, True])
def test_a_data_dependent_gradient_splits_the_graph_as_for_torchdynamos_backends(fullgraph):
    """The joint graph of ``h[mask] = emb`` needs ``nonzero`` (an output size that depends on
    the data), which AOTAutograd's tracing refuses. torchfuse ran the whole captured graph
    eagerly, with a warning; now it hands the refusal back to TorchDynamo, which runs that frame
    eagerly and compiles the modules it calls (the encoder's forward and backward are fused),
    as it does for its own backends. Under ``fullgraph=True`` the graph is compiled whole.
    Values and gradients are eager's, without a warning."""
    torch.manual_seed(0)
    model = _MaskedEncoder().to(DEVICE)
    x = make_sample(F32, 14, shape=(2, 8, 8), specials=False)
    mask = torch.zeros(2, 8, dtype=torch.bool, device=DEVICE)
    mask[:, 2:5] = True
    model(x, mask).backward()
    expected = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    from torchfuse import backend

    before = list(backend.RECENT)  # (a bounded list: compare identities, not lengths)
    with warnings.catch_warnings(record=True) as records:
        warnings.simplefilter("always")
        loss = torchfuse.compile(model, dynamic=False, fullgraph=fullgraph)(x, mask)
        loss.backward()
    assert not [w for w in records if "torchfuse" in str(w.message)]
    assert_matches(loss, model(x, mask))
    assert_matches([p.grad for p in model.parameters()], expected)
    compiled = [g for g in backend.RECENT if all(g is not b for b in before)]
    assert {g.name for g in compiled} == {"forward", "backward"}
    if not fullgraph:  # (whole, the gradient's sum over the masked frames has a data-dependent size: ATen's)
        assert_all_fused(compiled)
