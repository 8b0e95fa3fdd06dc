"""Views of a ``@fused`` function's arguments, taken by the caller and read by the fusion.

A kernel reads each input through its strides and offset, so a view of an argument (a slice,
``select``, ``narrow``, the pieces of ``split``, ``chunk`` and ``unbind``, a transpose, and
chains of these with the layout ops the fusion holds) needs no op of its own: it becomes an
extra input of the fusion, and each call takes that view of the real argument on the host
(no data moves) and passes it in. The views are the trace's own ATen calls, cut out of its
graph with the size arithmetic they read (:func:`views_module`), so a call's bounds come
from its sizes (``q[..., :q.shape[-1] // 2]``). A size of a view that the fusion cannot
express in its arguments' sizes (``D // 2``) gets a size symbol of its own, bound from the
view; where the fusion's ops then relate it to others (``cat`` of the two halves: ``D ==
2 * (D // 2)``), :func:`size_check` makes the test a call must pass for the trace to serve it.
"""
from __future__ import annotations

import operator
from typing import Any, Callable, Iterable

import sympy
import torch


def is_view(target: Any) -> bool:
    """Whether the ATen overload ``target`` returns a view of its first argument (its
    schema's result aliases it, unwritten): ``slice``, ``select``, ``split``, ``permute``...
    ``detach`` is left out: it stops gradients, which an argument view would not."""
    if not isinstance(target, torch._ops.OpOverload) or target is torch.ops.aten.detach.default:
        return False
    returns = target._schema.returns
    if not returns or returns[0].alias_info is None or returns[0].alias_info.is_write:
        return False
    args = target._schema.arguments
    return bool(args) and args[0].alias_info is not None and not args[0].alias_info.is_write


def takes_view(node: torch.fx.Node, lazy: dict) -> bool:
    """Whether ``node`` extends a chain of views from an argument (``lazy``: the chain's nodes
    so far, placeholders included): a view op, or an item of a split, of one of them."""
    if node.op != "call_function" or not node.args or not isinstance(node.args[0], torch.fx.Node):
        return False
    return node.args[0] in lazy and (node.target is operator.getitem or is_view(node.target))


def views_module(gm: torch.fx.GraphModule, views: list[torch.fx.Node]) -> torch.fx.GraphModule:
    """A graph module taking ``gm``'s inputs and returning the values of ``views`` (nodes of
    ``gm``), computed by the nodes of ``gm`` they depend on, sizes and arithmetic included."""
    needed: set = set()
    stack = list(views)
    while stack:
        n = stack.pop()
        if n not in needed:
            needed.add(n)
            stack.extend(n.all_input_nodes)
    graph = torch.fx.Graph()
    copied: dict = {}
    for n in gm.graph.nodes:
        if n.op == "placeholder" or n in needed:
            copied[n] = graph.node_copy(n, lambda a: copied[a])
    graph.output(tuple(copied[v] for v in views))
    return torch.fx.GraphModule(gm, graph)


def size_check(shapes: Iterable[tuple | None]) -> Callable[[list], bool]:
    """A function of the inputs' shapes (a list, one per fusion input) that tells whether they
    bind the fusion's canonical sizes ``shapes`` consistently: each symbol one value, each
    static size and each expression (``2*s3``) its value. Plain Python comparisons, so that
    TorchDynamo traces it as guards on sizes."""
    first: dict = {}
    equal, rest = [], []
    shapes = list(shapes)
    for k, shape in enumerate(shapes):
        for d, s in enumerate(shape or ()):
            if isinstance(s, sympy.Symbol):
                if s in first:
                    equal.append(f"s[{k}][{d}] == {first[s]}")
                else:
                    first[s] = f"s[{k}][{d}]"
    for k, shape in enumerate(shapes):
        for d, s in enumerate(shape or ()):
            if isinstance(s, sympy.Symbol) and first[s] == f"s[{k}][{d}]":
                rest.append(f"s[{k}][{d}] >= 1")  # (an empty view: no fusion holds a size 0)
            elif isinstance(s, int):
                rest.append(f"s[{k}][{d}] == {s}")
            elif not isinstance(s, sympy.Symbol) and integer_polynomial(s) and all(x in first for x in s.free_symbols):
                text = str(s.xreplace({x: sympy.Symbol(first[x]) for x in s.free_symbols}))
                rest.append(f"s[{k}][{d}] == {text}")
    return eval("lambda s: " + (" and ".join(equal + rest) or "True"))  # noqa: S307 - built above


def integer_polynomial(expr: Any) -> bool:
    """Whether ``expr`` is a polynomial with integer coefficients (Python's ``*`` and ``+``
    evaluate it exactly on ints and SymInts)."""
    try:
        return all(c.is_Integer for c in sympy.Poly(expr).coeffs())
    except sympy.PolynomialError:
        return False
