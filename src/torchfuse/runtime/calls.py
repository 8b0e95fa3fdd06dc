"""ATen calls at run time: closures with their arguments resolved ahead of time, view
replay, and the multi-tensor copies that batch casts and writes to graph inputs.

Takes call nodes of a :class:`~torchfuse.segment.Segmentation` (and the graph's value slots);
returns runners ``run(env, sym_key, sym_values)`` that read their arguments from the graph's
environment and write their results into it: :func:`call_runner` (a :class:`ViewCall` for
view ops of static shapes), :class:`CastBatch`, :class:`InputWriteBatch`, and
:func:`run_registry_node_eagerly` for a group's fallback.
"""
from __future__ import annotations

import math
from typing import Any

import sympy
import torch

from ..ir.graph import Graph, Node, Value, _collect_values, as_int, map_values, values_in
from ..ir.ops import REGISTRY
from ..segment import FusionGroup
from .launch import REINTERPRET, allocator


def run_registry_node_eagerly(node: Node, env: list, slots: dict[Value, int], sym_values: dict) -> None:
    """Run a registry node through ATen (a group's fallback).

    Constants and ``copy`` are rebuilt from their output metadata, since their original
    arguments name tensors they read for metadata only (which may be dead by then).
    """
    from ..ir.ops import REGISTRY

    kind = REGISTRY[node.op].kind
    if kind == "random":
        m = node.output.meta
        shape = [as_int(s, sym_values) for s in m.shape]
        if node.op == "rand":
            out = torch.rand(shape, dtype=m.dtype, device=m.device)
        elif node.op == "randn":
            out = torch.randn(shape, dtype=m.dtype, device=m.device)
        else:
            out = torch.empty(shape, dtype=m.dtype, device=m.device).bernoulli_(node.attrs["p"])
        env[slots[node.output]] = out
        return
    if kind == "constant" or node.op == "copy":
        m = node.output.meta
        out = torch.empty_strided([as_int(s, sym_values) for s in m.shape],
                                  [as_int(s, sym_values) for s in m.stride], dtype=m.dtype, device=m.device)
        if node.op == "arange":
            out.copy_(torch.arange(out.numel(), device=m.device) * node.attrs["step"] + node.attrs["start"])
        elif kind == "constant":
            out.fill_(node.attrs["value"])
        else:
            out.copy_(env[slots[node.inputs[0]]])
        env[slots[node.output]] = out
        return
    run_call(node, env, slots, sym_values)


def _with_sizes(obj: Any, sym_values: dict | None) -> Any:
    """``obj`` with every ``sympy`` size in it evaluated to an int."""
    if isinstance(obj, sympy.Expr):
        return as_int(obj, sym_values)
    if isinstance(obj, list):
        return [_with_sizes(o, sym_values) for o in obj]
    if isinstance(obj, tuple):
        return tuple(_with_sizes(o, sym_values) for o in obj)
    if isinstance(obj, dict):
        return {k: _with_sizes(o, sym_values) for k, o in obj.items()}
    return obj


def _flat_output_slots(outputs, slots) -> list | None:
    """``[(slot, None) or (-1, constant)]`` when the graph returns a flat list, else None."""
    if not isinstance(outputs, (list, tuple)):
        return None
    flat = []
    for o in outputs:
        if isinstance(o, Value):
            flat.append((slots[o], None))
        elif isinstance(o, (list, tuple, dict)):
            return None
        else:
            flat.append((-1, o))
    return flat


def _compile_argument(a: Any, slots: dict[Value, int]):
    """``(True, constant)`` or ``(False, fn(env, sym_values))`` for one call argument."""
    if isinstance(a, Value):
        s = slots[a]
        return False, lambda env, sv: env[s]
    if isinstance(a, sympy.Expr) and not a.is_Integer:
        return False, lambda env, sv: as_int(a, sv)
    if isinstance(a, (list, tuple)):
        parts = [_compile_argument(x, slots) for x in a]
        if all(c for c, _ in parts):
            return True, type(a)(v for _, v in parts)
        typ = type(a)
        return False, lambda env, sv: typ(v if c else v(env, sv) for c, v in parts)
    if isinstance(a, dict):
        parts = {k: _compile_argument(v, slots) for k, v in a.items()}
        if all(c for c, _ in parts.values()):
            return True, {k: v for k, (_, v) in parts.items()}
        return False, lambda env, sv: {k: (v if c else v(env, sv)) for k, (c, v) in parts.items()}
    return True, int(a) if isinstance(a, sympy.Integer) else a


_aten = torch.ops.aten
#: ATen ops whose result always aliases their first argument's storage, with sizes, strides
#: and offset that depend only on the argument's sizes and strides and the op's constants.
VIEW_OPS = frozenset([
    _aten.view.default, _aten._unsafe_view.default, _aten.permute.default, _aten.t.default,
    _aten.transpose.int, _aten.expand.default, _aten.squeeze.dim, _aten.squeeze.dims, _aten.squeeze.default,
    _aten.unsqueeze.default, _aten.slice.Tensor, _aten.select.int, _aten.alias.default,
    _aten.diagonal.default, _aten.detach.default,
])  # not as_strided: its storage offset argument is absolute, not relative to the input's


class ViewCall:
    """View ops of a static-shape graph, replayed as one reinterpretation of their input.

    ``ops`` is a chain: each op's result is the next one's input (the runtime merges a view
    whose only reader is another view into it, so ``view -> permute -> view`` costs one step).
    The first call runs the ATen ops and records the result's sizes, strides and
    storage-offset increment for the input's sizes and strides; later calls with an input of
    the same sizes and strides build the result directly (about 1.5 us against 5 us per op on
    the CPU measured here; a BERT-base training step runs about 1400 view ops). An input with
    other strides, or one that requires grad (the reinterpreted tensor would not be an
    autograd view), goes through the ops.

    Args:
        target: the ATen view op (an ``OpOverload`` in ``VIEW_OPS``).
        src: slot of the tensor argument (the first).
        rest: the other arguments, constants.
        out: slot of the result.
    """

    __slots__ = ("ops", "src", "out", "key", "view")

    def __init__(self, target, src: int, rest: list, out: int):
        self.ops = [(target._op, rest)]
        self.src = src
        self.out = out
        self.key = None  # (sizes, strides) of the input the recorded view is for
        self.view = None  # (sizes, strides, offset increment) of the result

    def absorb(self, later: "ViewCall") -> None:
        """Append ``later``'s ops, whose input is this chain's result (read by nothing else)."""
        self.ops += later.ops
        self.out = later.out
        self.key = self.view = None

    def __call__(self, env: list, sym_key=None, sym_values=None) -> None:
        x = env[self.src]
        if self.key is not None and x.stride() == self.key[1] and x.shape == self.key[0] and not x.requires_grad:
            size, stride, delta = self.view
            env[self.out] = REINTERPRET(x, size, stride, delta)
            return
        r = x
        for op, rest in self.ops:
            r = op(r, *rest)
        env[self.out] = r
        if (REINTERPRET is not None and isinstance(r, torch.Tensor) and r.dtype == x.dtype
                and r.device == x.device and _same_storage(r, x)):
            self.key = (x.shape, x.stride())
            self.view = (tuple(r.shape), r.stride(), r.storage_offset() - x.storage_offset())


def _same_storage(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether ``a`` and ``b`` lie in one storage; False where either has no storage to read:
    a zero tensor of ``aten._efficientzerotensor`` (a zero gradient of forward-mode AD), whose
    storage raises when its address is asked for. A view of one is then not recorded: the view
    ops run on every call, and give a zero tensor again."""
    try:
        return a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()
    except RuntimeError:
        return False


def _no_view(t):
    """``t`` as a tensor of its own when it is an autograd view (of an intermediate the graph
    does not return): the same storage, sizes, strides and offset, without the view relation.
    AOTAutograd returns a graph's outputs from an autograd Function, and PyTorch forbids
    in-place changes to a view returned from one ("a function that returns multiple views"),
    where eager's result (a fresh tensor) allows them; Inductor's outputs are never views
    either. Outputs that alias graph inputs are rebuilt by AOTAutograd from the inputs; those
    that share memory with another output get its version counter back in
    ``backend._with_shared_version_counters``."""
    if isinstance(t, torch.Tensor) and t._base is not None and not t.requires_grad and REINTERPRET is not None:
        return REINTERPRET(t, t.size(), t.stride(), 0)
    return t


def _with_bits(t: torch.Tensor, conj: bool, neg: bool) -> torch.Tensor:
    """``t``, or a view of it, with these conjugate and negative bits (each toggles one)."""
    if t.is_conj() != conj:
        t = t.conj()
    if t.is_neg() != neg:
        t = torch._neg_view(t)
    return t


def alias_as(base: torch.Tensor, t: torch.Tensor) -> torch.Tensor | None:
    """A view of ``base`` with ``t``'s dtype, sizes, strides and storage offset (``t`` lies in
    ``base``'s memory), sharing ``base``'s version counter; ``None`` where ``base`` cannot be
    viewed with ``t``'s dtype (``Tensor.view(dtype)``'s rules, which a view of the whole storage
    as one row meets for the dtypes PyTorch can reinterpret). A view of another dtype
    (``x.view(torch.int16)``, ``z.real`` of a complex ``z``) is reinterpreted first, and ``t``'s
    conjugate and negative bits (``x.conj()``, ``z.conj().imag``) are set as ``t``'s:
    ``as_strided`` alone keeps ``base``'s dtype and bits, and read its bytes as those."""
    if t.dtype != base.dtype:
        base = _with_bits(base, False, False)  # (Tensor.view(dtype) refuses a view with a bit set)
        # the whole storage as one row of whole elements of both dtypes, which any layout of
        # base can be viewed as, then reinterpreted (base itself may have a last stride or an
        # offset that Tensor.view(dtype) refuses)
        size, unit = base.element_size(), math.lcm(base.element_size(), t.element_size())
        count = base.untyped_storage().nbytes() // unit * unit // size
        try:
            base = base.as_strided((count,), (1,), 0).view(t.dtype)
        except RuntimeError:
            return None
    return _with_bits(base, t.is_conj(), t.is_neg()).as_strided(t.size(), t.stride(), t.storage_offset())


def storage_groups(tensors: list) -> list[list[int]]:
    """The positions of ``tensors`` grouped by the storage they lie in, in order of first
    appearance (entries that are not tensors left out); storages without bytes, which all have
    address 0, each make a group of their own."""
    groups: dict = {}
    for i, t in enumerate(tensors):
        if isinstance(t, torch.Tensor):
            ptr = t.untyped_storage().data_ptr()
            groups.setdefault(ptr if ptr else ("empty", i), []).append(i)
    return list(groups.values())


def copies_sharing_memory(tensors: list) -> list:
    """Copies of ``tensors`` (one storage: a value and views of it, of any dtypes) that share
    one new copy of that storage: the first a tensor over the copy, the others views of the
    first (:func:`alias_as`), each with its own dtype, sizes, strides and offset, so that a write
    through one is seen through the others, as through the originals. A view that cannot be
    made of the first (``Tensor.view(dtype)``'s rules) gets a copy of its own."""
    first = tensors[0]
    root = torch.empty(0, dtype=first.dtype, device=first.device).set_(
        first.untyped_storage().clone(), first.storage_offset(), first.size(), first.stride())
    root = _with_bits(root, first.is_conj(), first.is_neg())
    views = [alias_as(root, t) for t in tensors[1:]]
    return [root] + [t.clone() if v is None else v for t, v in zip(tensors[1:], views)]


def merge_view_chains(runners: list, steps: list, reads_at: dict[int, int], keep: set) -> int:
    """Merge each ViewCall whose result only the next view of its chain reads into that one,
    in place: the earlier position runs nothing and its reads move to the later one
    (``reads_at``, for liveness).

    Args:
        runners: per step, its callable (ViewCall for view ops).
        steps: the segmentation's steps, parallel to ``runners``.
        reads_at: step index -> index where its reads really happen (updated).
        keep: values the graph returns (never merged away).

    Returns:
        The number of merges.
    """
    readers: dict = {}
    for st in steps:
        for v in _step_reads(st):
            readers[v] = readers.get(v, 0) + 1
    produced_at: dict[int, int] = {}  # slot -> index of the ViewCall that writes it
    merged = 0
    for j, r in enumerate(runners):
        if not isinstance(r, ViewCall):
            continue
        i = produced_at.get(r.src)
        if i is not None:
            value = steps[i].outputs[0]
            if readers.get(value, 0) == 1 and value not in keep:
                first = runners[i]
                first.absorb(r)
                runners[j], runners[i] = first, _nothing
                for k, at in list(reads_at.items()):
                    if at == i:
                        reads_at[k] = j
                reads_at[i] = j
                merged += 1
        produced_at[runners[j].out] = j
    return merged


#: the matrix products (cuBLAS): each returns a new contiguous tensor (their meta functions
#: allocate it so), and a transformer's training step calls them hundreds of times
MATRIX_PRODUCTS = frozenset({torch.ops.aten.mm.default, torch.ops.aten.addmm.default, torch.ops.aten.bmm.default,
                             torch.ops.aten.baddbmm.default})

#: per matrix product, its Python binding (``torch._C._VariableFunctions``), which dispatches to
#: the same overload when called with the graph's positional tensors: its argument parser costs
#: less host time per call than the overload's schema-driven entry point (benchmarks/NOTES.md)
BOUND = {op: getattr(torch._C._VariableFunctions, op._schema.name.split("::")[1]) for op in MATRIX_PRODUCTS}


def entry_point(target: Any, node: Node) -> Any:
    """What a compiled graph calls for ``node``'s op: the Python binding of a matrix product
    called with tensors only (:data:`BOUND`), an ``OpOverload``'s C++ entry point (one Python
    frame less per call than the overload object), else ``target`` itself."""
    if (target in BOUND and not node.kwargs
            and all(isinstance(a, Value) for a in node.args)):
        return BOUND[target]
    if isinstance(target, torch._ops.OpOverload):
        return target._op
    return target


def call_runner(node: Node, slots: dict[Value, int]):
    """A closure running ``node``'s call with its arguments resolved ahead of time (slots of
    values, evaluation of symbolic sizes, constants as they are); its ``aten_call`` attribute
    is ``node``, which marks it as a plain ATen call that a graph's generated function may
    write inline (a :class:`ViewCall` for a view op of static shape)."""
    target = node.target
    if (target in VIEW_OPS and not node.kwargs and len(node.outputs) == 1 and node.args
            and isinstance(node.args[0], Value) and node.args[0].meta is not None):
        rest = [_compile_argument(a, slots) for a in node.args[1:]]
        if all(c for c, _ in rest) and not any(isinstance(a, Value) for a in node.args[1:]):
            return ViewCall(target, slots[node.args[0]], [v for _, v in rest], slots[node.outputs[0]])
    target = entry_point(target, node)
    args = [_compile_argument(a, slots) for a in node.args]
    kwargs = {k: _compile_argument(v, slots) for k, v in node.kwargs.items()}
    outs = [slots[o] for o in node.outputs]
    single = outs[0] if len(outs) == 1 else None

    if not kwargs and all(c or isinstance(a, Value) for (c, _), a in zip(args, node.args)):
        spec = [(slots[a], None) if isinstance(a, Value) else (-1, v) for (c, v), a in zip(args, node.args)]
        if single is not None:
            def run(env, sym_key=None, sym_values=None):
                env[single] = target(*[env[s] if s >= 0 else c for s, c in spec])
            run.aten_call = node
            return run

    def run_general(env, sym_key=None, sym_values=None):
        a = [v if c else v(env, sym_values) for c, v in args]
        k = {n: (v if c else v(env, sym_values)) for n, (c, v) in kwargs.items()}
        result = target(*a, **k)
        if single is not None:
            env[single] = result
        else:
            for s, r in zip(outs, result):
                env[s] = r

    run_general.aten_call = node  # what the graph's generated function writes as a direct call
    return run_general


def _nothing(env, sym_key=None, sym_values=None) -> None:
    pass


class CastBatch:
    """Stand-alone dtype conversions of one graph, run as one multi-tensor copy.

    Under autocast every weight is cast to half precision before its matrix product (and in
    the backward every weight gradient back to fp32); one kernel launch per tensor is what
    eager does, and in a Python runtime each launch costs host time. ``torch._foreach_copy_``
    converts them all in one call (PyTorch's multi-tensor kernels, the ones fused optimizers
    use), with ATen's own conversion rules.

    Args:
        nodes: call nodes of ``aten._to_copy`` the segmenter marked with one reason
            (``BATCHED_CAST`` or ``BATCHED_CAST_LATE``).
        slots: value -> slot of the graph's environment.
        device_guarded: the graph makes the tensors' CUDA device current around every call.
    """

    def __init__(self, nodes: list[Node], slots: dict[Value, int], device_guarded: bool = False):
        self.src = [slots[n.args[0]] for n in nodes]
        self.dst = [slots[n.output] for n in nodes]
        self.metas = [n.output.meta for n in nodes]
        self.static = all(isinstance(d, int) for m in self.metas for d in (*m.shape, *m.stride))
        self.allocs = [(allocator(m.device, device_guarded), tuple(m.shape), tuple(m.stride), m.dtype)
                       for m in self.metas] if self.static else []

    def __call__(self, env: list, sym_key=None, sym_values=None) -> None:
        if self.static:
            outs = [alloc(sh, st, dt) for alloc, sh, st, dt in self.allocs]
        else:
            outs = [torch.empty_strided([as_int(d, sym_values) for d in m.shape], [as_int(d, sym_values) for d in m.stride],
                                        dtype=m.dtype, device=m.device) for m in self.metas]
        torch._foreach_copy_(outs, [env[s] for s in self.src])
        for s, o in zip(self.dst, outs):
            env[s] = o


class InputWriteBatch:
    """The graph's writes back to its inputs, run as one multi-tensor copy.

    AOTAutograd keeps the writes to inputs that need no gradient in the graph as
    ``aten.copy_(input, new_value)`` calls at its end (``keep_inference_input_mutations``):
    BatchNorm's running mean, running variance and batch counter, three per layer in
    training. Run one by one they are one device copy and its host-side dispatch each
    (ResNet-50 at batch 128 on an H200: 161 device copies per training step, about 9 us of
    host time each in the profile); ``torch._foreach_copy_`` writes them all in one call per
    dtype pair, with ``copy_``'s conversion rules.

    Args:
        nodes: the ``copy_`` call nodes (see :func:`input_write_batch`).
        slots: value -> slot of the graph's environment.
    """

    def __init__(self, nodes: list[Node], slots: dict[Value, int]):
        # one call per pair of dtypes (and device): PyTorch's multi-tensor kernels take lists of
        # one dtype (a mixed list falls back to a copy per tensor). Each input is written once
        # (``input_write_batch``), so the order between the calls does not matter
        by_dtypes: dict = {}
        for n in nodes:
            dst, src = n.args[0].meta, n.args[1].meta
            by_dtypes.setdefault((dst.dtype, src.dtype, dst.device), []).append(n)
        self.batches = [([slots[n.args[0]] for n in ns], [slots[n.args[1]] for n in ns]) for ns in by_dtypes.values()]
        self.out = [(slots[n.outputs[0]], slots[n.args[0]]) for n in nodes]

    def __call__(self, env: list, sym_key=None, sym_values=None) -> None:
        for dst, src in self.batches:
            torch._foreach_copy_([env[s] for s in dst], [env[s] for s in src])
        for s, d in self.out:
            env[s] = env[d]


def input_write_batch(graph: Graph, steps: list) -> list[Node]:
    """The ``copy_`` calls of ``steps`` that :class:`InputWriteBatch` can run at the last one's
    place: each writes a graph input from a value of the same shape and device, nothing reads
    its result, and no later step reads the input it writes (so delaying the write changes
    nothing). Fewer than two: none."""
    inputs = set(graph.inputs)
    returned = set(values_in(graph.outputs))
    last_read: dict[Value, int] = {}
    for i, st in enumerate(steps):
        for v in _step_reads(st):
            last_read[v] = i
    found: list[Node] = []
    for i, st in enumerate(steps):
        if not isinstance(st, Node) or not st.is_call or st.target is not torch.ops.aten.copy_.default:
            continue
        if st.kwargs or len(st.args) != 2 or len(st.outputs) != 1:
            continue
        dst, src = st.args
        if not (isinstance(dst, Value) and isinstance(src, Value) and dst in inputs) or st.outputs[0] in returned:
            continue
        if dst.meta is None or src.meta is None or tuple(dst.meta.shape) != tuple(src.meta.shape) \
                or dst.meta.device != src.meta.device:
            continue
        # a later read of the input (another write to it included) or of the call's result
        if last_read.get(dst, i) > i or last_read.get(st.outputs[0], i) > i:
            continue
        found.append(st)
    return found if len(found) >= 2 else []


def run_call(node: Node, env: list, slots: dict[Value, int], sym_values: dict | None = None) -> None:
    """Run a node as its ATen (or Python) call, reading and writing ``env``. Sizes left
    symbolic in its arguments (views built from metadata) are evaluated with ``sym_values``."""
    def resolve(v: Value):
        x = env[slots[v]]
        if x is None and isinstance(v.example, torch.SymInt):
            # a size the graph reads symbolically: its step may not have run, or its slot was
            # freed, when only kernels read it (a group's ATen fallback reads it again)
            return as_int(v.example.node.expr, sym_values)
        return x

    args = _with_sizes(map_values(node.args, resolve), sym_values)
    kwargs = _with_sizes(map_values(node.kwargs, resolve), sym_values)
    result = node.target(*args, **kwargs)
    if len(node.outputs) == 1:
        env[slots[node.outputs[0]]] = result
    else:
        for o, r in zip(node.outputs, result):
            env[slots[o]] = r


def _registry_runner(node: Node, slots: dict[Value, int], env: list, sym_key=None, sym_values=None) -> None:
    run_registry_node_eagerly(node, env, slots, sym_values or {})


def _step_reads(step) -> list[Value]:
    """The values a step reads when it runs: a group's inputs; a call's arguments; a registry
    node outside any group runs as its ATen call (:func:`_call_runner`), whose arguments may
    name more tensors than its operands, except constants and random draws (rebuilt from their
    metadata)."""
    if isinstance(step, FusionGroup):
        return list(step.inputs)
    if step.is_call or REGISTRY[step.op].kind in ("constant", "random"):
        return step.input_values()
    found: list[Value] = []
    _collect_values((step.args, step.kwargs), found)
    return list(dict.fromkeys(step.input_values() + found))
