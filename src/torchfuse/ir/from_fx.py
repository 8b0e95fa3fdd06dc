"""FX -> fusion IR.

Takes an FX graph as AOTAutograd hands it over (ATen ops after decomposition, each node's
``meta["val"]`` a fake tensor, SymInt or tuple of those) and returns a :class:`Graph`. Each
ATen op the registry knows, with arguments and dtypes it can fuse, becomes a registry node;
everything else becomes a call node carrying the reason it stayed on ATen.
"""
from __future__ import annotations

import functools
import logging
import operator
from typing import Any

import sympy
import torch
import torch.fx

from ..config import Options
from . import ops
from .graph import Graph, Node, TensorMeta, Value, map_values
from .random_state import RNG_STATE_OPS, RNG_STATE_REASON, result_example

log = logging.getLogger("torchfuse.fusion")



#: Why an op on CPU tensors stays on ATen: generated kernels run there only through Triton's
#: interpreter, when asked (``interpret=True`` or ``TORCHFUSE_INTERPRET=1``).
CPU_REASON = "CPU tensors run generated kernels only with interpret=True (TORCHFUSE_INTERPRET=1)"
#: why an op stays on ATen when fusion is switched off (``Options.fuse``)
FUSE_OFF_REASON = "fuse=False"
#: The reason given for ATen calls that return a view of their input (``select``, ``slice``,
#: ``view``...): they run as calls, and kernels read the view through its strides.
VIEW_REASON = "view (no data moves)"
#: why an op with an empty result stays on ATen: there is nothing to compute, and ATen gives
#: the result eager's strides
ZERO_SIZE_REASON = "empty result (no elements)"


def is_view_op(target) -> bool:
    """Whether ``target`` is an ATen overload that returns views of its inputs and writes
    nothing, from its schema's alias annotations (``select.int(Tensor(a) self, ...) ->
    Tensor(a)``)."""
    schema = getattr(target, "_schema", None)
    if not isinstance(target, torch._ops.OpOverload) or schema is None or not schema.returns:
        return False
    if any(a.alias_info is not None and a.alias_info.is_write for a in schema.arguments):
        return False
    return all(r.alias_info is not None and not r.alias_info.is_write for r in schema.returns)


def size_of(s: Any) -> Any:
    """An FX/fake size (int or SymInt) as ``int`` or ``sympy.Expr``."""
    if isinstance(s, torch.SymInt):
        expr = s.node.expr
        return int(expr) if expr.is_Integer else expr
    return int(s)


def meta_of(t: torch.Tensor) -> TensorMeta:
    return TensorMeta(
        dtype=t.dtype,
        shape=tuple(size_of(s) for s in t.shape),
        stride=tuple(size_of(s) for s in t.stride()),
        device=t.device,
    )


def _has_unbacked(meta: TensorMeta) -> bool:
    for s in meta.shape + meta.stride:
        if isinstance(s, sympy.Expr) and any(str(f).startswith("u") for f in s.free_symbols):
            return True
    return False


class _Builder:
    def __init__(self, options: Options, device_ok):
        self.options = options
        self.device_ok = device_ok
        self.env: dict[torch.fx.Node, Any] = {}
        self.nodes: list[Node] = []
        self.count = 0

    def new_value(self, meta=None, example=None) -> Value:
        v = Value(name=f"v{self.count}", meta=meta, example=example)
        self.count += 1
        return v

    def lookup(self, a: Any) -> Any:
        if isinstance(a, torch.fx.Node):
            return self.env[a]
        if isinstance(a, (list, tuple)):
            return type(a)(self.lookup(x) for x in a)
        if isinstance(a, dict):
            return {k: self.lookup(v) for k, v in a.items()}
        return a

    def value_for(self, val: Any) -> Any:
        """A value (or nested structure of values) for an FX node's ``meta['val']``."""
        if isinstance(val, torch.Tensor):
            return self.new_value(meta=meta_of(val))
        if isinstance(val, (list, tuple)):
            return type(val)(self.value_for(x) for x in val)
        return self.new_value(example=val)

    def add_call(self, fx_node: torch.fx.Node, reason: str) -> None:
        args = self.lookup(fx_node.args)
        kwargs = self.lookup(fx_node.kwargs)
        val = fx_node.meta.get("val")
        if val is None and fx_node.target in RNG_STATE_OPS:  # made by the partitioner without one
            val = result_example(fx_node)
        out = self.value_for(val)
        outputs = [out] if isinstance(out, Value) else [x for x in _flatten(out) if isinstance(x, Value)]
        if isinstance(out, Value):
            result_values = [out]
        else:
            # a multi-output call returns a tuple; a getitem call node extracts each element
            result = self.new_value(example=None)
            node = Node(op=None, inputs=[], attrs={}, outputs=[result], target=fx_node.target,
                        args=args, kwargs=kwargs, reason=reason, source=fx_node.name)
            self.nodes.append(node)
            result.producer = node
            for i, item in enumerate(_flatten_indexed(out)):
                path, v = item
                getter = Node(op=None, inputs=[], attrs={}, outputs=[v], target=getitem_path,
                              args=(result, path), reason="tuple element", source=fx_node.name)
                v.producer = getter
                self.nodes.append(getter)
            self.env[fx_node] = out
            return
        node = Node(op=None, inputs=[], attrs={}, outputs=result_values, target=fx_node.target,
                    args=args, kwargs=kwargs, reason=reason, source=fx_node.name)
        for v in outputs:
            v.producer = node
        self.nodes.append(node)
        self.env[fx_node] = out

    def try_registry(self, fx_node: torch.fx.Node) -> str | None:
        """Add ``fx_node`` as a registry node; return why not, or ``None`` on success."""
        opdef = ops.lookup(fx_node.target)
        if opdef is None:
            if ops.is_library_op(fx_node.target):
                return "vendor library op"
            from ..decompose import KEPT_REASONS

            if fx_node.target in KEPT_REASONS:
                return KEPT_REASONS[fx_node.target]
            if is_view_op(fx_node.target):
                return VIEW_REASON
            if fx_node.target in RNG_STATE_OPS:
                return RNG_STATE_REASON
            return "not in the op registry"
        val = fx_node.meta.get("val")
        vals = list(val) if isinstance(val, (list, tuple)) else [val]
        if not vals or not all(isinstance(v, torch.Tensor) for v in vals):
            return "output is not a tensor"
        if any(type(d) is int and d == 0 for v in vals for d in v.shape):  # (TorchDynamo specializes 0)
            # nothing to compute, and fake tensors' strides of empty results are not eager's
            # (a channels-last (2, 3, 0, 5) times 2 is (15, 1, 15, 3) there, (0, 1, 15, 3) in eager)
            return ZERO_SIZE_REASON
        args = self.lookup(fx_node.args)
        kwargs = self.lookup(fx_node.kwargs)
        tensors = [a for a in _flatten((args, kwargs)) if isinstance(a, Value) and a.meta is not None]
        metas = [meta_of(v) for v in vals] + [t.meta for t in tensors]
        for m in metas:
            if m.dtype not in ops.KERNEL_DTYPES:
                return f"dtype {m.dtype} is not supported in kernels"
            if not self.device_ok(m.device):
                if m.device.type == "cpu":
                    return CPU_REASON
                return f"device {m.device} does not run generated kernels"
            if _has_unbacked(m):
                return "data-dependent (unbacked) size"
        devices = {m.device for m in metas}
        if len(devices) > 1:
            return "operands on several devices"
        try:
            inputs, attrs = opdef.parse(args, kwargs)
        except ops.Unsupported as e:
            return str(e)
        except (IndexError, KeyError, TypeError, ValueError) as e:
            return f"arguments not understood ({type(e).__name__}: {e})"
        if opdef.integer_division and not self.options.interpret_integer_division:
            if any(m.device.type == "cpu" for m in metas) and not vals[0].dtype.is_floating_point:
                return "integer division on CPU keeps eager's ZeroDivisionError"
        for x in inputs:
            if isinstance(x, Value) and x.meta is None and not isinstance(x.example, (torch.SymInt, torch.SymFloat, int, float, bool)):
                return "operand is not a tensor or scalar"
            if isinstance(x, (list, tuple)):
                return "list operand"
        if opdef.kind == "pointwise":
            operands = [_example(x, fx_node, self) for x in inputs]
            try:
                compute = ops.compute_dtype_for_promotion(opdef, attrs, operands)
            except Exception as e:  # promotion PyTorch itself rejects
                return f"type promotion failed: {e}"
            if compute is None:
                compute_check = vals[0].dtype if opdef.name != "cast" else None
            else:
                compute_check = compute
            if compute_check is not None and compute_check not in opdef.dtypes:
                return f"{opdef.name} does not support compute dtype {compute_check}"
            attrs["compute_dtype"] = compute
            common = ops.common_dtype_for_promotion(opdef, attrs, operands) if compute is not None else None
            if common is not None and common != compute:
                attrs["common_dtype"] = common
        elif opdef.kind == "reduction":
            src = inputs[0].meta.dtype
            if src not in opdef.dtypes:
                return f"{opdef.name} does not support dtype {src}"
            if inputs[0].meta.rank == 0:
                return "reduction of a 0-dim tensor (nothing to reduce; ATen's scalar kernel)"
        elif opdef.kind in ("random", "constant") and vals[0].dtype not in opdef.dtypes:
            return f"{opdef.name} does not support dtype {vals[0].dtype}"
        outs = [self.new_value(meta=meta_of(v)) for v in vals]
        node = Node(op=opdef.name, inputs=inputs, attrs=attrs, outputs=outs, source=fx_node.name,
                    target=fx_node.target, args=args, kwargs=kwargs)
        for o in outs:
            o.producer = node
        self.nodes.append(node)
        self.env[fx_node] = outs[0] if not isinstance(val, (list, tuple)) else type(val)(outs)
        return None


def _example(x: Any, fx_node: torch.fx.Node, builder: _Builder) -> Any:
    """A stand-in for PyTorch's promotion helper: only dtype and 0-dim-ness matter to it."""
    if isinstance(x, Value):
        if x.meta is not None:
            return _stand_in(x.meta.dtype, x.meta.rank == 0)
        return x.example
    return x


@functools.lru_cache(maxsize=None)
def _stand_in(dtype: torch.dtype, zero_dim: bool) -> torch.Tensor:
    """A meta tensor of ``dtype``, 0-dim or of one element; made once per pair (the promotion
    helper only reads it, and a graph asks for the same few thousands of times)."""
    return torch.empty(() if zero_dim else (1,), dtype=dtype, device="meta")


def _flatten(obj: Any) -> list:
    if isinstance(obj, (list, tuple)):
        return [y for x in obj for y in _flatten(x)]
    if isinstance(obj, dict):
        return [y for x in obj.values() for y in _flatten(x)]
    return [obj]


def _flatten_indexed(obj: Any, prefix=()) -> list:
    if isinstance(obj, (list, tuple)):
        out = []
        for i, x in enumerate(obj):
            out.extend(_flatten_indexed(x, prefix + (i,)))
        return out
    return [(prefix, obj)] if isinstance(obj, Value) else []


def getitem_path(container: Any, path: tuple) -> Any:
    """``container[path[0]][path[1]]...``: one element of a multi-output call's (nested) result,
    the target of the IR node that extracts it."""
    for i in path:
        container = container[i]
    return container


getitem_path.__name__ = "getitem"


def graph_from_fx(gm: torch.fx.GraphModule, options: Options) -> Graph:
    """Build the fusion IR of ``gm``.

    Args:
        gm: an FX graph of ATen ops whose nodes carry ``meta["val"]`` (as produced by
            AOTAutograd or ``make_fx`` with fake tensors).
        options: compiler options (``interpret`` decides whether CPU tensors may be fused).

    Returns:
        The graph; its ``symbols`` say where each size symbol is read from the inputs.

    Raises:
        KeyError: a node lacks ``meta["val"]`` where one is required (not produced by
            AOTAutograd); callers fall back to running ``gm`` as it is.
    """

    def device_ok(device: torch.device) -> bool:
        return device.type == "cuda" or (options.interpret and device.type == "cpu")

    b = _Builder(options, device_ok)
    inputs: list[Value] = []
    symbols: dict = {}
    outputs: Any = None
    for fx_node in gm.graph.nodes:
        if fx_node.op == "placeholder":
            val = fx_node.meta.get("val")
            v = b.value_for(val) if isinstance(val, torch.Tensor) else b.new_value(example=val)
            idx = len(inputs)
            inputs.append(v)
            b.env[fx_node] = v
            if isinstance(val, torch.Tensor):
                for d, s in enumerate(v.meta.shape):
                    if isinstance(s, sympy.Symbol) and s not in symbols:
                        symbols[s] = (idx, d)
            elif isinstance(val, torch.SymInt):
                expr = val.node.expr
                if isinstance(expr, sympy.Symbol) and expr not in symbols:
                    symbols[expr] = (idx, None)
        elif fx_node.op == "call_function":
            if fx_node.target is operator.getitem and isinstance(b.env.get(fx_node.args[0]), (list, tuple)):
                b.env[fx_node] = b.env[fx_node.args[0]][fx_node.args[1]]
                continue
            reason = b.try_registry(fx_node) if options.fuse else FUSE_OFF_REASON
            if reason is not None:
                if ops.lookup(fx_node.target) is not None:
                    log.info("%s stays on ATen: %s", fx_node.target, reason)
                b.add_call(fx_node, reason)
        elif fx_node.op == "output":
            outputs = b.lookup(fx_node.args[0])
        elif fx_node.op == "get_attr":
            # a constant tensor held by the module: an input the graph reads as is
            attr = getattr(gm, fx_node.target)
            node = Node(op=None, inputs=[], attrs={}, outputs=[], target=_constant(attr),
                        reason="module constant", source=fx_node.name)
            out = b.value_for(attr) if isinstance(attr, torch.Tensor) else b.new_value(example=attr)
            node.outputs = [out]
            out.producer = node
            b.nodes.append(node)
            b.env[fx_node] = out
        else:
            raise NotImplementedError(f"FX node kind {fx_node.op}")
    return eliminate_dead_code(Graph(inputs=inputs, nodes=b.nodes, outputs=outputs, symbols=symbols))


def eliminate_dead_code(graph: Graph) -> Graph:
    """Drop registry nodes whose results nothing reads (they are pure); calls always stay,
    since an ATen call may have effects the graph does not show."""
    used = graph.output_values()
    kept: list[Node] = []
    for node in reversed(graph.nodes):
        if not node.is_call and not any(o in used for o in node.outputs):
            continue
        kept.append(node)
        used.update(node.input_values())
    kept.reverse()
    graph.nodes = kept
    return graph


def _constant(t: Any):
    def constant():
        return t
    constant.__name__ = "constant"
    return constant


__all__ = ["graph_from_fx", "meta_of", "size_of", "map_values"]
