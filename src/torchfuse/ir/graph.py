"""The fusion IR: values with tensor metadata, and nodes that are either registry ops or calls.

Takes nothing (this module only defines the data structures); :mod:`torchfuse.ir.from_fx`
builds a :class:`Graph` from an FX graph. Invariants of a :class:`Graph`:

* ``nodes`` is in topological order; every :class:`Value` has exactly one producer (a node,
  or the graph's inputs) and knows it.
* A node with ``op`` set is a registry op (:mod:`torchfuse.ir.ops`): its tensor inputs are
  :class:`Value` objects and its static parameters live in ``attrs``. A node with ``target``
  set instead is a *call*: an ATen op (or a Python function on sizes) the compiler does not
  fuse, run as-is with ``args``/``kwargs`` in which values stand for tensors.
* Sizes and strides are ``int`` or ``sympy.Expr`` (symbolic sizes from dynamic shapes).
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, Iterator, Sequence

import sympy
import torch

Size = Any  # int | sympy.Expr


@dataclasses.dataclass(frozen=True)
class TensorMeta:
    """What the compiler knows of a tensor value before it runs.

    Attributes:
        dtype: element type.
        shape: sizes, each an ``int`` or a ``sympy.Expr`` in the graph's size symbols.
        stride: strides in elements, same length and kinds as ``shape``.
        device: where the tensor lives.
    """

    dtype: torch.dtype
    shape: tuple[Size, ...]
    stride: tuple[Size, ...]
    device: torch.device

    @property
    def rank(self) -> int:
        return len(self.shape)

    def numel(self) -> Size:
        n: Size = 1
        for s in self.shape:
            n = n * s
        return n

    def __str__(self) -> str:
        dt = str(self.dtype).replace("torch.", "")
        shape = ",".join(str(s) for s in self.shape)
        stride = ",".join(str(s) for s in self.stride)
        return f"{dt}[{shape}]{{{stride}}}@{self.device.type}"


@dataclasses.dataclass(eq=False)
class Value:
    """One SSA value: a tensor (``meta`` set) or anything else a call returns (``meta`` None).

    Attributes:
        name: unique printable name within its graph (``v12``).
        meta: tensor metadata, or ``None`` for non-tensor values (ints, tuples, None).
        producer: the node that computes it; ``None`` for graph inputs.
        example: for non-tensor inputs and symbolic ints, the traced example (a SymInt, int...).
    """

    name: str
    meta: TensorMeta | None = None
    producer: "Node | None" = None
    example: Any = None

    def __repr__(self) -> str:
        return self.name


@dataclasses.dataclass(eq=False)
class Node:
    """An operation. Either ``op`` (a registry op name) or ``target`` (a call) is set.

    Attributes:
        op: registry op name (``"add"``, ``"sum"``, ``"permute"`` ...), or ``None`` for calls.
        inputs: tensor operands of a registry op (values) or Python scalars.
        attrs: static parameters of a registry op (dims, dtypes, keepdim ...), as plain data.
        target: the callable of a call node (usually a ``torch._ops.OpOverload``).
        args, kwargs: the call's arguments, values standing in for tensors.
        outputs: the values it defines.
        reason: for call nodes that stayed on ATen, why (shown by logs and reports).
        source: the FX node name it came from, for reports.
    """

    op: str | None
    inputs: list[Any]
    attrs: dict[str, Any]
    outputs: list[Value]
    target: Callable | None = None  # for registry nodes: the ATen op they came from
    args: tuple = ()
    kwargs: dict[str, Any] = dataclasses.field(default_factory=dict)
    reason: str = ""
    source: str = ""

    @property
    def is_call(self) -> bool:
        return self.op is None

    @property
    def output(self) -> Value:
        assert len(self.outputs) == 1, f"{self} has {len(self.outputs)} outputs"
        return self.outputs[0]

    def input_values(self) -> list[Value]:
        """Every :class:`Value` this node reads: a registry node's operands, or the values
        inside a call's nested arguments. (A registry node's original ATen arguments may name
        more tensors, e.g. ``full_like``'s template, read for metadata only.)"""
        if self.is_call:
            found: list[Value] = []
            _collect_values((self.args, self.kwargs), found)
            seen: set = set()
            return [v for v in found if not (v in seen or seen.add(v))]
        return [v for v in self.inputs if isinstance(v, Value)]

    def __repr__(self) -> str:
        outs = ", ".join(o.name for o in self.outputs)
        if self.is_call:
            name = getattr(self.target, "__name__", str(self.target))
            tgt = str(self.target) if isinstance(self.target, torch._ops.OpOverload) else name
            return f"{outs} = call {tgt}({_format_args(self.args, self.kwargs)})"
        attrs = "".join(f", {k}={_fmt(v)}" for k, v in self.attrs.items())
        ins = ", ".join(_fmt(i) for i in self.inputs)
        return f"{outs} = {self.op}({ins}{attrs})"


def _collect_values(obj: Any, found: list[Value]) -> None:
    if isinstance(obj, Value):
        found.append(obj)
    elif isinstance(obj, (list, tuple)):
        for o in obj:
            _collect_values(o, found)
    elif isinstance(obj, dict):
        for o in obj.values():
            _collect_values(o, found)


def _fmt(v: Any) -> str:
    if isinstance(v, torch.dtype):
        return str(v).replace("torch.", "")
    if isinstance(v, float):
        return repr(v)
    return str(v)


def _format_args(args: tuple, kwargs: dict) -> str:
    parts = [_fmt(a) for a in args] + [f"{k}={_fmt(v)}" for k, v in kwargs.items()]
    return ", ".join(parts)


@dataclasses.dataclass(eq=False)
class Graph:
    """A whole captured graph in the fusion IR.

    Attributes:
        inputs: one value per FX placeholder, in order.
        nodes: every operation, topologically ordered.
        outputs: what the graph returns: values, or constants (None, ints) in their place.
        symbols: the free size symbols, each with where its value is read at run time:
            ``(input index, dim)`` for a tensor's size, ``(input index, None)`` for an int input.
    """

    inputs: list[Value]
    nodes: list[Node]
    outputs: list[Any]
    symbols: dict[sympy.Symbol, tuple[int, int | None]] = dataclasses.field(default_factory=dict)

    def users(self) -> dict[Value, list[Node]]:
        """Map each value to the nodes that read it (in graph order)."""
        table: dict[Value, list[Node]] = {}
        for node in self.nodes:
            for v in node.input_values():
                table.setdefault(v, []).append(node)
        return table

    def output_values(self) -> set[Value]:
        found: list[Value] = []
        _collect_values(self.outputs, found)
        return set(found)

    def walk(self) -> Iterator[Node]:
        return iter(self.nodes)

    def __str__(self) -> str:
        lines = ["graph(" + ", ".join(f"{v.name}: {v.meta or type(v.example).__name__}" for v in self.inputs) + "):"]
        for node in self.nodes:
            metas = "; ".join(str(o.meta) for o in node.outputs if o.meta is not None)
            lines.append(f"    {node!r}" + (f"    # {metas}" if metas else ""))
        lines.append(f"    return {_fmt(self.outputs)}")
        return "\n".join(lines)


def is_symbolic(x: Any) -> bool:
    """True for a ``sympy.Expr`` that is not a plain integer."""
    return isinstance(x, sympy.Expr) and not x.is_Integer


def as_int(x: Size, values: dict | None = None) -> int:
    """Evaluate a size (``int`` or ``sympy.Expr``) to an int, substituting ``values`` for symbols.

    Raises:
        ValueError: a symbol in ``x`` has no value in ``values``.
    """
    if isinstance(x, int):
        return x
    if isinstance(x, sympy.Expr):
        if x.is_Integer:
            return int(x)
        if values is None:
            raise ValueError(f"size {x} is symbolic and no symbol values were given")
        y = sympy.sympify(x.xreplace(values))
        if not y.is_Integer and not y.is_number:
            raise ValueError(f"size {x} did not evaluate to an integer with {values}")
        return int(y)
    return int(x)


def sizes_equal(a: Size, b: Size) -> bool:
    """Structural equality of two sizes (``3 == Integer(3)``; ``s0 == s0``)."""
    if isinstance(a, int) and isinstance(b, int):
        return a == b
    if a is b:  # one symbolic size object (sympy's equality is structural)
        return True
    return sympy.sympify(a) == sympy.sympify(b)


def is_one(x: Size) -> bool:
    """Whether the size ``x`` is 1 (see :func:`sizes_equal`)."""
    if isinstance(x, int):  # the common case, without sympy
        return x == 1
    return sizes_equal(x, 1)


def values_in(obj: Any) -> list[Value]:
    """All values inside a nested structure of lists, tuples and dicts."""
    found: list[Value] = []
    _collect_values(obj, found)
    return found


def map_values(obj: Any, fn: Callable[[Value], Any]) -> Any:
    """Rebuild a nested structure, replacing each value ``v`` by ``fn(v)``."""
    if isinstance(obj, Value):
        return fn(obj)
    if isinstance(obj, list):
        return [map_values(o, fn) for o in obj]
    if isinstance(obj, tuple):
        return tuple(map_values(o, fn) for o in obj)
    if isinstance(obj, dict):
        return {k: map_values(o, fn) for k, o in obj.items()}
    return obj


def topo_index(nodes: Sequence[Node]) -> dict[Node, int]:
    return {n: i for i, n in enumerate(nodes)}
