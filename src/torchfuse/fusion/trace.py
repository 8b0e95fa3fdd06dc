"""The decorator form: trace a plain Python function of tensors into one fusion.

``@fused`` traces the function with ``make_fx`` (symbolic sizes, torchfuse's decomposition
table: the compiler's own frontend) on the first call with each *signature* (dtypes, device,
ranks, which dims have size 1 and which sizes are equal, layouts, the values of non-tensor arguments
and of the attributes and constant items the function reads of them, and the Python values
(numbers, strings, dtypes, tuples of them) it reads from its closure and its module's
globals, directly or through attributes, constant dict items and the user's helper functions
reached through them, which the trace bakes in as constants), and replays the ATen graph op by
op into a :class:`~torchfuse.fusion.Fusion` through the same checks as a hand-written
definition. Later calls with the same signature run that fusion, at any sizes where the
trace's own decisions hold: Python control flow on
sizes (``if x.shape[-1] > 5``) is recorded by the trace as a condition on its size symbols
(``make_fx``'s shape guards), checked on every later call of the signature; sizes for which
one fails are traced again, into a fusion of their own; a call with an empty tensor runs the
function as written. Calls with inputs that require grad go through
:class:`~torchfuse.fusion.autograd.FusionOp` (derived backward), so the function is
differentiable and a single op inside ``torch.compile``. Under ``torch.compile`` every call is
that op; a signature first met under ``torch.compile`` (no call of it outside) runs outside
the compiled graph (a graph break) and registers it: the code TorchDynamo compiled around
that break keeps it, so the op joins a single graph only where TorchDynamo compiles again
(after ``torch._dynamo.reset()``, or in code that first calls it after one call outside).
Which trace serves a call is decided by plain comparisons of sizes (the trace's conditions
written by PyTorch's printer of guards), which TorchDynamo traces as guards of the compiled
code; a condition the printer cannot write makes the call run outside.

A view of an argument (slices, ``select``, ``narrow``, ``split``/``chunk``/``unbind`` pieces,
transposes, chains of them) becomes an input of the fusion that each call takes of the real
argument (:mod:`.views`); ``torch.cat`` of tensors of one shape is ``fd.ops.cat``
(:mod:`.concat`), so rotary position embeddings fuse into one kernel.

What cannot be fused is reported when tracing: an ATen op outside the op registry, a view of
a value the function computes, a concatenation of tensors of different shapes, a scalar
computed from sizes, a captured tensor constant.
"""
from __future__ import annotations

import functools
import inspect
import logging
import math
import numbers
import operator
import traceback
from typing import Any, Callable

import sympy
import torch

from ..ir import ops as registry
from .definition import TRACING, Fusion
from .errors import DefinitionError
from .traces import Traced, shape_guards, without_view_guards
from .views import integer_polynomial, is_view, push_views_to_arguments, takes_view, views_module

log = logging.getLogger("torchfuse.fusion")

aten = torch.ops.aten
_SIZE_ARITHMETIC = {operator.add: operator.add, operator.sub: operator.sub, operator.mul: operator.mul,
                    operator.floordiv: lambda a, b: sympy.floor(sympy.sympify(a) / b)}
_DROPPED_KWARGS = ("device", "pin_memory", "layout")
#: overloads of a number and a tensor (``2 ** x``, ``3 % x``) outside the registry: the fusion's
#: op of that name takes them, the number as a constant operand, as a definition's ``2 ** t`` does
_NUMBER_FIRST = {aten.pow.Scalar: "pow", aten.remainder.Scalar_Tensor: "remainder"}


def signature(args: tuple) -> tuple:
    """What a trace depends on: per tensor its dtype, device, size pattern (1, or the index of
    the first tensor dim with the same size) and layout (:func:`layout_key`), per other
    argument its value (:func:`value_key`)."""
    # sizes compared, never converted to int or hashed: under TorchDynamo with dynamic sizes a
    # comparison is a guard on a relation between sizes, an int() a guard on the value (a
    # recompilation for every new batch size)
    seen: list = []
    key = []
    for a in args:
        if isinstance(a, torch.Tensor):
            pattern = []
            for s in a.shape:
                if s == 1:
                    pattern.append(1)
                    continue
                k = next((k for k, other in enumerate(seen) if s == other), None)
                if k is None:
                    k = len(seen)
                    seen.append(s)
                pattern.append(("d", k))
            key.append(("tensor", a.dtype, a.device.type, a.device.index, tuple(pattern), layout_key(a)))
        else:
            key.append(value_key(a))
    return tuple(key)


def layout_key(t: torch.Tensor) -> tuple:
    """The layout a trace of ``t`` assumed: the trace's fake tensor has ``t``'s strides, and its
    decompositions decide on them (``reshape`` of a contiguous tensor is a view, of a
    transposed one a copy), so a trace serves only tensors laid out alike. A dense tensor
    (every element once, no gaps) is keyed by its dims' order from the fastest, size-1 dims
    left out, as its strides follow from its sizes; any other by its strides."""
    # compared, not converted (see signature); only a tensor with gaps is keyed by its strides'
    # values, which pins a trace of one to its exact layout
    sizes, strides = list(t.shape), list(t.stride())
    order: list[int] = []  # dims from the smallest stride (ties: the later dim first)
    for d in range(len(sizes)):
        if sizes[d] == 1:
            continue
        i = 0  # an insertion, not sorted(): TorchDynamo cannot sort on symbolic keys
        while i < len(order) and (strides[order[i]] < strides[d] or (strides[order[i]] == strides[d] and order[i] > d)):
            i += 1
        order.insert(i, d)
    expected = 1
    for d in order:
        if strides[d] != expected:
            return ("strides", tuple(int(s) for s in strides))
        expected *= sizes[d]
    return ("dense", tuple(order))


def value_key(a: Any) -> tuple:
    """A non-tensor value as a key that tells apart what a trace tells apart: the kind (2, 2.0
    and True are equal in Python), a float's sign (``0.0 == -0.0``, but ``1 / x`` differs) and
    NaN (unequal to itself, which would never find its trace), element by element in tuples
    and lists."""
    kind = _value_kind(a)
    if kind == "float":
        return ("value", kind, "nan") if a != a else ("value", kind, a, math.copysign(1.0, a))
    if kind == "complex":
        return ("value", kind, value_key(a.real), value_key(a.imag))
    if isinstance(a, (tuple, list)):
        return ("value", "list" if isinstance(a, list) else "tuple", tuple(value_key(x) for x in a))
    return ("value", kind, a)


#: a place a function may read a value from: ``(root, path)``, the root a closure cell
#: (``("cell", cell)``), a module global (``("global", globals, name)``) or an argument of the
#: call (``("arg", position)``), the path the attribute loads and constant subscripts applied to
#: it (``(("attr", "lr"),)``, ``(("item", "lr"),)``)
Read = tuple[tuple, tuple]

#: the loads of a local variable (an argument) in the bytecode of Python 3.10 to 3.14
_LOCAL_LOADS = ("LOAD_FAST", "LOAD_FAST_CHECK", "LOAD_FAST_BORROW")

def _chains(code) -> list[tuple[str, str, tuple]]:
    """``(kind, name, path)`` for each load of a global (``kind`` ``"global"``), a closure
    variable (``"cell"``) or a local (``"local"``) in ``code``, with every prefix of the chain
    of attribute loads and constant subscripts that follows it (``cfg.lr``: the global ``cfg``,
    then ``cfg.lr``)."""
    import dis

    ins = list(dis.get_instructions(code))
    out = []
    for i, x in enumerate(ins):
        if x.opname not in ("LOAD_GLOBAL", "LOAD_DEREF", *_LOCAL_LOADS):
            continue
        kind = "global" if x.opname == "LOAD_GLOBAL" else "cell" if x.opname == "LOAD_DEREF" else "local"
        path = []
        out.append((kind, x.argval, ()))
        j = i + 1
        while j < len(ins):
            y = ins[j]
            if y.opname in ("LOAD_ATTR", "LOAD_METHOD"):
                path.append(("attr", y.argval))
                j += 1
            elif (y.opname in ("LOAD_CONST", "LOAD_SMALL_INT") and j + 1 < len(ins)
                  and (ins[j + 1].opname == "BINARY_SUBSCR"  # (Python 3.14: a BINARY_OP "[]")
                       or (ins[j + 1].opname == "BINARY_OP" and ins[j + 1].argrepr == "[]"))):
                path.append(("item", y.argval))
                j += 2
            else:
                break
            out.append((kind, x.argval, tuple(path)))
    return out


def _is_user_function(v: Any) -> bool:
    """A plain Python function outside PyTorch and Triton, whose code a trace runs through."""
    import types

    module = getattr(v, "__module__", None) or ""
    return isinstance(v, types.FunctionType) and not module.split(".")[0] in ("torch", "triton", "torchfuse")


def _free_number_reads(fn: Callable, depth: int = 3, seen: set | None = None) -> tuple[Read, ...]:
    """Where ``fn`` may read a Python value that is not an argument: each closure variable and each
    global its code (and the code of functions defined in it) loads, with the attributes and
    constant items it reads of them (``cfg.lr``, ``sched["lr"]``), the attributes and constant
    items it reads of its arguments (``self.alpha``, ``c.lr``), and the same for the user's own
    helper functions it calls through a global or a closure variable (``current_lr()``),
    ``depth`` calls deep. A trace bakes such a value in as a constant, so the values are part
    of its key (:meth:`FusedFunction.free_numbers`)."""
    code = getattr(fn, "__code__", None)
    top = seen is None  # (fn itself, whose arguments are the call's; not one of its helpers)
    seen = set() if seen is None else seen
    if code is None or id(code) in seen:
        return ()
    seen.add(id(code))
    cells = dict(zip(code.co_freevars, getattr(fn, "__closure__", None) or ()))
    params = code.co_varnames[:code.co_argcount]
    g = getattr(fn, "__globals__", {})
    reads: list[Read] = []
    stack = [code]
    while stack:
        c = stack.pop()
        stack.extend(k for k in c.co_consts if isinstance(k, type(code)))
        for kind, name, path in _chains(c):
            if kind == "local":
                # (a helper's arguments are its caller's values, read where the caller reads them)
                if c is code and top and path and name in params:
                    reads.append((("arg", params.index(name)), path))
                continue
            if kind == "cell":
                # (in nested code too: a lambda or comprehension reading the closure variable;
                # a name there that is not one of fn's closure variables is a local of fn's)
                if name in cells:
                    reads.append((("cell", cells[name]), path))
                    helper = _cell_contents(cells[name])
                    if not path and depth > 0 and _is_user_function(helper):
                        reads.extend(_free_number_reads(helper, depth - 1, seen))
                continue
            reads.append((("global", g, name), path))
            helper = g.get(name)
            if not path and depth > 0 and _is_user_function(helper):
                reads.extend(_free_number_reads(helper, depth - 1, seen))
    unique: dict = {}  # (globals dicts are compared by identity)
    for root, path in reads:
        unique.setdefault((root[0], id(root[1]), root[2:], path), (root, path))
    return tuple(unique.values())


def _cell_contents(cell) -> Any:
    try:
        return cell.cell_contents
    except ValueError:  # not assigned yet
        return None


#: values a trace may bake in that its key can hold (compared by value): numbers (NumPy's
#: scalars included), strings, dtypes, devices, layouts and memory formats, ``None``
_WATCHED_TYPES = (numbers.Number, str, torch.dtype, torch.device, torch.layout, torch.memory_format, type(None))


def watchable(v: Any) -> bool:
    """Whether ``v`` is a value a trace's key holds: one of :data:`_WATCHED_TYPES`, or a tuple
    or list of them."""
    if isinstance(v, (tuple, list)):
        return all(watchable(x) for x in v)
    return isinstance(v, _WATCHED_TYPES)


def read_number_place(read: Read, args: tuple = ()) -> Any:
    """The value at ``read`` now, for a call with ``args`` (``None`` where it cannot be read:
    an unassigned cell, a missing key or attribute)."""
    root, path = read
    try:
        if root[0] == "arg":
            v = args[root[1]]
            if isinstance(v, torch.Tensor):
                return None  # (its sizes and dtype are the signature's; ``x.shape`` is symbolic)
        else:
            v = root[1].cell_contents if root[0] == "cell" else root[1].get(root[2])
        for kind, key in path:
            v = getattr(v, key) if kind == "attr" else v[key]
        return v
    except Exception:  # the place does not exist now: nothing is read from it
        return None


def _read_label(read: Read) -> str:
    """A stable name of ``read`` for a trace's key: ``"cell"`` or the global's name, then its
    path (``cfg.lr``, ``sched['lr']``)."""
    root, path = read
    label = "cell" if root[0] == "cell" else f"argument {root[1]}" if root[0] == "arg" else root[2]
    for kind, key in path:
        label += f".{key}" if kind == "attr" else f"[{key!r}]"
    return label


def _value_kind(a) -> str:
    """``bool``, ``int``, ``float``, ... of a non-tensor argument, by ``isinstance`` with literal
    names: TorchDynamo (torch 2.11) cannot hash ``type(a).__name__`` and broke the graph there."""
    for kind, name in ((bool, "bool"), (int, "int"), (float, "float"), (complex, "complex"), (str, "str")):
        if isinstance(a, kind):
            return name
    # NumPy's scalars, which PyTorch reads as the Python number of their kind: keyed as that
    # (else np.int64(2) and np.float32(2.0), or 0.0 and -0.0, are one key)
    for kind, name in ((numbers.Integral, "int"), (numbers.Real, "float"), (numbers.Complex, "complex")):
        if isinstance(a, kind):
            return name
    return "other"



#: why a call of a ``@fused`` function inside a compiled region ran outside the graph
_BY_SIZES = ("which of its traces serves a call is decided by a condition on sizes that cannot be written as "
             "Python comparisons")
_NOT_TRACED = "it had no trace for these argument dtypes and sizes yet (traced now; later compilations fuse it)"

#: what TorchDynamo's error says where it may not break the graph for such a call
#: (``fullgraph=True``): the graph break is torchfuse's, not a ``torch.compiler.disable`` of the user's
_OUTSIDE_GRAPH_REASON = ("a @fused function's first call with a signature (dtypes, ranks, size-1 dims, layouts, "
                         "the Python values it reads) runs outside the compiled graph, where it is traced; under "
                         "fullgraph=True, call the function once outside torch.compile with such arguments first")

#: while :func:`torchfuse.explain` runs, a list of ``(function name, why, stack text)`` of each
#: call that ran outside a compiled graph (a graph break TorchDynamo may not list), else None
OUTSIDE_GRAPH_CALLS: list | None = None


class _EmptyView(Exception):
    """A trace met a view of an argument with no elements (``x[:, 1:]`` of one column)."""


class FusedFunction:
    """A Python function run as one fusion per input signature and branch of its Python on
    sizes (see the module docstring).

    Attributes:
        fn: the function.
        fusions: signature -> its :class:`Traced` traces, the first whose guards hold serving a
            call.
    """

    def __init__(self, fn: Callable, name: str | None = None, options: Any = None, **overrides):
        """Raises:
            TypeError: ``fn`` has keyword-only parameters or ``**kwargs`` (a trace reads
                arguments by position; one left at its default would be baked in unseen)."""
        try:
            kw_only = [("**" if p.kind is p.VAR_KEYWORD else "") + p.name
                       for p in inspect.signature(fn).parameters.values() if p.kind in (p.KEYWORD_ONLY, p.VAR_KEYWORD)]
        except (TypeError, ValueError):  # (a callable without a signature)
            kw_only = []
        if kw_only:
            raise TypeError(f"{getattr(fn, '__name__', 'fused')}: keyword-only arguments ({', '.join(kw_only)}) are "
                            f"not supported by @fused; make them positional-or-keyword")
        functools.update_wrapper(self, fn)
        self.fn = fn
        self.name = name or getattr(fn, "__name__", "fused")
        self.options = options
        self.overrides = overrides
        self.fusions: dict[tuple, list[Traced]] = {}
        self._ops: dict[tuple, Any] = {}
        #: per signature, the argument shapes at which a view the function takes is empty
        #: (those calls run unfused; a compiled caller then traces the function inline)
        self._empty_views: dict[tuple, set] = {}
        #: where ``fn`` may read a number (:func:`_free_number_reads`); narrowed at the first
        #: trace to the places that hold one then (not a module, a function, an attribute name),
        #: so that every later call, and every guard TorchDynamo adds, reads only those; each
        #: with its label, made here (TorchDynamo with dynamic sizes, torch 2.11, cannot trace
        #: the f-string of an argument's position, which it takes for a symbolic int)
        self._reads = tuple((r, _read_label(r)) for r in _free_number_reads(fn))

    def free_numbers(self, args: tuple = ()) -> tuple:
        """The Python values (numbers, strings, dtypes, tuples of them: :func:`watchable`)
        ``fn`` reads now, for a call with ``args``, from its closure, its module's globals and
        its arguments' attributes and items, and the reads of its helper functions
        (:func:`_free_number_reads`), keyed as arguments are: a trace made with other values
        is not reused (``scale = 3.0`` after a call with ``2.0`` traces again), as TorchDynamo
        guards on the globals a compiled function reads. A place that held no such value at
        the first trace is not watched."""
        values = []
        for read, label in self._reads:
            v = read_number_place(read, args)
            if watchable(v):
                values.append((label, value_key(v)))
        return tuple(values)

    def key_of(self, args: tuple) -> tuple:
        """The key of the traces that may serve ``args``: their :func:`signature` and the
        free values'."""
        return signature(args) + self.free_numbers(args)

    def fusion_for(self, *args) -> Fusion:
        """The fusion ``fn`` becomes for arguments like ``args`` (traced on first use).

        Raises:
            DefinitionError: a view the function takes of ``args`` has no elements (such a
                call runs unfused).
        """
        try:
            return self._entry(args)[0].fusion
        except _EmptyView:
            raise DefinitionError(f"{self.name}: a view it takes of these arguments has no elements; such a call "
                                  f"runs the function unfused") from None

    def _find(self, args: tuple) -> tuple[tuple, Traced | None, list | None]:
        """``((signature, trace index), trace, the fusion's inputs)`` of the trace serving
        ``args``; the trace and inputs are ``None`` when none of the signature's serves it (the
        index is then the next one's)."""
        sig = self.key_of(args)
        traces = self.fusions.get(sig, [])
        for i, t in enumerate(traces):
            inputs = t.serves(args)
            if inputs is not None:
                return (sig, i), t, inputs
        return (sig, len(traces)), None, None

    def _entry(self, args: tuple) -> tuple[Traced, tuple, list]:
        key, traced, inputs = self._find(args)
        if traced is None:
            with TRACING:  # one make_fx trace at a time in the process (see TRACING)
                key, traced, inputs = self._find(args)  # another thread may have traced it meanwhile
                if traced is None:
                    if not self.fusions:
                        self._reads = tuple(r for r in self._reads if watchable(read_number_place(r[0], args)))
                    traced = self._trace(args)
                    self.fusions.setdefault(key[0], []).append(traced)
                    inputs = traced.inputs(args)
                    # registered now, so that a compiled graph calling the function with these
                    # arguments later finds its op (without it: a graph break, an error under fullgraph)
                    self._op_for(key, traced.fusion)
        return traced, key, inputs

    # a fused function is a function: copying a model that holds one (``copy.deepcopy`` of a
    # module for an EMA copy) shares it, and pickling names it (multiprocessing sends it so)
    def __copy__(self) -> "FusedFunction":
        return self

    def __deepcopy__(self, memo: dict) -> "FusedFunction":
        return self

    def __reduce__(self) -> str:
        """Pickled by reference, as functions are: by ``__module__`` and ``__qualname__``.

        Raises:
            pickle.PicklingError: (at pickling) the function is not reachable by that name (one
                defined inside another function).
        """
        return self.__qualname__

    def __call__(self, *args, **kwargs):
        if kwargs:
            args = self._positional(args, kwargs)
        if _has_empty([a for a in args if isinstance(a, torch.Tensor)]):
            # an empty tensor: no fusion holds a size-0 dim, and a trace at other sizes assumed
            # every size at least 2 (a Python ``if x.shape[0] == 0`` took its other branch); under
            # TorchDynamo the function is traced inline
            return self.fn(*args)
        try:
            return self._fused_call(args)
        except _EmptyView:  # (as an empty argument: the call runs as written, unfused)
            return self._unfused_empty_view(args)

    def _unfused_empty_view(self, args: tuple):
        """Run a call where a view the function takes is empty as written (unfused), noting
        its shapes for a compiled caller (which then traces the function inline)."""
        self._empty_views.setdefault(self.key_of(args), set()).add(_shapes(args))
        return self.fn(*args)

    def _fused_call(self, args: tuple):
        """The call through the trace serving ``args``.

        Raises:
            _EmptyView: a view the function takes of an argument has no elements.
        """
        if torch.compiler.is_compiling():
            # Under TorchDynamo the call must be the fusion's registered op, one node in the
            # graph: tracing into this tracer, the code generator or the fusion's runtime would
            # run them on fake tensors and symbolic sizes, which fails. A signature without its
            # op yet runs outside the graph (a graph break, kept by the code compiled around it)
            # and registers it.
            traces = self.fusions.get(self.key_of(args), ())
            if not all(t.traceable for t in traces):
                # which trace serves these sizes is decided by a condition TorchDynamo cannot
                # trace: the call runs outside the graph (a graph break)
                return self._outside_graph(_BY_SIZES, *args)
            key, traced, tensors = self._find(args)
            op = self._ops.get(key)
            if op is None:
                empty = self._empty_views.get(key[0])  # (sizes read only where some were empty)
                if empty and _shapes(args) in empty:
                    return self.fn(*args)  # (an empty view met outside: traced inline, as an empty argument)
                return self._outside_graph(_NOT_TRACED, *args)
            if _has_empty(tensors):  # an empty view: traced inline, as an empty argument
                return self.fn(*args)
            return self._call_op(op, traced.single, tensors)
        traced, key, tensors = self._entry(args)
        if _has_empty(tensors):
            raise _EmptyView
        if torch.is_grad_enabled() and any(t.requires_grad for t in tensors):
            return self._call_op(self._op_for(key, traced.fusion), traced.single, tensors)
        outs = tuple(traced.fusion.execute(tensors))
        return outs[0] if traced.single else outs

    def _positional(self, args: tuple, kwargs: dict) -> tuple:
        """``args`` and ``kwargs`` as the function's positional arguments, in its order (a
        trace and its signature read arguments by position).

        Raises:
            TypeError: the function does not take them (keyword-only parameters are refused
                where it is defined).
        """
        bound = inspect.signature(self.fn).bind(*args, **kwargs)
        bound.apply_defaults()  # f(x, scale=3.0) past a defaulted b: b's default in its place
        return tuple(bound.args)

    def _op_for(self, key: tuple, fusion: Fusion):
        if key not in self._ops:
            with TRACING:  # one op per trace, when threads first call it at once
                if key not in self._ops:
                    self._ops[key] = fusion.as_op()
        return self._ops[key]

    @staticmethod
    def _call_op(op, single: bool, inputs: list):
        outs = op(*inputs)
        outs = (outs,) if single or not isinstance(outs, tuple) else outs
        return outs[0] if single else outs

    @torch.compiler.disable(reason=_OUTSIDE_GRAPH_REASON)
    def _outside_graph(self, why: str, *args):
        if OUTSIDE_GRAPH_CALLS is not None:
            # the stack as FX's stack traces hold it: explain finds the user's line as for an op
            OUTSIDE_GRAPH_CALLS.append((getattr(self.fn, "__name__", "fused function"), why,
                                        "".join(traceback.format_stack())))
        try:
            traced, key, _ = self._entry(args)
        except _EmptyView:
            return self._unfused_empty_view(args)
        self._op_for(key, traced.fusion)  # what later compilations put in their graphs
        return self(*args)

    def _trace(self, args: tuple) -> Traced:
        from torch.fx.experimental.proxy_tensor import make_fx

        from ..decompose import decomposition_table
        from ..passes.fx import with_number_checks

        positions = [i for i, a in enumerate(args) if isinstance(a, torch.Tensor)]

        returned: list = []

        def flat(*tensors):
            full = list(args)
            for i, t in zip(positions, tensors):
                full[i] = t
            result = self.fn(*full)
            returned.append(isinstance(result, torch.Tensor))
            return result

        tensors = [args[i].detach() for i in positions]
        try:
            # eager's checked conversion of stored numbers, which the decompositions drop
            gm = make_fx(flat, decomposition_table=with_number_checks(decomposition_table()),
                         tracing_mode="symbolic")(*tensors)
        except AssertionError as e:
            if "FakeTensor" not in str(e):
                raise
            # make_fx's fake mode meets a real tensor: one the function reads without taking it
            raise DefinitionError(f"{self.name} reads a tensor it does not take as an argument (a captured or "
                                  f"global tensor); pass it as an argument to fuse it") from None
        except RuntimeError:
            # an error at symbolic sizes ("size of tensor a (s9 - 1) must match ... (s7)"): the
            # function as written raises eager's own, with the call's sizes, where it raises
            with torch.no_grad():
                self.fn(*args)
            raise
        push_views_to_arguments(gm)  # (a slice of q.float() as q's slice, converted)
        try:
            params = list(inspect.signature(self.fn).parameters)
            names = [params[i] if i < len(params) else None for i in positions]
        except (TypeError, ValueError):
            names = None
        guards, sizes = shape_guards(gm, positions)
        fusion, views = replay(gm, self.name, self.options, input_names=names, **self.overrides)
        if views is not None and views.unit_views:
            guards = None  # (see replay: a view of size 1 serves these sizes alone)
        exact = None if guards is not None else {i: tuple(args[i].shape) for i in positions}
        if views is not None and guards:
            guards, sizes = without_view_guards(guards, gm, views, tensors, positions, fusion)
        # its derivative is ATen's (softplus_backward), as in eager; traced now, while the
        # numbers the function reads are the key's. Before dispatch, so that ``detach()`` and
        # ``torch.no_grad()`` stay in it (a later trace makes detach an alias and drops grad mode),
        # with grad mode on whatever the caller's (a block's exit restores the mode it met)
        try:
            watch = _InferenceModeWatch()
            with torch.enable_grad(), torch.inference_mode(False):  # (the caller's modes are not the function's)
                reference = make_fx(watch.wrap(flat), tracing_mode="symbolic", pre_dispatch=True)(*tensors)
            if watch.seen:  # a block the trace does not record: no backward would be eager's
                fusion.backward_refusal = (f"{self.name} computes under torch.inference_mode(), which its trace "
                                           f"cannot hold; write torch.no_grad() instead to differentiate it")
            elif any(n.op == "get_attr" for n in reference.graph.nodes):
                # a tensor autograd does not track (``.data``), which this trace keeps only as a
                # constant of its own and the fusion's trace as an alias: no backward is eager's
                fusion.backward_refusal = (f"{self.name} reads a tensor's .data, which autograd does not track; "
                                           f"write .detach() instead to differentiate it")
            else:
                # (a function of the arguments: argument views get no gradient of their own,
                # their part reaches the argument through it; see FusionOp)
                fusion.autograd_reference = reference
                fusion.gradient_inputs = gradient_inputs(reference)
        except Exception as e:  # noqa: BLE001 - the recorded nodes' derivative serves instead
            log.info("%s: no undecomposed trace for its backward (%s: %s)", self.name, type(e).__name__, e)
        return Traced(fusion, returned[0], guards or [], sizes, exact, views, example=args)


def _shapes(args: tuple) -> tuple:
    """The shapes of the tensor arguments, as a key."""
    return tuple(tuple(int(s) for s in a.shape) for a in args if isinstance(a, torch.Tensor))


def _has_empty(tensors) -> bool:
    """Whether one of ``tensors`` (arguments, or a fusion's inputs with argument views) has
    no elements."""
    return any(0 in t.shape for t in tensors)


class _InferenceModeWatch(torch.overrides.TorchFunctionMode):
    """Notes whether any torch function of a call runs under ``torch.inference_mode()``, which
    a trace made before dispatch leaves no mark of (``seen``)."""

    def __init__(self):
        super().__init__()
        self.seen = False

    def __torch_function__(self, func, types, args=(), kwargs=None):
        self.seen = self.seen or torch.is_inference_mode_enabled()
        return func(*args, **(kwargs or {}))

    def wrap(self, fn: Callable) -> Callable:
        @functools.wraps(fn)
        def watched(*args):
            with self:
                return fn(*args)

        return watched


#: ``detach()`` and ``detach_()`` in a trace made before dispatch
_DETACHES = (aten.detach.default, aten.detach_.default)


def stops_gradient(reference: Any) -> bool:
    """Whether ``reference`` (a fusion's ``autograd_reference``, traced before dispatch) stops
    gradients anywhere: a detach, or grad mode set (``torch.no_grad()``)."""
    graph = getattr(reference, "graph", None)
    return graph is not None and any(n.target in _DETACHES or n.target is torch._C._set_grad_enabled
                                     for n in graph.nodes)


def gradient_inputs(gm: torch.fx.GraphModule) -> list[set[int]]:
    """Per output of ``gm``, the positions of its inputs from which it is computed through ops
    that record a gradient: not through ``aten.detach``/``detach_`` nor between
    ``torch._C._set_grad_enabled(False)`` and its ``True`` (``torch.no_grad()``), as a trace made
    before dispatch records them. Eager gives the other inputs no gradient (``None``), where a
    zero would still move a parameter under weight decay, and an output reached from none
    does not require grad."""
    reach: dict = {}
    enabled, position = True, 0
    for node in gm.graph.nodes:
        if node.op == "placeholder":
            reach[node], position = {position}, position + 1
        elif node.op == "call_function" and node.target is torch._C._set_grad_enabled:
            enabled = bool(node.args[0])
        elif node.op == "output":
            outs = node.args[0] if isinstance(node.args[0], (list, tuple)) else [node.args[0]]
            return [set(reach.get(o, set())) for o in outs]
        elif not enabled or node.target in _DETACHES:
            reach[node] = set()
        else:
            reach[node] = set().union(*(reach.get(a, set()) for a in node.all_input_nodes))
    return []


def replay(gm: torch.fx.GraphModule, name: str, options: Any = None, input_names: list | None = None,
           **overrides) -> tuple[Fusion, torch.fx.GraphModule | None]:
    """Define a fusion by applying the ATen ops of ``gm`` (traced by ``make_fx`` with symbolic
    sizes) one by one.

    Returns:
        ``(fusion, views)``: ``views`` (``None`` where there are none) computes, from the
        tensor arguments, the argument views the fusion takes after them as inputs
        (:mod:`.views`).

    Raises:
        DefinitionError: an op the fusion cannot hold (see the module docstring).
    """
    fd = Fusion(name, options=options, **overrides)
    env: dict = {}
    symbols: dict = {}  # FX size symbol -> this fusion's size
    written_as: dict = {}  # a node an in-place op wrote -> every node that stands for its tensor
    #: each view of an argument not applied yet -> whether its chain holds an op the fusion
    #: does not (a slice: it becomes an input); the arguments themselves map to False
    lazy: dict = {}
    taken: list = []  # the views that became inputs, in order
    view_sizes: dict = {}  # a view's size the arguments' sizes cannot express -> its symbol
    unit_views: list = []  # such sizes that are 1 at this trace (declared as broadcast dims)

    def size(s: Any) -> Any:
        if isinstance(s, torch.SymInt):
            expr = s.node.expr
            if expr.is_Integer:
                return int(expr)
            return expr.xreplace({**view_sizes, **{k: symbols[k] for k in expr.free_symbols}})
        return int(s)

    def view_input(node: torch.fx.Node) -> Any:
        """The argument view ``node`` as an input of the fusion (see :mod:`.views`)."""
        root = node
        while root.op != "placeholder":
            root = root.args[0]
        shape = []
        for s in node.meta["val"].shape:
            expr = s.node.expr if isinstance(s, torch.SymInt) else sympy.Integer(int(s))
            # (the size at this trace, read without specializing it: int() of a SymInt would)
            hint = s.node.hint if isinstance(s, torch.SymInt) else int(s)
            if hint == 0:
                raise _EmptyView
            if expr.is_Integer:
                shape.append(int(expr))
            elif expr in symbols:
                shape.append(symbols[expr])
            elif hint == 1:
                # a size the arguments' make 1 here (``D // 2`` of 3): the trace broadcast it as
                # eager does, which other sizes would not; it serves these sizes alone
                shape.append(1)
                view_sizes[expr] = sympy.Integer(1)
                unit_views.append(expr)
            else:
                shape.append(view_sizes.setdefault(expr, fd.sizes.new()))
        base = env[root]
        fd.views_of[len(fd.inputs)] = fd.inputs.index(base.value)
        taken.append(node)
        return fd.define_tensor(shape, node.meta["val"].dtype, name=f"{base.name}_view{len(taken) - 1}")

    def materialize(node: torch.fx.Node) -> Any:
        if node not in env:
            if lazy[node]:
                env[node] = view_input(node)
            else:  # layout ops alone (a transpose): the fusion's own, as for any value
                args, kwargs = lookup(node.args), lookup(node.kwargs)
                env[node] = _apply_node(fd, node, node.target, args, kwargs, size)
        return env[node]

    def lookup(a: Any) -> Any:
        if isinstance(a, torch.fx.Node):
            return materialize(a) if a in lazy else env[a]
        if isinstance(a, (list, tuple)):
            return type(a)(lookup(x) for x in a)
        if isinstance(a, dict):
            return {k: lookup(v) for k, v in a.items()}
        return a

    # a size the trace computed from others (``x[..., 1:] * y`` makes x's ``n + 1`` of y's ``n``):
    # a size of its own, made that expression once every input is declared, so that a call
    # binds it, and checks it, as any size the fusion computes
    computed: list = []
    for node in gm.graph.nodes:
        if node.op != "placeholder" and computed:
            for fresh, expr, arg, d in computed:
                if not (expr.free_symbols <= symbols.keys() and integer_polynomial(expr)):
                    raise DefinitionError(f"{name}: argument {arg!r} has, in dim {d}, a size the function makes "
                                          f"{expr} of other arguments' sizes, which a fusion cannot check; pass "
                                          f"sizes that the function's ops line up one to one")
                fd.sizes.unify(fresh, expr.xreplace(symbols))
            computed = []
        if node.op == "placeholder":
            val = node.meta["val"]
            k = len(fd.inputs)
            given = (input_names[k] if input_names and k < len(input_names) else None) or node.name
            shape = []
            for d, s in enumerate(val.shape):
                expr = s.node.expr if isinstance(s, torch.SymInt) else sympy.Integer(int(s))
                if expr.is_Integer:
                    shape.append(int(expr))
                elif isinstance(expr, sympy.Symbol):
                    if expr not in symbols:
                        symbols[expr] = fd.sizes.new()
                    shape.append(symbols[expr])
                else:
                    shape.append(fd.sizes.new())
                    computed.append((shape[-1], expr, given, d))
            env[node] = fd.define_tensor(shape, val.dtype, name=given)
            lazy[node] = False
        elif node.op == "call_function" and node.target is aten.sym_size.int and node.args[0] in lazy:
            env[node] = size(node.meta["val"])  # (a view's size, without taking the view)
        elif takes_view(node, lazy):
            # applied when a value is computed from it: as an input if it slices
            lazy[node] = lazy[node.args[0]] or (node.target is not operator.getitem
                                                and registry.lookup(node.target) is None)
        elif node.op == "call_function":
            target = node.target
            args, kwargs = lookup(node.args), lookup(node.kwargs)
            if target is aten.cat.default:
                env[node] = _concatenate(fd, node, args, name)
            elif is_view(target) and registry.lookup(target) is None:
                raise DefinitionError(f"{name}: {_python_name(target)} takes a view of a value the function "
                                      "computes, which a "
                                      "fusion cannot hold; it takes slices, select, narrow, split, chunk, unbind "
                                      "and transposes of the function's arguments only (slice the argument, or "
                                      "compute the value outside and pass it in)")
            elif target is operator.getitem:
                env[node] = args[0][args[1]]
            elif target is aten.sym_size.int:
                env[node] = args[0].shape[args[1]]
            elif target is aten.sym_numel.default:  # x.numel(): the product of its sizes
                env[node] = functools.reduce(operator.mul, args[0].shape, 1)
            elif target in _SIZE_ARITHMETIC:
                env[node] = _SIZE_ARITHMETIC[target](*args)
            elif target in _NUMBER_FIRST:
                env[node] = getattr(fd.ops, _NUMBER_FIRST[target])(*args, **kwargs)
            elif registry.lookup(target) is None and _out_of_place(target) is not None:
                # an in-place op (``y.add_(1)``, ``relu(inplace=True)``, and the ``add_`` of
                # PyTorch's own ``rms_norm``): its out-of-place op, whose result stands for the
                # written tensor from here on, where that tensor is an intermediate no view shares
                written = node.args[0]
                if not isinstance(written, torch.fx.Node) or written.op == "placeholder":
                    raise DefinitionError(f"{name}: {target} writes into the function's argument "
                                          f"{args[0].value.name!r}; a fused function cannot write into its "
                                          "inputs: compute a new tensor and return it")
                group = written_as.get(written, [written])  # the nodes that stand for that tensor
                if any(_aliases(g) for g in group) or any(_aliases(u) for g in group for u in g.users if u is not node):
                    raise DefinitionError(f"{name}: {target} writes into a view of another tensor, which a "
                                          "fusion cannot hold; write the out-of-place op")
                result = _apply_node(fd, node, _out_of_place(target), args, kwargs, size)
                group.append(node)
                for g in group:
                    written_as[g], env[g] = group, result
            elif registry.lookup(target) is None:
                raise DefinitionError(f"{name}: {target} cannot be fused (it is not in the op registry)")
            else:
                env[node] = _apply_node(fd, node, target, args, kwargs, size)
        elif node.op == "output":
            result = node.args[0]
            results = list(result) if isinstance(result, (list, tuple)) else [result]
            for r in results:
                if isinstance(r, torch.fx.Node) and r.op == "placeholder":
                    raise DefinitionError(f"{name}: the function returns its argument {env[r].value.name!r} "
                                          "unchanged; a fused function returns values it computes (return the "
                                          "argument from the caller, or a copy: x.clone())")
                if lazy.get(r):
                    raise DefinitionError(f"{name}: the function returns a view of an argument ({r.target}); a "
                                          "fused function returns values it computes (take the view in the "
                                          "caller, or return a copy: x[..., :2].clone())")
                fd.add_output(lookup(r))
        elif node.op == "get_attr":
            raise DefinitionError(f"{name}: the function captures the tensor {node.target}; pass it as an argument")
    module = views_module(gm, taken) if taken else None
    if module is not None:
        #: the trace's size symbols and views' sizes -> the fusion's sizes they became
        module.fusion_sizes = {**symbols, **view_sizes}
        #: whether a view's size was 1 at the trace where other sizes make it larger
        module.unit_views = bool(unit_views)
    return fd.finish(), module


#: the Python spellings of the ATen view ops a trace records, for refusals
_VIEW_SPELLINGS = {"slice": "x[a:b]", "select": "x[i]", "split_with_sizes": "chunk or split", "split": "chunk or split",
                   "unbind": "unbind", "narrow": "narrow", "diagonal": "diagonal", "unfold": "unfold",
                   "as_strided": "as_strided"}


def _python_name(target: Any) -> str:
    """``aten.split_with_sizes.default`` as the user wrote it: ``chunk or split
    (aten.split_with_sizes.default)``; the ATen name alone for others."""
    spelled = _VIEW_SPELLINGS.get(getattr(getattr(target, "_schema", None), "name", "").split("::")[-1])
    return f"{spelled} ({target})" if spelled else str(target)


def _concatenate(fd: Fusion, node: torch.fx.Node, args: tuple, name: str) -> Any:
    """``aten.cat`` as ``fd.ops.cat``, for tensors of one shape in the trace: the sizes of
    views that only the call's sizes make equal (``D // 2`` and ``D - D // 2``) are made one
    size, which each call checks (:func:`~torchfuse.fusion.views.size_check`).

    Raises:
        DefinitionError: tensors of different shapes at the traced sizes.
    """
    tensors, dim = args[0], args[1] if len(args) > 1 else node.kwargs.get("dim", 0)
    shapes = [[s.node.hint if isinstance(s, torch.SymInt) else int(s) for s in t.meta["val"].shape]
              for t in node.args[0]]
    if any(s != shapes[0] for s in shapes):
        raise DefinitionError(f"{name}: cat of tensors of shapes {shapes}; a fusion concatenates tensors of one "
                              f"shape, dtype and device only (such as RoPE's two halves of an even size): "
                              f"concatenate others outside the fusion and pass the result as an argument")
    return fd.ops.cat(tensors, dim)


def _apply_node(fd: Fusion, node: torch.fx.Node, target, args, kwargs, size) -> Any:
    """Apply the registry op ``target`` for the FX node ``node`` (with its operands looked up)."""
    val = node.meta.get("val")
    vals = list(val) if isinstance(val, (list, tuple)) else [val]
    shapes = [[size(s) for s in v.shape] for v in vals]
    kwargs = {k: v for k, v in kwargs.items() if k not in _DROPPED_KWARGS}
    overloads = [target] + [o for o in registry.lookup(target).aten if o is not target]
    outs = fd.applier.apply(str(target).split(".")[1], overloads, args, kwargs, shapes=shapes,
                            strict_rank=False)
    return tuple(outs) if isinstance(val, (list, tuple)) else outs[0]


def _out_of_place(target) -> Any:
    """The registry's out-of-place overload of an in-place ATen overload (``aten.add.Scalar``
    for ``aten.add_.Scalar``), or ``None``."""
    if not isinstance(target, torch._ops.OpOverload):
        return None
    schema = target._schema
    if not schema.name.endswith("_") or not schema.arguments or schema.arguments[0].alias_info is None \
            or not schema.arguments[0].alias_info.is_write:
        return None
    packet = getattr(aten, schema.name.split("::")[-1][:-1], None)
    overload = getattr(packet, target._overloadname, None) if packet is not None else None
    return overload if overload is not None and registry.lookup(overload) is not None else None


def _aliases(node: Any) -> bool:
    """Whether the FX node's result may share memory with one of its operands (a view; an
    in-place op the fusion holds as its out-of-place op does not count)."""
    target = getattr(node, "target", None)
    if not isinstance(target, torch._ops.OpOverload) or _out_of_place(target) is not None:
        return False
    return any(r.alias_info is not None for r in target._schema.returns)


def fused(fn: Callable | None = None, *, name: str | None = None, options: Any = None, **overrides):
    """Decorator: run a Python function of tensors as one fusion (see the module docstring).

    ::

        @torchfuse.fusion.fused
        def bias_gelu(x, b):
            return torch.nn.functional.gelu(x + b)

    Args:
        fn: the function; its tensor arguments become the fusion's inputs, its result (a
            tensor or a tuple of tensors) its outputs.
        name: the fusion's name (default: the function's).
        options, overrides: compiler options, as for :class:`~torchfuse.fusion.Fusion`.
    """
    if fn is None:
        return lambda f: FusedFunction(f, name, options, **overrides)
    return FusedFunction(fn, name, options, **overrides)
