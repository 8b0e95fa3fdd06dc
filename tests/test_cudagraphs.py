"""CUDA graphs (mode="reduce-overhead"): capture, replay, new shapes, safe outputs, refusals.

The capture tests need a GPU and run on one; on a CPU-only machine the CPU test below checks
that the runner refuses to capture and says why.
"""
from __future__ import annotations

import pytest
import torch

import torchfuse
import torchfuse.backend as backend
from torchfuse.runtime.cudagraphs import CudaGraphOutputInUse
from conftest import DEVICE

gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA graphs need a GPU")


def _model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.GELU(), torch.nn.LayerNorm(64),
                               torch.nn.Linear(64, 8)).eval()


def test_cpu_graph_is_not_captured_and_says_why():
    m = _model()
    x = torch.randn(4, 32)
    with torch.no_grad():
        out = torchfuse.compile(m, mode="reduce-overhead")(x)
        torch.testing.assert_close(out, m(x))
    stats = backend.RECENT[-1].stats
    assert "not captured" in stats["cudagraph"] and "CUDA" in stats["cudagraph"]


def test_training_graphs_say_whether_they_are_captured():
    """With gradients on, the forward and backward graphs are captured on a GPU
    (``torchfuse.runtime.training_graphs``); on CPU tensors they run uncaptured, and the report
    (the graph's stats, which ``explain`` prints) says why instead of saying nothing."""
    m = _model().to(DEVICE)
    x = torch.randn(4, 32, device=DEVICE)
    out = torchfuse.compile(m, mode="reduce-overhead")(x)
    out.sum().backward()
    graphs = [g for g in backend.RECENT[-2:] if g.name in ("forward", "backward")]
    assert {g.name for g in graphs} == {"forward", "backward"}
    for g in graphs:
        if DEVICE == "cpu":
            assert g.stats["cudagraph"].startswith("not captured") and "cpu" in g.stats["cudagraph"]
        else:
            assert g.stats["cudagraph"].startswith("captured")
    torch.testing.assert_close(out, m(x))


@gpu
def test_replays_match_eager_for_new_inputs_and_shapes():
    m = _model().cuda()
    cm = torchfuse.compile(m, mode="reduce-overhead")
    with torch.no_grad():
        for batch in (4, 4, 4, 7, 7, 7, 4):
            x = torch.randn(batch, 32, device="cuda")
            torch.testing.assert_close(cm(x), m(x))
    assert backend.RECENT[-1].stats["cudagraph"].startswith("captured")


@gpu
def test_outputs_are_not_overwritten_by_the_next_replay():
    m = _model().cuda()
    cm = torchfuse.compile(m, mode="reduce-overhead")
    with torch.no_grad():
        xs = [torch.randn(4, 32, device="cuda") for _ in range(4)]
        outs = [cm(x) for x in xs]  # replays after the second call
        for x, o in zip(xs, outs):
            torch.testing.assert_close(o, m(x))
        y = cm(cm(xs[0])[:, :8].repeat(1, 4))  # f(f(x))
        torch.testing.assert_close(y, m(m(xs[0])[:, :8].repeat(1, 4)))


@gpu
def test_without_copies_holding_an_output_raises():
    m = _model().cuda()
    cm = torchfuse.compile(m, mode="reduce-overhead", cudagraph_copy_outputs=False)
    with torch.no_grad():
        x = torch.randn(4, 32, device="cuda")
        cm(x)
        cm(x)
        held = cm(x)  # a replay's output, still referenced
        with pytest.raises(CudaGraphOutputInUse):
            cm(x)
        del held
        torch.testing.assert_close(cm(x), m(x))


@gpu
def test_training_graphs_replay_with_an_input_that_requires_grad():
    m = _model().cuda().train()
    cm = torchfuse.compile(m, mode="reduce-overhead")
    x = torch.randn(4, 32, device="cuda", requires_grad=True)
    for _ in range(4):
        x.grad = None
        out = cm(x)
        out.sum().backward()
    grad = x.grad.clone()
    x.grad = None
    ref = m(x)
    ref.sum().backward()
    torch.testing.assert_close(out, ref)
    torch.testing.assert_close(grad, x.grad)


# ------------------------------------------------------------------ runner logic on the CPU
# The runner's bookkeeping (signatures, static inputs read in place, capturing again when a
# parameter moves, output safety) does not depend on CUDA: a stand-in for the CUDA graph that
# re-runs the recorded call on the same buffers and writes into the recorded outputs (what a
# replay does) lets CI check it without a GPU.

from torchfuse.config import Options  # noqa: E402
from torchfuse.runtime.cudagraphs import CudaGraphRunner  # noqa: E402


class _Replayer:
    def __init__(self, fn, args, outputs):
        self.fn, self.args, self.outputs = fn, list(args), outputs

    def replay(self):
        for o, n in zip(self.outputs, self.fn(list(self.args))):
            o.copy_(n)


class _CpuRunner(CudaGraphRunner):
    device_type = "cpu"

    def _record(self, static_args):
        self.recorded = getattr(self, "recorded", 0) + 1
        outs = self.compiled(list(static_args))
        return _Replayer(self.compiled, static_args, outs), outs

    def _synchronize(self):
        pass


class _Linear:
    """A compiled graph stand-in: inputs (weight, bias, x), boxed; counts its calls."""

    name = "linear"

    def __init__(self):
        self.stats, self.calls = {}, 0

    def __call__(self, args):
        w, b, x = args
        args.clear()
        self.calls += 1
        return [x @ w + b]


def _runner(static=(0, 1), **options):
    return _CpuRunner(_Linear(), Options(**options), None if static is None else list(static))


@pytest.mark.parametrize("static", [(0, 1), None])
def test_runner_replays_per_shape_and_reads_parameters_in_place(static):
    torch.manual_seed(0)
    w, b = torch.randn(8, 4), torch.randn(4)
    r = _runner(static)
    with torch.no_grad():
        for batch in (3, 3, 3, 5, 5, 5, 3):
            x = torch.randn(batch, 8)
            torch.testing.assert_close(r([w, b, x])[0], x @ w + b)
        assert r.recorded == 2 and r.dyn_idx == [2]
        w.mul_(2.0)  # in place: the replay reads the parameter's memory
        x = torch.randn(3, 8)
        torch.testing.assert_close(r([w, b, x])[0], x @ w + b)
        assert r.recorded == 2


def test_runner_captures_again_when_a_parameter_moves():
    torch.manual_seed(0)
    w, b = torch.randn(8, 4), torch.randn(4)
    r = _runner()
    with torch.no_grad():
        for _ in range(3):
            x = torch.randn(3, 8)
            r([w, b, x])
        w2 = torch.randn(8, 4)  # a replaced parameter: new address
        for _ in range(3):
            x = torch.randn(3, 8)
            torch.testing.assert_close(r([w2, b, x])[0], x @ w2 + b)
    assert r.recorded == 2


def test_runner_learned_static_inputs_survive_a_reused_input():
    """Without AOTAutograd's list, an input passed as the same tensor on the first two calls
    is taken for a parameter; a later, different input is still computed correctly."""
    torch.manual_seed(0)
    w, b, x = torch.randn(8, 4), torch.randn(4), torch.randn(3, 8)
    r = _runner(static=None)
    with torch.no_grad():
        r([w, b, x])
        r([w, b, x])
        assert r.static_idx == [0, 1, 2]
        y = torch.randn(3, 8)
        torch.testing.assert_close(r([w, b, y])[0], y @ w + b)


def test_runner_signs_only_the_non_static_inputs(monkeypatch):
    """Steady-state calls sign the inputs that change (not the hundreds of parameters)."""
    signed = []
    real = CudaGraphRunner._signature
    monkeypatch.setattr(CudaGraphRunner, "_signature", lambda self, args, idx: signed.append(list(idx)) or
                        real(self, args, idx))
    w, b = torch.randn(8, 4), torch.randn(4)
    r = _runner()
    with torch.no_grad():
        for _ in range(4):
            r([w, b, torch.randn(3, 8)])
    assert all(s == [2] for s in signed)


def test_runner_without_copies_refuses_to_overwrite_a_held_output():
    w, b = torch.randn(8, 4), torch.randn(4)
    r = _runner(cudagraph_copy_outputs=False)
    with torch.no_grad():
        x = torch.randn(3, 8)
        r([w, b, x])
        r([w, b, x])
        held = r([w, b, x])[0]
        with pytest.raises(CudaGraphOutputInUse):
            r([w, b, x])
        del held
        torch.testing.assert_close(r([w, b, x])[0], x @ w + b)


class _DoubledLinear:
    """A compiled main-graph stand-in for frozen weights: inputs (weight, bias, x, 2*weight)."""

    name = "inference"

    def __init__(self):
        self.stats, self.calls = {}, 0

    def __call__(self, args):
        w, b, x, w2 = args
        args.clear()
        self.calls += 1
        return [x @ w2 + b]


def test_frozen_wrapper_vouches_for_static_inputs_and_changes_are_still_seen(monkeypatch):
    """Under frozen weights the wrapper checks every parameter's address and version; when
    nothing changed, the CUDA-graph runner inside skips its own address check. In-place updates
    and replaced parameters still give eager's values (the latter captured again)."""
    from types import SimpleNamespace

    from torchfuse.freezing import FrozenGraph

    torch.manual_seed(0)
    w, b = torch.randn(8, 4), torch.randn(4)
    split = SimpleNamespace(weights=lambda w: (w * 2,), weight_inputs=[0], main=None)
    runner = _CpuRunner(_DoubledLinear(), Options(), [0, 1, 3])
    checks = []
    real = runner._static_unchanged
    monkeypatch.setattr(runner, "_static_unchanged", lambda args: checks.append(1) or real(args))
    frozen = FrozenGraph(split, runner, static_inputs=[0, 1])
    with torch.no_grad():
        for _ in range(5):
            x = torch.randn(3, 8)
            torch.testing.assert_close(frozen([w, b, x])[0], x @ (w * 2) + b)
        assert runner.recorded == 1 and frozen.refreshes == 1 and checks == []
        w.mul_(-1.0)  # in place: version changes, the values are recomputed into the same memory
        x = torch.randn(3, 8)
        torch.testing.assert_close(frozen([w, b, x])[0], x @ (w * 2) + b)
        assert frozen.refreshes == 2 and len(checks) == 1 and runner.recorded == 1
        b2 = torch.randn(4)  # a replaced parameter the main graph reads directly
        for _ in range(3):
            x = torch.randn(3, 8)
            torch.testing.assert_close(frozen([w, b2, x])[0], x @ (w * 2) + b2)
        assert runner.recorded == 2 and len(checks) == 2


def test_runner_names_the_input_that_is_not_on_a_cuda_device():
    """A graph called with a CPU input runs uncaptured, and the refusal names that input."""
    r = CudaGraphRunner(_Linear(), Options(), [0, 1], name_input=["w", "b", "x (float32[3, 8])"].__getitem__)
    w, b, x = torch.randn(8, 4), torch.randn(4), torch.randn(3, 8)
    with torch.no_grad():
        torch.testing.assert_close(r([w, b, x])[0], x @ w + b)
    assert r.disabled == "input x (float32[3, 8]) is on cpu, not a CUDA device", r.disabled


def test_runner_refuses_a_graph_that_writes_a_non_static_input():
    """A replay would write its private copy of such an input, not the caller's tensor."""
    r = _CpuRunner(_Linear(), Options(), [0, 1], mutated_inputs={2})
    w, b, x = torch.randn(8, 4), torch.randn(4), torch.randn(3, 8)
    with torch.no_grad():
        for _ in range(3):
            torch.testing.assert_close(r([w, b, x])[0], x @ w + b)
    assert r.disabled and "input(s) 2 written in place" in r.stats["cudagraph"]
    assert not _CpuRunner(_Linear(), Options(), [0, 1], mutated_inputs={1}).disabled
    named = _CpuRunner(_Linear(), Options(), [0, 1], mutated_inputs={2}, name_input=["w", "b", "x (float32[3, 8])"].__getitem__)
    assert "input(s) x (float32[3, 8]) written in place" in named.stats["cudagraph"]


@gpu
def test_inference_replays_draw_new_random_numbers():
    def f(x):
        return torch.nn.functional.dropout(x * 2, p=0.5, training=True) + torch.rand_like(x)

    cf = torchfuse.compile(f, mode="reduce-overhead")
    x = torch.randn(64, 64, device="cuda")
    with torch.no_grad():
        for _ in range(3):  # planning, capture, a replay: the calls below all replay
            cf(x)
        torch.manual_seed(3)
        first = [cf(x) for _ in range(3)]
        torch.manual_seed(3)
        again = [cf(x) for _ in range(3)]
    assert backend.RECENT[-1].stats["cudagraph"].startswith("captured")
    assert not torch.equal(first[1], first[2])
    for a, b in zip(first, again):
        assert torch.equal(a, b)


class _ValueAndViews:
    """A compiled graph stand-in returning a value, three views of it (one of another dtype) and a
    value of its own."""

    name = "value_and_views"

    def __init__(self):
        self.stats = {}

    def __call__(self, args):
        (x,) = args
        args.clear()
        y = x.exp() * 2
        return [y, y[:, :2], y.t(), x.sin(), y.view(torch.int32)]


def test_empty_outputs_share_no_memory():
    """Storages without bytes all have address 0: empty outputs of a replay are not one memory
    (they were copied as views of one another, sharing a version counter)."""
    from torchfuse.runtime.cudagraphs import _sharing_memory

    outs = [torch.empty(0, 4), torch.empty(0, 4, dtype=torch.float64), torch.randn(3)]
    assert outs[0].untyped_storage().data_ptr() == outs[1].untyped_storage().data_ptr() == 0
    assert _sharing_memory(outs) == ()


def test_replayed_outputs_on_one_memory_stay_one_memory():
    """A replay's copies of a value and its views (``y, y[:, :2], y.t()``, ``y.view(torch.int32)``)
    share one copy, the views views of the value: a write through one is seen through the others
    and raises the value's version, as in eager, on every replay (separate copies came apart
    after the first call; a view of another dtype got a copy of its own). Values are eager's."""
    r = _CpuRunner(_ValueAndViews(), Options(), [])
    torch.manual_seed(0)
    kept = []
    with torch.no_grad():
        for _ in range(3):
            x = torch.randn(4, 3)
            y, d, t, s, bits = r([x])
            torch.testing.assert_close(y, x.exp() * 2)
            assert bits.dtype == torch.int32 and torch.equal(bits, y.view(torch.int32))
            kept.append((s, x.sin()))
            version = y._version
            d.fill_(7.0)
            assert (y[:, :2] == 7).all() and (t[:2] == 7).all() and y._version == version + 1
            assert (bits[:, :2] == 0x40E00000).all()  # 7.0's bits
            assert d._base is y and t._base is y
    assert r.recorded == 1
    for s, want in kept:  # the output on memory of its own is a copy, not overwritten by later replays
        torch.testing.assert_close(s, want)
