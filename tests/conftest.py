"""Test configuration: every generated kernel runs under Triton's interpreter on CPU tensors."""
from __future__ import annotations

import os

os.environ.setdefault("TORCHFUSE_INTERPRET", "1")
os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest  # noqa: E402
import torch  # noqa: E402


@pytest.fixture(autouse=True)
def _reset_dynamo():
    import torch._dynamo

    torch._dynamo.reset()
    yield


@pytest.fixture
def device() -> str:
    """The device tests run on: CUDA when present, else CPU through the interpreter."""
    return "cuda" if torch.cuda.is_available() else "cpu"
