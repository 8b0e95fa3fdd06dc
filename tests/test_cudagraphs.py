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
def test_training_graphs_run_uncaptured():
    m = _model().cuda().train()
    cm = torchfuse.compile(m, mode="reduce-overhead")
    x = torch.randn(4, 32, device="cuda", requires_grad=True)
    for _ in range(3):
        out = cm(x)
        out.sum().backward()
    torch.testing.assert_close(out, m(x))
