"""Random numbers inside fused kernels: dropout, rand_like, randn_like, bernoulli."""
from __future__ import annotations

import math

import pytest
import torch

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
