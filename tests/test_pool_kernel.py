"""2-D max pooling and its backward as Triton kernels (``torchfuse.runtime.pool``, on by
default, ``Tuning.runtime.pool_kernels``): values and indices against eager (bitwise: a maximum
and its index are exact, and the gradient's sums follow ATen's order and precision), which
poolings they take, their fallback to ATen, and what explain says of them."""
from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F

import torchfuse
from torchfuse import backend
from torchfuse.runtime.pool import PoolRunner, _pooled

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
#: the kernels on (the default, named so that a changed default does not silently test ATen)
ON = "runtime.pool_kernels=True"


def _runners() -> list[PoolRunner]:
    return [r for cg in backend.RECENT for r in cg.runners if isinstance(r, PoolRunner)]


def _data(shape, dtype, seed, ties=False, specials=False, channels_last=False):
    g = torch.Generator().manual_seed(seed)
    # small integers make many equal maxima (the first one's index must win)
    x = torch.randint(-3, 4, shape, generator=g).float() if ties else torch.randn(shape, generator=g) * 4
    if specials:
        flat = x.view(-1)
        flat[::7] = float("nan")
        flat[3::11] = float("inf")
        flat[5::13] = -float("inf")
        flat[2::5] = -0.0
    x = x.to(DEVICE, dtype)
    return x.to(memory_format=torch.channels_last) if channels_last else x


def _with_negative_zeros(t: torch.Tensor) -> torch.Tensor:
    """Every fifth element -0.0: a gradient copied as it is keeps its sign, one added to zero
    does not, and eager does one or the other by device and format."""
    t.view(-1)[::5] = -0.0
    return t


def _assert_same_bits(a: torch.Tensor, b: torch.Tensor) -> None:
    """Equal values with equal signs of zero (``assert_close`` takes -0.0 for 0.0), NaN where
    eager has NaN."""
    torch.testing.assert_close(a, b, rtol=0, atol=0, equal_nan=True)
    if a.is_floating_point():
        real = ~b.isnan()
        assert torch.equal(a.signbit()[real], b.signbit()[real]), "signs of zero differ"


def _exact_grads(dtype) -> bool:
    """Whether eager's gradient is the kernel's to the bit: ATen's CPU kernel adds 16-bit
    gradients in their own precision where three or more windows pick one element (rounding
    each time), its CUDA kernel and torchfuse's in float32 (rounding once)."""
    return DEVICE == "cuda" or dtype in (torch.float32, torch.float64)


def _check(fn, x, grad_seed=1, calls=2, tuning=ON):
    """``fn(x)`` compiled and eager: each output (values, indices) bitwise, then the input's
    gradient under a random upstream gradient, over ``calls`` calls (the second runs the
    graph's generated function); returns the max-pool runners."""
    torch._dynamo.reset()
    backend.RECENT.clear()
    compiled = torchfuse.compile(fn, dynamic=False, tuning=tuning)
    xe = _copy(x).requires_grad_(True)
    want = fn(xe)
    want = want if isinstance(want, tuple) else (want,)
    g = torch.Generator().manual_seed(grad_seed)
    ups = [_with_negative_zeros(torch.randn(w.shape, generator=g)).to(DEVICE, w.dtype) if w.is_floating_point()
           else None for w in want]
    want_grad = torch.autograd.grad([w for w in want if w.requires_grad], xe,
                                    [u for u, w in zip(ups, want) if w.requires_grad])[0]
    for _ in range(calls):
        xg = _copy(x).requires_grad_(True)
        got = compiled(xg)
        got = got if isinstance(got, tuple) else (got,)
        for a, b in zip(got, want):
            assert a.shape == b.shape and a.dtype == b.dtype and a.stride() == b.stride(), (a.stride(), b.stride())
            _assert_same_bits(a, b)
        grad = torch.autograd.grad([a for a in got if a.requires_grad], xg,
                                   [u for u, a in zip(ups, got) if a.requires_grad])[0]
        assert grad.stride() == want_grad.stride()
        if _exact_grads(x.dtype):
            _assert_same_bits(grad, want_grad)
        else:  # no farther from float64 than eager's, give or take one rounding
            ref = _float64_grad(fn, x, ups)
            eps = torch.finfo(x.dtype).eps
            ours, theirs = (grad.double() - ref).abs(), (want_grad.double() - ref).abs()
            assert (ours.nan_to_num(0) <= theirs.nan_to_num(0) + eps * ref.abs().nan_to_num(0)).all()
            assert torch.equal(grad.isnan(), ref.isnan())
    return _runners()


def _copy(x: torch.Tensor) -> torch.Tensor:
    """A copy of ``x`` with its strides, gaps included (``clone`` makes a gapped slice dense)."""
    return torch.empty_strided(x.shape, x.stride(), dtype=x.dtype, device=x.device).copy_(x)


def _float64_grad(fn, x, ups) -> torch.Tensor:
    """The input's gradient of ``fn`` in float64 (the test's data make the same indices:
    small integers, exact in every dtype)."""
    xd = x.detach().double().requires_grad_(True)
    out = fn(xd)
    out = out if isinstance(out, tuple) else (out,)
    return torch.autograd.grad([o for o in out if o.requires_grad], xd,
                               [u.double() for u, o in zip(ups, out) if o.requires_grad])[0]


POOLINGS = {  # kernel, stride, padding, dilation, ceil_mode
    "resnet stem 3/2/1": (3, 2, 1, 1, False),
    "2x2": (2, 2, 0, 1, False),
    "3/1/1 overlapping": (3, 1, 1, 1, False),
    "ceil mode": (3, 2, 0, 1, True),
    "dilated": (3, 2, 1, 2, False),
    "rectangular": ((3, 2), (2, 1), (1, 0), 1, False),
}


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("pooling", list(POOLINGS))
@pytest.mark.parametrize("channels_last", [False, True], ids=["channels-first", "channels-last"])
def test_max_pooling_and_its_gradient_are_eager_values_bit_for_bit(dtype, pooling, channels_last):
    """Max pooling between two fusion groups, with its indices returned, over ties, NaN,
    infinities and -0.0: pooled values, indices and the input's gradient are eager's (strides
    included); forward and backward each run as one kernel at every call."""
    k, s, p, d, ceil = POOLINGS[pooling]
    x = _data((2, 3, 11, 9), dtype, seed=list(POOLINGS).index(pooling), ties=True, specials=True, channels_last=channels_last)

    def fn(x):
        out, idx = F.max_pool2d(x * 1.5, k, s, p, d, ceil_mode=ceil, return_indices=True)
        return out * 2, idx

    runners = _check(fn, x)
    assert sorted(r.backward for r in runners) == [False, True], runners
    assert all(r.failed is None and r.launches == 2 for r in runners), [(r.failed, r.launches) for r in runners]


@pytest.mark.parametrize("channels_last", [False, True], ids=["channels-first", "channels-last"])
def test_the_int64_form_for_tensors_of_2_to_the_31_elements_has_the_same_values(monkeypatch, channels_last):
    """The kernels' int64 offsets (taken from 2**31 elements, forced here on small tensors)
    give eager's values, indices and gradients as the int32 form does."""
    monkeypatch.setattr(PoolRunner, "INT32_ELEMENTS", 0)
    x = _data((2, 3, 11, 9), torch.float32, seed=9, ties=True, specials=True, channels_last=channels_last)

    def fn(x):
        out, idx = F.max_pool2d(x * 1.5, 3, 2, 1, return_indices=True)
        return out * 2, idx

    runners = _check(fn, x)
    assert len(runners) == 2 and all(r.launches == 2 for r in runners)
    assert all(key[2] for r in runners for key in r.kernels)  # the wide form ran


@pytest.mark.parametrize("channels_last", [False, True], ids=["channels-first", "channels-last"])
def test_smaller_tiles_from_the_tuning_give_the_same_values(channels_last):
    """``runtime.pool_tile`` and ``runtime.pool_xblock`` reach the launches: tiles of 64
    elements, at most 8 columns wide, split rows and channels across programs with eager's
    values, indices and gradients."""
    x = _data((2, 20, 11, 13), torch.float32, seed=10, ties=True, channels_last=channels_last)

    def fn(x):
        out, idx = F.max_pool2d(x * 1.5, 3, 2, 1, return_indices=True)
        return out * 2, idx

    runners = _check(fn, x, tuning=ON + ",runtime.pool_tile=64,runtime.pool_xblock=8")
    assert len(runners) == 2 and all(r.launches == 2 and (r.tile, r.xblock) == (64, 8) for r in runners)


def test_inference_pooling_writes_no_indices_and_matches_eager():
    """Under ``torch.no_grad()`` nothing reads the indices: the forward kernel writes the
    pooled values only, eager's bit for bit."""
    x = _data((2, 4, 13, 13), torch.float16, seed=3, ties=True, specials=True)

    def fn(x):
        return F.max_pool2d(torch.relu(x), 3, 2, 1) + 1

    torch._dynamo.reset()
    backend.RECENT.clear()
    compiled = torchfuse.compile(fn, dynamic=False, tuning=ON)
    with torch.no_grad():
        for _ in range(2):
            torch.testing.assert_close(compiled(x), fn(x), rtol=0, atol=0, equal_nan=True)
    runners = _runners()
    assert len(runners) == 1 and not runners[0].indices and runners[0].launches == 2


@pytest.mark.parametrize("shape", [(2, 1, 9, 9), (1, 3, 9, 9), (1, 1, 5, 5), (2, 3, 3, 1)])
@pytest.mark.parametrize("channels_last", [False, True], ids=["channels-first", "channels-last"])
def test_tensors_contiguous_in_both_formats_get_eagers_strides(shape, channels_last):
    """A single channel, image or column makes a tensor contiguous in both formats: the
    results' strides (and the gradient's) follow the input's as eager's do, values bitwise."""
    x = _data(shape, torch.float32, seed=sum(shape), ties=True, channels_last=channels_last)

    def fn(x):
        out, idx = F.max_pool2d(x + 1, 3, 2, 1, return_indices=True)
        return out * 2, idx

    runners = _check(fn, x)
    assert len(runners) == 2 and all(r.launches == 2 for r in runners)


def test_a_window_larger_than_the_kernels_take_stays_on_aten():
    """A 9x9 window (81 elements, more than the kernels unroll by default) is ATen's, with
    eager's values; ``runtime.pool_max_window=81`` gives it to the kernels."""
    x = _data((2, 3, 12, 12), torch.float32, seed=12, ties=True)

    def fn(x):
        out, idx = F.max_pool2d(x * 1.5, 9, 3, 4, return_indices=True)
        return out * 2, idx

    assert _check(fn, x) == []
    runners = _check(fn, x, tuning=ON + ",runtime.pool_max_window=81")
    assert len(runners) == 2 and all(r.launches == 2 for r in runners)


@pytest.mark.parametrize("channels_last", [False, True], ids=["channels-first", "channels-last"])
def test_a_strided_input_is_copied_into_its_format_as_aten_does(channels_last):
    """An input contiguous in neither format (a slice with gaps, as a graph input) is copied
    into the format PyTorch suggests for it, then pooled by the kernels: values, indices,
    strides and gradients stay eager's."""
    base = _data((2, 3, 12, 20), torch.float32, seed=4, ties=True, channels_last=channels_last)
    x = base[:, :, :, ::2]

    def fn(x):
        out, idx = F.max_pool2d(x, 3, 2, 1, return_indices=True)
        return out * 2, idx

    runners = _check(fn, x)
    assert len(runners) == 2 and all(r.launches == 2 and r.failed is None for r in runners)


@pytest.mark.parametrize("channels_last", [False, True], ids=["channels-first", "channels-last"])
def test_an_expanded_gradient_is_copied_into_its_format_as_aten_does(channels_last, monkeypatch):
    """A sum after the pool hands the pool's backward its gradient expanded from one value
    (every stride 0): it is copied into the input's format, and the gradient is eager's bit
    for bit."""
    x = _data((2, 4, 12, 12), torch.float32, seed=6, ties=True, channels_last=channels_last)
    received = []
    run = PoolRunner._run

    def recording(self, args):
        if self.backward:
            received.append(args[0].stride())
        return run(self, args)

    monkeypatch.setattr(PoolRunner, "_run", recording)

    def fn(x):
        return F.max_pool2d(x * 1.5, 3, 2, 1).sum()

    runners = _check(fn, x)
    assert received and all(stride == (0, 0, 0, 0) for stride in received), received
    assert len(runners) == 2 and all(r.launches == 2 and r.failed is None for r in runners)


def test_a_training_step_of_a_convolutional_stem_matches_eager():
    """Convolution, BatchNorm, ReLU and a 3x3 stride-2 max pool, trained for three steps with
    SGD: loss, every gradient and the parameters after each step are eager's (float32, to the
    convolution's rounding), and the pool ran as kernels."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8), torch.nn.ReLU(),
                                torch.nn.MaxPool2d(3, 2, 1), torch.nn.Flatten(), torch.nn.Linear(8 * 8 * 8, 5)).to(DEVICE)
    twin = copy.deepcopy(model)
    x = torch.randn(4, 3, 16, 16, device=DEVICE)
    t = torch.arange(4, device=DEVICE) % 5
    torch._dynamo.reset()
    backend.RECENT.clear()
    compiled = torchfuse.compile(model, dynamic=False, tuning=ON)
    opts = [torch.optim.SGD(m.parameters(), lr=0.1) for m in (model, twin)]
    for _ in range(3):
        losses = []
        for m, opt, run in ((model, opts[0], compiled), (twin, opts[1], twin)):
            opt.zero_grad()
            loss = F.cross_entropy(run(x), t)
            loss.backward()
            losses.append(loss.detach())
            grads = [p.grad.clone() for p in m.parameters()]
            opt.step()
            if m is model:
                got_grads = grads
        torch.testing.assert_close(losses[0], losses[1], rtol=1e-5, atol=1e-6)
        for a, b in zip(got_grads, grads):
            torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)
        for a, b in zip(model.parameters(), twin.parameters()):
            torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)
    runners = _runners()
    assert sorted(r.backward for r in runners) == [False, True]
    assert all(r.launches == 3 for r in runners)


def test_a_max_pool_kernel_that_fails_warns_and_leaves_pooling_to_aten(monkeypatch):
    """A kernel that cannot be loaded (a compiler failure) warns once and pooling runs on ATen
    from then on, with eager's values at every call."""
    from torchfuse.runtime import pool as pool_module

    def broken(*args, **kwargs):
        raise RuntimeError("no kernel today")

    monkeypatch.setattr(pool_module, "load", broken)
    x = _data((2, 3, 9, 9), torch.float32, seed=6)

    def fn(x):
        return F.max_pool2d(x * 2, 3, 2, 1) + 1

    torch._dynamo.reset()
    backend.RECENT.clear()
    compiled = torchfuse.compile(fn, dynamic=False, tuning=ON)
    with torch.no_grad():
        with pytest.warns(RuntimeWarning, match="a max-pool kernel failed .*no kernel today"):
            got = compiled(x)
        torch.testing.assert_close(got, fn(x), rtol=0, atol=0)
        torch.testing.assert_close(compiled(x), fn(x), rtol=0, atol=0)
    runners = _runners()
    assert len(runners) == 1 and "no kernel today" in runners[0].failed and runners[0].launches == 0


def test_pooling_stays_on_aten_when_switched_off_and_explain_names_the_kernels():
    """With ``runtime.pool_kernels=False`` max pooling is an ATen call; by default explain lists
    it as torchfuse's kernels, and the backward's ``convolution_backward`` (a call returning
    several tensors) as the vendor library's, not as moving no data."""
    x = _data((2, 3, 10, 10), torch.float32, seed=7)

    def fn(x):
        return F.max_pool2d(x * 2, 3, 2, 1) + 1

    torch._dynamo.reset()
    backend.RECENT.clear()
    off = torchfuse.compile(fn, dynamic=False, tuning="runtime.pool_kernels=False")
    with torch.no_grad():
        torch.testing.assert_close(off(x), fn(x), rtol=0, atol=0)
    assert _runners() == []
    conv = torch.nn.Conv2d(3, 4, 3).to(DEVICE)

    def net(x):
        return F.max_pool2d(torch.relu(conv(x)), 3, 2, 1).sum()

    result = torchfuse.explain(net, x, backward=True, verbose=False)
    by_op = {c.op: c.category for c in result.aten_calls}
    assert by_op["aten.max_pool2d_with_indices.default"] == "pool"
    assert by_op["aten.max_pool2d_with_indices_backward.default"] == "pool"
    assert by_op["aten.convolution_backward.default"] == "library"
    assert "[torchfuse's max-pool kernels (runtime.pool), not ATen]" in result.summary()


@pytest.mark.parametrize("size, k, s, p, d", [(11, 3, 2, 0, 1), (12, 3, 2, 1, 1), (10, 2, 3, 1, 1), (9, 3, 2, 1, 2),
                                              (5, 5, 3, 2, 1), (112, 3, 2, 1, 1)])
@pytest.mark.parametrize("ceil_mode", [False, True])
def test_pooled_sizes_are_pytorchs(size, k, s, p, d, ceil_mode):
    """The pooled length the forward kernel allocates is the one eager returns."""
    x = torch.zeros(1, 1, size, size)
    want = F.max_pool2d(x, k, s, p, d, ceil_mode=ceil_mode).shape[-1]
    assert _pooled(size, k, s, p, d, ceil_mode) == want


def test_a_new_batch_size_keeps_the_kernels_and_eagers_values():
    """Batch sizes 2, 3 and 5 through one compiled function (TorchDynamo makes the batch
    symbolic at the second size; the pooled sizes stay static): values, indices and gradients
    are eager's at each, and every call after the first size's runs the kernels."""
    torch._dynamo.reset()
    backend.RECENT.clear()

    def fn(x):
        out, idx = F.max_pool2d(x * 1.5, 3, 2, 1, return_indices=True)
        return out * 2, idx

    compiled = torchfuse.compile(fn, tuning=ON)
    for n in (2, 3, 5):
        x = _data((n, 3, 11, 9), torch.float32, seed=n, ties=True, specials=True)
        xe, xg = _copy(x).requires_grad_(True), _copy(x).requires_grad_(True)
        want, got = fn(xe), compiled(xg)
        for a, b in zip(got, want):
            torch.testing.assert_close(a, b, rtol=0, atol=0, equal_nan=True)
        up = torch.randn(want[0].shape, generator=torch.Generator().manual_seed(n)).to(DEVICE)
        torch.testing.assert_close(torch.autograd.grad(got[0], xg, up)[0], torch.autograd.grad(want[0], xe, up)[0],
                                   rtol=0, atol=0, equal_nan=True)
    symbolic = [r for cg in backend.RECENT for r in cg.runners if isinstance(r, PoolRunner) and cg.symbols]
    assert len(symbolic) == 2 and all(r.launches == 2 for r in symbolic), [r.launches for r in symbolic]


@pytest.mark.parametrize("channels_last", [False, True], ids=["channels-first", "channels-last"])
def test_windows_that_take_no_element_have_eagers_indices_and_gradients(channels_last):
    """Windows of ``-inf`` only take no element: their index is the device's eager index
    (ATen's CPU kernels and channels-first CUDA kernel name the window's first element, its
    channels-last CUDA kernel 0), and so is where their gradient goes. (A window wholly in
    the padding, possible with dilation, has an index outside the plane on a CPU, where
    eager's backward then aborts; not tested.)"""
    x = torch.full((2, 3, 6, 6), -float("inf"))
    x[:, :, 4:, 4:] = torch.randn(2, 3, 2, 2)
    x = x.to(DEVICE)
    if channels_last:
        x = x.to(memory_format=torch.channels_last)

    def fn(x):
        out, idx = F.max_pool2d(x * 1, 2, return_indices=True)
        return out * 2, idx

    runners = _check(fn, x)
    assert len(runners) == 2 and all(r.launches == 2 for r in runners)


@pytest.mark.parametrize("channels_last", [False, True], ids=["channels-first", "channels-last"])
def test_results_wider_than_one_program_have_eagers_values(channels_last):
    """More channels (channels-last) or result columns (channels-first) than one program's
    128 columns: several column programs a row, eager's values, indices and gradients."""
    shape = (2, 160, 5, 5) if channels_last else (2, 2, 4, 300)
    x = _data(shape, torch.float32, seed=11, ties=True, specials=True, channels_last=channels_last)

    def fn(x):
        out, idx = F.max_pool2d(x * 1.5, 2, return_indices=True)
        return out * 2, idx

    runners = _check(fn, x)
    assert len(runners) == 2 and all(r.launches == 2 for r in runners)


def test_the_cuda_channels_last_form_follows_atens_cuda_rules(tmp_path):
    """The channels-last form for CUDA tensors, run under the interpreter on CPU tensors
    against ATen's channels-last CUDA rules (``max_pool_forward_nhwc``, ``max_pool_backward_nhwc``
    in ``DilatedMaxPool2d.cu``): a window that takes no element has index 0; an input element
    in one window only gets that window's gradient as it is (-0.0 stays -0.0), an element in
    several windows the float32 sum from zero (+0.0 for a single -0.0)."""
    from torchfuse.runtime.cache import SourceStore
    from torchfuse.runtime.compile import load
    from torchfuse.runtime.pool import pool_source

    store = SourceStore(str(tmp_path))
    x = torch.full((1, 2, 4, 4), -float("inf")).to(memory_format=torch.channels_last)
    x[0, :, 3, 3] = 5.0  # the last 2x2 window takes (3, 3); the other three take nothing
    out = torch.empty(1, 2, 2, 2).to(memory_format=torch.channels_last)
    idx = torch.empty(1, 2, 2, 2, dtype=torch.int64).to(memory_format=torch.channels_last)
    forward = load(pool_source(False, (2, 2, 2, 2, 0, 0, 1, 1), torch.float32, True, cuda=True), store, True)
    # rows: (image, row, column) of the result, 4; columns: the 2 channels
    forward.launch(0, (1, 1), [x, out, idx, 2, 4, 4, 2, 2, 4, 2], 2, 4, 4)
    assert idx[0, :, 1, 1].tolist() == [15, 15] and (idx[0, :, :1].eq(0).all() and idx[0, :, 1, 0].eq(0).all())
    assert out[0, :, 1, 1].tolist() == [5.0, 5.0] and out[0, :, 0].eq(-float("inf")).all()

    # 3x3 windows, stride 2, over 5x5: element (0, 0) is in one window, (2, 2) in four
    backward = load(pool_source(True, (3, 3, 2, 2, 0, 0, 1, 1), torch.float32, True, cuda=True), store, True)
    g = torch.tensor([[-0.0, 1.0], [2.0, 3.0]]).reshape(1, 1, 2, 2).expand(1, 2, 2, 2).contiguous(
        memory_format=torch.channels_last)
    chosen = torch.tensor([[0, 12], [12, 12]]).reshape(1, 1, 2, 2).expand(1, 2, 2, 2).contiguous(
        memory_format=torch.channels_last)
    grad = torch.empty(1, 2, 5, 5).to(memory_format=torch.channels_last)
    backward.launch(0, (2, 1), [g, chosen, grad, 2, 5, 5, 2, 2, 25, 2], 2, 16, 4)
    assert grad[0, :, 0, 0].signbit().all() and grad[0, :, 0, 0].eq(0).all()  # copied: -0.0
    assert grad[0, :, 2, 2].tolist() == [6.0, 6.0]  # 1 + 2 + 3, the first window's index is 0
    assert grad[0, :, 1, 1].eq(0).all() and not grad[0, :, 1, 1].signbit().any()


def test_the_fusion_log_does_not_list_the_kernels_poolings_as_aten_calls(caplog):
    """The ``fusion`` log topic lists each call left on ATen after the runtime decided which
    calls its own kernels run: a max pool the kernels take is counted as theirs, not logged
    "on ATen"."""
    import logging

    x = _data((2, 3, 10, 10), torch.float32, seed=13)

    def fn(x):
        return F.max_pool2d(x * 2, 3, 2, 1) + 1

    torch._dynamo.reset()
    with caplog.at_level(logging.INFO, logger="torchfuse"), torch.no_grad():
        torchfuse.compile(fn, dynamic=False, tuning=ON)(x)
    text = "\n".join(r.getMessage() for r in caplog.records)
    assert "max_pool2d_with_indices.default on ATen" not in text
    assert "1 on torchfuse's own kernel" in text
