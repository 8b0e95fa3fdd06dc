"""Applying one op to the values of a fusion being defined: checks, inference, one IR node.

Takes an ATen overload that the op registry (:mod:`torchfuse.ir.ops`) knows, with arguments in
which :class:`~torchfuse.fusion.tensor.FusionTensor` handles stand for tensors, and returns
handles to its results. The node it appends is exactly what :mod:`torchfuse.ir.from_fx` builds
for the same ATen call (same ``inputs``, ``attrs`` from the op's ``parse``, ``compute_dtype`` from
PyTorch's promotion rule, ``target``/``args``/``kwargs`` for the ATen fallback), so the
segmenter, the code generator and the runtime treat both alike.

Result metadata comes from PyTorch itself: the overload runs on ``device="meta"`` tensors whose
sizes are the representatives of the size symbols (:mod:`torchfuse.fusion.sizes`), and the
result sizes map back to symbols. What PyTorch would broadcast implicitly must be written
explicitly here (nvFuser's rule): tensor operands of a pointwise op have one rank (0-dim
tensors and scalars excepted), and dims line up only where they have the same size or one of
them is a broadcast 1. Every violation raises :class:`~torchfuse.fusion.errors.DefinitionError`
(or its ``TypeError`` subclass for dtypes) naming the op and the operand.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

import sympy
import torch
from torch._prims_common import ELEMENTWISE_TYPE_PROMOTION_KIND, elementwise_dtypes

from ..ir import ops as registry
from ..ir.graph import Node, TensorMeta, Value
from .errors import fail
from .sizes import SizeMismatch
from .tensor import FusionScalar, FusionTensor, is_size

if TYPE_CHECKING:
    from .definition import Fusion

aten = torch.ops.aten
META = torch.device("meta")
_CONSTANT_TARGETS = (aten.full.default, aten.scalar_tensor.default)


def describe(x: Any) -> str:
    """How an operand is named in messages: ``x: float32[s0, 1]``, ``2.0``, ``size s1``."""
    if isinstance(x, FusionTensor):
        dt = str(x.dtype).replace("torch.", "")
        return f"{x.name}: {dt}[{', '.join(str(s) for s in x.shape)}]"
    if isinstance(x, FusionScalar):
        return f"{x.name}: runtime {x.dtype.__name__}"
    if is_size(x):
        return f"size {x}"
    if isinstance(x, torch.Tensor):
        return f"a torch.Tensor of shape {list(x.shape)}"
    return repr(x)


def _arguments(overload) -> list:
    return list(overload._schema.arguments)


def _slot_kind(type_str: str) -> str:
    t = type_str.replace("Optional[", "").rstrip("]")
    if t == "Tensor":
        return "tensor"
    if t in ("number", "Scalar", "float", "int", "bool"):
        return "scalar"
    return "other"


def _accepts(overload, args: Sequence, kwargs: dict) -> bool:
    params = [a for a in _arguments(overload) if not a.kwarg_only]
    if len(args) > len(params):
        return False
    names = {a.name for a in _arguments(overload)}
    if any(k not in names for k in kwargs):
        return False
    for a, p in zip(args, params):
        kind = _slot_kind(str(p.type))
        optional = str(p.type).startswith("Optional")
        if a is None:
            if not optional:
                return False
        elif kind == "tensor" and not isinstance(a, FusionTensor):
            return False
        elif kind == "scalar" and isinstance(a, FusionTensor):
            return False
    return True


def choose_overload(overloads: Sequence, args: Sequence, kwargs: dict):
    """The first overload whose schema takes tensors and scalars where ``args`` have them, or
    ``None``."""
    for o in overloads:
        if _accepts(o, args, kwargs):
            return o
    return None


#: reductions with no identity element: over a dim of size 0 eager raises ``IndexError``
_NO_IDENTITY = frozenset({"max", "min", "argmax", "argmin"})


class Applier:
    """Appends ops to one fusion (see the module docstring)."""

    def __init__(self, fusion: "Fusion"):
        self.fusion = fusion
        self.sizes = fusion.sizes

    # ------------------------------------------------------------------ operands
    def operand(self, op: str, slot: str, x: Any, in_list: bool = False) -> Any:
        """Check an operand and return it as the IR holds it: a value, a number, or (inside a
        list of sizes) a size expression. A size given as an operand becomes a runtime scalar.

        Raises:
            DefinitionError: it belongs to another fusion, or is the wrong kind of object.
        """
        if isinstance(x, (FusionTensor, FusionScalar)):
            if x.fusion is not self.fusion:
                fail(op, f"operand '{slot}' ({describe(x)}) belongs to another fusion")
            if in_list:
                fail(op, f"'{slot}' holds {describe(x)} where it takes sizes", type_error=True)
            return x.value
        if is_size(x):
            size = self.sizes.find(x)
            if in_list:
                return size
            return self.fusion.size_value(size) if not isinstance(size, int) else size
        if isinstance(x, sympy.Integer):
            return int(x)
        if isinstance(x, (bool, int, float, str, torch.dtype, torch.memory_format, torch.layout)) or x is None:
            return x
        if isinstance(x, torch.Tensor):
            fail(op, f"operand '{slot}' is a torch.Tensor; define it with fd.define_tensor and pass "
                     "its data to execute()", type_error=True)
        fail(op, f"operand '{slot}' has unsupported type {type(x).__name__}", type_error=True)

    def operands(self, op: str, slot: str, x: Any) -> Any:
        if isinstance(x, (list, tuple, torch.Size)):
            return [self.operand(op, slot, v, in_list=True) for v in x]
        return self.operand(op, slot, x)

    def constant(self, op: str, value: Any, others: list[FusionTensor],
                 kind: ELEMENTWISE_TYPE_PROMOTION_KIND = ELEMENTWISE_TYPE_PROMOTION_KIND.DEFAULT) -> FusionTensor:
        """A 0-dim constant for a number given where the op takes a tensor, in the dtype
        PyTorch would compute ``value op others`` in under the op's promotion ``kind`` (so
        promotion and rounding match: ``-3 / uint8`` divides -3.0, not the wrapped 253)."""
        if isinstance(value, FusionScalar) or is_size(value):
            fail(op, f"operand {describe(value)} must be a tensor or a Python number here")
        if isinstance(value, bool) and op in ("sub", "rsub"):  # as the op registry's sub refuses a bool operand
            fail(op, "cannot be fused with these arguments: subtraction with a bool operand, which eager refuses")
        examples = [torch.empty((1,) * t.ndim, dtype=t.dtype, device=META) for t in others]
        compute, _ = elementwise_dtypes(value, *examples, type_promotion_kind=kind)
        return self.apply(op, [aten.scalar_tensor.default], (value,), {"dtype": compute})[0]

    # ------------------------------------------------------------------ shape rules
    def check_broadcast(self, op: str, named: list[tuple[str, FusionTensor]], strict_rank: bool) -> None:
        """Ranks agree (``strict_rank``) and lined-up dims have one size; unifies symbols.

        Raises:
            DefinitionError: naming the op and the operand that does not fit.
        """
        tensors = [(n, t) for n, t in named if isinstance(t, FusionTensor) and t.ndim > 0]
        if not tensors:
            return
        first_name, first = tensors[0]
        if strict_rank:
            for name, t in tensors[1:]:
                if t.ndim != first.ndim:
                    fail(op, f"operand '{name}' ({describe(t)}) has rank {t.ndim} but operand "
                             f"'{first_name}' ({describe(first)}) has rank {first.ndim}; give them one rank "
                             f"with fd.ops.broadcast_in_dim")
        rank = max(t.ndim for _, t in tensors)
        for d in range(rank):
            holder: tuple[str, FusionTensor, Any] | None = None
            for name, t in tensors:
                j = d - (rank - t.ndim)
                if j < 0:
                    continue
                s = self.sizes.find(t.value.meta.shape[j])
                if s == 1:
                    continue
                if holder is None:
                    holder = (name, t, s)
                    continue
                try:
                    self.sizes.unify(holder[2], s)
                except SizeMismatch as e:
                    fail(op, f"operand '{name}' ({describe(t)}) cannot broadcast with operand '{holder[0]}' "
                             f"({describe(holder[1])}) at dim {d}: {e}")

    def unify_dim(self, op: str, what: str, have: Any, want: Any) -> None:
        if self.sizes.find(have) == 1:
            return
        try:
            self.sizes.unify(have, want)
        except SizeMismatch as e:
            fail(op, f"{what} cannot be {want}: {e}")

    # ------------------------------------------------------------------ the op
    def apply(self, op: str, overloads: Sequence, args: Sequence, kwargs: dict | None = None, *,
              shapes: Sequence[Sequence] | None = None, strict_rank: bool = True) -> list:
        """Append one registry op; returns handles to its results.

        Args:
            op: the name messages use (the namespace's name for the op).
            overloads: candidate ATen overloads, all of one registry op; the first whose
                schema fits the operands is used. Python numbers where only tensors fit become
                0-dim constants.
            args, kwargs: the ATen call's arguments, with handles for tensors and runtime
                scalars, and sizes from ``FusionTensor.shape`` where sizes go.
            shapes: the result shapes when the caller knows them symbolically (reshape,
                broadcasts, constants); otherwise they are mapped back from PyTorch's.
            strict_rank: require one rank for the tensor operands of pointwise ops.

        Raises:
            DefinitionError, DefinitionTypeError: see the module docstring.
        """
        kwargs = dict(kwargs or {})
        self.fusion.check_open(op)
        for slot, a in zip([p.name for p in _arguments(overloads[0])], args):
            if isinstance(a, torch.Tensor):
                self.operand(op, slot, a)
        overload = choose_overload(overloads, args, kwargs)
        if overload is None:
            # a number where the op only takes tensors: make it a 0-dim constant
            tensors = [a for a in args if isinstance(a, FusionTensor)]
            params = [p for p in _arguments(overloads[0]) if not p.kwarg_only]
            args = list(args)
            kind = _promotion_kind(overloads[0], kwargs)
            for i, (a, p) in enumerate(zip(args, params)):
                if _slot_kind(str(p.type)) == "tensor" and not isinstance(a, FusionTensor) and a is not None:
                    if not tensors:
                        fail(op, f"operand '{p.name}' ({describe(a)}) must be a tensor")
                    args[i] = self.constant(op, a, tensors, kind)
            overload = choose_overload(overloads, args, kwargs)
            if overload is None:
                fail(op, "no overload of " + ", ".join(map(str, overloads)) + " takes operands ("
                     + ", ".join(describe(a) for a in args) + ")", type_error=True)
        opdef = registry.lookup(overload)
        assert opdef is not None, f"{overload} is not in the op registry"
        params = [p.name for p in _arguments(overload)]
        named = list(zip(params, args)) + [(k, v) for k, v in kwargs.items()]
        if opdef.kind == "pointwise":
            self.check_broadcast(op, named, strict_rank)
        ir_args = tuple(self.operands(op, slot, a) for slot, a in zip(params, args))
        ir_kwargs = {k: self.operands(op, k, v) for k, v in kwargs.items()}
        result = self.infer(op, overload, named, ir_args, ir_kwargs)
        results = list(result) if isinstance(result, (tuple, list)) else [result]
        # result sizes are operand sizes (or 1): map representatives back through the operands
        known = {self.sizes.representative(s): self.sizes.find(s)
                 for _, a in named if isinstance(a, FusionTensor) for s in a.shape}
        metas = []
        for i, r in enumerate(results):
            if shapes is not None:
                shape = shapes[i]
            else:
                shape = [known.get(int(n), None) or self.sizes.from_representative(n) for n in r.shape]
            metas.append(meta_for(r, [self.sizes.find(s) for s in shape]))
        return self.record(op, opdef, overload, named, ir_args, ir_kwargs, metas)

    def infer(self, op: str, overload, named, ir_args, ir_kwargs):
        """Run ``overload`` on meta tensors of representative sizes; PyTorch's errors become
        definition errors."""
        cache: dict = {}

        def to_meta(x):
            if isinstance(x, Value):
                if x.meta is None:
                    return x.example
                if x not in cache:
                    m = x.meta
                    shape = [self.sizes.representative(s) for s in m.shape]
                    stride = [self.sizes.representative(s) for s in m.stride]
                    cache[x] = torch.empty_strided(shape, stride, dtype=m.dtype, device=META)
                return cache[x]
            if isinstance(x, sympy.Expr):
                return self.sizes.representative(x)
            return x

        margs = tuple(_map(a, to_meta) for a in ir_args)
        mkwargs = {k: _map(v, to_meta) for k, v in ir_kwargs.items()}
        if overload in _CONSTANT_TARGETS:
            mkwargs["device"] = META
        try:
            return overload(*margs, **mkwargs)
        except Exception as e:  # PyTorch's own check of the operands
            text = str(e).splitlines()[0] if str(e) else type(e).__name__
            operands = ", ".join(f"'{n}' ({describe(a)})" for n, a in named
                                 if isinstance(a, (FusionTensor, FusionScalar)))
            is_type = isinstance(e, TypeError) or any(w in text.lower() for w in ("dtype", "bool", "integer", "floating"))
            if "is invalid for input of size" in text:
                # the sizes in PyTorch's message are the stand-ins, not the caller's
                text += (" (the fusion checks shapes on a stand-in prime for each size: a view or reshape to "
                         "fixed sizes other than 1 cannot be checked; reshape outside the fusion)")
            fail(op, f"PyTorch rejects operands {operands}: {text}", type_error=is_type)

    def reduce_nothing(self, op: str, name: str, x: FusionTensor, attrs: dict, metas: list[TensorMeta]) -> list:
        """A reduction of a 0-dim tensor (over no dim, or its dim 0 or -1, as PyTorch takes them),
        which a kernel's reduction cannot hold, as the pointwise ops it comes to: the element
        converted to the result's dtype (``sum``, ``mean``, ``amax``, ``prod``, ``any``...),
        index 0 (``argmax``), and a variance of ``(x - x)**2 / (1 - correction)`` (0, or NaN
        as eager's for a correction of 1 or a non-finite element)."""
        prims = torch.ops.prims

        def cast(v, dtype):
            return self.apply(op, [prims.convert_element_type.default], (v, dtype))[0]

        def index():
            return self.apply(op, [aten.full_like.default], (x, 0), {"dtype": torch.int64})[0]

        if name in ("argmax", "argmin"):
            return [index()]
        if name in ("max_dim", "min_dim"):
            return [cast(x, metas[0].dtype), index()]
        if name in ("var", "prims_var", "var_mean"):
            d = self.apply(op, [aten.sub.Tensor], (x, x))[0]
            square = self.apply(op, [aten.mul.Tensor], (d, d))[0]
            var = self.apply(op, [aten.div.Scalar], (square, 1 - float(attrs.get("correction", 1))))[0]
            return [cast(var, metas[0].dtype)] + ([cast(x, metas[1].dtype)] if name == "var_mean" else [])
        return [cast(x, m.dtype) for m in metas]

    def record(self, op, opdef, overload, named, ir_args, ir_kwargs, metas: list[TensorMeta]) -> list:
        for m in metas:
            if m.dtype not in registry.KERNEL_DTYPES:
                fail(op, f"result dtype {m.dtype} cannot be computed in a kernel", type_error=True)
        try:
            inputs, attrs = opdef.parse(ir_args, ir_kwargs)
        except registry.Unsupported as e:
            fail(op, f"cannot be fused with these arguments: {e}")
        except (IndexError, KeyError, TypeError, ValueError) as e:
            fail(op, f"arguments not understood ({type(e).__name__}: {e})")
        tensors = [(n, a) for n, a in named if isinstance(a, FusionTensor)]
        if opdef.kind == "pointwise":
            examples = [_example(x) for x in inputs]
            try:
                compute = registry.compute_dtype_for_promotion(opdef, attrs, examples)
            except Exception as e:  # noqa: BLE001 - promotion PyTorch rejects
                fail(op, f"type promotion failed: {e}", type_error=True)
            check = compute if compute is not None else (metas[0].dtype if opdef.name != "cast" else None)
            if check is not None and check not in opdef.dtypes:
                listing = ", ".join(f"'{n}' ({describe(t)})" for n, t in tensors) or "its operands"
                fail(op, f"computes in {check} for operands {listing}, which it does not take; it takes "
                         f"{_dtype_list(opdef.dtypes)}", type_error=True)
            attrs["compute_dtype"] = compute
            common = registry.common_dtype_for_promotion(opdef, attrs, examples) if compute is not None else None
            if common is not None and common != compute:
                attrs["common_dtype"] = common
        elif opdef.kind == "reduction":
            name, t = tensors[0]
            if t.dtype not in opdef.dtypes:
                fail(op, f"operand '{name}' ({describe(t)}) has dtype {t.dtype}, which it does not take; "
                         f"it takes {_dtype_list(opdef.dtypes)}", type_error=True)
            if t.ndim == 0:
                return self.reduce_nothing(op, opdef.name, t, attrs, metas)
            if registry.REDUCTIONS[opdef.name].combine in _NO_IDENTITY:
                self.fusion.reduced_sizes.append((op, [inputs[0].meta.shape[d] for d in attrs["dims"]]))
        elif opdef.kind == "random" and metas[0].dtype not in opdef.dtypes:
            fail(op, f"cannot draw {metas[0].dtype} numbers; it draws {_dtype_list(opdef.dtypes)}", type_error=True)
        outs = [self.fusion.new_value(m) for m in metas]
        node = Node(op=opdef.name, inputs=list(inputs), attrs=attrs, outputs=outs, target=overload,
                    args=ir_args, kwargs=ir_kwargs, source=op)
        for o in outs:
            o.producer = node
        self.fusion.nodes.append(node)
        return [FusionTensor(self.fusion, o) for o in outs]


def _promotion_kind(overload, kwargs: dict) -> ELEMENTWISE_TYPE_PROMOTION_KIND:
    """The type promotion kind of a registry op (its ``promotion``, called with the keyword
    arguments where it depends on them: ``div``'s rounding mode); ``DEFAULT`` for none."""
    opdef = registry.lookup(overload)
    kind = getattr(opdef, "promotion", None)
    if callable(kind):
        kind = kind(kwargs)
    return kind if isinstance(kind, ELEMENTWISE_TYPE_PROMOTION_KIND) else ELEMENTWISE_TYPE_PROMOTION_KIND.DEFAULT


def meta_for(t: torch.Tensor, shape: list) -> TensorMeta:
    """Symbolic metadata of a meta-tensor result: ``shape``, and contiguous strides in the
    order of the result's strides (PyTorch's choice of memory layout)."""
    rank = t.dim()
    # outermost first; broadcast (stride-0) dims count as outermost, as TensorIterator ignores them
    order = sorted(range(rank), key=lambda d: (t.stride(d) != 0, -t.stride(d), d))
    stride: list = [1] * rank
    running: Any = 1
    for d in reversed(order):
        stride[d] = running
        running = running * shape[d]
    return TensorMeta(dtype=t.dtype, shape=tuple(shape), stride=tuple(stride), device=META)


def _example(x: Any) -> Any:
    if isinstance(x, Value):
        if x.meta is not None:
            return torch.empty(() if x.meta.rank == 0 else (1,), dtype=x.meta.dtype, device=META)
        return x.example
    return x


def _map(obj: Any, fn) -> Any:
    if isinstance(obj, (list, tuple)):
        return type(obj)(_map(o, fn) for o in obj)
    return fn(obj)


def _dtype_list(dtypes) -> str:
    return ", ".join(sorted(str(d).replace("torch.", "") for d in dtypes))
