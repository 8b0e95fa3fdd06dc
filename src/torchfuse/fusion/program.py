"""From a definition to a runnable program for one device: IR graph, segmentation, runtime.

Takes a finished :class:`~torchfuse.fusion.definition.Fusion`; :func:`build_graph` returns a
fresh :class:`~torchfuse.ir.graph.Graph` in which every size is canonical (unified symbols
replaced by their root, see :mod:`torchfuse.fusion.sizes`), every value lives on the target
device, and ``symbols`` says which input dim each size symbol is read from. :class:`Program`
segments it with the segmenter's passes (:mod:`torchfuse.segment`) plus one more,
:func:`fuse_horizontally` (a definition asks for one kernel, so groups over one domain merge
even when no value flows between them), and runs it with
:class:`torchfuse.runtime.executor.CompiledGraph`, exactly as a graph captured by
``torch.compile`` runs: the same schedulers, kernels and kernel cache. Derived backward
graphs (:mod:`torchfuse.fusion.autograd`) run through :class:`Program` too.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import sympy
import torch

from ..config import Options
from ..ir import ops as registry
from ..ir.from_fx import eliminate_dead_code
from ..ir.graph import Graph, Node, TensorMeta, Value
from ..runtime.executor import CompiledGraph
from ..segment import Segmentation
from .sizes import evaluate

if TYPE_CHECKING:
    from .definition import Fusion


class SizeOf:
    """A call-node target computing a size (an expression in size symbols) from the input
    tensors that carry its symbols; it stands for a size used as a scalar operand."""

    __name__ = "size"

    def __init__(self, expr: Any, dims: tuple = ()):
        self.expr = expr
        self.dims = dims  # per source tensor: (symbol, dim)

    def __call__(self, *tensors):
        return evaluate(self.expr, {s: t.shape[d] for (s, d), t in zip(self.dims, tensors)})

    def __repr__(self) -> str:
        return f"size({self.expr})"


def build_graph(fusion: "Fusion", device: torch.device, extra_outputs: tuple = ()) -> Graph:
    """The fusion's IR graph on ``device``, with its outputs followed by ``extra_outputs``
    (values of the definition, e.g. random numbers saved for a backward pass)."""
    canon = fusion.sizes.canonical_map()

    def size(s):
        if isinstance(s, int):
            return s
        r = sympy.sympify(s).xreplace(canon)
        return int(r) if r.is_Integer else r

    def meta(m: TensorMeta | None) -> TensorMeta | None:
        if m is None:
            return None
        return TensorMeta(m.dtype, tuple(size(s) for s in m.shape), tuple(size(s) for s in m.stride), device)

    vmap: dict[Value, Value] = {}
    inputs = []
    symbols: dict = {}
    for i, v in enumerate(fusion.inputs):
        nv = Value(v.name, meta(v.meta), example=v.example)
        vmap[v] = nv
        inputs.append(nv)
        if nv.meta is not None:
            for d, s in enumerate(nv.meta.shape):
                if isinstance(s, sympy.Symbol) and s not in symbols:
                    symbols[s] = (i, d)

    def mapped(x):
        if isinstance(x, Value):
            return vmap[x]
        if isinstance(x, sympy.Expr):
            return size(x)
        if isinstance(x, (list, tuple)):
            return type(x)(mapped(y) for y in x)
        if isinstance(x, dict):
            return {k: mapped(y) for k, y in x.items()}
        return x

    nodes = []
    for n in fusion.nodes:
        outs = [Value(o.name, meta(o.meta), example=o.example) for o in n.outputs]
        vmap.update(zip(n.outputs, outs))
        if isinstance(n.target, SizeOf):
            expr = size(n.target.expr)
            free = sorted(getattr(expr, "free_symbols", ()), key=str)
            sources = tuple(inputs[symbols[s][0]] for s in free)
            node = Node(op=None, inputs=[], attrs={}, outputs=outs, reason="size used as a scalar operand",
                        target=SizeOf(expr, tuple((s, symbols[s][1]) for s in free)), args=sources)
        else:
            node = Node(op=n.op, inputs=mapped(n.inputs), attrs=dict(n.attrs), outputs=outs, target=n.target,
                        args=mapped(n.args), kwargs=mapped(n.kwargs), reason=n.reason, source=n.source)
            if _integer_division_stays_on_aten(node, device, fusion.options):
                node.op, node.reason = None, "integer division on CPU keeps eager's ZeroDivisionError"
        for o in outs:
            o.producer = node
        nodes.append(node)
    outputs = [vmap[o] for o in list(fusion.outputs) + list(extra_outputs)]
    graph = Graph(inputs=inputs, nodes=nodes, outputs=outputs, symbols=symbols)
    return eliminate_dead_code(graph)


def _integer_division_stays_on_aten(node: Node, device: torch.device, options: Options) -> bool:
    if node.op is None or device.type != "cpu" or options.interpret_integer_division:
        return False
    opdef = registry.REGISTRY[node.op]
    return opdef.integer_division and not node.output.meta.dtype.is_floating_point


def segment_fusion(graph: Graph, options: Options) -> Segmentation:
    """The segmenter's passes, then :func:`fuse_horizontally`: a user-defined fusion asks for
    one kernel, so groups over one domain merge even when no value flows between them."""
    from ..segment import fuse, rewrites, steps

    rewrites.duplicate_constants(graph)
    units = fuse.Units(graph, options)
    fuse.fuse_producers(units)
    fuse.fuse_siblings(units)
    fuse.fuse_consumer_siblings(units)
    fuse_horizontally(units)
    return steps.finalize(units)


def fuse_horizontally(units) -> None:
    """Merge each group into the first earlier group it can share a domain with (no cycle)."""
    anchors: list[Node] = []
    seen: set[int] = set()
    for node in units.graph.nodes:
        if node.is_call or id(units.unit[node]) in seen:
            continue
        seen.add(id(units.unit[node]))
        if not any(units.try_merge(a, node) for a in anchors):
            anchors.append(node)


class Program:
    """One graph segmented and ready to run on one device.

    Attributes:
        segmentation: its fusion groups and ATen calls.
        compiled: the runtime object (plans per size, kernels keyed by source hash).
    """

    def __init__(self, graph: Graph, options: Options, name: str):
        from ..segment import FusionGroup

        self.segmentation = segment_fusion(graph, options)
        self.compiled = CompiledGraph(self.segmentation, options, name=name)
        written = {o for s in self.segmentation.steps if isinstance(s, FusionGroup) for o in s.outputs}
        outs = graph.outputs
        #: per graph output: whether a kernel writes it into a tensor of its own (allocated
        #: with the value's declared strides), not an ATen call (a view) or another output
        self.fresh_outputs = [o in written and outs.count(o) == 1 for o in outs]

    @property
    def num_kernels(self) -> int:
        return len(self.segmentation.groups)

    def kernel_keys(self) -> set[str]:
        """Hashes of every kernel source generated so far (one per group and layout)."""
        keys = set()
        for runner in self.compiled.runners:
            for src in getattr(runner, "sources", {}).values():
                keys.add(src.key)
        return keys

    def __call__(self, inputs: list) -> list:
        return self.compiled(list(inputs))
