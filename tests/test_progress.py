"""Compile progress: the terminal bar counts one graph's kernels generated and compiled, and
stays quiet when compiling is quick, when stderr is not a terminal, or with ``progress=False``."""
from __future__ import annotations

import io
import sys

import pytest
import torch

import torchfuse
from conftest import DEVICE
from torchfuse.runtime import executor, progress


class Terminal(io.StringIO):
    """A stream that says it is a terminal, as stderr in a shell does."""

    def isatty(self) -> bool:
        return True


def test_bar_counts_kernels_generated_then_compiled():
    out = Terminal()
    bar = progress.CompileProgress("backward", 3, enabled=True, stream=out, delay=0)
    for _ in range(3):
        bar.generated()
    assert "torchfuse backward graph: generated 3/3 kernels" in str(bar.bar)
    bar.compiling(4)
    for _ in range(4):
        bar.compiled()
    shown = str(bar.bar)
    assert "generated 3/3, compiled 4/4 kernels" in shown and "100%" in shown, shown
    assert "torchfuse backward graph" in out.getvalue()  # drawn on the terminal
    bar.close()


@pytest.mark.parametrize("case", ["not a terminal", "turned off", "quick"])
def test_bar_stays_quiet(case):
    out = io.StringIO() if case == "not a terminal" else Terminal()
    bar = progress.CompileProgress("forward", 5, enabled=case != "turned off", stream=out,
                                   delay=3600.0 if case == "quick" else 0)
    for _ in range(5):
        bar.generated()
    bar.compiling(5)
    for _ in range(5):
        bar.compiled()
    bar.close()
    assert out.getvalue() == ""
    assert (bar.generated_count, bar.compiled_count) == (5, 5)  # counted all the same


@pytest.mark.parametrize("enabled", [True, False])
def test_compiling_a_graph_drives_the_bar(monkeypatch, enabled):
    """``CompiledGraph._prepare`` counts every fusion group's kernel (and, on a GPU, every
    compiled kernel) on a terminal's stderr; ``progress=False`` draws nothing."""
    made = []

    class Recorded(progress.CompileProgress):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            made.append(self)

    out = Terminal()
    monkeypatch.setattr(executor, "CompileProgress", Recorded)
    monkeypatch.setattr(sys, "stderr", out)

    def f(x):
        return torch.softmax(x, -1) * torch.sigmoid(x).sum(0)

    x = torch.randn(16, 32, device=DEVICE)
    torch.testing.assert_close(torchfuse.compile(f, progress=enabled, tuning="runtime.progress_delay_seconds=0")(x), f(x))
    assert len(made) == 1 and made[0].groups >= 2
    bar = made[0]
    assert bar.generated_count == bar.groups
    assert bar.compiled_count == bar.jobs and (bar.jobs >= bar.groups if DEVICE == "cuda" else bar.jobs == 0)
    assert ("torchfuse inference graph: generated" in out.getvalue()) == enabled
