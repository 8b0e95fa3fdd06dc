"""Graph rewrites before the IR is built, by the level of the graph they work on.

* :mod:`.fx`: TorchDynamo's captured graph of PyTorch-level calls, before AOTAutograd;
* :mod:`.aten`: the ATen-level graphs AOTAutograd produces (forward, backward, inference);
* :mod:`.cross_entropy`: ATen-level rewrites of cross-entropy's row reductions.

Each pass takes a ``torch.fx.GraphModule``, changes it in place and returns how many rewrites
it made. :mod:`torchfuse.pipeline` lists them (and the IR-level passes) in the order they run.
This module holds what they share.
"""
from __future__ import annotations

import logging

import torch
import torch.fx

log = logging.getLogger("torchfuse.fusion")


def calls_to(gm: torch.fx.GraphModule, targets) -> list[torch.fx.Node]:
    """The ``call_function`` nodes of ``gm`` whose target is one of ``targets``, in graph
    order, as a list (the passes insert nodes while they walk it)."""
    return [n for n in gm.graph.nodes if n.op == "call_function" and n.target in targets]


def finish(gm: torch.fx.GraphModule, done: int, what: str) -> int:
    """After a pass made ``done`` rewrites: check and regenerate ``gm``, log ``what``."""
    if done:
        gm.graph.lint()
        gm.recompile()
        log.info("%d %s", done, what)
    return done
