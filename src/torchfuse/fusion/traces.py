"""One trace of a ``@fused`` function, and the conditions on sizes that choose it.

A trace of :mod:`.trace` holds for the sizes its Python's decisions hold for: ``make_fx``
records each condition on sizes as a shape guard (``s1 <= 5``, a ``chunk``'s piece count), and
a later call of the same signature is served by the first trace whose guards hold. The guards
are written as plain Python comparisons of the arguments' sizes (:func:`guard_check`), which
TorchDynamo traces as guards of its own, so the choice costs a compiled caller nothing at run
time; those that taking argument views alone records are the fusion's own size check's
(:func:`without_view_guards`).
"""
from __future__ import annotations

from typing import Callable

import sympy
import torch

from .definition import Fusion
from .views import integer_polynomial, size_check


class Traced:
    """One trace of a :class:`FusedFunction`: its fusion, whether the function returned one
    tensor, and the conditions on sizes its Python decisions assumed.

    Attributes:
        fusion: the :class:`~torchfuse.fusion.Fusion`.
        single: the function returned one tensor (not a tuple).
        guards: sympy conditions on the trace's size symbols (``s1 <= 5``), each true for the
            traced sizes; ``sizes`` maps each symbol to ``(argument position, dim)``.
        exact: argument position -> traced shape, for a trace that holds for those sizes
            only (a condition pinned a size); else ``None``.
        views: computes, from the tensor arguments, the views of them the fusion takes
            after them as inputs (:mod:`.views`); ``None`` where it takes none.
        check: the guards as a Python function of the arguments (:func:`guard_check`),
            checked against ``example`` (the traced arguments, which satisfy them); ``None``:
            no guards, or they are evaluated with sympy.
    """

    def __init__(self, fusion: Fusion, single: bool, guards: list, sizes: dict, exact: dict | None = None,
                 views: torch.fx.GraphModule | None = None, example: tuple | None = None):
        self.fusion, self.single, self.guards, self.sizes, self.exact = fusion, single, guards, sizes, exact
        self.views = views
        self._sizes_bind = size_check(fusion.shapes) if views is not None else None
        #: the guards as one plain-Python test of the arguments' sizes (``None``: no guards,
        #: or one PyTorch's printer cannot write)
        self.check = guard_check(guards, sizes)
        if self.check is not None and example is not None:
            try:  # the traced arguments satisfy every guard: a printed form that says otherwise is unused
                if not self.check(example):
                    self.check = None
            except Exception:  # noqa: BLE001 - (a name the printer used that Python lacks)
                self.check = None

    def inputs(self, args: tuple) -> list:
        """The fusion's inputs for a call with ``args``: the tensor arguments, then the views
        of them it reads (taken now: views on the host, no data moves)."""
        tensors = [a for a in args if isinstance(a, torch.Tensor)]
        return tensors if self.views is None else tensors + list(self.views(*tensors))

    def serves(self, args: tuple) -> list | None:
        """The fusion's inputs (:meth:`inputs`) for the call's ``args`` (of the trace's
        signature) when the trace serves it, else ``None``: every guard holds for its sizes;
        for a trace whose Python pinned a size to one value (``exact``: argument position ->
        traced shape), the sizes are the traced ones; for one that reads views of its
        arguments, the views' sizes bind the fusion's (the two halves of an odd size do not).
        The views are taken once, for the check and the call."""
        if self.exact is not None:
            held = all(tuple(args[i].shape) == shape for i, shape in self.exact.items())
            return self.inputs(args) if held else None
        inputs = self.inputs(args)
        if self._sizes_bind is not None and not self._sizes_bind([t.shape for t in inputs]):
            return None
        if not self.guards:
            return inputs
        if self.check is not None:
            return inputs if self.check(args) else None
        values = {sym: int(args[i].shape[d]) for sym, (i, d) in self.sizes.items()}
        return inputs if all(bool(g.xreplace(values)) for g in self.guards) else None

    @property
    def traceable(self) -> bool:
        """Whether TorchDynamo can trace :meth:`serves` (plain Python on sizes, which it turns
        into guards of the compiled code): no guards, or guards :func:`guard_check` wrote."""
        return not self.guards or self.check is not None


def guard_check(guards: list, sizes: dict) -> Callable[[tuple], bool] | None:
    """``guards`` (sympy conditions on size symbols; ``sizes``: symbol -> ``(argument
    position, dim)``) as one Python function of the call's arguments, written by PyTorch's
    printer of guards (``torch.utils._sympy.printers.PythonPrinter``: ``//``, ``%``,
    ``max``...), so that TorchDynamo traces it as comparisons of sizes: a trace chosen by an
    ``if`` on sizes stays one op in the compiled graph. ``None`` where there are no guards or
    the printer cannot write one."""
    if not guards:
        return None
    try:
        from torch.utils._sympy.printers import PythonPrinter

        names = {sym: sympy.Symbol(f"a[{i}].shape[{d}]", integer=True) for sym, (i, d) in sizes.items()}
        text = " and ".join(f"({PythonPrinter().doprint(g.xreplace(names))})" for g in guards)
        return eval(f"lambda a: {text}", {"max": max, "min": min})  # noqa: S307 - printed from the guards
    except Exception:  # noqa: BLE001 - a guard outside the printer's forms: checked with sympy instead
        return None


def shape_guards(gm: torch.fx.GraphModule, positions: list[int]) -> tuple[list, dict]:
    """The shape guards ``make_fx`` recorded while tracing ``gm`` symbolically (conditions the
    traced Python evaluated on sizes), and each size symbol's ``(argument position, dim)``
    (``positions``: the argument position of each of ``gm``'s inputs).

    Returns ``None`` for the guards when one names a size that no input's dim is any more
    (``x.shape[1] == 4`` pins the dim to 4, and the trace has no symbol for it): the trace then
    holds for its exact sizes only.
    """
    sizes: dict = {}
    shape_env = None
    inputs = [n for n in gm.graph.nodes if n.op == "placeholder"]
    for k, n in enumerate(inputs):
        val = n.meta.get("val")
        for d, s in enumerate(getattr(val, "shape", ())):
            if isinstance(s, torch.SymInt):
                shape_env = s.node.shape_env
                if isinstance(s.node.expr, sympy.Symbol):
                    sizes.setdefault(s.node.expr, (positions[k], d))
    guards = [g.expr for g in shape_env.guards] if shape_env is not None else []
    guards = [g for g in guards if g is not sympy.true]
    if any(x not in sizes for g in guards for x in g.free_symbols):
        return None, {}
    return guards, {sym: at for sym, at in sizes.items() if any(sym in g.free_symbols for g in guards)}


def symbols_at(gm: torch.fx.GraphModule, positions: list[int]) -> dict:
    """``(argument position, dim) -> size symbol`` of the inputs of a symbolic trace."""
    out = {}
    inputs = [n for n in gm.graph.nodes if n.op == "placeholder"]
    for k, n in enumerate(inputs):
        for d, s in enumerate(getattr(n.meta.get("val"), "shape", ())):
            if isinstance(s, torch.SymInt) and isinstance(s.node.expr, sympy.Symbol):
                out[(positions[k], d)] = s.node.expr
    return out


def without_view_guards(guards: list, gm: torch.fx.GraphModule, views: torch.fx.GraphModule, tensors: list,
                         positions: list[int], fusion: Fusion) -> tuple[list, dict]:
    """``guards`` (a trace's, with their symbols' places) less those that taking the argument
    views alone records (a slice's ``D // 2 <= D``, its result's strides): each call takes the
    views again, so those decisions are made for its sizes, and the fusion's own relation
    between the views' sizes is :func:`~torchfuse.fusion.views.size_check`'s; less those
    that relation implies (``N - 1 == (W + 1) // 2``: two views lined up by one op)."""
    from torch.fx.experimental.proxy_tensor import make_fx

    traced = make_fx(views, tracing_mode="symbolic")(*tensors)
    own, _ = shape_guards(traced, positions)
    rename = {}
    theirs = symbols_at(traced, positions)
    ours = symbols_at(gm, positions)
    for at, sym in theirs.items():
        if at in ours:
            rename[sym] = ours[at]
    taken = {g.xreplace(rename) for g in own or []}
    # a view's size is at least 1 (a call with an empty view fails the size check): a guard
    # that holds for every such size (``Max(1, D - D // 2) == D - D // 2``, an intermediate's
    # strides) is no decision
    view_sizes = {}
    for v in views.graph.output_node().args[0]:
        for s in v.meta["val"].shape:
            expr = s.node.expr if isinstance(s, torch.SymInt) else sympy.Integer(int(s))
            if not expr.is_Integer and not isinstance(expr, sympy.Symbol):
                view_sizes.setdefault(expr, sympy.Symbol(f"v{len(view_sizes)}", integer=True, positive=True))
    kept = [g for g in guards if g not in taken and g.xreplace(view_sizes) is not sympy.true]
    # each size as the fusion's canonical size, which every call it serves binds (fresh symbols:
    # the fusion's names may be the trace's); only integer polynomials, which size_check tests
    fresh: dict = {}
    as_fusion = {}
    for expr, sym in getattr(views, "fusion_sizes", {}).items():
        canonical = sympy.sympify(fusion.sizes.find(sym))
        if canonical.is_Integer or integer_polynomial(canonical):
            as_fusion[expr] = canonical.xreplace({x: fresh.setdefault(x, sympy.Dummy(integer=True, positive=True))
                                                  for x in canonical.free_symbols})
    kept = [g for g in kept if g.xreplace(as_fusion) is not sympy.true]
    return kept, {sym: at for at, sym in ours.items() if any(sym in g.free_symbols for g in kept)}
