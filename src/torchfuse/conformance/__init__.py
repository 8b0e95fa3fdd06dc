"""Conformance with PyTorch's own operator database (OpInfo).

``torchfuse conformance`` runs the samples of ``op_db`` through torchfuse, each op alone and
between pointwise neighbours, forward and backward, for every dtype the op supports, and
writes a table op x dtype -> pass / aten (ran through ATen) / fail (``table.md`` and ``table.json``).

Modules: :mod:`.catalog` (which ops, in which order, with which tolerances), :mod:`.runner`
(one sample in eager and through torchfuse), :mod:`.classify` (a verdict per op and dtype),
:mod:`.report` (the table), :mod:`.cli` (the command).
"""
from __future__ import annotations


def main(argv: list[str] | None = None) -> int:
    from .cli import main as run

    return run(argv)
