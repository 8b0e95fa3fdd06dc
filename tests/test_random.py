"""Random numbers inside fused kernels: dropout, rand_like, randn_like, bernoulli."""
from __future__ import annotations

import math

import pytest
import triton
import triton.language as tl
import torch
import torch.utils.checkpoint

import torchfuse
import torchfuse.backend as backend
from conftest import DEVICE


def _groups_with(op: str) -> int:
    return sum(1 for g in backend.RECENT[-1].segmentation.groups for n in g.nodes if n.op == op)


def test_dropout_is_fused_reproducible_and_unbiased():
    def f(x, r):
        return torch.nn.functional.dropout(x + r, p=0.3, training=True)

    x = torch.randn(256, 129, device=DEVICE)
    r = torch.randn(256, 129, device=DEVICE)
    g = torchfuse.compile(f)
    torch.manual_seed(1)
    a = g(x, r)
    torch.manual_seed(1)
    b = g(x, r)
    c = g(x, r)
    assert _groups_with("rand") == 1
    assert not backend.RECENT[-1].segmentation.calls or all(
        "rand" not in str(n.target) for n in backend.RECENT[-1].segmentation.calls)
    assert torch.equal(a, b), "torch.manual_seed must make fused dropout reproducible"
    assert not torch.equal(a, c), "consecutive calls must draw new masks"
    kept = a != 0
    n = kept.numel()
    rate = kept.float().mean().item()
    # keep probability 0.7; 5 standard deviations of a binomial proportion
    assert abs(rate - 0.7) < 5 * math.sqrt(0.7 * 0.3 / n)
    torch.testing.assert_close(a[kept], ((x + r) / 0.7)[kept])


@pytest.mark.parametrize("p", [0.0, 1.0])
def test_dropout_extreme_probabilities_match_eager(p):
    def f(x):
        return torch.nn.functional.dropout(x * 2, p=p, training=True)

    x = torch.randn(40, 30, device=DEVICE)
    torch.testing.assert_close(torchfuse.compile(f)(x), f(x))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_dropout_of_every_element_multiplies_by_zero_as_eager(dtype):
    """``p = 1`` multiplies by zero, as eager's ``F.dropout`` does: NaN stays NaN, an infinity
    becomes NaN and a negative value ``-0.0`` (PyTorch's decomposition returned zeros)."""
    def f(x):
        return torch.nn.functional.dropout(x, p=1.0, training=True)

    x = torch.tensor([1.0, -2.0, -0.0, float("nan"), float("inf"), -float("inf")], device=DEVICE).to(dtype)
    y, want = torchfuse.compile(f)(x), f(x)
    torch.testing.assert_close(y, want, rtol=0, atol=0, equal_nan=True)
    zero = want == 0  # NaNs made by arithmetic carry the device's sign (semantics.md)
    assert torch.equal(y[zero].signbit(), want[zero].signbit())


@pytest.mark.parametrize("dtype", [torch.bool, torch.int32, torch.int64])
def test_dropout_of_every_element_keeps_a_bool_or_integer_dtype_as_eager(dtype):
    """``p = 1`` of a bool or integer tensor gives zeros of its dtype, as eager's ``F.dropout``
    (a zero of the input's dtype times the input): a bool input stays bool, not int64."""
    def f(x):
        return torch.nn.functional.dropout(x, p=1.0, training=True)

    x = torch.tensor([1, 0, 3, -2], device=DEVICE).to(dtype)
    y, want = torchfuse.compile(f, dynamic=False)(x), f(x)
    assert y.dtype == want.dtype == dtype
    assert torch.equal(y, want)


@pytest.mark.parametrize("dtype,p", [(torch.bfloat16, 0.995), (torch.bfloat16, 0.3), (torch.float16, 0.9995)])
def test_half_precision_dropout_keeps_one_minus_p(dtype, p):
    """fp16 and bf16 dropout keep ``1 - p`` of the elements, as eager's CUDA kernel (an fp32
    uniform number compared with ``p`` in fp32): drawn in the tensor's dtype, bf16 at
    ``p = 0.995`` kept none (both the number and ``p`` rounded to 8 bits) and fp16 at
    ``p = 0.9995`` none. Through ``native_dropout``, as a training graph on a GPU and
    TorchDynamo's graph of ``F.dropout`` without gradients trace it, kept values scaled by
    exactly ``1 / (1 - p)`` rounded once; 5 standard deviations of a binomial proportion."""
    n = 200_000
    x = torch.linspace(-3, 3, n, device=DEVICE).to(dtype)
    for fn in (lambda t: torch.ops.aten.native_dropout(t, p, True)[0],
               lambda t: torch.nn.functional.dropout(t, p, training=True)):
        torch._dynamo.reset()
        torch.manual_seed(3)
        y = torchfuse.compile(fn)(x)
        kept = y != 0
        rate = kept.double().mean().item()
        assert abs(rate - (1 - p)) < 5 * math.sqrt(p * (1 - p) / n), (dtype, p, rate)
        want = (x.double() * (1 / (1 - p))).to(dtype)
        torch.testing.assert_close(y[kept], want[kept], rtol=0, atol=0)


def test_fp64_random_numbers_have_53_random_bits():
    """fp64 ``rand_like``, ``randn_like`` and ``bernoulli`` draw 53 random bits, as eager's fp64
    draws: fp32 draws cast to fp64 are multiples of 2**-24, have no normal value beyond about
    5.8, and a ``bernoulli`` with ``p`` below 2**-24 would keep only exact zeros. Moments within
    5 standard deviations; in a row kernel too (dropout after a softmax)."""
    x = torch.zeros(200, 1000, dtype=torch.float64, device=DEVICE)
    torch.manual_seed(0)
    u, z, rare, b = torchfuse.compile(
        lambda x: (torch.rand_like(x), torch.randn_like(x), torch.bernoulli(x, 2.0 ** -30), torch.bernoulli(x, 0.3)))(x)
    n = u.numel()
    assert u.dtype == z.dtype == b.dtype == torch.float64
    assert u.min() >= 0 and u.max() < 1
    assert ((u * 2**24) % 1 != 0).double().mean() > 0.99  # finer than fp32's 24 bits
    assert ((u * 2**53) % 1 == 0).all()  # and no finer than 53
    assert abs(u.mean().item() - 0.5) < 5 * math.sqrt(1 / 12 / n)
    assert abs(z.mean().item()) < 5 / math.sqrt(n) and abs(z.std().item() - 1) < 0.01
    assert ((z * 2**24) % 1 != 0).double().mean() > 0.99
    assert rare.sum().item() <= 1  # expected 2e5 * 2**-30 = 0.0002 kept
    assert abs(b.mean().item() - 0.3) < 5 * math.sqrt(0.3 * 0.7 / n)
    y = torchfuse.compile(lambda t: torch.nn.functional.dropout(torch.softmax(t, -1), 0.5, True))(
        torch.randn(64, 300, dtype=torch.float64, device=DEVICE))
    assert abs((y == 0).double().mean().item() - 0.5) < 5 * math.sqrt(0.25 / y.numel())


def test_rand_like_statistics_and_range():
    def f(x):
        return torch.rand_like(x), torch.randn_like(x) * 2 + 1

    x = torch.empty(200, 300, device=DEVICE)
    u, z = torchfuse.compile(f)(x)
    assert u.min() >= 0 and u.max() < 1
    n = u.numel()
    assert abs(u.mean().item() - 0.5) < 5 * math.sqrt(1 / 12 / n)
    assert abs(z.mean().item() - 1) < 5 * 2 / math.sqrt(n)
    assert abs(z.std().item() - 2) < 0.05
    # uniform: the fraction below 0.25 is 0.25
    assert abs((u < 0.25).float().mean().item() - 0.25) < 5 * math.sqrt(0.25 * 0.75 / n)


def test_rand_half_precision_stays_below_one():
    def f(x):
        return torch.rand_like(x, dtype=torch.float16) + 0 * x.half()

    u = torchfuse.compile(f)(torch.zeros(100000, device=DEVICE))
    assert u.dtype == torch.float16 and u.max().item() < 1.0


def test_dropout_backward_uses_the_forward_mask():
    def f(x):
        return torch.nn.functional.dropout(x * 2, p=0.4, training=True)

    x = torch.randn(64, 50, device=DEVICE).abs() + 0.1  # nonzero, so a zero output means dropped
    x.requires_grad_(True)
    out = torchfuse.compile(f)(x)
    out.sum().backward()
    kept = (out != 0).float()
    assert 0.4 < kept.mean().item() < 0.8
    torch.testing.assert_close(x.grad, kept * 2 / 0.6)
    torch.testing.assert_close(out, kept * x.detach() * 2 / 0.6)


# ---- four numbers per Philox call (Tuning.codegen.philox_four) ----------------------------

FOURS = "codegen.philox_four=true"


@triton.jit
def _fours_reference(seed_ptr, out_ptr, cols, rpad, n, NORMAL: tl.constexpr, BLOCK: tl.constexpr):
    # element i of a [n // cols, cols] iteration space: position p = row * rpad + col, its
    # number component p % 4 of Philox's four for counter p // 4, drawn one element at a time
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    p = (i // cols).to(tl.int64) * rpad + i % cols
    if NORMAL:
        a, b, c, d = tl.randn4x(tl.load(seed_ptr), p // 4)
    else:
        a, b, c, d = tl.rand4x(tl.load(seed_ptr), p // 4)
    lane = p % 4
    tl.store(out_ptr + i, tl.where(lane == 0, a, tl.where(lane == 1, b, tl.where(lane == 2, c, d))), mask=i < n)


def _reference_numbers(shape, rpad: int, normal: bool, seed_of_call: int) -> torch.Tensor:
    """The numbers a call seeded with ``torch.manual_seed(seed_of_call)`` must produce: its
    kernel seed drawn as the graph draws it (:func:`torchfuse.runtime.launch.draw_seeds`), then
    each element's number by the definition in ``KernelWriter.random_by_fours``."""
    from torchfuse.runtime.launch import draw_seeds

    torch.manual_seed(seed_of_call)
    seeds, _ = draw_seeds(1, torch.device(DEVICE))
    out = torch.empty(shape, device=DEVICE)
    kernel = _fours_reference
    if DEVICE == "cpu":
        from triton.runtime.interpreter import InterpretedFunction
        kernel = InterpretedFunction(_fours_reference.fn)
    n, block = out.numel(), 256
    kernel[(triton.cdiv(n, block),)](seeds, out, shape[-1], rpad, n, NORMAL=normal, BLOCK=block)
    return out


@pytest.mark.parametrize("shape, reduced", [((1001,), False), ((2,), False), ((5, 37), True), ((3, 2), True),
                                            ((6, 300), True)],
                         ids=["pointwise", "pointwise-of-2", "rows-of-37", "rows-of-2", "rows-of-300"])
def test_four_numbers_per_philox_call_are_each_positions_own(shape, reduced):
    """With ``philox_four`` each element gets component ``p % 4`` of the Philox call for
    counter ``p // 4`` (rows padded to a multiple of four in a reduction), whether its kernel
    drew a quarter tile and interleaved it (blocks of four or more) or drew per element (two
    elements, rows of two): the numbers equal a one-element-at-a-time reference bit for bit, and positions do
    not share numbers (a reused counter would repeat a quarter of them; float32 rounding makes
    a few chance ties)."""
    def f(x):  # x is zero: the output is the random number itself
        if reduced:
            return x - x.mean(-1, keepdim=True) + torch.rand_like(x)
        return torch.rand_like(x) + 0 * x

    x = torch.zeros(shape, device=DEVICE)
    g = torchfuse.compile(f, tuning=FOURS)
    g(x)  # compiles (TorchDynamo and AOTAutograd draw nothing from the generator)
    assert _groups_with("rand") == 1
    group = next(gr for gr in backend.RECENT[-1].segmentation.groups if any(n.op == "rand" for n in gr.nodes))
    assert any(n.op == "mean" or n.op == "sum" for n in group.nodes) == reduced, group
    torch.manual_seed(11)
    got = g(x)
    rpad = (shape[-1] + 3) // 4 * 4 if reduced else shape[-1]
    expected = _reference_numbers(shape, rpad, False, 11)
    assert torch.equal(got, expected)
    assert got.unique().numel() >= 0.99 * got.numel()
    assert got.min() >= 0 and got.max() < 1


def test_four_normal_numbers_per_philox_call():
    def f(x):
        return torch.randn_like(x) + 0 * x

    x = torch.zeros(999, device=DEVICE)
    g = torchfuse.compile(f, tuning=FOURS)
    g(x)
    torch.manual_seed(3)
    got = g(x)
    assert torch.equal(got, _reference_numbers((999,), 999, True, 3))
    assert abs(got.mean().item()) < 5 / math.sqrt(999) and abs(got.std().item() - 1) < 0.1


def test_dropout_with_four_numbers_per_call_is_reproducible_and_unbiased():
    def f(x, r):
        return torch.nn.functional.dropout(x + r, p=0.3, training=True)

    x = torch.randn(256, 129, device=DEVICE)
    r = torch.randn(256, 129, device=DEVICE)
    g = torchfuse.compile(f, tuning=FOURS)
    torch.manual_seed(1)
    a = g(x, r)
    torch.manual_seed(1)
    b = g(x, r)
    c = g(x, r)
    assert torch.equal(a, b) and not torch.equal(a, c)
    kept = a != 0
    rate = kept.float().mean().item()
    assert abs(rate - 0.7) < 5 * math.sqrt(0.7 * 0.3 / kept.numel())
    torch.testing.assert_close(a[kept], ((x + r) / 0.7)[kept])


# ---- dropout in a checkpointed region (torch.utils.checkpoint, non-reentrant) ---------------

class CheckpointedMLP(torch.nn.Module):
    """Linear -> GELU -> dropout -> Linear, recomputed in the backward: AOTAutograd wraps the
    dropout's ``rand_like`` in ``run_and_save_rng_state`` (forward) and ``run_with_rng_state``
    (backward), or ``graphsafe_run_with_rng_state`` on CUDA (:mod:`torchfuse.ir.random_state`)."""

    def __init__(self, checkpointed: bool = True):
        super().__init__()
        self.l1, self.l2, self.checkpointed = torch.nn.Linear(32, 64), torch.nn.Linear(64, 32), checkpointed

    def block(self, x):
        return self.l2(torch.nn.functional.dropout(torch.nn.functional.gelu(self.l1(x)), 0.1, training=True))

    def forward(self, x):
        if self.checkpointed:
            return torch.utils.checkpoint.checkpoint(self.block, x, use_reentrant=False)
        return self.block(x)


#: PyTorch's wrappers of such a draw (torch._prims.rng_prims)
RNG_STATE_OP_NAMES = ("run_and_save_rng_state", "run_with_rng_state", "graphsafe_run_with_rng_state")


def test_checkpointed_dropout_backward_repeats_the_forward_mask():
    """The backward recomputes the draw from the forward's saved generator state: the gradient
    of ``dropout(2 x)`` is ``2 mask / (1 - p)`` with the forward's mask, and the forward is
    ``2 x mask / (1 - p)`` (x is positive, so a zero output means dropped)."""
    def f(x):
        return torch.utils.checkpoint.checkpoint(
            lambda t: torch.nn.functional.dropout(t * 2, p=0.4, training=True), x, use_reentrant=False)

    x = (torch.randn(64, 50, device=DEVICE).abs() + 0.1).requires_grad_(True)
    g = torchfuse.compile(f)
    for seed in (1, 2):  # the second call: later calls' generated function
        torch.manual_seed(seed)
        x.grad = None
        out = g(x)
        out.sum().backward()
        kept = (out != 0).float()
        assert 0.4 < kept.mean().item() < 0.8
        assert torch.equal(x.grad, kept * (2 / 0.6))
        torch.testing.assert_close(out, kept * x.detach() * 2 / 0.6)


def test_checkpointed_dropout_block_matches_its_unfused_graph():
    """Fused and with fusion off, the same seed draws the same numbers (PyTorch's generator in
    both), so the output and every gradient agree."""
    x = torch.randn(4, 16, 32, device=DEVICE)
    results = []
    for fuse in (True, False):
        torch._dynamo.reset()
        torch.manual_seed(0)
        model = CheckpointedMLP().to(DEVICE)
        out = torchfuse.compile(model, fuse=fuse)(x)
        out.square().sum().backward()
        results.append([out.detach()] + [p.grad for p in model.parameters()])
    for a, b in zip(*results):
        torch.testing.assert_close(a, b)


def test_checkpointed_dropout_fuses_around_the_draw():
    """The draw stays on ATen and the ops around it fuse as without checkpointing: the GELU,
    the mask (``rand > p``) and its scale are one kernel in the forward, and in the backward
    the recomputed GELU, the mask and the gradient's pointwise ops are one (the draw reads a
    stand-in of its operand's layout, so it runs before that group)."""
    x = torch.randn(4, 16, 32, device=DEVICE)
    counts = {}
    for checkpointed in (False, True):
        torch._dynamo.reset()
        torch.manual_seed(0)
        before = {id(c) for c in backend.RECENT}
        torchfuse.compile(CheckpointedMLP(checkpointed).to(DEVICE))(x).sum().backward()
        graphs = {c.name: c.segmentation for c in backend.RECENT if id(c) not in before}
        counts[checkpointed] = {name: len(seg.groups) for name, seg in graphs.items()}
        if checkpointed:
            for name, seg in graphs.items():
                draws = [n for n in seg.calls if getattr(n.target, "__name__", "") in RNG_STATE_OP_NAMES]
                assert len(draws) == 1, (name, seg)
                assert not any("gt" in str(n.target) for n in seg.calls), (name, seg)
                assert sum(n.op == "gt" for g in seg.groups for n in g.nodes) == 1, (name, seg)
    assert counts[True] == counts[False] and counts[True]["forward"] == 1, counts


_pause = {"thread": None, "reached": None, "release": None}


@torch.library.custom_op("torchfuse_test::pause_in", mutates_args=())
def _pause_in(x: torch.Tensor) -> torch.Tensor:
    """``x + 1``; in the thread named in ``_pause``, blocks until released (the call's seeds
    are drawn by then: they are drawn when the call starts)."""
    import threading

    if threading.current_thread() is _pause["thread"]:
        _pause["reached"].set()
        assert _pause["release"].wait(60)
    return x + 1


@_pause_in.register_fake
def _(x):
    return torch.empty_like(x)


def test_concurrent_calls_each_use_their_own_seeds():
    """Two threads calling one compiled graph: each call's random groups use the seeds that
    call drew, as a call running alone with the same generator state does. (Seeds kept on
    the shared group runner let the second call's draw replace the first's: both calls
    returned the same mask, and the first call's own draw went unused.)"""
    import threading

    def f(x):
        return torch.nn.functional.dropout(_pause_in(x) * 2, p=0.5, training=True)

    x = torch.rand(64, 50, device=DEVICE) + 0.1  # nonzero, so a zero output means dropped
    g = torchfuse.compile(f)
    for _ in range(2):  # the first call and the generated straight-line function
        g(x)
    torch.manual_seed(0)
    alone = [g(x), g(x)]
    torch.manual_seed(0)
    results = {}

    def call(name):
        results[name] = g(x)

    first = threading.Thread(target=call, args=("first",))
    _pause.update(thread=first, reached=threading.Event(), release=threading.Event())
    try:
        first.start()
        assert _pause["reached"].wait(60)  # the first call has drawn its seeds and waits
        call("second")                      # the second draws and runs to its end meanwhile
    finally:
        _pause["release"].set()
        first.join(60)
        _pause["thread"] = None
    assert not first.is_alive()
    assert not torch.equal(results["first"], results["second"])
    assert torch.equal(results["first"], alone[0]) and torch.equal(results["second"], alone[1])
