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
import sys
from typing import Any, Callable, Iterable

import sympy
import torch

from ..passes.concat import elementwise


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


#: views of a computed value that :func:`push_views_to_arguments` moves to its operands
_MOVABLE_VIEWS = (torch.ops.aten.slice.Tensor, torch.ops.aten.select.int)
_SPLITS = (torch.ops.aten.split_with_sizes.default, torch.ops.aten.split.Tensor)


def _tensor(a: Any) -> bool:
    return isinstance(a, torch.fx.Node) and isinstance(a.meta.get("val"), torch.Tensor)


def _from_argument(node: torch.fx.Node) -> bool:
    """Whether ``node`` is an argument or a chain of views of one."""
    while node.op != "placeholder":
        if node.op != "call_function" or not node.args or not isinstance(node.args[0], torch.fx.Node):
            return False
        if node.target is not operator.getitem and not is_view(node.target):
            return False
        node = node.args[0]
    return True


def _movable(node: torch.fx.Node) -> bool:
    """Whether a view of ``node`` can be taken of the arguments it is computed from."""
    if _from_argument(node):
        return True
    return elementwise(node) and all(_movable(a) for a in node.all_input_nodes if _tensor(a))


def push_views_to_arguments(gm: torch.fx.GraphModule) -> int:
    """Rewrite, in place, each slice, ``select`` and ``split``/``chunk`` piece of a value that
    ``gm`` computes elementwise from its arguments into the same computation of those pieces of
    the arguments: ``rotate_half(q.float())`` becomes ``cat((-q[..., D//2:].float(),
    q[..., :D//2].float()))``, whose argument views a fusion takes as inputs. An operand
    broadcast along the view's dim is left whole (``select`` takes its size-1 dim away). The
    elementwise ops are computed once per piece; the values are eager's (each element is
    computed from the same elements by the same ops). A 1-dim operand's ``select`` is a
    1-element slice (a 0-dim operand would promote as a number does); a view whose rewrite
    would change the result's dtype or rank is left as written (and refused by
    :func:`~torchfuse.fusion.trace.replay`).

    Returns:
        The number of views moved.
    """
    from torch._guards import detect_fake_mode

    fake = detect_fake_mode([n.meta.get("val") for n in gm.graph.nodes if n.op == "placeholder"])
    if fake is None:
        return 0
    moved = 0
    for node in list(gm.graph.nodes):
        spec = _view_spec(node)
        if spec is None or _from_argument(spec[0]) or not _movable(spec[0]):
            continue
        made: list = []
        try:
            with gm.graph.inserting_before(node), fake:
                new = _moved(gm.graph, spec, made)
        except Exception:  # noqa: BLE001 - an op that refuses its operands' views: left as written
            new = None
        expected = node.meta["val"]
        if (new is None or new.meta["val"].dtype != expected.dtype
                or new.meta["val"].dim() != expected.dim()):
            for m in reversed(made):
                gm.graph.erase_node(m)
            continue
        node.replace_all_uses_with(new)
        moved += 1
        dead = [node]
        while dead:
            n = dead.pop()
            if n.op == "call_function" and not n.users:
                inputs = n.all_input_nodes
                gm.graph.erase_node(n)
                dead.extend(inputs)
    if moved:
        gm.recompile()
    return moved


def _view_spec(node: torch.fx.Node) -> tuple | None:
    """``(source, op, dim, rest, piece)`` for a slice or ``select`` of ``source`` (``piece``
    None) or the ``piece``-th item of a split of it; ``rest``: the op's arguments after the dim.
    None for other nodes."""
    if node.op != "call_function":
        return None
    if node.target in _MOVABLE_VIEWS and len(node.args) >= 1 and not node.kwargs:
        src, dim, rest = node.args[0], (node.args[1] if len(node.args) > 1 else 0), tuple(node.args[2:])
        piece = None
        op = node.target
    elif (node.target is operator.getitem and isinstance(node.args[0], torch.fx.Node)
          and node.args[0].target in _SPLITS and not node.args[0].kwargs):
        split = node.args[0]
        src, op, piece = split.args[0], split.target, node.args[1]
        dim, rest = (split.args[2] if len(split.args) > 2 else 0), (split.args[1],)
    else:
        return None
    if not _tensor(src) or not isinstance(dim, int):
        return None
    return src, op, dim % max(src.meta["val"].dim(), 1), rest, piece


def _moved(graph: torch.fx.Graph, spec: tuple, made: list) -> torch.fx.Node | None:
    """The nodes computing the view ``spec`` of its source from views of the source's operands
    (appended to ``made``); None where an operand's view cannot be written so."""
    src, op, dim, rest, piece = spec

    def node(target, args, kwargs=None):
        n = graph.call_function(target, args, kwargs or {})
        made.append(n)
        values = torch.fx.node.map_arg((args, kwargs or {}), lambda a: a.meta["val"])
        n.meta["val"] = target(*values[0], **values[1])
        return n

    if _from_argument(src):
        if piece is None:
            return node(op, (src, dim, *rest))
        return node(operator.getitem, (node(op, (src, rest[0], dim)), piece))
    if any(isinstance(v, torch.fx.Node) for v in src.kwargs.values()):
        return None  # (a tensor passed by keyword: left as written)
    out = src.meta["val"]
    args = []
    for a in src.args:
        if not _tensor(a) or a.meta["val"].dim() == 0:
            args.append(a)
            continue
        val = a.meta["val"]
        d = dim - (out.dim() - val.dim())
        broadcast = d < 0 or (val.shape[d] == 1 and out.shape[dim] != 1)
        if broadcast and (op is not torch.ops.aten.select.int or d < 0):
            args.append(a)
            continue
        view = (a, op, d, (0,) if broadcast else rest, piece)
        if op is torch.ops.aten.select.int and val.dim() == 1:
            # a 0-dim operand would promote as a number: its one element as a 1-element slice
            if broadcast:
                args.append(a)
                continue
            index = rest[0]
            if not isinstance(index, int):
                return None
            view = (a, torch.ops.aten.slice.Tensor, d, (index, index + 1 if index != -1 else sys.maxsize), None)
        moved = _moved(graph, view, made)
        if moved is None:
            return None
        args.append(moved)
    return node(src.target, tuple(args), dict(src.kwargs))
