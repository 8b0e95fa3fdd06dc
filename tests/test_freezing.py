"""``freeze=True``: BatchNorm folding, channels-last convolutions and hoisting of weight-only
work (:mod:`torchfuse.freezing`), checked against eager PyTorch."""
from __future__ import annotations

import pytest
import torch

import torchfuse
from torchfuse import backend
from torchfuse.freezing import FrozenGraph, channels_last_convolutions, conv_bias_epilogues, fold_conv_batchnorm

from test_ops import DEVICE


@pytest.fixture(autouse=True)
def _no_tf32():
    """fp32 convolutions in full fp32 on both sides (cuDNN's TF32 would make eager and the
    folded convolution differ by ~1e-3 on a GPU, more than the tolerances below)."""
    with torch.backends.cudnn.flags(enabled=True, allow_tf32=False):
        yield


def _randomize_bn(model: torch.nn.Module) -> None:
    for mod in model.modules():
        if isinstance(mod, torch.nn.modules.batchnorm._BatchNorm):
            mod.running_mean.uniform_(-1, 1)
            mod.running_var.uniform_(0.5, 2.0)
            if mod.affine:
                mod.weight.data.uniform_(0.5, 1.5)
                mod.bias.data.uniform_(-1, 1)


def _conv_bn_net():
    return torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8), torch.nn.ReLU(),
        torch.nn.Conv2d(8, 8, 3, padding=1, groups=4, bias=False), torch.nn.BatchNorm2d(8, affine=False),
        torch.nn.Conv2d(8, 4, 1, bias=False), torch.nn.BatchNorm2d(4))


def _frozen_conv_bn():
    """An eval conv/BatchNorm network with random statistics, an input, and its frozen compile."""
    torch.manual_seed(0)
    model = _conv_bn_net().to(DEVICE).eval()
    _randomize_bn(model)
    x = torch.randn(2, 3, 10, 10, device=DEVICE)
    return model, x, torchfuse.compile(model, freeze=True, dynamic=False)


def _inference_graph():
    """The compiled (main) inference graph most recently built."""
    graphs = [g for g in backend.RECENT if g.name == "inference"]
    assert graphs, "no inference graph compiled"
    return graphs[-1]


def test_conv_batchnorm_folded_and_hoisted():
    """Every eval BatchNorm after a convolution is folded (with and without conv bias, with
    affine=False, grouped convolution); values match eager to fp32 rounding."""
    model, x, compiled = _frozen_conv_bn()
    with torch.no_grad():
        got = compiled(x)
        torch.testing.assert_close(got, model(x), rtol=1e-4, atol=1e-4)
    g = _inference_graph()
    ops = [str(n.target) for n in g.fx_graph.graph.nodes if n.op == "call_function"]
    # the normalization's arithmetic (rsqrt(var + eps), the scale and shift) left the per-call graph
    assert sum("convolution" in o for o in ops) == 3
    assert not any(o.startswith(("aten.rsqrt", "aten.sub", "aten.mul", "aten._native_batch_norm")) for o in ops), ops


def test_weights_changed_in_place_are_seen():
    """A weight updated in place (version counter) or replaced (new storage) after compiling is
    used by the next call: the hoisted part runs again."""
    model, x, compiled = _frozen_conv_bn()
    with torch.no_grad():
        compiled(x)
        compiled(x)
        model[1].running_var.mul_(3.0)           # in place: version counter
        torch.testing.assert_close(compiled(x), model(x), rtol=1e-4, atol=1e-4)
        model[0].weight.mul_(-1.0)
        torch.testing.assert_close(compiled(x), model(x), rtol=1e-4, atol=1e-4)
        state = {k: v.clone() * 0.5 if v.is_floating_point() else v for k, v in model.state_dict().items()}
        model.load_state_dict(state)             # copies into the same tensors
        torch.testing.assert_close(compiled(x), model(x), rtol=1e-4, atol=1e-4)
        model[5].weight = torch.nn.Parameter(torch.randn_like(model[5].weight))  # a new tensor
        torch.testing.assert_close(compiled(x), model(x), rtol=1e-4, atol=1e-4)


def test_hoisted_part_runs_only_when_weights_change(monkeypatch):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 8)).to(DEVICE).eval()
    x = torch.randn(4, 16, device=DEVICE)
    runs = []
    real = FrozenGraph._refresh
    monkeypatch.setattr(FrozenGraph, "_refresh", lambda self, params: runs.append(1) or real(self, params))
    compiled = torchfuse.compile(model, freeze=True, dynamic=False)
    with torch.no_grad():
        for _ in range(3):
            torch.testing.assert_close(compiled(x), model(x))
        assert len(runs) == 1, runs
        model[0].weight.add_(1.0)  # read through a hoisted transpose
        torch.testing.assert_close(compiled(x), model(x))
        assert len(runs) == 2, runs


def test_freeze_leaves_training_graphs_alone(monkeypatch):
    """With gradients on, ``freeze`` changes nothing (no rewrite runs) and says so once;
    gradients match eager."""
    from torchfuse import freezing

    calls = []
    for name in ("fold_conv_batchnorm", "conv_bias_epilogues", "channels_last_convolutions", "split_weight_subgraph"):
        real = getattr(freezing, name)
        monkeypatch.setattr(freezing, name, lambda *a, _real=real, **k: calls.append(1) or _real(*a, **k))
    torch.manual_seed(0)
    model = _conv_bn_net().to(DEVICE).eval()
    _randomize_bn(model)
    x = torch.randn(2, 3, 10, 10, device=DEVICE)
    compiled = torchfuse.compile(model, freeze=True, dynamic=False, channels_last_training=False)
    monkeypatch.setattr(torchfuse.backend, "_warned_freeze_grad", [False])
    with pytest.warns(UserWarning, match="freeze=True applies to graphs compiled under torch.no_grad"):
        compiled(x).sum().backward()
    got = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    model(x).sum().backward()
    for a, b in zip(got, [p.grad for p in model.parameters()]):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-4)
    assert calls == []


@pytest.mark.parametrize("training_bn", [True, False])
def test_batchnorm_not_folded_when_not_eval_or_shared(training_bn):
    """A BatchNorm in training mode, or a convolution whose output is also read elsewhere, is
    left as it is (and values match eager, including running-statistics updates)."""
    torch.manual_seed(0)

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv, self.bn = torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4)

        def forward(self, x):
            y = self.conv(x)
            return self.bn(y) + (0 if training_bn else y.mean())

    model = Net().to(DEVICE)
    model.train(training_bn)
    _randomize_bn(model)
    ref = Net().to(DEVICE)
    ref.load_state_dict(model.state_dict())
    ref.train(training_bn)
    x = torch.randn(2, 3, 8, 8, device=DEVICE)
    folded = []

    def backend_fn(gm, inputs):
        folded.append(fold_conv_batchnorm(gm))
        return gm

    torch._dynamo.reset()
    with torch.no_grad():
        got = torch.compile(model, backend=backend_fn)(x)
        torch.testing.assert_close(got, ref(x))
    assert folded == [0]
    torch.testing.assert_close(model.bn.running_mean, ref.bn.running_mean)


def test_channels_last_convolutions_keep_values_and_output_layout():
    """The channels-last rewrite (on for half-precision CUDA convolutions; forced here on the
    CPU) applies to plain and BatchNorm-folded convolutions alike, gives eager's values and
    returns a 4-D output in eager's (contiguous) layout."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.BatchNorm2d(8), torch.nn.ReLU(),
                                torch.nn.Conv2d(8, 8, 3)).to(torch.bfloat16).eval()
    _randomize_bn(model)
    x = torch.randn(2, 3, 12, 12, dtype=torch.bfloat16)
    counts = []

    def backend_fn(gm, inputs):
        counts.append((fold_conv_batchnorm(gm), channels_last_convolutions(gm, devices=("cpu",))))
        return gm

    torch._dynamo.reset()
    with torch.no_grad():
        got = torch.compile(model, backend=backend_fn)(x)
        want = model(x)
    assert counts == [(1, 2)]
    assert got.is_contiguous()
    # bf16: the folded weight is rounded once, and the layouts sum in different orders
    torch.testing.assert_close(got, want, rtol=3e-2, atol=3e-2)


def test_training_convolutions_run_channels_last_with_eager_gradients(monkeypatch):
    """Training graphs under autocast convert their convolutions to channels-last (on for
    CUDA; forced here on the test's device): gradients and running statistics match eager."""
    from torchfuse import freezing

    rewritten = []
    real = freezing.channels_last_convolutions
    monkeypatch.setattr(freezing, "channels_last_convolutions",
                        lambda gm, devices=("cuda",): rewritten.append(real(gm, devices=(DEVICE,))) or rewritten[-1])
    torch.manual_seed(0)
    model = _conv_bn_net().to(DEVICE).train()
    ref = _conv_bn_net().to(DEVICE).train()
    ref.load_state_dict(model.state_dict())
    x = torch.randn(4, 3, 12, 12, device=DEVICE)
    compiled = torchfuse.compile(model, dynamic=False)
    for m in (compiled, ref):
        with torch.autocast(DEVICE, torch.bfloat16):
            out = m(x)
        assert out.is_contiguous()
        out.float().square().mean().backward()
    assert rewritten and rewritten[0] >= 2, rewritten
    for (name, p), q in zip(model.named_parameters(), ref.parameters()):
        # bf16 convolutions summed in another layout's order: a few bf16 ulps
        torch.testing.assert_close(p.grad, q.grad, rtol=5e-2, atol=5e-3, msg=name)
    for a, b in zip(model.buffers(), ref.buffers()):
        torch.testing.assert_close(a, b, rtol=1e-2, atol=1e-3)


def test_conv_bias_joins_the_following_fusion_group():
    """A convolution's bias becomes an add after it (on for CUDA; forced here for the test's
    device), which fuses with the activation that follows instead of costing a kernel of its
    own; values match eager."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.ReLU(), torch.nn.Conv2d(8, 4, 1),
                                torch.nn.Hardsigmoid())
    model = model.to(DEVICE).eval()
    x = torch.randn(2, 3, 9, 9, device=DEVICE)
    moved = []

    def backend_fn(gm, inputs):
        moved.append(conv_bias_epilogues(gm, devices=(DEVICE,)))
        return backend.torchfuse_backend(gm, inputs, options=torchfuse.Options.from_env(interpret=DEVICE == "cpu"))

    torch._dynamo.reset()
    with torch.no_grad():
        got = torch.compile(model, backend=backend_fn, dynamic=False)(x)
        want = model(x)
    assert moved == [2]
    torch.testing.assert_close(got, want)
    graph = _inference_graph()
    calls = [str(n.target) for n in graph.segmentation.calls]
    assert calls == ["aten.convolution.default"] * 2, calls
    fused = [sorted(str(n.target) for n in g.nodes) for g in graph.segmentation.groups]
    assert any("aten.add.Tensor" in ops and "aten.relu.default" in ops for ops in fused), fused


def test_conv_bias_of_an_unbatched_convolution_stays():
    """An unbatched convolution (input without a batch dim) has its channels in dim 0, where
    the bias add after it would broadcast wrongly: it keeps its bias."""
    torch.manual_seed(0)
    conv = torch.nn.Conv2d(3, 5, 3).to(DEVICE).eval()
    x = torch.randn(3, 7, 7, device=DEVICE)
    moved = []

    def backend_fn(gm, inputs):
        moved.append(conv_bias_epilogues(gm, devices=(DEVICE,)))
        return gm

    torch._dynamo.reset()
    with torch.no_grad():
        got = torch.compile(conv, backend=backend_fn, dynamic=False)(x)
        torch.testing.assert_close(got, conv(x))
    assert moved == [0]


def test_unfrozen_inference_under_cuda_graphs_runs_convolutions_channels_last(monkeypatch):
    """``mode="reduce-overhead"`` without ``freeze``: half-precision convolutions of inference
    graphs are converted to channels-last (weights in every call; on for CUDA, forced here on
    the test's device), outputs keep eager's layout and values; with the option off they are
    left alone."""
    from torchfuse import freezing

    rewritten = []
    real = freezing.channels_last_convolutions
    monkeypatch.setattr(freezing, "channels_last_convolutions",
                        lambda gm, devices=("cuda",): rewritten.append(real(gm, devices=(DEVICE,))) or rewritten[-1])
    torch.manual_seed(0)
    model = _conv_bn_net().to(DEVICE, torch.bfloat16).eval()
    x = torch.randn(2, 3, 12, 12, device=DEVICE, dtype=torch.bfloat16)
    with torch.no_grad():
        want = model(x)
        for enabled in (True, False):
            torch._dynamo.reset()
            rewritten.clear()
            got = torchfuse.compile(model, mode="reduce-overhead", dynamic=False, channels_last_inference=enabled)(x)
            assert got.is_contiguous() == want.is_contiguous()
            # bf16 convolutions summed in another layout's order: a few bf16 ulps
            torch.testing.assert_close(got, want, rtol=5e-2, atol=5e-2)
            assert (bool(rewritten) and rewritten[0] >= 2) == enabled, rewritten
