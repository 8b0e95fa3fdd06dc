"""Reports: what the compiler did to a program, and why.

* :func:`explain` runs a model or function once under torchfuse and returns an
  :class:`ExplainResult`: the graphs TorchDynamo captured and its graph breaks, every fusion
  group with its ops, scheduler, launch configuration and kernel, every op left to ATen and
  why, recompilations, compile time per stage, kernel cache hits and misses, and (on a GPU,
  with ``measure=True``) each kernel's time and bandwidth against a device copy.
* :mod:`.html` renders a result as one self-contained HTML page (``torchfuse report``).
* :mod:`.reproducer` writes a standalone script when a graph or kernel fails to compile.
"""
from __future__ import annotations

from .explain import explain
from .result import ExplainResult

__all__ = ["explain", "ExplainResult"]
