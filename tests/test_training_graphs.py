"""CUDA graphs for training graphs (``mode="reduce-overhead"``): what is captured, what is
refused and why, gradients with PyTorch's ``.grad`` semantics, random numbers that advance.

The refusals are checked on FX graphs traced with fake CUDA tensors, and the output handling
on the CPU with a stand-in for PyTorch's CUDA graph trees that replays into the same output
buffers every call (what a replay does to its pool); the GPU tests compare real replays with
eager.
"""
from __future__ import annotations

import functools
import sys

import pytest
import torch
from torch._subclasses import FakeTensorMode
from torch.fx.experimental.proxy_tensor import make_fx
from torch.fx.experimental.symbolic_shapes import ShapeEnv

import torchfuse
import torchfuse.backend as backend
from torchfuse.runtime import training_graphs
from torchfuse.runtime import capture_refusals
from torchfuse.runtime.capture_refusals import capture_refusal

gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA graphs need a GPU")
#: the stand-in pool tests run the generated kernels on CPU tensors through Triton's interpreter,
#: as CI does; on a GPU machine the tests marked ``gpu`` check real replays instead
cpu_only = pytest.mark.skipif(torch.cuda.is_available(), reason="interpreter tests; real replays run on the GPU")


def _fake_cuda(*shapes, devices=None, shape_env=None):
    with FakeTensorMode(shape_env=shape_env):
        return [torch.empty(s, device=(devices[i] if devices else "cuda")) for i, s in enumerate(shapes)]


# ------------------------------------------------------------------ refusals
def test_capturable_graph_is_not_refused():
    gm = make_fx(lambda x, w: (x * w).relu().sum(-1), tracing_mode="fake")(*_fake_cuda((4, 8), (8,)))
    assert capture_refusal(gm, []) is None


def test_cpu_tensors_are_refused():
    """A CPU input is refused, and named as the graph names it, with its dtype, shape and
    position, which the user's code shows."""
    gm = make_fx(lambda x: x.relu())(torch.randn(3))
    name = next(n.name for n in gm.graph.nodes if n.op == "placeholder")
    assert capture_refusal(gm, []).startswith(f"tensors on cpu (input {name} (float32[3], graph input 1 of 1);")
    assert capture_refusal(gm, [], names=("x",)).startswith(f"tensors on cpu (input x (float32[3], {name});")


def test_cpu_scalars_made_from_constants_are_captured():
    """A CPU scalar made from constants (an attention mask's fill value, as HuggingFace's T5
    makes it under fp16) has the same value every call, so the capture may freeze it; one made
    from an input, a random one, or a CPU tensor the graph returns is refused."""
    aten = torch.ops.aten

    def masked(x, m):
        low = aten.scalar_tensor.default(-65504.0, dtype=torch.float32, device="cpu")
        return aten.where.self(m, x, low).sum(-1)

    with FakeTensorMode():
        x, m = torch.empty(4, 8, device="cuda"), torch.empty(4, 8, device="cuda", dtype=torch.bool)
    gm = make_fx(masked, tracing_mode="fake")(x, m)
    assert any(n.meta["val"].device.type == "cpu" for n in gm.graph.nodes
               if isinstance(n.meta.get("val"), torch.Tensor))
    assert capture_refusal(gm, []) is None

    def from_input(x, s):  # a CPU scalar input: its value changes between calls
        return x * (s + 1)

    with FakeTensorMode():
        x, s = torch.empty(4, device="cuda"), torch.empty((), device="cpu")
    assert "tensors on cpu" in capture_refusal(make_fx(from_input, tracing_mode="fake")(x, s), [])

    def random_scalar(x):
        return x * aten.rand.default([], device="cpu")

    (x,) = _fake_cuda((4,))
    assert "tensors on cpu" in capture_refusal(make_fx(random_scalar, tracing_mode="fake")(x), [])

    def returned(x):
        return x * 2, aten.scalar_tensor.default(3.0, device="cpu")

    assert "tensors on cpu" in capture_refusal(make_fx(returned, tracing_mode="fake")(x), [])

    def copied(x):  # a copy of host memory to the device: a replay would read it again
        return x + aten._to_copy.default(aten.scalar_tensor.default(3.0, device="cpu"), device=x.device)

    assert "copy from host" in capture_refusal(make_fx(copied, tracing_mode="fake")(x), [])

    def filled(x):  # fill_ takes the value on the host
        return aten.fill.Tensor(x, aten.scalar_tensor.default(3.0, device="cpu")) + x

    assert capture_refusal(make_fx(filled, tracing_mode="fake")(x), []) is None


@cpu_only  # fake tensors on a second CUDA device need one where CUDA is present
def test_several_devices_are_refused():
    a, b = _fake_cuda((4,), (4,), devices=["cuda:0", "cuda:1"])
    gm = make_fx(lambda x, y: x + y.to(x.device), tracing_mode="fake")(a, b)
    assert "several devices" in capture_refusal(gm, [])


def test_data_dependent_sizes_are_refused():
    (x,) = _fake_cuda((4, 8), shape_env=ShapeEnv())
    gm = make_fx(lambda x: torch.nonzero(x > 0).float().sum() + x.sum(), tracing_mode="fake")(x)
    assert "nonzero" in capture_refusal(gm, [])


def test_writes_to_inputs_are_refused_unless_static():
    def f(x, buf):
        buf.add_(1)
        return x * buf

    gm = make_fx(f, tracing_mode="fake")(*_fake_cuda((4,), (4,)))
    assert "buf_1 (float32[4], forward input 2 of 2) written in place" in capture_refusal(gm, [], graph="forward")
    assert "self.buf (float32[4], buf_1) written in place" in capture_refusal(gm, [], names=("x", "self.buf"))
    assert capture_refusal(gm, [1]) is None  # a buffer: the replay writes it in place


def test_backward_refusals_name_the_saved_forward_inputs_by_the_users_names():
    """A backward graph's inputs that are saved forward inputs (AOTAutograd's ``primals_k``)
    read by the forward input's user name; the others by their place in the backward."""
    graph = torch.fx.Graph()
    nodes = [graph.placeholder(n) for n in ("primals_2", "tangents_1")]
    for n in nodes:
        n.meta["val"] = torch.empty(2, 3)
    graph.output(tuple(nodes))
    gm = torch.fx.GraphModule(torch.nn.Module(), graph)
    names = ("model[0].weight", "x")
    assert capture_refusals.describe_input(gm, nodes[0], names, "backward") == \
        "x (float32[2, 3], primals_2, backward input 1 of 2)"
    assert capture_refusals.describe_input(gm, nodes[1], names, "backward") == \
        "tangents_1 (float32[2, 3], backward input 2 of 2)"


def test_refusals_name_inputs_as_the_users_code_does(monkeypatch):
    """TorchDynamo's sources name a graph's inputs as the user's code reads them (a module's
    parameters and buffers by attribute path, arguments by name); a CPU training graph under
    CUDA graphs is refused naming its first input so, and AOTAutograd's name beside it."""
    seen = []

    def backend_(gm, example_inputs):
        seen.append(capture_refusals.user_input_names(gm))
        return gm.forward

    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.BatchNorm1d(4))
    torch.compile(lambda x, y: model(x) + y, backend=backend_)(torch.randn(3, 4), torch.randn(3, 4))
    assert seen == [("model[0].weight", "model[0].bias", "x", "model[1].num_batches_tracked",
                     "model[1].running_mean", "model[1].running_var", "model[1].weight", "model[1].bias", "y")]
    torch._dynamo.reset()
    from torchfuse.runtime import cudagraphs

    monkeypatch.setattr(cudagraphs, "_warned_not_cuda", [False])  # (once per process)
    compiled = torchfuse.compile(model, mode="reduce-overhead", interpret=True)
    with pytest.warns(UserWarning, match="not on a CUDA device"):
        compiled(torch.randn(3, 4)).sum().backward()
    fw = next(r for r in reversed(backend.RECENT) if r.name == "forward")
    assert "tensors on cpu (input model[0].weight (float32[4, 4], primals_1);" in fw.stats["cudagraph"]


# ------------------------------------------------------------------ outputs and gradients (CPU)
class _Node:
    """The trees' node as the stand-in keeps it: its weak references to its outputs (and, as a
    node of the trees, itself weakly referenceable)."""

    def __init__(self, outputs_weakrefs):
        self.outputs_weakrefs = outputs_weakrefs


class _Pool:
    """A stand-in for ``cudagraphify_impl`` that does to outputs what PyTorch's CUDA graph trees
    do. The first call is a warm-up whose outputs are fresh tensors; every later call writes
    its outputs into the buffers of the second (the recording's pool), so an output held across
    calls is overwritten and the activations a backward reads in place are at other addresses
    after the warm-up. Later calls return the same cached tensors over that memory, registered
    as the trees register them (``torch._C._add_cached_tensor``, so that autograd may take one
    as ``.grad``), and ``node`` holds the trees' weak references to the last call's outputs:
    ``StorageWeakRefWrapper``, with the trees' reference-count check for the cached ones.
    ``warmed_up`` says whether the last call was a warm-up, and ``new_generation`` whether a
    backward ran since the last forward (the trees' test when the user marks no step)."""

    def __init__(self):
        self.calls = []
        self.replays = 0  # calls of the functions made, the warm-ups included
        self.node = None  # as the trees' ``current_node``: the last call's
        self.cached: list = []  # each function's list of cached outputs (the trees' one reference)
        self.warmed_up = False
        self.new_generation = True

    def __call__(self, fn, inputs, static, **settings):
        from torch._inductor.cudagraph_trees import StorageWeakRefWrapper

        buffers: list = []
        cached: list = []
        storages: list = []  # the trees keep a Python storage object per cached output
        warmed_up = [False]
        self.calls.append(settings["is_backward"])
        self.cached.append(cached)

        def check(i):  # the trees' rule: only the list and the call hold the cached tensor
            return sys.getrefcount(cached[i]) == (3 if cached[i]._use_count() > 1 else 2)

        def replay(args):
            self.replays += 1
            self.new_generation = settings["is_backward"]
            self.warmed_up = not warmed_up[0]
            outs = fn(list(args))
            if not warmed_up[0]:
                warmed_up[0] = True
                self.node = _Node(outputs_weakrefs=[
                    StorageWeakRefWrapper(o) if isinstance(o, torch.Tensor) else None for o in outs])
                return list(outs)
            if not buffers:
                buffers.extend(o.clone() if isinstance(o, torch.Tensor) else o for o in outs)
                for b in buffers:
                    if isinstance(b, torch.Tensor):
                        storages.append(_storage_over(b))
                        cached.append(torch.empty(0, dtype=b.dtype).set_(storages[-1], b.storage_offset(),
                                                                         b.shape, b.stride()))
                        torch._C._add_cached_tensor(cached[-1])
                    else:
                        cached.append(b)
                node = _Node(outputs_weakrefs=[
                    StorageWeakRefWrapper(c, extra_ref_check=functools.partial(check, i))
                    if isinstance(c, torch.Tensor) else None for i, c in enumerate(cached)])
                replay.node = node
            else:
                for b, o in zip(buffers, outs):
                    if isinstance(b, torch.Tensor):
                        b.copy_(o)
            self.node = replay.node
            return list(cached)

        return replay


def _storage_over(b: torch.Tensor) -> torch.UntypedStorage:
    """A storage over ``b``'s memory that does not own it (as the trees make for replays)."""
    memory = b.untyped_storage()
    return torch._C._construct_storage_from_data_pointer(memory.data_ptr(), b.device, memory.nbytes())


@pytest.fixture
def pool(monkeypatch):
    """Training graphs on CPU tensors go through the capture wrapper with the stand-in pool."""
    import torch._inductor.cudagraph_trees as trees

    stand_in = _Pool()
    monkeypatch.setattr(trees, "cudagraphify_impl", stand_in)
    monkeypatch.setattr(training_graphs, "capture_refusal", lambda gm, static, *names: None)
    monkeypatch.setattr(training_graphs, "_trees_node", lambda device_index: stand_in.node)
    monkeypatch.setattr(training_graphs, "_warmed_up", lambda device_index: stand_in.warmed_up)
    monkeypatch.setattr(training_graphs, "_new_generation", lambda device_index: stand_in.new_generation)
    torch._C._set_cached_tensors_enabled(True)
    yield stand_in
    for pending in (training_graphs._PENDING, training_graphs._HELD, training_graphs._HELD_OUTPUTS,
                    training_graphs._OUTPUTS):
        pending.clear()  # the stand-in's memory, which no later test's pool shares
    for t in (t for ts in stand_in.cached for t in ts if isinstance(t, torch.Tensor)):
        torch._C._remove_cached_tensor(t)
    torch._C._set_cached_tensors_enabled(False)


def _mlp():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.LayerNorm(16),
                               torch.nn.Linear(16, 4))


def _grads(model):
    return [p.grad.clone() if p.grad is not None else None for p in model.parameters()]


@cpu_only
@pytest.mark.parametrize("set_to_none", [True, False])
def test_gradient_accumulation_matches_eager(pool, set_to_none):
    """Two backward calls accumulate into ``.grad`` and ``zero_grad`` clears it, as in eager,
    although every replay writes its gradients into the same pool buffers."""
    eager, model = _mlp(), _mlp()
    compiled = torchfuse.compile(model, mode="reduce-overhead", interpret=True)
    xs = [torch.randn(5, 8) for _ in range(6)]
    for step in range(3):
        for m, f in ((eager, eager), (model, compiled)):
            for x in xs[2 * step: 2 * step + 2]:  # two micro-batches, then a look at .grad
                f(x).square().mean().backward()
        for a, b in zip(_grads(eager), _grads(model)):
            torch.testing.assert_close(b, a)
        eager.zero_grad(set_to_none=set_to_none)
        model.zero_grad(set_to_none=set_to_none)
    assert pool.calls == [False, True]
    fw, bw = [g for g in backend.RECENT[-2:]]
    assert "captured" in fw.stats["cudagraph"] and "gradients returned in the pool" in bw.stats["cudagraph"]


class _Broken(torch.nn.Module):
    """Two halves with a graph break between them: two captures, whose backward replays both
    leave gradients in the pool before the next micro-batch's first forward."""

    def __init__(self):
        super().__init__()
        self.a, self.b = _mlp(), _mlp()[:2]
        self.b[0] = torch.nn.Linear(4, 16)

    def forward(self, x):
        h = self.a(x)
        torch._dynamo.graph_break()
        return self.b(h)


def _accumulate(eager, model, compiled, xs, set_to_none):
    """Two micro-batches a step over ``xs``, then ``.grad`` checked against eager's and zeroed."""
    for step in range(len(xs) // 2):
        for f in (eager, compiled):
            for x in xs[2 * step: 2 * step + 2]:
                f(x).square().mean().backward()
        for a, b in zip(_grads(eager), _grads(model)):
            torch.testing.assert_close(b, a)
        eager.zero_grad(set_to_none=set_to_none)
        model.zero_grad(set_to_none=set_to_none)


@cpu_only
def test_gradients_left_in_the_pool_move_out_across_graph_breaks(pool, monkeypatch):
    """Each ``.grad`` a backward replay left in the pool (taken by autograd, then accumulated
    into by the next micro-batch) moves out before the next forward, whichever capture made it."""
    moved = []
    release = training_graphs.release_pool_gradients
    monkeypatch.setattr(training_graphs, "release_pool_gradients", lambda: moved.append(release()) or moved[-1])
    eager, model = _Broken(), _Broken()
    model.load_state_dict(eager.state_dict())
    compiled = torchfuse.compile(model, mode="reduce-overhead", interpret=True)
    _accumulate(eager, model, compiled, [torch.randn(5, 8) for _ in range(6)], set_to_none=True)
    assert pool.calls == [False, False, True, True]
    # the second micro-batch of each step: all 8 parameters of both halves (the first step's
    # gradients come from the warm-up, which the trees also allocate in the pool)
    assert [m for m in moved if m] == [8, 8, 8]


@cpu_only
@pytest.mark.parametrize("how", [".grad", "autograd.grad"])
def test_gradients_held_outside_grad_keep_their_values(pool, how):
    """Gradients kept across steps outside ``.grad`` (an old ``.grad`` after
    ``zero_grad(set_to_none=True)``, or ``torch.autograd.grad``'s results) keep their step's
    values: while one is held the graphs run uncaptured, and the capture copies its gradients
    from then on; once none is held the graphs replay again."""
    eager, model = _mlp(), _mlp()
    compiled = torchfuse.compile(model, mode="reduce-overhead", interpret=True)
    xs = [torch.randn(5, 8) for _ in range(8)]

    def step(m, f, x):
        loss = f(x).square().mean()
        if how == "autograd.grad":
            return list(torch.autograd.grad(loss, list(m.parameters())))
        loss.backward()
        grads = [p.grad for p in m.parameters()]
        m.zero_grad(set_to_none=True)
        return grads

    kept = [(step(eager, eager, x), step(model, compiled, x)) for x in xs[:5]]
    for want, got in kept:
        for a, b in zip(want, got):
            torch.testing.assert_close(b, a)
    fw, bw = backend.RECENT[-2:]
    assert "held outside .grad" in fw.stats["cudagraph"]
    del kept  # nothing held any more: replays resume, with copied gradients
    before = pool.replays
    for x in xs[5:]:
        for a, b in zip(step(eager, eager, x), step(model, compiled, x)):
            torch.testing.assert_close(b, a)
    assert pool.replays == before + 2 * 3
    assert "captured" in fw.stats["cudagraph"] and "held" not in fw.stats["cudagraph"]
    assert "gradients copied out of the pool: a gradient returned in the pool was still held" in bw.stats["cudagraph"]


@cpu_only
def test_held_gradients_are_found_after_free_counts_are_learned(pool, monkeypatch):
    """The trees' own check judges a gradient's holder counts once; later steps with the same
    counts skip it, and a gradient kept after that (``torch.autograd.grad``'s results) is
    still found: the graphs run uncaptured and the values are eager's."""
    from torch._inductor.cudagraph_trees import StorageWeakRefWrapper

    checks = []
    expired = StorageWeakRefWrapper.expired
    monkeypatch.setattr(StorageWeakRefWrapper, "expired", lambda self: checks.append(1) or expired(self))
    monkeypatch.setattr(training_graphs, "_FREE", set())
    eager, model = _mlp(), _mlp()
    compiled = torchfuse.compile(model, mode="reduce-overhead", interpret=True)
    xs = [torch.randn(5, 8) for _ in range(8)]
    per_step = []
    for x in xs[:5]:
        for m, f in ((eager, eager), (model, compiled)):
            f(x).square().mean().backward()
            m.zero_grad(set_to_none=True)
        per_step.append(len(checks))
        checks.clear()
    assert per_step[-1] == 0 and max(per_step) > 0  # learned, then skipped
    fw, bw = backend.RECENT[-2:]
    assert "held" not in fw.stats["cudagraph"]
    kept = [(torch.autograd.grad(f(x).square().mean(), list(m.parameters())))
            for x in xs[5:7] for m, f in ((eager, eager), (model, compiled))]
    assert "held outside .grad" in fw.stats["cudagraph"]
    for want, got in zip(kept[0::2], kept[1::2]):
        for a, b in zip(want, got):
            torch.testing.assert_close(b, a)


@cpu_only
def test_parameters_that_move_stop_the_capture(pool):
    """Parameters at new addresses every step (FSDP2 allocates its unsharded parameters again
    each step): the graphs run uncaptured from the second step, with eager's values, and their
    stats say why."""
    eager, model = _mlp(), _mlp()
    compiled = torchfuse.compile(model, mode="reduce-overhead", interpret=True)
    for step in range(4):
        x = torch.randn(5, 8, generator=torch.Generator().manual_seed(step))
        for m, f in ((eager, eager), (model, compiled)):
            f(x).square().mean().backward()
            with torch.no_grad():
                for p in m.parameters():
                    p -= 0.1 * p.grad
                    p.grad = None
        for p in model.parameters():
            p.data = p.data.clone()  # same values, new storage
        for a, b in zip(eager.parameters(), model.parameters()):
            torch.testing.assert_close(b, a)
    assert pool.calls == [False, True]  # recorded once, for the first step only
    fw, bw = backend.RECENT[-2:]
    assert "new address" in fw.stats["cudagraph"] and "new address" in bw.stats["cudagraph"]


@cpu_only
def test_outputs_held_across_steps_keep_their_values(pool):
    """An output kept from an earlier step (``outputs.append(out)``) is not overwritten."""
    model = _mlp()
    compiled = torchfuse.compile(model, mode="reduce-overhead", interpret=True)
    xs = [torch.randn(5, 8) for _ in range(3)]
    outs = []
    for x in xs:
        out = compiled(x)
        out.square().mean().backward()
        outs.append(out)
    for x, out in zip(xs, outs):
        torch.testing.assert_close(out, model(x))


#: every forward output returned in the pool, whatever its size (the tests' tensors are small)
ALL_IN_POOL = "runtime.pool_output_bytes=1"


def _steps_dropping_outputs(device: str, steps: int) -> list[int]:
    """``steps`` training steps of :class:`_Broken` under ``reduce-overhead`` with every output
    returned in the pool, each step's output dropped after its backward; the output and the
    gradients are checked against eager's at every step. Returns the output's address at each
    step."""
    eager, model = _Broken().to(device), _Broken().to(device)
    model.load_state_dict(eager.state_dict())
    compiled = torchfuse.compile(model, mode="reduce-overhead", interpret=device == "cpu", tuning=ALL_IN_POOL)
    addresses = []
    for _ in range(steps):
        x = torch.randn(5, 8, device=device)
        out = compiled(x)
        torch.testing.assert_close(out, eager(x))
        addresses.append(out.data_ptr())
        out.square().mean().backward()
        eager(x).square().mean().backward()
        del out
        for a, b in zip(_grads(eager), _grads(model)):
            torch.testing.assert_close(b, a)
        eager.zero_grad(set_to_none=True)
        model.zero_grad(set_to_none=True)
    return addresses


@cpu_only
def test_outputs_dropped_within_the_step_stay_in_the_pool(pool):
    """Outputs the step drops (the value passed across a graph break, the output once the
    loss is taken) are returned in the pool, not copied: every step replays both captures and
    returns the same pool memory, with eager's values and gradients."""
    addresses = _steps_dropping_outputs("cpu", 5)
    assert len(set(addresses[2:])) == 1  # the replays' (after the warm-up and the recording)
    assert pool.replays == 4 * 5  # two captures, forward and backward, every step
    assert all("copied out of the pool from then on" not in g.stats["cudagraph"] for g in backend.RECENT[-4:])


@cpu_only
@pytest.mark.parametrize("keep", ["output", "view", "alias"])
def test_outputs_kept_into_the_next_step_keep_their_values(pool, keep, monkeypatch):
    """Outputs in the pool that later steps still find kept (each step's output, a view of it,
    or a detached alias, collected in a list from the fourth step on) keep their values: the
    steps run uncaptured while a replayed one is kept, with a warning, and the output is
    copied from then on; once the list is gone the graphs replay again."""
    eager, model = _mlp(), _mlp()
    compiled = torchfuse.compile(model, mode="reduce-overhead", interpret=True, tuning=ALL_IN_POOL)
    xs = [torch.randn(5, 8) for _ in range(10)]

    def step(x):
        out = compiled(x)
        out.square().mean().backward()
        return {"output": out, "view": out.t(), "alias": out[1:].detach()}[keep]

    def want(x):
        ref = eager(x).detach()
        return {"output": ref, "view": ref.t(), "alias": ref[1:]}[keep]

    for x in xs[:4]:
        torch.testing.assert_close(step(x), want(x))
    assert pool.replays == 2 * 4  # warm-up, recording, two replays
    monkeypatch.setattr(training_graphs, "_warned_outputs_held", [False])  # (once per process)
    with pytest.warns(UserWarning, match="still referenced two steps later"):
        kept = [step(x) for x in xs[4:8]]
    for x, got in zip(xs[4:8], kept):
        torch.testing.assert_close(got, want(x))
    fw = backend.RECENT[-2]
    assert "an output returned in the pool was still held" in fw.stats["cudagraph"]
    assert pool.replays == 2 * 5  # the fifth step's replay; uncaptured while its output is kept
    del kept
    for x in xs[8:]:
        torch.testing.assert_close(step(x), want(x))
    assert pool.replays == 2 * 7
    assert "1 outputs copied out of the pool from then on" in fw.stats["cudagraph"]
    assert "calls run uncaptured" not in fw.stats["cudagraph"]


@cpu_only
def test_outputs_the_loop_keeps_until_the_next_call_are_copied_from_the_first_replay(pool, monkeypatch):
    """``out = compiled(x)`` in a loop keeps the last step's output until the next call
    returns: the warm-up's copy shows it, so the output is copied from the recording on and
    no step runs uncaptured."""
    monkeypatch.setattr(training_graphs, "_warned_outputs_held", [False])
    eager, model = _mlp(), _mlp()
    compiled = torchfuse.compile(model, mode="reduce-overhead", interpret=True, tuning=ALL_IN_POOL)
    out = None
    for step in range(6):
        x = torch.randn(5, 8)
        out = compiled(x)
        out.square().mean().backward()
        torch.testing.assert_close(out, eager(x))
    assert pool.replays == 2 * 6
    fw = backend.RECENT[-2]
    assert "1 outputs copied out of the pool from then on" in fw.stats["cudagraph"]
    assert "uncaptured" not in fw.stats["cudagraph"]
    assert not training_graphs._warned_outputs_held[0]


@cpu_only
def test_small_outputs_are_copied_so_kept_losses_leave_replays_on(pool):
    """Under ``pool_output_bytes`` an output is copied out of the pool: losses kept for logging
    do not stop the replays."""
    eager, model = _mlp(), _mlp()
    compiled = torchfuse.compile(model, mode="reduce-overhead", interpret=True,
                                 tuning="runtime.pool_output_bytes=1048576")
    losses, want = [], []
    for step in range(5):
        x = torch.randn(5, 8)
        loss = compiled(x).square().mean()
        loss.backward()
        losses.append(loss)
        want.append(eager(x).square().mean().detach())
    torch.testing.assert_close(torch.stack(losses).detach(), torch.stack(want))
    assert pool.replays == 2 * 5
    assert "copied out of the pool from then on" not in backend.RECENT[-2].stats["cudagraph"]


@pytest.mark.parametrize("foreach_clone", [True, False], ids=["foreach-clone", "no-foreach-clone"])
def test_output_copier_copies_broadcast_tensors(monkeypatch, foreach_clone):
    """The copier gives a broadcast output (stride 0) a dense copy with its values, and every
    other output a copy with its strides, on every call (the dtype groups are made once);
    also with a PyTorch that has no ``torch._foreach_clone``."""
    if not foreach_clone:
        monkeypatch.setattr(training_graphs, "_FOREACH_CLONE", None)
    copier = training_graphs.OutputCopier(None)
    for step in range(2):
        expanded = torch.arange(3.0).reshape(3, 1).expand(3, 4) + step
        sliced = torch.arange(24.0).reshape(4, 6)[:, ::2] - step
        permuted = torch.randn(2, 3, 4, dtype=torch.float16).permute(2, 0, 1)
        ints = torch.arange(6).reshape(2, 3).t()
        outputs = [expanded, sliced, 7, permuted, ints]
        got = copier(outputs)
        assert got[2] == 7
        for i in (0, 1, 3, 4):
            assert torch.equal(got[i], outputs[i]) and got[i].dtype == outputs[i].dtype
            assert got[i].untyped_storage().data_ptr() != outputs[i].untyped_storage().data_ptr()
        assert all(got[i].device == outputs[i].device for i in (0, 1, 3, 4))
        assert got[0].is_contiguous()
        assert [got[i].stride() for i in (1, 3, 4)] == [outputs[i].stride() for i in (1, 3, 4)]


@cpu_only
def test_without_output_copies_the_pool_is_returned(pool):
    """``cudagraph_copy_outputs=False`` returns the pool's tensors (the trees' own semantics)."""
    model = _mlp()
    compiled = torchfuse.compile(model, mode="reduce-overhead", interpret=True, cudagraph_copy_outputs=False)
    compiled(torch.randn(5, 8))  # the warm-up
    a = compiled(torch.randn(5, 8))
    b = compiled(torch.randn(5, 8))
    assert a.data_ptr() == b.data_ptr()


@cpu_only
def test_backward_uncaptured_when_forward_refused():
    """When the forward graph is refused its backward is not captured either, and both say why."""
    model = _mlp()
    x = torch.randn(5, 8)
    out = torchfuse.compile(model, mode="reduce-overhead", interpret=True)(x)
    out.sum().backward()
    fw, bw = backend.RECENT[-2:]
    assert fw.stats["cudagraph"].startswith("not captured: tensors on cpu")
    assert bw.stats["cudagraph"].startswith("not captured")
    torch.testing.assert_close(out, model(x))


@cpu_only
@pytest.mark.parametrize("grad", [True, False], ids=["training", "inference"])
def test_reduce_overhead_on_cpu_tensors_warns_once(monkeypatch, grad):
    """``mode="reduce-overhead"`` on CPU tensors captures nothing; the first such graph of a
    process says so once, pointing at the user's code (here, this file), and the values are
    eager's."""
    from torchfuse.runtime import cudagraphs

    monkeypatch.setattr(cudagraphs, "_warned_not_cuda", [False])
    model = _mlp()
    compiled = torchfuse.compile(model, mode="reduce-overhead", interpret=True)
    xs = [torch.randn(5, 8), torch.randn(3, 8)]
    with torch.set_grad_enabled(grad), pytest.warns(UserWarning, match="capture CUDA work only") as caught:
        outs = [compiled(x) for x in xs for _ in range(2)]
    assert [w.filename for w in caught if "capture CUDA work only" in str(w.message)] == [__file__]
    with torch.no_grad():
        for out, x in zip(outs, [x for x in xs for _ in range(2)]):
            torch.testing.assert_close(out, model(x))


class _Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(8, 4)

    def forward(self, features):
        return torch.relu(self.fc(features))


@cpu_only
def test_a_warning_at_compile_time_points_at_the_line_that_called_the_model(monkeypatch):
    """The off-CUDA warning of an inference graph, given while TorchDynamo compiles the model's
    ``forward``, names the line that called the model, not the ``def`` line of ``forward``."""
    import inspect

    from torchfuse.runtime import cudagraphs

    monkeypatch.setattr(cudagraphs, "_warned_not_cuda", [False])
    compiled = torchfuse.compile(_Net(), mode="reduce-overhead", interpret=True)
    with torch.no_grad(), pytest.warns(UserWarning, match="capture CUDA work only") as caught:
        line = inspect.currentframe().f_lineno + 1
        compiled(torch.randn(2, 8))
    assert [(w.filename, w.lineno) for w in caught if "capture CUDA work only" in str(w.message)] == [(__file__, line)]


# ------------------------------------------------------------------ on a GPU
def _train(model, step_fn, steps, xs, ys, opt, scaler=None):
    losses = []
    for i in range(steps):
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.float16):
            loss = torch.nn.functional.cross_entropy(step_fn(xs[i]), ys[i])
        if scaler is not None:
            scaler.scale(loss).backward()
            scaler.unscale_(opt)
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            scaler.step(opt)
            scaler.update()
        else:
            loss.backward()
            opt.step()
        losses.append(loss.detach().float())
    return torch.stack(losses)


@gpu
def test_replayed_training_matches_eager_with_batchnorm_scaler_and_clipping():
    """A conv + BatchNorm + max-pool classifier trained for several steps with fp16 autocast,
    GradScaler, gradient clipping and fused AdamW: losses, parameters and BatchNorm's running
    statistics (written by every replay) match eager's; the pooling's kernels run in the
    captured graphs."""
    def make():
        torch.manual_seed(0)
        # no convolution bias before the BatchNorm, as in ResNets: its gradient is zero but for
        # rounding, which Adam's first steps turn into updates of +-lr whatever its size
        return torch.nn.Sequential(torch.nn.Conv2d(3, 16, 3, padding=1, bias=False), torch.nn.BatchNorm2d(16),
                                   torch.nn.ReLU(), torch.nn.MaxPool2d(3, 2, 1),
                                   torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(16, 10)).cuda()

    torch.manual_seed(1)
    xs = [torch.randn(8, 3, 16, 16, device="cuda") for _ in range(6)]
    ys = [torch.randint(0, 10, (8,), device="cuda") for _ in range(6)]
    results = []
    for compiled in (False, True):
        m = make()
        opt = torch.optim.AdamW(m.parameters(), lr=1e-3, fused=True)
        fn = torchfuse.compile(m, mode="reduce-overhead") if compiled else m
        losses = _train(m, fn, 6, xs, ys, opt, torch.amp.GradScaler("cuda"))
        results.append((losses, [p.detach().clone() for p in m.parameters()], m[1].running_mean.clone(),
                        m[1].num_batches_tracked.clone()))
    (l0, p0, r0, n0), (l1, p1, r1, n1) = results
    torch.testing.assert_close(l1, l0, rtol=2e-2, atol=2e-2)
    for a, b in zip(p0, p1):
        torch.testing.assert_close(b, a, rtol=2e-2, atol=2e-3)
    torch.testing.assert_close(r1, r0, rtol=2e-2, atol=2e-3)
    assert int(n1) == int(n0) == 6
    assert any("captured: replayed" in g.stats.get("cudagraph", "") for g in backend.RECENT[-2:])
    from torchfuse.runtime.pool import PoolRunner

    pools = [r for g in backend.RECENT[-2:] for r in g.runners if isinstance(r, PoolRunner)]
    assert len(pools) == 2 and all(r.failed is None and r.launches for r in pools), \
        [(r.backward, r.failed, r.launches) for r in pools]


@gpu
@pytest.mark.parametrize("set_to_none", [True, False])
def test_replayed_gradient_accumulation_matches_eager(set_to_none):
    eager, model = _mlp().cuda(), _mlp().cuda()
    compiled = torchfuse.compile(model, mode="reduce-overhead")
    _accumulate(eager, model, compiled, [torch.randn(5, 8, device="cuda") for _ in range(8)], set_to_none)


@gpu
@pytest.mark.parametrize("set_to_none", [True, False])
def test_replayed_gradient_accumulation_across_a_graph_break_matches_eager(set_to_none):
    """Two captures (a graph break): the second's forward replay starts a new generation of
    the CUDA graph trees, so every pool ``.grad`` must have moved out before the first's."""
    eager, model = _Broken().cuda(), _Broken().cuda()
    model.load_state_dict(eager.state_dict())
    compiled = torchfuse.compile(model, mode="reduce-overhead")
    _accumulate(eager, model, compiled, [torch.randn(5, 8, device="cuda") for _ in range(6)], set_to_none)
    assert "captured: replayed" in backend.RECENT[-1].stats["cudagraph"]


@gpu
def test_replayed_gradients_held_outside_grad_keep_their_values():
    """``torch.autograd.grad``'s results kept over steps keep their values while later steps
    replay (the trees' replays write the same pool memory and mark nothing)."""
    eager, model = _mlp().cuda(), _mlp().cuda()
    compiled = torchfuse.compile(model, mode="reduce-overhead")
    xs = [torch.randn(5, 8, device="cuda") for _ in range(6)]
    kept = [(torch.autograd.grad(eager(x).square().mean(), list(eager.parameters())),
             torch.autograd.grad(compiled(x).square().mean(), list(model.parameters()))) for x in xs]
    for want, got in kept:
        for a, b in zip(want, got):
            torch.testing.assert_close(b, a)
    assert "held outside .grad" in backend.RECENT[-2].stats["cudagraph"]


@gpu
@pytest.mark.parametrize("tuning", [ALL_IN_POOL, "runtime.pool_output_bytes=1048576", "runtime.pool_output_bytes=0"],
                         ids=["all-in-pool", "small-copied", "all-copied"])
def test_replayed_outputs_kept_across_steps_keep_their_values(tuning):
    """Outputs kept from every step, with a view and a detached alias of each, keep that step's
    values after later replays write the same pool memory; so do ``.grad`` tensors that
    accumulate over every step. Returned in the pool or copied out of it."""
    eager, model = _mlp().cuda(), _mlp().cuda()
    compiled = torchfuse.compile(model, mode="reduce-overhead", tuning=tuning)
    xs = [torch.randn(5, 8, device="cuda") for _ in range(6)]
    kept = []
    for x in xs:
        out = compiled(x)
        out.square().mean().backward()
        eager(x).square().mean().backward()
        kept.append((out, out.t(), out[1:].detach()))
    for a, b in zip(_grads(eager), _grads(model)):
        torch.testing.assert_close(b, a)
    for x, (out, view, alias) in zip(xs, kept):
        ref = eager(x).detach()
        torch.testing.assert_close(out, ref)
        torch.testing.assert_close(view, ref.t())
        torch.testing.assert_close(alias, ref[1:])
    assert "captured: replayed" in backend.RECENT[-1].stats["cudagraph"]


@gpu
def test_replayed_outputs_dropped_within_the_step_stay_in_the_pool():
    """On PyTorch's CUDA graph trees: the output the step drops is returned in the pool at the
    same address every step, every step from the third replays (the value passed across the
    graph break is copied if something kept it into the next step), and values and gradients
    are eager's."""
    addresses = _steps_dropping_outputs("cuda", 6)
    assert len(set(addresses[2:])) == 1
    states = [g.stats["cudagraph"] for g in backend.RECENT[-4:]]
    assert all(s.startswith("captured") and "uncaptured" not in s for s in states), states
    assert "copied out of the pool from then on" not in states[-3], states  # the second forward's


@gpu
def test_replays_draw_new_dropout_masks_and_reseeding_repeats_them():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.Dropout(0.5)).cuda()
    compiled = torchfuse.compile(model, mode="reduce-overhead")
    x = torch.randn(32, 64, device="cuda")

    def masks():
        out = []
        for _ in range(3):
            y = compiled(x)
            y.sum().backward()
            out.append(y.detach() != 0)
        return out

    masks()  # warm-up, recording, a replay: the calls below all replay
    torch.manual_seed(1)
    first = masks()
    torch.manual_seed(1)
    again = masks()
    assert not torch.equal(first[1], first[2]), "two replays drew the same mask"
    for a, b in zip(first, again):
        assert torch.equal(a, b), "torch.manual_seed must repeat the replays' masks"
    kept = first[2].float().mean().item()
    assert 0.45 < kept < 0.55
    assert "captured: replayed" in backend.RECENT[-2].stats["cudagraph"]


@gpu
def test_replayed_t5_under_fp16_is_captured_whole_and_matches_eager():
    """HuggingFace's T5 (a small configuration) trained under fp16 autocast with GradScaler:
    its graphs hold CPU scalars made from constants (the attention mask's fill value, the
    decoder start token written into the shifted labels), which are captured; every graph of
    the step replays, and the losses of five steps match eager's (dropout off)."""
    transformers = pytest.importorskip("transformers")
    import copy

    cfg = transformers.T5Config(d_model=64, d_kv=16, d_ff=128, num_layers=2, num_decoder_layers=2, num_heads=4,
                                vocab_size=256, dropout_rate=0.0, decoder_start_token_id=0, pad_token_id=0)
    torch.manual_seed(0)
    m0 = transformers.T5ForConditionalGeneration(cfg).cuda().train()
    m1 = copy.deepcopy(m0)
    data = [(torch.randint(0, 256, (4, 32), device="cuda"), torch.randint(0, 256, (4, 16), device="cuda"))
            for _ in range(5)]

    def run(model, fn):
        opt = torch.optim.AdamW(model.parameters(), fused=True)
        scaler = torch.amp.GradScaler("cuda")
        losses = []
        for ids, labels in data:
            with torch.autocast("cuda", torch.float16):
                loss = fn(input_ids=ids, labels=labels).loss
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            opt.zero_grad()
            losses.append(loss.detach().float())
        return torch.stack(losses)

    backend.RECENT.clear()
    eager = run(m0, m0)
    replayed = run(m1, torchfuse.compile(m1, mode="reduce-overhead", dynamic=False))
    torch.testing.assert_close(replayed, eager, rtol=2e-3, atol=2e-3)
    states = [g.stats.get("cudagraph", "") for g in backend.RECENT]
    assert states and all(s.startswith("captured") for s in states), states
