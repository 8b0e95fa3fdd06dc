"""The zero pad written by one kernel (``torchfuse.runtime.pad``, on with
on by default, ``Tuning.runtime.pad_kernel``): values against eager (a pad is a copy: bitwise), which pads it
takes, its fallback to ATen, and what explain says of it."""
from __future__ import annotations

import pytest
import torch

import torchfuse
from torchfuse import backend
from torchfuse.runtime.pad import PadRunner

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
#: the pad kernel on (the default, named so that a changed default does not silently test ATen)
PAD_KERNEL = "runtime.pad_kernel=True"


def _pad_runners() -> list[PadRunner]:
    return [r for cg in backend.RECENT[-2:] for r in cg.runners if isinstance(r, PadRunner)]


def _run(fn, x):
    """``fn(x)`` compiled, called twice (the second call runs the graph's generated function),
    against eager; the pad runners of the compiled graphs."""
    torch._dynamo.reset()
    backend.RECENT.clear()
    compiled = torchfuse.compile(fn, dynamic=False, tuning=PAD_KERNEL)
    want = fn(x)
    for _ in range(2):
        got = compiled(x)
        assert got.shape == want.shape and got.dtype == want.dtype and got.stride() == want.stride()
        torch.testing.assert_close(got, want, rtol=0, atol=0, equal_nan=True)
        if got.is_floating_point():  # -0.0 kept; a NaN's sign is not a value (GPU multiplies drop it)
            real = ~want.isnan()
            assert torch.equal(got.signbit()[real], want.signbit()[real])
    return _pad_runners()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.int64])
@pytest.mark.parametrize("layout", ["contiguous", "transposed", "sliced"])
@pytest.mark.parametrize("pad", [(0, 3), (0, 0, 0, 5), (0, 7, 0, 2), (0, 8)])
def test_zero_pads_appending_rows_or_columns_run_as_one_kernel_with_eager_values(dtype, layout, pad):
    """A zero pad appending columns, rows or both to a 2-D tensor read in any layout (a
    transposed view, a slice with gaps) between two fusion groups runs as the pad kernel; the
    result is eager's bit for bit (NaN, infinities and -0.0 among the values), contiguous."""
    g = torch.Generator().manual_seed(len(pad) * 31 + pad[1])
    base = (torch.randn(40, 70, generator=g) * 100).to(dtype)
    if dtype.is_floating_point:
        base[0, :4] = torch.tensor([float("nan"), float("inf"), -float("inf"), -0.0]).to(dtype)
    x = {"contiguous": base[:13, :37].contiguous(), "transposed": base[:37, :13].t(),
         "sliced": base[2:15, 5:42]}[layout].to(DEVICE)

    def fn(x):
        y = x * 1 if not dtype.is_floating_point else x * 1.0
        return torch.nn.functional.pad(y, pad) * 1

    runners = _run(fn, x)
    assert len(runners) == 1 and runners[0].failed is None, [r.failed for r in runners]
    assert runners[0].launches == 2  # the interpreted first call and the generated function's


@pytest.mark.parametrize("case", ["value one", "negative zero", "leading pad", "cropping", "three dims"])
def test_other_pads_stay_on_aten_with_eager_values(case):
    """A pad the kernel does not take (another fill value, -0.0, a pad before the first row or
    column, a negative pad that crops, a 3-D tensor) runs on ATen: eager's values, no pad
    kernel."""
    x = torch.randn(6, 9, 5, device=DEVICE) if case == "three dims" else torch.randn(6, 9, device=DEVICE)
    pad, value = {"value one": ((0, 3), 1.0), "negative zero": ((0, 3), -0.0), "leading pad": ((2, 3), 0.0),
                  "cropping": ((0, -2, 0, 1), 0.0), "three dims": ((0, 3), 0.0)}[case]

    def fn(x):
        return torch.nn.functional.pad(x * 2, pad, value=value) + 1

    assert _run(fn, x) == []


def test_a_pad_kernel_that_fails_warns_and_leaves_the_pad_to_aten(monkeypatch):
    """A pad kernel that cannot be loaded (a compiler failure) warns once and the pad runs on
    ATen from then on, with eager's values at every call."""
    from torchfuse.runtime import pad as pad_module

    def broken(*args, **kwargs):
        raise RuntimeError("no kernel today")

    monkeypatch.setattr(pad_module, "load", broken)
    x = torch.randn(5, 11, device=DEVICE)

    def fn(x):
        return torch.nn.functional.pad(x * 2, (0, 5)) + 1

    torch._dynamo.reset()
    backend.RECENT.clear()
    compiled = torchfuse.compile(fn, dynamic=False, tuning=PAD_KERNEL)
    with pytest.warns(RuntimeWarning, match="the pad kernel failed .*no kernel today"):
        got = compiled(x)
    torch.testing.assert_close(got, fn(x), rtol=0, atol=0)
    torch.testing.assert_close(compiled(x), fn(x), rtol=0, atol=0)
    runners = _pad_runners()
    assert len(runners) == 1 and "no kernel today" in runners[0].failed


def test_the_padded_gradient_of_a_vocabulary_head_runs_as_pad_kernels():
    """A language-model head whose vocabulary (37) is not a multiple of 8, aligned as on a GPU
    (forced here on the test's device): every pad of the forward and the backward is a pad
    kernel, and the loss and gradients are eager's to bf16 matmul precision."""
    from torchfuse.config import Tuning

    tuning = Tuning().replace("decompose.mm_pad_devices", (torch.device(DEVICE).type,)).replace(
        "decompose.mm_pad_min_macs", 1).replace("runtime.pad_kernel", True)
    g = torch.Generator().manual_seed(5)
    x = torch.randn(12, 24, generator=g).to(DEVICE, torch.bfloat16)
    w = torch.randn(37, 24, generator=g).to(DEVICE, torch.bfloat16)
    t = torch.arange(12, device=DEVICE) * 5 % 37

    def fn(x, w):
        return torch.nn.functional.cross_entropy(torch.nn.functional.linear(x, w).float(), t)

    torch._dynamo.reset()
    backend.RECENT.clear()
    got_in = [a.clone().requires_grad_() for a in (x, w)]
    want_in = [a.clone().requires_grad_() for a in (x, w)]
    compiled = torchfuse.compile(fn, dynamic=False, tuning=tuning)
    want = fn(*want_in)
    want_grads = torch.autograd.grad(want, want_in)
    for _ in range(2):  # the second step runs each graph's generated function
        got = compiled(*got_in)
        torch.testing.assert_close(got, want, rtol=1e-2, atol=1e-2)
        for a, e in zip(torch.autograd.grad(got, got_in), want_grads):
            torch.testing.assert_close(a, e, rtol=2e-2, atol=2e-3)
    pads = [n for cg in backend.RECENT for n in cg.segmentation.calls if n.target is torch.ops.aten.constant_pad_nd.default]
    runners = _pad_runners()
    assert pads and len(runners) == len(pads) and all(r.failed is None for r in runners)
    assert [r.launches for r in runners] == [2] * len(runners)


def test_pads_stay_on_aten_when_switched_off_and_explain_names_the_pad_kernel():
    """With ``runtime.pad_kernel=False`` a zero pad is an ATen call; by default explain lists
    the pad as the pad kernel's, not as an op torchfuse cannot fuse."""
    x = torch.randn(6, 9, device=DEVICE)

    def fn(x):
        return torch.nn.functional.pad(x * 2, (0, 3)) + 1

    torch._dynamo.reset()
    backend.RECENT.clear()
    off = torchfuse.compile(fn, dynamic=False, tuning="runtime.pad_kernel=False")
    torch.testing.assert_close(off(x), fn(x), rtol=0, atol=0)
    assert _pad_runners() == []
    result = torchfuse.explain(fn, x, verbose=False)
    pads = [c for c in result.aten_calls if c.op == "aten.constant_pad_nd.default"]
    assert [c.category for c in pads] == ["pad"]
    assert "[torchfuse's pad kernel (runtime.pad), not ATen]" in result.summary()


@pytest.mark.parametrize("shape, pad", [((0, 5), (0, 3)), ((0, 5), (0, 0, 0, 2)), ((4, 0), (0, 0))])
def test_pads_of_empty_tensors_have_eager_values(shape, pad):
    """Padding a tensor without elements: an empty result launches nothing; zero rows padded
    with rows are all zeros, as eager's."""
    x = torch.randn(*shape, device=DEVICE)

    def fn(x):
        return torch.nn.functional.pad(x * 2, pad) + 1

    _run(fn, x)
