"""``freeze=True``: BatchNorm folding, channels-last convolutions and hoisting of weight-only
work (:mod:`torchfuse.freezing`), checked against eager PyTorch."""
from __future__ import annotations

import copy

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


def test_replacing_a_parameter_leaves_the_old_one_unchanged():
    """A hoisted value that views a parameter (``linear``'s transposed weight) is that
    parameter's memory: when a new parameter replaces it, or ``functional_call`` passes another
    set, the new values are not written into the old tensor, and calls with either set give
    eager's values."""
    from torch.func import functional_call

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.GELU(), torch.nn.Linear(8, 4)).to(DEVICE).eval()
    compiled = torchfuse.compile(model, freeze=True, dynamic=False)
    x = torch.randn(2, 8, device=DEVICE)
    with torch.no_grad():
        compiled(x)
        old = model[0].weight
        kept = old.detach().clone()
        model[0].weight = torch.nn.Parameter(torch.randn_like(old))
        torch.testing.assert_close(compiled(x), model(x))
        assert torch.equal(old, kept)
        sets = [{k: torch.randn_like(v) for k, v in model.state_dict().items()} for _ in range(2)]
        copies = [{k: v.clone() for k, v in p.items()} for p in sets]
        for p in (*sets, sets[0]):
            torch.testing.assert_close(functional_call(compiled, p, (x,)), functional_call(model, p, (x,)))
        for p, c in zip(sets, copies):
            for k in p:
                assert torch.equal(p[k], c[k]), k


def test_weights_made_under_inference_mode_are_read_every_call():
    """Inference tensors keep no version counter, and ``inference_mode`` lets them be written in
    place unseen: parameters made under it (a model loaded for inference) work, and a frozen
    graph reading them recomputes its weight-only part on every call."""
    torch.manual_seed(0)
    with torch.inference_mode():
        model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.BatchNorm1d(8)).to(DEVICE).eval()
        _randomize_bn(model)
    compiled = torchfuse.compile(model, freeze=True, dynamic=False)
    x = torch.randn(4, 8, device=DEVICE)
    with torch.inference_mode():
        torch.testing.assert_close(compiled(x), model(x))
        model[0].weight.mul_(-2.0)
        model[1].running_var.mul_(3.0)
        torch.testing.assert_close(compiled(x), model(x))


def test_batchnorm_after_an_unbatched_convolution_is_not_folded():
    """An unbatched ``Conv1d`` ((C_in, L) in) gives (C_out, L), which ``BatchNorm1d`` reads as
    a batch of C_out rows of L channels: its statistics are per position, not per output
    channel, so folding them into the convolution's weight would scale the wrong axis (here
    C_out == L, so no shape error would show it)."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv1d(3, 5, 3, padding=1), torch.nn.BatchNorm1d(5)).to(DEVICE).eval()
    _randomize_bn(model)
    x = torch.randn(3, 5, device=DEVICE)
    with torch.no_grad():
        torch.testing.assert_close(torchfuse.compile(model, freeze=True, dynamic=False)(x), model(x),
                                   rtol=1e-4, atol=1e-4)
        batched = torch.randn(2, 3, 5, device=DEVICE)  # the batched form still folds, and agrees
        torch.testing.assert_close(torchfuse.compile(model, freeze=True, dynamic=False)(batched), model(batched),
                                   rtol=1e-4, atol=1e-4)


class _ClassToken(torch.nn.Module):
    """A ViT-style class token plus its position, broadcast over the batch: a weights-only value
    with a stride-0 dim; ``zero_row`` also zeroes a row of a weight in the forward."""

    def __init__(self, zero_row: bool):
        super().__init__()
        self.zero_row = zero_row
        self.cls, self.pos = torch.nn.Parameter(torch.randn(1, 1, 4)), torch.nn.Parameter(torch.randn(1, 4, 4))
        self.proj, self.head = torch.nn.Linear(4, 4), torch.nn.Linear(4, 3)

    def forward(self, x):
        if self.zero_row:
            with torch.no_grad():
                self.proj.weight[0].zero_()
        cls = (self.cls + self.pos[:, :1]).expand(x.shape[0], -1, -1)
        return self.head(torch.cat([cls, self.proj(x) + self.pos[:, 1:]], 1).mean(1))


@pytest.mark.parametrize("zero_row", [False, True], ids=["optimizer_step", "zeroed_in_forward"])
def test_an_expanded_weights_only_value_is_refreshed(zero_row):
    """A weights-only value that is a broadcast (stride 0) is refreshed when a weight changes,
    by an optimizer step between calls or by the forward's own write: copying the new values
    into it raised ("more than one element of the written-to tensor refers to a single memory
    location"). Outputs equal eager's at every call."""
    torch.manual_seed(0)
    ref = _ClassToken(zero_row).to(DEVICE)
    model = copy.deepcopy(ref)
    compiled = torchfuse.compile(model, freeze=True, dynamic=False)
    opts = [torch.optim.SGD(m.parameters(), lr=0.1) for m in (model, ref)]
    x = torch.randn(2, 3, 4, device=DEVICE)
    for _ in range(3):
        with torch.no_grad():
            torch.testing.assert_close(compiled(x), ref(x), rtol=1e-5, atol=1e-5)
        for m, opt in zip((model, ref), opts):
            m(x).square().mean().backward()
            opt.step()
            opt.zero_grad()


def test_weights_swapped_through_data_are_neither_overwritten_nor_stale():
    """Evaluating EMA weights by ``p.data = ema`` and back: the refresh must not write the new
    values into the memory the last call read (the user's saved training weights, which a
    cached ``w.t()`` views: ``.data =`` keeps the parameter object, and so hid the old memory),
    and a new tensor must not take the last call's address with the same counter (``.data =``
    keeps the counter) and so reuse stale values."""
    torch.manual_seed(0)
    m = torch.nn.Linear(4, 3).to(DEVICE)
    compiled = torchfuse.compile(m, freeze=True, dynamic=False)
    x = torch.randn(2, 4, device=DEVICE)
    with torch.no_grad():
        compiled(x)
        saved = m.weight.data
        kept = saved.clone()
        for _ in range(4):
            m.weight.data = torch.randn(3, 4, device=DEVICE)
            m.weight.data = torch.randn(3, 4, device=DEVICE)  # (may land where the last call's was)
            torch.testing.assert_close(compiled(x), m(x))
        assert torch.equal(saved, kept)
        m.weight.data = saved
        torch.testing.assert_close(compiled(x), m(x))


class _BatchNormOfLaterArguments(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3)
        self.register_buffer("rm", torch.randn(4))
        self.register_buffer("rv", torch.rand(4) + 0.5)
        self.weight, self.bias = torch.nn.Parameter(torch.randn(4)), torch.nn.Parameter(torch.randn(4))

    def forward(self, x):
        return torch.nn.functional.batch_norm(self.conv(x), self.rm, self.rv.clamp(min=1e-3), self.weight.abs(),
                                              self.bias)


def test_batchnorm_whose_arguments_are_computed_after_the_convolution():
    """``F.batch_norm(conv(x), rm, rv.clamp(min=1e-3), w.abs(), b)``: the clamped variance and
    the scale are computed after the convolution, where the folded weight (made before it)
    cannot read them; such a BatchNorm is not folded (folding it raised at every call)."""
    torch.manual_seed(0)
    model = _BatchNormOfLaterArguments().to(DEVICE).eval()
    x = torch.randn(2, 3, 8, 8, device=DEVICE)
    with torch.no_grad():
        torch.testing.assert_close(torchfuse.compile(model, freeze=True, dynamic=False)(x), model(x),
                                   rtol=1e-5, atol=1e-5)


def test_an_fp64_fold_is_computed_in_fp64():
    """Folding a float64 model's BatchNorm computes in float64 (in fp32 it was 6e-8 from
    eager, an fp32 rounding of every folded weight)."""
    torch.manual_seed(0)
    model = _conv_bn_net().to(DEVICE).double().eval()
    _randomize_bn(model)
    x = torch.randn(2, 3, 16, 16, device=DEVICE, dtype=torch.float64)
    with torch.no_grad():
        torch.testing.assert_close(torchfuse.compile(model, freeze=True, dynamic=False)(x), model(x),
                                   rtol=1e-12, atol=1e-12)


class _WriteAfterConv(torch.nn.Module):
    def __init__(self, write: str):
        super().__init__()
        self.write = write
        self.conv, self.bn = torch.nn.Conv2d(3, 4, 3, padding=1), torch.nn.BatchNorm2d(4)

    def forward(self, x):
        y = self.conv(x)
        if self.write == "add_":
            self.bn.running_mean.add_(1.0)
        elif self.write == "foreach":
            torch._foreach_mul_([self.bn.weight], 0.5)
        elif self.write == "foreach_keyword":
            torch._foreach_mul_(self=[self.bn.running_var], scalar=0.5)
        elif self.write == "out_tuple":
            torch.sort(self.bn.running_mean * 2, out=(self.bn.running_mean, torch.empty(4, dtype=torch.long,
                                                                                          device=x.device)))
        else:  # a training-mode batch norm of another input updates the same statistics
            torch.nn.functional.batch_norm(x[:, :1].expand(-1, 4, -1, -1), self.bn.running_mean,
                                           self.bn.running_var, training=True)
        return self.bn(y)


@pytest.mark.parametrize("write", ["add_", "foreach", "foreach_keyword", "out_tuple", "training_batch_norm"])
def test_batchnorm_not_folded_across_a_write_of_its_tensors(write):
    """A BatchNorm whose statistics or weight are written between its convolution and itself
    reads them after the write in eager; the folded weight would be made before the
    convolution, from the old values, so it is not folded. Outputs and statistics equal
    eager's over two calls."""
    torch.manual_seed(0)
    ref = _WriteAfterConv(write).to(DEVICE).eval()
    _randomize_bn(ref)
    model = copy.deepcopy(ref)
    compiled = torchfuse.compile(model, freeze=True, dynamic=False)
    with torch.no_grad():
        for _ in range(2):
            x = torch.randn(2, 3, 5, 5, device=DEVICE)
            torch.testing.assert_close(compiled(x), ref(x), rtol=1e-4, atol=1e-4)
            torch.testing.assert_close(model.bn.running_mean, ref.bn.running_mean)
            torch.testing.assert_close(model.bn.running_var, ref.bn.running_var)
            torch.testing.assert_close(model.bn.weight, ref.bn.weight)


@pytest.mark.parametrize("grad", [False, True], ids=["no_grad", "grad"])
def test_running_statistics_eager_training_updates_are_seen(grad):
    """Eager BatchNorm in training writes its running statistics without raising their
    version counters: a frozen model evaluated after an eager training call of the same
    modules (validation beside an uncompiled training loop) uses the new statistics, as the
    module's ``num_batches_tracked`` counter tells."""
    model, x, compiled = _frozen_conv_bn()
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), model(x), rtol=1e-4, atol=1e-4)
    version = model[1].running_mean._version
    model.train()
    with torch.set_grad_enabled(grad):
        model(torch.randn(4, 3, 10, 10, device=DEVICE) * 3 + 1)
    model.eval()
    assert model[1].running_mean._version == version  # (why the counters alone miss it)
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), model(x), rtol=1e-4, atol=1e-4)


def test_a_folded_batchnorm_keeps_its_inputs_dtype_under_autocast():
    """Under bf16 autocast a convolution's output is bf16 and so is its BatchNorm's (fp32
    statistics); the folded form adds the shift in fp32 and rounds once to bf16."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 6, 3, padding=1), torch.nn.BatchNorm2d(6)).to(DEVICE).eval()
    _randomize_bn(model)
    x = torch.randn(3, 3, 6, 6, device=DEVICE)
    compiled = torchfuse.compile(model, freeze=True, dynamic=False)
    with torch.no_grad(), torch.autocast(DEVICE, dtype=torch.bfloat16):
        got, want = compiled(x), model(x)
    assert got.dtype == want.dtype == torch.bfloat16
    ref = model.double()(x.double())
    assert (got.double() - ref).abs().max() <= 1.5 * (want.double() - ref).abs().max()


class WeightOutputs(torch.nn.Module):
    """Returns values computed from its weight alone, one of them through two views."""

    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(4, 3))

    def forward(self, x):
        k = self.w.exp()
        return x @ k, self.w * 2, k.t(), k[1:]


def test_an_output_computed_from_weights_alone_is_a_new_tensor_each_call():
    """The hoisted values are the frozen graph's own, kept across calls; an output that is one
    of them or views one is returned as a copy, as eager returns a new tensor each call: the
    caller may write into it without changing later calls, and two views of one value still
    alias each other."""
    torch.manual_seed(0)
    model = WeightOutputs().to(DEVICE)
    compiled = torchfuse.compile(model, freeze=True, dynamic=False)
    x = torch.randn(2, 4, device=DEVICE)
    with torch.no_grad():
        first = compiled(x)
        for t in first[1:]:
            t.add_(100)  # the caller's own writes
        second = compiled(x)
        want = model(x)
        for got, expected in zip(second, want):
            torch.testing.assert_close(got, expected)
            assert got.stride() == expected.stride()
        second[2].zero_()  # k.t() and k[1:] view one tensor in eager, and here
        assert (second[3] == 0).all() and not (want[3] == 0).all()
        torch.testing.assert_close(compiled(x)[3], model(x)[3])
        assert all(a.data_ptr() != b.data_ptr() for a, b in zip(first[1:], second[1:]))


class SplitWeightOutput(torch.nn.Module):
    """Returns a piece of ``split`` of a value computed from its weight alone, its size taken
    from the input's (symbolic once a second size is seen)."""

    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.arange(12.0).reshape(12, 1))

    def forward(self, x):
        w2 = self.w * 2
        head = torch.split(w2, [x.shape[0], 12 - x.shape[0]])[0]
        return head, x * w2.t()[:, :4]


def test_a_split_piece_of_a_weight_value_is_returned_as_a_copy():
    """A piece of ``split`` (an ``operator.getitem`` of a list of views) of a hoisted value was
    not seen as a view of it once sizes were symbolic: it was returned on the frozen graph's
    own memory, so the caller's write into it changed every later call's values, and a later
    refresh after a weight change overwrote the tensor the caller held. Values against eager."""
    model = SplitWeightOutput().to(DEVICE)
    compiled = torchfuse.compile(model, freeze=True)
    with torch.no_grad():
        compiled(torch.ones(2, 1, device=DEVICE))
        held, _ = compiled(torch.ones(3, 1, device=DEVICE))  # a new size: the symbolic graph
        kept = held.clone()
        held.add_(100)  # the caller's own write
        for n in (4, 5):
            x = torch.ones(n, 1, device=DEVICE)
            for got, want in zip(compiled(x), model(x)):
                torch.testing.assert_close(got, want)
        held, _ = compiled(torch.ones(3, 1, device=DEVICE))
        kept = held.clone()
        model.w.mul_(-1)
        x = torch.ones(4, 1, device=DEVICE)
        for got, want in zip(compiled(x), model(x)):
            torch.testing.assert_close(got, want)
        torch.testing.assert_close(held, kept)  # the weight change did not reach it


class WeightOutputsOfTwoDtypes(torch.nn.Module):
    """Returns a value computed from its weight alone beside its bits, and a complex buffer's
    double, as its conjugate, beside its real part."""

    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(2, 3))
        self.register_buffer("z", torch.randn(2, 6).view(torch.complex64))

    def forward(self, x):
        y, c = self.w * 2, self.z * 2
        return y, y.view(torch.int32), c.conj(), c.real, x + y


def test_weight_outputs_of_two_dtypes_on_one_memory_stay_one_memory():
    """An output computed from weights alone and a view of it with another dtype (``y.view(
    torch.int32)``, ``c.real`` of a complex ``c`` returned as ``c.conj()``) are copied as one
    memory: a write through the value is seen through the view, as in eager (they got a copy
    each)."""
    torch.manual_seed(0)
    model = WeightOutputsOfTwoDtypes().to(DEVICE).eval()
    compiled = torchfuse.compile(model, freeze=True, dynamic=False)
    x = torch.zeros(2, 3, device=DEVICE)
    with torch.no_grad():
        for f in (model, compiled, compiled):
            y, bits, c, real, _ = f(x)
            assert bits.dtype == torch.int32 and torch.equal(bits, y.view(torch.int32))
            y.add_(1.0)
            c.mul_(10)
            assert torch.equal(bits, y.view(torch.int32)) and torch.equal(real, c.real)
            torch.testing.assert_close(y, model.w * 2 + 1)


class EmptyWeightOutputs(torch.nn.Module):
    """Returns two empty values computed from its weight alone, on storages of their own."""

    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(2, 4))

    def forward(self, x):
        return self.w[:0] * 2, (self.w[:0] * 3).double(), x + 1


def test_empty_weight_outputs_share_no_memory():
    """Empty outputs computed from weights alone (their storages all at address 0) are copied
    apart: a write to one leaves the other's version, which a backward that saved it checks
    (they were made views of one memory, and the backward raised where eager's runs)."""
    model = EmptyWeightOutputs().to(DEVICE).eval()
    compiled = torchfuse.compile(model, freeze=True, dynamic=False)
    for f in (model, compiled, compiled):
        with torch.no_grad():
            a, b, _ = f(torch.zeros(2, device=DEVICE))
        p = torch.ones(4, dtype=torch.float64, device=DEVICE, requires_grad=True)
        loss = (b * p).sum()
        version = b._version
        a.add_(1)
        assert b._version == version
        loss.backward()


@pytest.mark.parametrize("make_optimizer", [
    lambda ps: torch.optim.AdamW(ps, lr=0.1, fused=True),
    lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9, fused=True),
    lambda ps: torch.optim.AdamW(ps, lr=0.1, foreach=True)], ids=["adamw-fused", "sgd-fused", "adamw-foreach"])
def test_optimizer_steps_between_frozen_calls_are_seen(make_optimizer):
    """An optimizer step between calls is seen, fused ones included: PyTorch's fused kernels
    write the parameters without raising their version counters (AdamW's fused step leaves
    them as they were), so the frozen graph also counts fused steps. Each call against
    eager after each step."""
    model, x, compiled = _frozen_conv_bn()
    opt = make_optimizer(list(model.parameters()))
    for step in range(3):
        with torch.no_grad():
            torch.testing.assert_close(compiled(x), model(x), rtol=1e-4, atol=1e-4)
        generator = torch.Generator().manual_seed(step)
        for p in model.parameters():
            p.grad = torch.randn(p.shape, generator=generator).to(DEVICE)
        opt.step()


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


class _Counter(torch.nn.Module):
    """A buffer the forward updates in place (``buf.add_(1)``), read after the update through
    weight-only work (``exp``, hoisted when frozen), next to a weight."""

    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(4, 4))
        self.register_buffer("buf", torch.zeros(4))

    def forward(self, x):
        self.buf.add_(1)
        return x @ (self.w * 2).t() + self.buf.exp()


def test_a_buffer_the_graph_updates_is_seen_by_frozen_inference():
    """An inference graph that writes a buffer it also reads through hoisted work: every call
    recomputes from the updated buffer (its version counter rose), as do an in-place weight
    update and a reset of the buffer outside the graph; values and buffer equal eager's."""
    torch.manual_seed(0)
    eager_model = _Counter().to(DEVICE)
    model = _Counter().to(DEVICE)
    model.load_state_dict(eager_model.state_dict())
    x = torch.randn(2, 4, device=DEVICE)
    compiled = torchfuse.compile(model, freeze=True, dynamic=False)
    with torch.no_grad():
        for step in range(5):
            if step == 3:
                for m in (eager_model, model):
                    m.w.mul_(0.5)
                    m.buf.zero_()
            torch.testing.assert_close(compiled(x), eager_model(x))
            torch.testing.assert_close(model.buf, eager_model.buf, rtol=0, atol=0)


def test_a_buffer_updated_by_a_training_graph_equals_eager():
    """``buf.add_(1)`` in a training graph: values, gradients and the buffer equal eager's on
    every call, and the buffer's version counter rises on every call (by 2 where eager's rises
    by 1: AOTAutograd counts the graph's write once more, as for every torch.compile backend)."""
    torch.manual_seed(0)
    eager_model = _Counter().to(DEVICE)
    model = _Counter().to(DEVICE)
    model.load_state_dict(eager_model.state_dict())
    x = torch.randn(2, 4, device=DEVICE)
    compiled = torchfuse.compile(model, dynamic=False)
    for _ in range(3):
        before = model.buf._version
        got, want = compiled(x), eager_model(x)
        got.sum().backward()
        want.sum().backward()
        torch.testing.assert_close(got, want)
        torch.testing.assert_close(model.w.grad, eager_model.w.grad)
        torch.testing.assert_close(model.buf, eager_model.buf, rtol=0, atol=0)
        assert model.buf._version > before


def test_frozen_inference_holds_the_tensors_it_was_keyed_on():
    """The weight part's cache is keyed on each parameter's address and version counter, so it
    holds the tensors of the last call: a new parameter (version 0) allocated after the old one
    was freed could otherwise take the old one's address, and the stale cached values be used.
    On a :class:`FrozenGraph` of a graph computing ``x + 2 * w``: the old weight stays alive,
    and a new one of the same size gives its own values."""
    import gc
    import weakref

    from torchfuse.freezing import WeightSplit

    split = WeightSplit(weights=lambda w: (w * 2,), weight_inputs=[0], main=None, hoisted=1)
    frozen = FrozenGraph(split, lambda full: [full[1] + full[2]], static_inputs=[0])
    x = torch.zeros(16, device=DEVICE)
    for value in (1.0, 5.0, 7.0):
        w = torch.full((16,), value, device=DEVICE)
        old = weakref.ref(w)
        torch.testing.assert_close(frozen([w, x])[0], torch.full((16,), 2 * value, device=DEVICE))
        del w
        gc.collect()
        assert old() is not None


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


def test_training_convolutions_run_channels_last_with_eager_gradients():
    """Training graphs under autocast convert their convolutions to channels-last (on for
    CUDA; forced here on the test's device): gradients and running statistics match eager."""
    torch.manual_seed(0)
    model = _conv_bn_net().to(DEVICE).train()
    ref = _conv_bn_net().to(DEVICE).train()
    ref.load_state_dict(model.state_dict())
    x = torch.randn(4, 3, 12, 12, device=DEVICE)
    compiled = torchfuse.compile(model, dynamic=False, tuning=f"graph_passes.channels_last_devices={DEVICE}")
    for m in (compiled, ref):
        with torch.autocast(DEVICE, torch.bfloat16):
            out = m(x)
        assert out.is_contiguous()
        out.float().square().mean().backward()
    rewritten = torchfuse.backend.LAST_REWRITES.get("channels_last_convolutions", 0)
    assert rewritten >= 2, torchfuse.backend.LAST_REWRITES
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


def test_unfrozen_inference_under_cuda_graphs_runs_convolutions_channels_last():
    """``mode="reduce-overhead"`` without ``freeze``: half-precision convolutions of inference
    graphs are converted to channels-last (weights in every call; on for CUDA, forced here on
    the test's device), outputs keep eager's layout and values; with the option off they are
    left alone."""
    torch.manual_seed(0)
    model = _conv_bn_net().to(DEVICE, torch.bfloat16).eval()
    x = torch.randn(2, 3, 12, 12, device=DEVICE, dtype=torch.bfloat16)
    with torch.no_grad():
        want = model(x)
        for enabled in (True, False):
            torch._dynamo.reset()
            got = torchfuse.compile(model, mode="reduce-overhead", dynamic=False, channels_last_inference=enabled,
                                    tuning=f"graph_passes.channels_last_devices={DEVICE}")(x)
            assert got.is_contiguous() == want.is_contiguous()
            # bf16 convolutions summed in another layout's order: a few bf16 ulps
            torch.testing.assert_close(got, want, rtol=5e-2, atol=5e-2)
            rewritten = torchfuse.backend.LAST_REWRITES.get("channels_last_convolutions", 0)
            assert (rewritten >= 2) == enabled, torchfuse.backend.LAST_REWRITES


# --- ReLU-ended convolutions on cuDNN's fused epilogue (passes.aten.conv_relu_epilogues) ---

def _ref_conv_relu(x, w, bias, stride, padding, dilation, groups):
    return torch.relu(torch.nn.functional.conv2d(x, w, bias, stride, padding, dilation, groups))


def _ref_conv_add_relu(x, w, z, alpha, bias, stride, padding, dilation, groups):
    y = torch.nn.functional.conv2d(x, w, bias, stride, padding, dilation, groups)
    return torch.relu(y + (1 if alpha is None else alpha) * z)


@pytest.fixture
def epilogues(monkeypatch):
    """The epilogue rewrite on for the test's device. On a GPU it runs on cuDNN in fp16, as
    shipped; on a CPU the two cuDNN ops get a reference kernel (convolution, add, ReLU in
    eager's order) so that the rewritten graph runs, and the rewrite is allowed for fp32 and bf16.
    Yields the dtypes to test in (the first is the main one) and a list that collects the ATen
    targets of each graph the pass ran on, after it ran."""
    # through the environment default of Options.tuning: every compile of the test takes it
    monkeypatch.setenv("TORCHFUSE_TUNING", f"graph_passes.conv_epilogue_devices={DEVICE}")
    from torchfuse.passes import aten as aten_passes

    seen = []
    real = aten_passes.conv_relu_epilogues

    def spy(gm, *args):  # watches the graph after the pass (tuning as the pipeline passes it)
        done = real(gm, *args)
        seen.append([str(n.target) for n in gm.graph.nodes if n.op == "call_function"])
        return done

    monkeypatch.setattr(aten_passes, "conv_relu_epilogues", spy)
    if DEVICE != "cpu":
        yield (torch.float16, torch.bfloat16), seen
        return
    monkeypatch.setenv("TORCHFUSE_TUNING", f"graph_passes.conv_epilogue_devices={DEVICE}, "
                                           "graph_passes.conv_epilogue_dtypes=float32,bfloat16")
    lib = torch.library.Library("aten", "IMPL")
    lib.impl("cudnn_convolution_relu", _ref_conv_relu, "CPU")
    lib.impl("cudnn_convolution_add_relu", _ref_conv_add_relu, "CPU")
    try:
        yield (torch.float32, torch.bfloat16), seen
    finally:
        lib._destroy()


class _Bottleneck(torch.nn.Module):
    """ResNet's bottleneck block (He et al., 2016): 1x1, 3x3 and 1x1 convolutions with
    BatchNorm, a shortcut that is the input or a strided 1x1 convolution with BatchNorm."""

    def __init__(self, cin, mid, cout, stride=1):
        super().__init__()
        C, B = torch.nn.Conv2d, torch.nn.BatchNorm2d
        self.conv1, self.bn1 = C(cin, mid, 1, bias=False), B(mid)
        self.conv2, self.bn2 = C(mid, mid, 3, stride, 1, bias=False), B(mid)
        self.conv3, self.bn3 = C(mid, cout, 1, bias=False), B(cout)
        self.down = (torch.nn.Sequential(C(cin, cout, 1, stride, bias=False), B(cout))
                     if stride != 1 or cin != cout else None)

    def forward(self, x):
        h = torch.relu(self.bn1(self.conv1(x)))
        h = torch.nn.functional.relu(self.bn2(self.conv2(h)), inplace=True)
        h = self.bn3(self.conv3(h))
        h += x if self.down is None else self.down(x)
        return torch.relu(h)


def _tol(dtype: torch.dtype) -> dict:
    """Tolerances against eager: fp32 as ``assert_close``'s; fp16 and bf16 a few ulps of outputs
    of magnitude about 1 (the epilogue skips eager's intermediate roundings)."""
    return {torch.float16: dict(rtol=1e-2, atol=1e-2), torch.bfloat16: dict(rtol=4e-2, atol=4e-2)}.get(dtype, {})


@pytest.mark.parametrize("which", [0, 1])
def test_resnet_blocks_run_conv_bias_shortcut_relu_as_one_cudnn_call(epilogues, which):
    """Frozen ResNet bottlenecks: each conv + folded BatchNorm + ReLU is one
    ``cudnn_convolution_relu``, each block's last conv + shortcut + ReLU one
    ``cudnn_convolution_add_relu`` (the downsampling shortcut's convolution is its ``z``, its
    folded bias summed into the epilogue's and hoisted); nothing is left to fuse. Values match
    eager, and against an fp64 reference they are on average at least as close as the same
    frozen graph's without the rewrite (fp16 on a GPU: the epilogue rounds once where a
    convolution and a separate kernel round after each op). fp16 and bf16 on a GPU, fp32 and
    bf16 on a CPU."""
    dtypes, seen = epilogues
    dtype = dtypes[which]
    torch.manual_seed(0)
    model = torch.nn.Sequential(_Bottleneck(16, 8, 32, stride=2), _Bottleneck(32, 8, 32)).to(DEVICE).eval()
    _randomize_bn(model)
    x = torch.randn(2, 16, 12, 12, device=DEVICE)
    with torch.no_grad():
        exact = model.double()(x.double())
        model.to(dtype)
        want = model(x.to(dtype))
        got = torchfuse.compile(model, freeze=True, dynamic=False)(x.to(dtype))
        plain = torchfuse.compile(model, freeze=True, dynamic=False, conv_epilogues=False)(x.to(dtype))
    targets = seen[0]  # the whole inference graph, before hoisting
    assert targets.count("aten.cudnn_convolution_relu.default") == 4, targets
    assert targets.count("aten.cudnn_convolution_add_relu.default") == 2, targets
    assert targets.count("aten.convolution.default") == 1, targets  # the downsampling shortcut, as z
    assert not any(t.startswith("aten.relu") for t in targets), targets
    # after hoisting, the per-call graph is the seven convolutions (the summed biases are hoisted)
    # and, on CUDA, the input's and output's layout conversions (channels-last)
    main = [t for t in seen[-1] if t not in ("aten.view.default", "aten.clone.default")]
    assert sorted(set(main)) == ["aten.convolution.default", "aten.cudnn_convolution_add_relu.default",
                                 "aten.cudnn_convolution_relu.default"], main
    err_got = (got.double() - exact).abs().mean().item()
    err_plain = (plain.double() - exact).abs().mean().item()
    # (on a CPU both sides are fp32 with the reference kernel: only summation order differs)
    assert err_got <= err_plain * 1.001 + (1e-6 if dtype == torch.float32 else 0), (err_got, err_plain)
    torch.testing.assert_close(got, want, **_tol(dtype))


class _LeftAlone(torch.nn.Module):
    """Convolutions followed by ReLU that the rewrite must leave to ATen and fusion."""

    def __init__(self):
        super().__init__()
        self.a = torch.nn.Conv2d(4, 8, 3, padding=1)
        self.g = torch.nn.Conv2d(8, 8, 3, padding=1, groups=2)
        self.t = torch.nn.ConvTranspose2d(8, 8, 1)
        self.c = torch.nn.Conv2d(8, 8, 1, bias=False)
        self.w = torch.nn.Parameter(torch.randn(8, 8, 1, 1))

    def forward(self, x, z, row):
        y = self.a(x)
        kept = torch.relu(y)                              # the convolution's result is returned too
        grouped = torch.relu(self.g(kept))                # grouped
        tr = torch.relu(self.t(grouped))                  # transposed
        two = torch.relu(self.c(tr) + z + z * 2)          # two full-size terms
        bcast = torch.relu(self.c(two) + row)             # a term along the last dim, not channels
        scaled = torch.relu(torch.add(self.c(bcast), z, alpha=2))  # alpha != 1
        return y, scaled


def test_conv_relu_epilogues_leave_other_shapes_alone(epilogues):
    dtype, seen = epilogues[0][0], epilogues[1]
    torch.manual_seed(0)
    model = _LeftAlone().to(DEVICE, dtype).eval()
    x = torch.randn(2, 4, 6, 6, device=DEVICE, dtype=dtype)
    z = torch.randn(2, 8, 6, 6, device=DEVICE, dtype=dtype)
    row = torch.randn(6, device=DEVICE, dtype=dtype)
    with torch.no_grad():
        want = model(x, z, row)
        got = torchfuse.compile(model, dynamic=False)(x, z, row)
    assert seen and not any("cudnn_convolution" in t for t in seen[0]), seen
    tol = _tol(dtype)
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b, **tol)


def test_conv_relu_epilogues_leave_an_empty_batch_alone(epilogues):
    """A graph compiled for an empty batch keeps ATen's convolution (which returns an empty
    result) instead of the cuDNN call."""
    dtype, seen = epilogues[0][0], epilogues[1]
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.ReLU()).to(DEVICE, dtype).eval()
    x = torch.randn(0, 3, 9, 9, device=DEVICE, dtype=dtype)
    with torch.no_grad():
        got = torchfuse.compile(model, dynamic=False)(x)
    assert got.shape == (0, 8, 7, 7)
    assert seen and not any("cudnn_convolution" in t for t in seen[0]), seen


@pytest.mark.parametrize("case", ["unfrozen_bias", "option_off", "training"])
def test_conv_relu_epilogues_unfrozen_off_and_training(epilogues, case):
    """An unfrozen inference graph's ``relu(conv(x, w, b))`` becomes ``cudnn_convolution_relu``
    with the convolution's own bias; ``conv_epilogues=False`` and graphs compiled with
    gradients (whose backward needs the convolution) are left alone. Values and gradients
    match eager."""
    dtype, seen = epilogues[0][0], epilogues[1]
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.ReLU()).to(DEVICE, dtype).eval()
    x = torch.randn(2, 3, 9, 9, device=DEVICE, dtype=dtype)
    tol = _tol(dtype)
    compiled = torchfuse.compile(model, dynamic=False, conv_epilogues=case != "option_off")
    if case == "training":
        compiled(x).float().sum().backward()
        got = [p.grad.clone() for p in model.parameters()]
        model.zero_grad()
        model(x).float().sum().backward()
        for a, b in zip(got, [p.grad for p in model.parameters()]):
            torch.testing.assert_close(a, b, **tol)
        assert seen == []  # the pass runs on inference graphs only
        return
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), model(x), **tol)
    if case == "option_off":
        assert seen == []
    else:
        assert seen[0].count("aten.cudnn_convolution_relu.default") == 1, seen


class _RepeatedTerms(torch.nn.Module):
    """Sums under a ReLU that hold one convolution twice."""

    def __init__(self):
        super().__init__()
        self.c = torch.nn.Conv2d(4, 8, 3, padding=1)
        self.b = torch.nn.Parameter(torch.randn(8, 1, 1))

    def forward(self, x):
        y = self.c(x)
        a = torch.relu(y + y)
        y = self.c(x)
        b = torch.relu(y + y + self.b)
        t = self.c(x) + self.b
        return a, b, torch.relu(t + t)


def test_conv_relu_epilogue_counts_a_repeated_term(epilogues):
    """``relu(y + y)``, ``relu(y + y + b)`` and ``relu(t + t)`` with ``t = conv + b``: the
    convolution is a term twice (an FX node lists a reader once however often it reads), so the
    sum is not one epilogue's: left alone, values as eager's."""
    dtype, seen = epilogues[0][0], epilogues[1]
    torch.manual_seed(0)
    model = _RepeatedTerms().to(DEVICE, dtype).eval()
    x = torch.randn(2, 4, 5, 5, device=DEVICE, dtype=dtype)
    with torch.no_grad():
        want = model(x)
        got = torchfuse.compile(model, dynamic=False)(x)
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b, **_tol(dtype))
    assert seen and not any("cudnn_convolution" in t for t in seen[0]), seen


class _TwoBiasedConvs(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.b = torch.nn.Conv2d(3, 8, 1)

    def forward(self, x):
        return torch.relu(self.a(x) + self.b(x))


def test_conv_relu_epilogue_takes_a_biased_shortcut_convolution(epilogues):
    """``relu(conv_a(x) + conv_b(x))`` with both biases in the convolutions (unfrozen): one
    ``cudnn_convolution_add_relu`` whose ``z`` is ``conv_b`` without its bias and whose bias is
    the sum of both; values match eager."""
    dtype, seen = epilogues[0][0], epilogues[1]
    torch.manual_seed(0)
    model = _TwoBiasedConvs().to(DEVICE, dtype).eval()
    with torch.no_grad():
        model.b.bias.uniform_(2, 3)  # a bias lost or counted twice shows
        x = torch.randn(2, 3, 7, 7, device=DEVICE, dtype=dtype)
        want = model(x)
        got = torchfuse.compile(model, dynamic=False)(x)
    assert seen[0].count("aten.cudnn_convolution_add_relu.default") == 1, seen
    torch.testing.assert_close(got, want, **_tol(dtype))
    torch._dynamo.reset()
    with torch.no_grad():  # explain lists the rewrite with those of the captured graph
        result = torchfuse.explain(model, x)
    assert "conv_relu_epilogues x1 (option conv_epilogues)" in result.summary(), result.summary()
    assert ", 1 graph rewrite(s), " in result.summary().splitlines()[0], result.summary()
