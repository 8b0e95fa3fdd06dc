"""Graph rewrites before the IR is built, by the level of the graph they work on.

* :mod:`.fx`: TorchDynamo's captured graph of PyTorch-level calls, before AOTAutograd;
* :mod:`.aten`: the ATen-level graphs AOTAutograd produces (forward, backward, inference);
* :mod:`.cross_entropy`: ATen-level rewrites of cross-entropy's row reductions;
* :mod:`.joint`: AOTAutograd's joint graph, before the partitioner splits it.

Each pass takes a ``torch.fx.GraphModule``, changes it in place and returns how many rewrites
it made. :mod:`torchfuse.pipeline` lists them (and the IR-level passes) in the order they run.
This module holds what they share.
"""
from __future__ import annotations

import logging
import operator

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


def written_arguments(schema: torch._C.FunctionSchema, args: tuple, kwargs: dict) -> list:
    """The arguments of a call ``(args, kwargs)`` that ``schema`` marks written in place
    (``Tensor(a!)``: ``copy_``'s destination, a custom op's ``mutates_args``), as given (a
    tensor, a node, or a list of them), whether passed by position or by keyword."""
    found = []
    for i, arg in enumerate(schema.arguments):
        if arg.alias_info is None or not arg.alias_info.is_write:
            continue
        value = args[i] if i < len(args) and not arg.kwarg_only else kwargs.get(arg.name)
        if value is not None:
            found.append(value)
    return found


def aliases_first_argument(target) -> bool:
    """Whether an ATen op's result aliases its first argument (a view: ``view``, ``t``,
    ``permute``, ``slice``...), by the schema's alias annotation; in-place ops are not views."""
    if not isinstance(target, torch._ops.OpOverload) or target._schema.is_mutable:
        return False
    returns = target._schema.returns
    return bool(returns) and returns[0].alias_info is not None


def is_view_of(node, source) -> bool:
    """Whether FX node ``node`` is a view of ``source``, its first argument: an op whose result
    aliases it (:func:`aliases_first_argument`), or an ``operator.getitem`` of the list of views
    that ``split``, ``split_with_sizes``, ``unbind`` or ``chunk`` of it returns."""
    if (not isinstance(source, torch.fx.Node) or node.op != "call_function" or not node.args
            or node.args[0] is not source):
        return False
    return aliases_first_argument(node.target) or (
        node.target is operator.getitem and source.op == "call_function" and aliases_first_argument(source.target))


def view_root(value):
    """``value`` (an FX node, or anything else) followed back through views
    (:func:`aliases_first_argument`) to the node they view, and through the pieces of ops that
    return a list of views (``split``, ``split_with_sizes``, ``unbind``, ``chunk``: an
    ``operator.getitem`` of their result is a view of their first argument too)."""
    while isinstance(value, torch.fx.Node) and value.args and is_view_of(value, value.args[0]):
        value = value.args[0]
    return value


def flat_nodes(args) -> list[torch.fx.Node]:
    """The nodes in a node's (nested) arguments, in order (an ``output`` node's results)."""
    found: list[torch.fx.Node] = []
    torch.fx.node.map_arg(args, found.append)
    return found
