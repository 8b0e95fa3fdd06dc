"""A fusion as a differentiable PyTorch operator, usable inside ``torch.compile`` as one op.

:class:`FusionOp` registers the fusion as a custom operator (``torch.ops.torchfuse.<name>``,
with :func:`torch.library.custom_op`) whose fake implementation computes the outputs' sizes
from the definition's symbolic metadata, so TorchDynamo and AOTAutograd trace it as a single
node with dynamic sizes. Its backward is a second custom operator, either

* **derived**: the vector-Jacobian product of the fusion's eager reference
  (:mod:`torchfuse.fusion.reference`), traced with ``make_fx`` and torchfuse's decomposition
  table into an ATen graph with symbolic sizes, and compiled like a backward graph of
  ``torch.compile`` (:func:`torchfuse.ir.from_fx.graph_from_fx`, segmentation, kernels). It
  is traced once per device (and per value of the fusion's scalar inputs). Random numbers
  cannot be drawn again identically, so the forward pass also returns what the backward needs
  of them: the values computed from random numbers alone that other ops read (for dropout,
  the bool keep-mask, one byte per element), which the backward reads instead of drawing;
* or **given**: a :class:`~torchfuse.fusion.definition.Fusion` whose inputs are the forward
  inputs, then the forward outputs, then the gradients of the floating-point outputs, and
  whose outputs are the gradients of the floating-point tensor inputs, in order.

Gradients flow to floating-point tensor inputs; other inputs and outputs are not
differentiable.
"""
from __future__ import annotations

import itertools
import re
from typing import Any, Sequence

import sympy
import torch

from ..ir import ops as registry
from ..ir.graph import Value
from .definition import TRACING, Fusion, default_device
from .errors import DefinitionError
from .inputs import SCALAR_TYPES, Binder
from .program import Program
from .reference import run_reference
from .sizes import evaluate

_counter = itertools.count()
#: registered op name (``torchfuse::<name>``, forward and backward) -> the fusion that runs it,
#: for reports (registered ops live as long as the process, and so do their fusions)
_RUN_BY: dict[str, Fusion] = {}
_SCALAR_SCHEMA = {float: "float", int: "int", bool: "bool"}


def random_frontier(fusion: Fusion) -> list[Value]:
    """Values computed from random numbers (and constants) alone that an op not of that kind
    reads, or that are outputs: what a backward pass needs of the forward's random numbers."""
    derived: set[Value] = set()
    constant: set[Value] = set()
    for node in fusion.nodes:
        if node.op is None:
            constant.update(node.outputs)  # sizes used as scalars
            continue
        kind = registry.REGISTRY[node.op].kind
        ins = node.input_values()
        if kind == "random":
            derived.update(node.outputs)
        elif kind == "constant" or (ins and all(v in constant for v in ins)):
            constant.update(node.outputs)
        elif any(v in derived for v in ins) and all(v in derived or v in constant for v in ins):
            derived.update(node.outputs)
    frontier: list[Value] = []
    for node in fusion.nodes:
        if all(o in derived for o in node.outputs) and node.outputs:
            continue
        for v in node.input_values():
            if v in derived and v not in frontier:
                frontier.append(v)
    for v in fusion.outputs:
        if v in derived and v not in frontier:
            frontier.append(v)
    return frontier


def inputs_reaching_outputs(fusion: Fusion) -> set[int]:
    """Positions of the declared inputs from which a floating-point output is computed through
    floating-point values: those autograd differentiates. An input read only through a
    comparison or an integer cast (or not at all) gets no gradient in eager (``None``). An
    input that is a view of another (:attr:`Fusion.views_of`) reaches as that one too."""
    reached: set[Value] = set()
    origins: dict[Value, set[int]] = {v: {i} | ({fusion.views_of[i]} if i in fusion.views_of else set())
                                      for i, v in enumerate(fusion.inputs)}
    for node in fusion.nodes:
        sources = set().union(*(origins.get(v, set()) for v in node.input_values()))
        for o in node.outputs:
            if _floating(o):  # (a size used as a number has no tensor metadata)
                origins[o] = origins.get(o, set()) | sources
    for v in fusion.outputs:
        if _floating(v):
            reached |= {v}
    return set().union(*(origins.get(v, set()) for v in reached)) if reached else set()


def _floating(v: Value) -> bool:
    return v.meta is not None and (v.meta.dtype.is_floating_point or v.meta.dtype.is_complex)


class OutputLayouts:
    """Sizes and strides of a fusion's output values for given inputs, from the canonical
    symbolic metadata: evaluated with Python arithmetic (SymInts in fake implementations),
    cached per set of sizes for real calls."""

    def __init__(self, fusion: Fusion, values: Sequence[Value]):
        canon = fusion.sizes.canonical_map()
        self.binding = []  # (input index, dim, root symbol): where each size is read
        seen = set()
        for i, shape in enumerate(fusion.shapes):
            for d, s in enumerate(shape or ()):
                if isinstance(s, sympy.Symbol) and s not in seen:
                    seen.add(s)
                    self.binding.append((i, d, s))

        def canonical(s):
            return s if isinstance(s, int) else sympy.sympify(s).xreplace(canon)

        self.layouts = [([canonical(s) for s in v.meta.shape], [canonical(s) for s in v.meta.stride]) for v in values]
        self.cache: dict[tuple, list] = {}

    def evaluate(self, inputs: Sequence) -> list[tuple[list, list]]:
        values = {s: inputs[i].shape[d] for i, d, s in self.binding}
        return [([evaluate(s, values) for s in shape], [evaluate(s, values) for s in stride])
                for shape, stride in self.layouts]

    def concrete(self, inputs: Sequence) -> list[tuple[list, list]]:
        key = tuple(int(inputs[i].shape[d]) for i, d, _ in self.binding)
        if key not in self.cache:
            self.cache[key] = self.evaluate(inputs)
        return self.cache[key]


def _conform(t: torch.Tensor, shape: list, stride: list, inputs: Sequence, earlier: list) -> torch.Tensor:
    """``t`` as a fresh tensor with the declared layout (a custom op's outputs may not alias
    its inputs or each other, and must have the strides its fake implementation reports)."""
    aliased = any(isinstance(x, torch.Tensor) and x.untyped_storage().data_ptr() == t.untyped_storage().data_ptr()
                  for x in list(inputs) + earlier)
    same = all(sz == 1 or a == b for sz, a, b in zip(shape, t.stride(), stride))
    if aliased or not same:
        out = torch.empty_strided(shape, stride, dtype=t.dtype, device=t.device)
        out.copy_(t)
        return out
    return t


class FusionOp:
    """A fusion as an operator: ``op(*inputs)`` returns its outputs (one tensor, or a tuple)
    and is differentiable; inside ``torch.compile`` it is a single node.

    Attributes:
        fusion: the forward fusion.
        backward_fusion: the given backward fusion, or ``None`` when it is derived.
        saved: values of the forward pass saved for a derived backward (random masks).
        forward_op, backward_op: the registered custom operators.
    """

    def __init__(self, fusion: Fusion, backward: Fusion | None = None, name: str | None = None):
        fusion.finish()
        self.fusion = fusion
        self.backward_fusion = backward.finish() if backward is not None else None
        self.specs = fusion.specs
        self.n_outputs = len(fusion.outputs)
        frontier = random_frontier(fusion) if backward is None else []
        #: a derived backward differentiates the autograd reference, a function of the inputs
        #: that are no views of others (Fusion.views_of): it gives the viewed input the
        #: gradient of every part read through views, which then get none (None) of their own;
        #: else the recorded nodes, where each view gets its part and autograd adds it into
        #: the viewed input's gradient, as for views the caller takes
        self.by_reference = backward is None and fusion.autograd_reference is not None and not frontier
        self.diff_inputs = [i for i, s in enumerate(self.specs) if s.is_tensor and s.dtype.is_floating_point
                            and not (self.by_reference and i in fusion.views_of)]
        self.diff_outputs = [k for k, v in enumerate(fusion.outputs) if v.meta.dtype.is_floating_point]
        self.saved = frontier
        #: inputs a derived backward gives a gradient (a given backward's are all given)
        self.reaching = inputs_reaching_outputs(fusion) if backward is None else set(range(len(self.specs)))
        #: outputs that pass no gradient to any input (computed through detach() alone)
        self.non_differentiable: list[int] = []
        if backward is None and fusion.gradient_inputs is not None:
            allowed = set().union(*fusion.gradient_inputs)  # (positions of the reference's inputs)
            self.reaching &= allowed | {i for i, j in fusion.views_of.items() if j in allowed}
            self.non_differentiable = [k for k, ins in enumerate(fusion.gradient_inputs) if not ins]
        from .trace import stops_gradient

        if self.saved and fusion.backward_refusal is None and stops_gradient(fusion.autograd_reference):
            # the derived backward of random ops differentiates the recorded nodes, which hold
            # detach() as an alias and no grad mode
            fusion.backward_refusal = (f"{fusion.name} draws random numbers and stops gradients (detach(), "
                                       f"torch.no_grad()): no backward can be derived; define the fusion with "
                                       f"Fusion and give its backward to as_op(backward=...)")
        self.extras = tuple(v for v in frontier if v not in fusion.outputs)
        if backward is not None:
            self._check_backward(backward)
        base = re.sub(r"\W", "_", name or fusion.name)
        self.name = f"{base}_{next(_counter)}"
        self._derived: dict = {}
        self.bind = Binder(self.specs, fusion.shapes, where=f"fused op {fusion.name!r}")
        #: keys of :meth:`_run_derived` whose joints are traced at each call's exact sizes
        self._by_size: set = set()
        self.forward_op = self._register_forward()
        self.backward_op = self._register_backward()
        _RUN_BY[_op_name(self.forward_op)] = fusion
        _RUN_BY[_op_name(self.backward_op)] = self.backward_fusion or fusion  # a derived one runs as the forward
        torch.library.register_autograd(f"torchfuse::{self.name}", self._backward, setup_context=self._setup_context)

    # ------------------------------------------------------------------ checks
    def _check_backward(self, backward: Fusion) -> None:
        want = len(self.specs) + self.n_outputs + len(self.diff_outputs)
        if len(backward.specs) != want:
            raise DefinitionError(
                f"backward: fusion {backward.name!r} takes {len(backward.specs)} inputs; a backward of "
                f"{self.fusion.name!r} takes {want}: its {len(self.specs)} inputs, its {self.n_outputs} outputs and "
                f"the gradients of its {len(self.diff_outputs)} floating-point outputs")
        if len(backward.outputs) != len(self.diff_inputs):
            raise DefinitionError(
                f"backward: fusion {backward.name!r} has {len(backward.outputs)} outputs; it must return one "
                f"gradient per floating-point tensor input of {self.fusion.name!r} ({len(self.diff_inputs)})")
        for i, out in zip(self.diff_inputs, backward.outputs):
            if out.meta.dtype != self.specs[i].dtype:
                raise DefinitionError(f"backward: output {out.name} has dtype {out.meta.dtype}, but the gradient of "
                                      f"input '{self.specs[i].name}' must be {self.specs[i].dtype}")
            self._check_gradient_shape(out, i)

    def _check_gradient_shape(self, out: Value, i: int) -> None:
        """A gradient has its input's shape: the same rank, and a fixed size only where the
        input's is that size (sizes that vary belong to each fusion's own symbols and are
        checked when the backward runs)."""
        want, got, name = self.fusion.shapes[i], out.meta.shape, self.specs[i].name
        if len(got) != len(want):
            raise DefinitionError(f"backward: output {out.name} has rank {len(got)}; the gradient of input "
                                  f"'{name}' has the input's rank ({len(want)})")
        for d, (g, w) in enumerate(zip(got, want)):
            if isinstance(g, int) and g != w:
                size = w if isinstance(w, int) else "a size that varies"
                raise DefinitionError(f"backward: output {out.name} has size {g} in dim {d}; the gradient of input "
                                      f"'{name}' has the input's size there ({size})")

    # ------------------------------------------------------------------ forward
    def _schema_inputs(self) -> list[str]:
        return [f"Tensor i{k}" if s.is_tensor else f"{_SCALAR_SCHEMA[s.dtype]} i{k}" for k, s in enumerate(self.specs)]

    def _register_forward(self):
        schema = "(" + ", ".join(self._schema_inputs()) + ") -> Tensor[]"
        outputs = list(self.fusion.outputs) + list(self.extras)

        layouts = OutputLayouts(self.fusion, outputs)

        def forward(*inputs):
            outs, fresh_outputs = self._run_forward(list(inputs))
            fresh: list = []
            for t, (shape, stride), ok in zip(outs, layouts.concrete(inputs), fresh_outputs):
                # (a value saved beside its alias, ``r`` and ``r.detach()``, is one tensor twice)
                ok = ok and all(t.untyped_storage().data_ptr() != e.untyped_storage().data_ptr() for e in fresh)
                fresh.append(t if ok else _conform(t, shape, stride, inputs, fresh))
            return fresh

        op = torch.library.custom_op(f"torchfuse::{self.name}", forward, mutates_args=(), schema=schema)

        @op.register_fake
        def _(*inputs):
            device = next(x.device for x in inputs if isinstance(x, torch.Tensor))
            return [torch.empty_strided(shape, stride, dtype=v.meta.dtype, device=device)
                    for v, (shape, stride) in zip(outputs, layouts.evaluate(inputs))]

        return op

    def _run_forward(self, inputs: list) -> tuple[list, list[bool]]:
        """The outputs and extras, and per output whether it is a fresh kernel-written tensor."""
        device, sizes = self.bind(inputs)
        self.fusion.check_reduced_sizes(sizes, where=f"fused op {self.fusion.name!r}")
        if self.fusion.runs_op_by_op(device):
            self.fusion.warn_op_by_op()
            outs = run_reference(self.fusion, inputs, outputs=list(self.fusion.outputs) + list(self.extras))
            return outs, [False] * len(outs)
        program = self.fusion.program(device, self.extras)
        return program(inputs), program.fresh_outputs

    # an operator, registered once: copying a model that holds one (``copy.deepcopy``) shares it
    def __copy__(self) -> "FusionOp":
        return self

    def __deepcopy__(self, memo: dict) -> "FusionOp":
        return self

    def __call__(self, *inputs):
        outs = self.forward_op(*inputs)[: self.n_outputs]
        return outs[0] if self.n_outputs == 1 else tuple(outs)

    # ------------------------------------------------------------------ backward
    def _setup_context(self, ctx, inputs, output) -> None:
        tensors = [x for x in inputs if isinstance(x, torch.Tensor)]
        if self.backward_fusion is not None:
            kept = list(output[: self.n_outputs])
        else:
            by_value = dict(zip(list(self.fusion.outputs) + list(self.extras), output))
            kept = [by_value[v] for v in self.saved]
        ctx.save_for_backward(*tensors, *kept)
        if self.non_differentiable:  # as eager's: requires_grad False, and no gradient flows back
            ctx.mark_non_differentiable(*(output[k] for k in self.non_differentiable))
        ctx.scalars = [x for x in inputs if not isinstance(x, torch.Tensor)]
        ctx.n_tensors = len(tensors)
        ctx.set_materialize_grads(False)  # (an output the loss does not read: None, see _backward)
        ctx.output_layouts = [(o.shape, o.dtype, o.device) for o in output[: self.n_outputs]]

    def _backward(self, ctx, grads):
        needed = [bool(ctx.needs_input_grad[i]) and i in self.reaching and self._reaches_used(i, grads)
                  for i in self.diff_inputs]
        result: list[Any] = [None] * len(self.specs)  # None: no gradient asked for or no path from the input
        if not any(needed):
            return tuple(result)
        saved = list(ctx.saved_tensors)
        tensors, kept = saved[: ctx.n_tensors], saved[ctx.n_tensors:]
        tensor_iter, scalar_iter = iter(tensors), iter(ctx.scalars)
        inputs = [next(tensor_iter) if s.is_tensor else next(scalar_iter) for s in self.specs]
        out_grads = []
        for k in self.diff_outputs:
            g = grads[k]
            if g is None:
                shape, dtype, device = ctx.output_layouts[k]
                g = torch.zeros(shape, dtype=dtype, device=device)
            out_grads.append(g)
        unique = self.backward_op(*inputs, *kept, *out_grads, needed)
        slots = [self.grad_slots[k] for k in self._returned(needed)]
        for k, (i, slot) in enumerate(zip(self.diff_inputs, self.grad_slots)):
            if needed[k]:
                result[i] = unique[slots.index(slot)]
        return tuple(result)

    def _reaches_used(self, i: int, grads: Sequence) -> bool:
        """Whether input ``i`` passes a gradient to an output that got one (``grads``: per
        output, ``None`` where the loss does not read it). As eager's autograd, an input only
        an unread output depends on gets ``None``, not zeros: an optimizer then skips it (no
        weight decay, no moment update). Known only for traced functions
        (:attr:`~Fusion.gradient_inputs`); else every output counts."""
        per_output = self.fusion.gradient_inputs
        if per_output is None:
            return True
        base = self.fusion.views_of.get(i, i)
        return any(grads[o] is not None and (i in ins or base in ins) for o, ins in enumerate(per_output))

    def _returned(self, needed: Sequence[bool]) -> list[int]:
        """Per distinct gradient that an input in ``needed`` (one flag per differentiable input)
        takes, the position among the differentiable inputs of the first such input: the
        gradients the backward operator returns, in order."""
        firsts: dict[int, int] = {}
        for k, slot in enumerate(self.grad_slots):
            if needed[k]:
                firsts.setdefault(slot, k)
        return sorted(firsts.values())

    def _grad_structure(self) -> list[int]:
        """Per differentiable input, the index of its gradient among the distinct ones: inputs
        that receive the very same gradient (``x + residual``) share one tensor, as in eager
        autograd, instead of the backward writing copies (a custom op may not return one
        tensor twice)."""
        if self.backward_fusion is not None:
            outs = list(self.backward_fusion.outputs)
        else:
            try:
                meta = torch.device("meta")
                scalars = tuple(SCALAR_TYPES[s.dtype] for s in self.specs if not s.is_tensor)
                outs = self._joint(scalars)(*self._examples(meta))
            except Exception:  # noqa: BLE001 - an op without a meta kernel: no sharing
                return list(range(len(self.diff_inputs)))
        slots, firsts = [], []
        for g in outs:
            for k, u in enumerate(firsts):
                if u is g:
                    slots.append(k)
                    break
            else:
                slots.append(len(firsts))
                firsts.append(g)
        return slots

    def _register_backward(self):
        n_kept = self.n_outputs if self.backward_fusion is not None else len(self.saved)
        # ``needed``: per differentiable input, whether its gradient is asked for
        # (ctx.needs_input_grad); a derived backward computes those alone (RoPE's cos and sin
        # tables need no gradient: its sums over batch and heads are never run)
        names = self._schema_inputs() + [f"Tensor k{j}" for j in range(n_kept)] + \
            [f"Tensor g{j}" for j in range(len(self.diff_outputs))] + ["bool[] needed"]
        schema = "(" + ", ".join(names) + ") -> Tensor[]"
        n_in = len(self.specs)
        self.grad_slots = self._grad_structure()

        def backward(*args):
            *args, needed = args
            if self.backward_fusion is not None:
                grads = self.backward_fusion.execute(list(args))
            else:
                grads = self._run_derived(list(args[:n_in]), list(args[n_in:n_in + n_kept]), list(args[n_in + n_kept:]),
                                          tuple(needed))
            fresh: list = []
            for k in self._returned(needed):
                g = grads[k]
                if _aliases(g, list(args) + fresh):
                    g = g.clone(memory_format=torch.contiguous_format)
                fresh.append(g.contiguous())
            return fresh

        op = torch.library.custom_op(f"torchfuse::{self.name}_backward", backward, mutates_args=(), schema=schema)

        @op.register_fake
        def _(*args):
            return [torch.empty(args[self.diff_inputs[k]].shape, dtype=args[self.diff_inputs[k]].dtype,
                                device=args[self.diff_inputs[k]].device) for k in self._returned(args[-1])]

        return op

    def _joint(self, scalars: tuple, needed: Sequence[bool] | None = None):
        """``(tensor inputs, saved values, output gradients) -> input gradients``: the
        vector-Jacobian product of the fusion's :attr:`~Fusion.autograd_reference` where it
        has one and draws no random numbers, else of the reference, random values read from
        ``saved``; the gradients of the differentiable inputs flagged in ``needed`` (default
        all), in order."""
        fusion, specs = self.fusion, self.specs
        n_tensors = sum(1 for s in specs if s.is_tensor)
        n_saved = len(self.saved)
        wrt = [i for k, i in enumerate(self.diff_inputs) if needed is None or needed[k]]
        out_values = [fusion.outputs[k] for k in self.diff_outputs]
        program = fusion.autograd_reference if not self.saved else None

        def run(args_: list, kept: Sequence) -> tuple:
            if program is None:
                return tuple(run_reference(fusion, args_, overrides=dict(zip(self.saved, kept)), outputs=out_values))
            outs = program(*[a for i, a in enumerate(args_) if i not in fusion.views_of])
            outs = outs if isinstance(outs, (tuple, list)) else (outs,)
            return tuple(outs[k] for k in self.diff_outputs)

        def joint(*args):
            tensors, kept, grads = args[:n_tensors], args[n_tensors:n_tensors + n_saved], args[n_tensors + n_saved:]
            t_iter, s_iter = iter(tensors), iter(scalars)
            full = [next(t_iter) if s.is_tensor else next(s_iter) for s in specs]

            def f(*diff):
                args_ = list(full)
                for i, d in zip(wrt, diff):
                    args_[i] = d
                return run(args_, kept)

            _, vjp = torch.func.vjp(f, *[full[i] for i in wrt])
            return list(vjp(tuple(grads)))

        return joint

    def _examples(self, device: torch.device, like: Sequence[torch.Tensor] | None = None) -> list[torch.Tensor]:
        """Tensors of the joint's inputs with every size at its representative (distinct
        primes: make_fx gives distinct sizes distinct symbols), or with the sizes of ``like``
        (a call's tensor inputs, saved values and output gradients)."""
        if like is not None:
            return [torch.empty(t.shape, dtype=t.dtype, device=device) for t in like]

        def example(shape, dtype):
            return torch.zeros([self.fusion.sizes.representative(s) for s in shape], dtype=dtype, device=device)

        out = [example(s.shape, s.dtype) for s in self.specs if s.is_tensor]
        out += [example(v.meta.shape, v.meta.dtype) for v in self.saved]
        out += [example(self.fusion.outputs[k].meta.shape, self.fusion.outputs[k].meta.dtype) for k in self.diff_outputs]
        return out

    def _run_derived(self, inputs: list, kept: list, grads: list, needed: tuple) -> list:
        """Per differentiable input, its gradient where ``needed`` flags it, else ``None``."""
        if self.fusion.backward_refusal is not None:
            raise DefinitionError(self.fusion.backward_refusal)
        device = next(x.device for x in inputs if isinstance(x, torch.Tensor))
        scalars = tuple(x for x in inputs if not isinstance(x, torch.Tensor))
        from .trace import value_key

        # (a key of the numbers as they are: 0.0 == -0.0, and 2 == 2.0 == True)
        key = (device.type, device.index, needed, tuple(value_key(x) for x in scalars))
        tensors = [x for x in inputs if isinstance(x, torch.Tensor)]
        like = None
        if self.fusion.views_of:
            # the sizes of argument views are functions of their arguments' (``D // 2``,
            # ``D - 1``) that the fusion's representatives need not satisfy, and the joint reads
            # the arguments and the views' gradients: it is traced at this call's sizes, and
            # serves the calls whose sizes are equal or 1 where these are (make_fx's symbols)
            like = tensors + kept + grads
            key += (_size_pattern(like),)
        sizes = tuple(tuple(t.shape) for t in like) if like is not None else ()

        def find():
            by_size = key in self._by_size
            return self._derived.get(key + sizes if by_size else key), by_size

        program, by_size = find()
        if program is None:
            with TRACING:  # one make_fx trace at a time in the process (see TRACING)
                program, by_size = find()  # (another thread may have derived it meanwhile)
                if program is None:
                    program, by_size = self._derive(device, scalars, like, needed, by_size)
                    if by_size:
                        self._by_size.add(key)
                    self._derived[key + sizes if by_size else key] = program
        try:
            out = program(tensors + kept + grads)
        except ZeroDivisionError:
            # the traced joint divides sizes in Python (a variance's ``N - correction`` of 0),
            # where eager's vector-Jacobian product divides in IEEE arithmetic (inf, then NaN):
            # this call runs the joint eagerly
            out = self._joint(scalars, needed)(*tensors, *kept, *grads)
        computed = iter(out)
        return [next(computed) if n else None for n in needed]

    def _derive(self, device: torch.device, scalars: tuple, like: Sequence[torch.Tensor] | None = None,
                needed: Sequence[bool] | None = None, by_size: bool = False) -> tuple[Any, bool]:
        """Trace the joint into an ATen graph with symbolic sizes and compile it (on CPU
        without the interpreter, run the traced graph); at the sizes of ``like`` where given
        (see :meth:`_examples`), else at the representatives. Returns the program and whether
        it serves only the sizes of ``like``.

        A joint of argument views (``like`` given) that scatters gradients into zeros (the
        backward of ``cat`` of slices, RoPE's ``rotate_half``) is traced again with these
        sizes alone and given the ATen graph passes, whose concatenation rewrites (the
        scatters' sum as a concatenation, a concatenation as a select) need static sizes:
        one kernel with the rest instead of zeros, scatters on ATen and copies. With
        ``by_size`` (an earlier call's joint of this kind) only that trace is made."""
        from torch.fx.experimental.proxy_tensor import make_fx

        from ..decompose import decomposition_table
        from ..ir.from_fx import graph_from_fx
        from ..pipeline import run_aten_passes

        options = self.fusion.options
        joint, examples = self._joint(scalars, needed), self._examples(device, like)
        table = decomposition_table(options.tuning.decompose)
        if not by_size:
            gm = make_fx(joint, decomposition_table=table, tracing_mode="symbolic")(*examples)
            by_size = like is not None and any(n.target is torch.ops.aten.slice_scatter.default
                                               for n in gm.graph.nodes)
        if by_size:
            gm = make_fx(joint, decomposition_table=table, tracing_mode="fake")(*examples)
        if self.fusion.runs_op_by_op(device):
            return (lambda args: gm(*args)), by_size
        if by_size:
            run_aten_passes(gm, options, "backward", {})
        return Program(graph_from_fx(gm, options), options, f"{self.fusion.name}_backward"), by_size

    def num_kernels(self, device: torch.device | str | None = None) -> tuple[int, int | None]:
        """Kernels of the forward and of the backward (``None`` until a derived backward has
        been traced for ``device``); ``device`` defaults to CUDA when available, else CPU."""
        device = torch.device(device or default_device())
        fwd = self.fusion.program(device, self.extras).num_kernels
        if self.backward_fusion is not None:
            return fwd, self.backward_fusion.num_kernels(device)
        index = device.index
        if device.type == "cuda" and index is None:
            index = torch.cuda.current_device()  # "cuda" and "cuda:0" are one device
        programs = [p for k, p in self._derived.items() if k[:2] == (device.type, index)]
        return fwd, (programs[0].num_kernels if programs and isinstance(programs[0], Program) else None)


def _size_pattern(tensors: Sequence[torch.Tensor]) -> tuple:
    """Per dim of ``tensors``, 0 or 1 for those sizes, else the index of the first dim with
    its size: what a make_fx trace at these sizes specializes (0 and 1) and shares (one
    symbol for equal sizes)."""
    seen: list[int] = []
    out = []
    for t in tensors:
        for s in t.shape:
            s = int(s)
            if s in (0, 1):
                out.append(s)
                continue
            if s not in seen:
                seen.append(s)
            out.append(("d", seen.index(s)))
    return tuple(out)


def _aliases(t: torch.Tensor, args: Sequence) -> bool:
    return any(isinstance(x, torch.Tensor) and x.untyped_storage().data_ptr() == t.untyped_storage().data_ptr()
               for x in args)


def _op_name(op: Any) -> str:
    """``torchfuse::name`` of a registered custom op (``CustomOpDef``)."""
    return str(getattr(op, "_qualname", op))


def runs_op_by_op(target: Any, device: torch.device) -> bool:
    """Whether the fused op ``target`` (an overload ``torchfuse::name.default`` in a captured
    graph, forward or backward) runs op by op through ATen on ``device``, as the fusion that
    runs it decides (:meth:`Fusion.runs_op_by_op`). False for an op this process did not
    register."""
    name = getattr(target, "name", None)
    name = name() if callable(name) else None
    fusion = _RUN_BY.get(name.split(".")[0]) if name else None
    return fusion is not None and fusion.runs_op_by_op(device)
