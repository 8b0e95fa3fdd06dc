"""The code writer all kernels share: names, addressing, masks, values and pointwise emission.

Takes a :class:`~torchfuse.segment.FusionGroup` and the code-relevant layout of a call
(:class:`~torchfuse.schedulers.layout.KernelLayout`); a scheduler's ``write_body`` drives a
:class:`KernelWriter` (the kernel body specific to it), and :meth:`KernelWriter.function`
returns the ``@triton.jit`` function's text. The reductions' combines come from its base
:class:`~torchfuse.codegen.reductions.Reductions`.

Naming, as every kernel uses it: inputs ``in<i>``, outputs ``out<i>``, arange results
``ix<i>``, runtime strides ``<tensor>_s<k>``; collapsed kept sizes ``xs<k>`` and reduced sizes
``rs<k>``; ``xindex``/``rindex`` the linear indices of a block, ``xmask``/``rmask``/``xrmask``
their masks. Invariants: a value is computed once per scope (a loop body is a scope of its
own; kept-space values live in the outer one); every load and store is masked; intermediate
values are rounded to the dtype eager stores them in unless ``exact_rounding`` is off.
"""
from __future__ import annotations

import math
import re
from typing import Any

import torch
from torch._prims_common import ELEMENTWISE_TYPE_PROMOTION_KIND as PROMOTE

from ..config import Tuning
from ..domain import Domain
from ..ir.emit import HALF_DTYPES, convert, literal, number_operand, one_element, runtime_number_operand, triton_dtype
from ..ir.graph import Node, Value
from ..ir.ops import REGISTRY
from ..schedulers.layout import KernelLayout, TensorAccess
from .reductions import Reductions, workspace_components, workspace_nodes

#: the names a kernel defines other than through ``KernelWriter.fresh``: the unravelled kept and
#: reduced indices and their quotients (``unravel``), the sizes, tensors, index values and
#: workspaces among its parameters (``params``)
_FIXED_NAME = re.compile(r"(x|r|xq|rq|xs|rs|in|out|ix|ws)\d+")


class KernelWriter(Reductions):
    """Writes one kernel function of a fusion group (one stage of a scheduler's launch).

    Args:
        group: the fusion group.
        layout: the call's code-relevant layout.
        reduce: the kernel works on [XBLOCK, RBLOCK] tiles (every scheduler but pointwise).
        stage, stages: which kernel of the scheduler's launch this is, of how many (1 or 2).
        exact_rounding: round intermediates to their eager dtype (``Options``).
        tuning: the forms of code to write (``Tuning.codegen``, ``pointwise.scalar_loads``).
    """

    def __init__(self, group, layout: KernelLayout, *, reduce: bool, stage: int = 0, stages: int = 1,
                 exact_rounding: bool = True, tuning: Tuning = Tuning()):
        self.tuning = tuning
        #: kernels of a two-stage scheduler take workspaces and ``nsplit``/``rchunk``; the
        #: first (or only) stage's masks fold away when its blocks are full (``xfull``/``rfull``)
        self.two_stage = stages == 2
        #: the offset of the current r block, a multiple of RBLOCK (set with ``rindex``)
        self.r_offset: str | None = None
        self.first_stage = stage == 0
        #: the end of the reduced extent the kernel's loops and masks run to
        self.r_limit = "rnumel"
        #: the first offset of the current loop over the reduced extent (``None``: no loop yet)
        self.loop_start: str | None = None
        #: Welford accumulators whose lane counts ``welford_count`` wrote (with their sum, ``{a}_n``)
        self.welford_totals: set[str] = set()
        self.g = group
        self.dom: Domain = group.domain
        self.layout = layout
        self.exact = exact_rounding
        self.reduce = reduce
        self.lines: list[str] = []
        self.indent = 1
        self.counter = 0
        self.tensors: list[Value] = [v for v in group.inputs if v.meta is not None] + list(group.outputs)
        #: arange results computed in registers: addressed like contiguous tensors (an offset
        #: is the index itself), after the real tensors in ``layout.accesses``
        self.index_values = index_values(group)
        self.access: dict[Value, TensorAccess] = dict(zip(self.tensors + self.index_values, layout.accesses))
        self.pname: dict[Value, str] = {}
        for i, v in enumerate(v for v in group.inputs):
            self.pname[v] = f"in{i}"
        for i, v in enumerate(group.outputs):
            self.pname[v] = f"out{i}"
        for i, v in enumerate(self.index_values):
            self.pname[v] = f"ix{i}"
        self.stride_params: dict[Value, list[str]] = {}
        for t in self.tensors + self.index_values:
            acc = self.access[t]
            names = []
            for k, c in enumerate(acc.x + acc.r):
                if c == "g":
                    names.append(f"{self.pname[t]}_s{k}")
            self.stride_params[t] = names
        # emitted values per scope: name -> (variable, dtype)
        self.scopes: list[dict[Value, tuple[str, torch.dtype]]] = [{}]
        self.producer_of = {o: n for n in group.nodes for o in n.outputs}
        #: ``reduction.inner_outer``: the column-sum nodes paired with the row reductions, and
        #: the values they compute (written by the second kernel)
        self.outer = set(getattr(group, "outer", ()))
        self.outer_values = {o for n in self.outer for o in n.outputs}
        #: persistent row sums reduced together (``sum_batches``), and every member of one
        self._sum_batches: dict | None = None
        self._batched: set = set()
        self._levels: dict | None = None
        #: tile variables that are ``tl.where(cond, a, b)`` with per-row ``a`` and ``b``:
        #: variable -> (cond, a, b) (``Tuning.codegen.sink_selects``)
        self.selects: dict[str, tuple[str, str, str]] = {}
        self._per_element: dict[Value, bool] = {}
        self.workspaces = [(n, comp, dt) for n in workspace_nodes(group) for comp, dt in workspace_components(n)]
        self.random_nodes = [n for n in group.nodes if REGISTRY[n.op].kind == "random"]
        #: selects on index conditions exist only where the group computes indices: only then
        #: a select's branch may be computed, down to its loads, on the lanes that take it
        #: alone (``branch_loads``), from the values read by exactly one in-group node
        self.branch_loads = tuning.codegen.branch_loads and any(n.op == "arange" for n in group.nodes)
        readers: dict[Value, list[Node]] = {}
        for n in group.nodes if self.branch_loads else ():
            for x in n.inputs:
                if isinstance(x, Value) and x.meta is not None:
                    readers.setdefault(x, []).append(n)
        written = set(group.outputs)
        self._only_reader = {x: r[0] for x, r in readers.items() if len(r) == 1 and x not in written}
        #: value -> (mask variable, whether it varies along r, the scope defining it): the lanes
        #: whose select takes the branch ``value`` is computed for
        self.branch_masks: dict[Value, tuple[str, bool, dict]] = {}

    # ------------------------------------------------------------------ text helpers
    def emit(self, line: str) -> None:
        self.lines.append("    " * self.indent + line)

    def fresh(self, prefix: str = "t") -> str:
        """A new variable name, ``prefix`` and a counter.

        Raises:
            ValueError: the name could be one the kernel defines otherwise (its unravelled
                indices ``x0``, ``rq1``, its parameters ``in0``, ``rs2``, ``ix0``, ``ws1``),
                which a later definition would silently overwrite, or which would overwrite
                it: an index read as a value makes addresses out of bounds.
        """
        self.counter += 1
        name = f"{prefix}{self.counter}"
        if _FIXED_NAME.fullmatch(name):
            raise ValueError(f"generated variable {name!r} has the form of a name the kernel defines otherwise")
        return name

    def in_r(self, v: Value) -> bool:
        return self.reduce and v.meta is not None and self.dom.varies_along_reduced(v)

    # ------------------------------------------------------------------ indexing
    def x_offsets(self, t: Value) -> str:
        acc = self.access[t]
        if not acc.x:
            return "0"
        if acc.x_linear and "0" not in acc.x:
            return "xindex"
        return self._offsets(t, acc.x, "x")

    def r_offsets(self, t: Value) -> str:
        acc = self.access[t]
        if not acc.r:
            return "0"
        if acc.r_linear and "0" not in acc.r:
            return "rindex"
        return self._offsets(t, acc.r, "r")

    def _offsets(self, t: Value, classes, prefix: str) -> str:
        terms = []
        gnames = self.stride_params[t]
        # runtime strides are ordered x dims first, then r dims
        gi = sum(1 for c in self.access[t].x if c == "g") if prefix == "r" else 0
        for k, c in enumerate(classes):
            if c == "0":
                continue
            if c == "1":
                terms.append(f"{prefix}{k}")
            else:
                terms.append(f"{prefix}{k} * {gnames[gi]}")
                gi += 1
        return " + ".join(terms) if terms else "0"

    def is_scalar_access(self, t: Value) -> bool:
        acc = self.access[t]
        return all(c == "0" for c in acc.x + acc.r)

    def address(self, t: Value, load: bool = False) -> str:
        xo = self.x_offsets(t)
        if self.in_r(t):
            ro = self.r_offsets(t)
            if load and xo == "0" and ro != "0":
                # a [1, RBLOCK] block (per-row statistics in a column reduction): a pointer
                # broadcast along x would be contiguous along r only, and Triton would give
                # its load a layout of its own and convert the tile to it on every step
                return f"{self.pname[t]} + ({ro})"
            if xo == "0":
                xo = "xindex * 0"
            return f"{self.pname[t]} + ({xo}) + ({ro})"
        if xo == "0":
            xo = "xindex * 0"  # keep the pointer a block of the loop's shape
        return f"{self.pname[t]} + ({xo})"

    def unravel(self, prefix: str, n: int, index: str) -> None:
        if n == 0:
            return
        if n == 1:
            self.emit(f"{prefix}0 = {index}")
            return
        rem = index
        for k in range(n - 1, 0, -1):
            self.emit(f"{prefix}{k} = {rem} % {prefix}s{k}")
            nxt = f"{prefix}q{k}"
            self.emit(f"{nxt} = {rem} // {prefix}s{k}")
            rem = nxt
        self.emit(f"{prefix}0 = {rem}")

    def needs_unravel(self, which: str) -> bool:
        for t in self.tensors + self.index_values:
            acc = self.access[t]
            classes, linear = (acc.x, acc.x_linear) if which == "x" else (acc.r, acc.r_linear)
            if which == "r" and not self.in_r(t):
                continue
            if classes and not (linear and "0" not in classes):
                return True
        return False

    # ------------------------------------------------------------------ values
    def lookup(self, v: Value):
        for scope in reversed(self.scopes):
            if v in scope:
                return scope[v]
        return None

    def define(self, v: Value, var: str, dtype: torch.dtype, outer: bool = False) -> None:
        (self.scopes[0] if outer else self.scopes[-1])[v] = (var, dtype)

    def mask_for(self, v: Value, load: bool = False) -> str:
        if not self.reduce:
            return "xmask"
        if self.in_r(v):
            return "rmask" if load and self.x_offsets(v) == "0" and self.r_offsets(v) != "0" else "xrmask"
        return "xmask"

    def value(self, v: Value) -> tuple[str, torch.dtype]:
        """The variable holding ``v`` in the current scope, emitting its computation if needed."""
        got = self.lookup(v)
        if got is not None:
            return got
        if v.meta is None:  # runtime scalar argument
            return (self.pname[v], _scalar_dtype(v))
        node = self.producer_of.get(v)
        if node is None:  # a group input: load it
            var = self.fresh("ld")
            if not self.reduce and self.tuning.pointwise.scalar_loads and self.is_scalar_access(v):
                # one element for the whole kernel (a 0-d loss scale): a one-element block,
                # so that what is computed from it alone runs once a thread, not once an
                # element (a 0-d load behaves differently under the interpreter)
                self.emit(f"{var} = tl.load({self.pname[v]} + tl.zeros([1], tl.int32))")
                self.define(v, var, v.meta.dtype)
                return var, v.meta.dtype
            # (a value broadcast along every loop dim of a row kernel is loaded as a block of
            # the loop's shape: all lanes read one cached address)
            mask = self.mask_for(v, load=True)
            branch = self.branch_masks.get(v)
            # a branch mask that varies along r only where the load is a tile already (the
            # load's shape stays the one the rest of the kernel expects), and only while the
            # scope that defines it is open (a later loop over r loads the value again)
            if (branch is not None and self._open(branch)
                    and (mask == "xrmask" or (mask == "xmask" and not branch[1]))):
                mask = f"{mask} & {branch[0]}"
            self.emit(f"{var} = tl.load({self.address(v, load=True)}, mask={mask}, other=0)")
            self.define(v, var, v.meta.dtype)
            return var, v.meta.dtype
        self.emit_node(node)
        return self.lookup(v)

    def operand(self, x: Any, dtype: torch.dtype, common: torch.dtype | None = None,
                numbers: str = "compute") -> str | None:
        """``x`` as an operand computed in ``dtype``. A tensor operand of another dtype is first
        cast to the op's ``common`` dtype, as PyTorch's TensorIterator does (an int32 operand
        of an fp16 op is rounded to fp16 before the fp32 arithmetic); a Python number is read
        as the op's ``numbers`` rule says (:func:`torchfuse.ir.emit.number_operand`)."""
        if x is None:
            return None
        if isinstance(x, Value):
            if x.meta is None:  # a number known at run time (a symbolic int): the rule of a constant
                return runtime_number_operand(self.pname[x], dtype, common, numbers)
            return self.cast_operand(*self.value(x), x.meta.dtype, dtype, common)
        return number_operand(x, dtype, common, numbers)

    @staticmethod
    def cast_operand(var: str, dt: torch.dtype, own: torch.dtype, dtype: torch.dtype,
                     common: torch.dtype | None) -> str:
        """Variable ``var``, held as ``dt``, of a tensor of dtype ``own``, as an operand computed
        in ``dtype`` (see ``operand``). The cast to ``common`` goes by the tensor's own dtype,
        not the one it is held in: a value ``exact_rounding=False`` keeps in fp32 is its own
        dtype held wider, and is not rounded to it."""
        if common is not None and own != common and common != dtype:
            var, dt = convert(var, dt, common), common
        return convert(var, dt, dtype)

    def args_of(self, node: Node, compute: torch.dtype, sub: dict | None = None) -> list[str]:
        """The operands of pointwise ``node`` as Triton expressions in ``compute`` (those its op
        does not promote as they are, a ``where``'s condition as bool); ``sub`` maps operands
        to ``(variable, dtype)`` used in place of their values."""
        opdef = REGISTRY[node.op]
        common = node.attrs.get("common_dtype")
        args = []
        for i, x in enumerate(node.inputs):
            if not (isinstance(x, Value) and x.meta is not None):
                rule = opdef.numbers(i, node.attrs) if callable(opdef.numbers) else opdef.numbers
                args.append(self.operand(x, compute, common, rule))  # a literal or a runtime scalar
                continue
            var, dt = sub[x] if sub and x in sub else self.value(x)
            if i == opdef.host_scalar and common in HALF_DTYPES and x.meta.dtype != common and one_element(x):
                # each device's kernels read it their way (OpDef.host_scalar); the kernel picks
                gpu = self.cast_operand(var, dt, x.meta.dtype, compute, common)
                args.append(f"tf_by_device({gpu}, {convert(var, dt, compute)})")
            elif i == opdef.unrounded_scalar and common in HALF_DTYPES and x.meta.dtype != common and one_element(x):
                args.append(convert(var, dt, compute))  # a Scalar argument's value (OpDef.unrounded_scalar)
            elif opdef.promoted is None or i in opdef.promoted:
                args.append(self.cast_operand(var, dt, x.meta.dtype, compute, common))
            else:
                args.append(convert(var, dt, torch.bool) if node.op == "where" and i == 0 else var)
        return args

    def per_element(self, v: Value) -> bool:
        """Whether ``v`` can differ between the elements of one row of the tile: it lives in
        the [x, r] space and depends on a load, index or random value that does (a per-row
        value expanded along the row does not)."""
        got = self._per_element.get(v)
        if got is None:
            node = self.producer_of.get(v)
            if not self.in_r(v):
                got = False
            elif node is None or node.op == "arange" or REGISTRY[node.op].kind == "random":
                got = True
            elif REGISTRY[node.op].kind == "reduction":
                got = False
            else:
                got = any(isinstance(x, Value) and x.meta is not None and self.per_element(x) for x in node.inputs)
            self._per_element[v] = got
        return got

    def select_operands(self, node: Node):
        """``(cond, a, b)`` when pointwise ``node`` varies along the row and every operand that
        does is a select ``where(cond, ., .)`` between per-row values on one ``cond`` (see
        ``Tuning.codegen.sink_selects``): ``a`` and ``b`` map those operands to their branches as
        ``(variable, dtype)``. Else None."""
        if not (self.tuning.codegen.sink_selects and self.reduce and self.per_element(node.output)):
            return None
        cond, a, b = None, {}, {}
        for x in node.inputs:
            if not isinstance(x, Value) or x.meta is None or not self.per_element(x):
                continue
            var, dt = self.value(x)
            sel = self.selects.get(var)
            if sel is None or (cond is not None and sel[0] != cond):
                return None
            cond, a[x], b[x] = sel[0], (sel[1], dt), (sel[2], dt)
        return None if cond is None else (cond, a, b)

    def emit_node(self, node: Node) -> None:
        opdef = REGISTRY[node.op]
        if self.branch_loads and opdef.kind in ("layout", "pointwise"):
            self.mask_branches(node)
        if opdef.kind == "layout":
            var, dt = self.value(node.inputs[0])
            self.define(node.output, var, dt)
            return
        if node.op == "arange":
            self.emit_arange(node)
            return
        if opdef.kind == "constant":
            out = node.output
            var = self.fresh()
            self.emit(f"{var} = {literal(node.attrs['value'], out.meta.dtype)}")
            self.define(out, var, out.meta.dtype, outer=True)
            return
        if opdef.kind == "random":
            self.emit_random(node)
            return
        if opdef.kind == "reduction":
            raise AssertionError("reductions are emitted by the pass structure")
        out = node.output
        compute = node.attrs.get("compute_dtype")
        if compute is None:
            src = node.inputs[0]
            compute = src.meta.dtype if isinstance(src, Value) and src.meta is not None else out.meta.dtype
        result_dtype = torch.bool if _is_bool_result(node) else compute
        target = out.meta.dtype
        keep_wide = (not self.exact and result_dtype.is_floating_point and target in (torch.float16, torch.bfloat16)
                     and result_dtype == torch.float32)
        final = result_dtype if keep_wide else target

        def expression(args: list[str]) -> str:
            expr = opdef.emit(args, compute, node.attrs)
            if node.op == "exp" and compute == torch.float32 and self.flushable_exp(node):
                expr = f"tf_exp_ftz({args[0]})"
            return convert(expr, result_dtype, final)

        for x in node.inputs:  # operands first, in order
            if isinstance(x, Value) and x.meta is not None:
                self.value(x)
        sel = self.select_operands(node)
        if sel is not None:  # computed on the per-row branches, selected once (sink_selects)
            cond, branches = sel[0], []
            for sub in sel[1:]:
                expr = expression(self.args_of(node, compute, sub))
                branches.append(self.fresh())
                self.emit(f"{branches[-1]} = {expr}")
            var = self.fresh()
            self.emit(f"{var} = tl.where({cond}, {branches[0]}, {branches[1]})")
            self.selects[var] = (cond, *branches)
            self.define(out, var, final)
            return
        args = self.args_of(node, compute)
        var = self.fresh()
        self.emit(f"{var} = {expression(args)}")
        self.define(out, var, final)
        if (self.tuning.codegen.sink_selects and node.op == "where" and self.reduce and self.per_element(node.inputs[0])
                and not any(isinstance(x, Value) and x.meta is not None and self.per_element(x)
                            for x in node.inputs[1:])):
            # a select between per-row values: its branches, for the ops that read it
            branches = []
            for arg in args[1:]:
                branches.append(self.fresh())
                self.emit(f"{branches[-1]} = {convert(arg, result_dtype, final)}")
            self.selects[var] = (args[0], *branches)

    def mask_branches(self, node: Node) -> None:
        """Before pointwise ``node``'s operands are emitted: where ``node`` is a select on a
        condition computed from indices alone (a concatenation's ``i == k``,
        :func:`~torchfuse.passes.concat.equal_cats_as_selects`), each branch it alone reads is
        computed, down to its loads, only on the lanes that take it; an op ``node`` alone reads,
        inside such a branch, inherits the branch's lanes. The other lanes load nothing and
        their values are never selected, so each input of a concatenation is read once
        (``Tuning.codegen.branch_loads``). Selects on loaded data (a ReLU's backward) are left
        alone: their branches change from element to element, and masks would save no memory
        traffic."""
        inherited = self.branch_masks.get(node.output)
        targets = [(i, x) for i, x in enumerate(node.inputs) if self._inherits(x, node)]
        if not targets:
            return
        if node.op == "where" and self._from_indices(node.inputs[0]):
            var, dt = self.value(node.inputs[0])
            pick = self.fresh("pick")
            self.emit(f"{pick} = {convert(var, dt, torch.bool)}")
            along_r = self.reduce and self.in_r(node.inputs[0])
            for i, x in targets:
                if i == 0:
                    continue
                cond = pick if i == 1 else f"({pick} == 0)"
                in_r = along_r
                if inherited is not None and self._open(inherited):
                    cond, in_r = f"{inherited[0]} & {cond}", in_r or inherited[1]
                name = self.fresh("lanes")
                self.emit(f"{name} = {cond}")
                self.branch_masks[x] = (name, in_r, self.scopes[-1])
        elif inherited is not None:
            for _, x in targets:
                self.branch_masks[x] = inherited

    def _open(self, branch: tuple) -> bool:
        """Whether the scope that defines a branch mask is open where code is emitted now."""
        return any(branch[2] is scope for scope in self.scopes)

    def _inherits(self, x: Any, node: Node) -> bool:
        """Whether operand ``x`` of ``node`` may be computed on ``node``'s lanes alone: only
        ``node`` reads it, it is not computed yet, and it is a load or a pointwise or layout
        op's result (never a reduction's, which needs every lane)."""
        if not (isinstance(x, Value) and x.meta is not None) or self._only_reader.get(x) is not node:
            return False
        if self.lookup(x) is not None:
            return False
        producer = self.producer_of.get(x)
        return producer is None or REGISTRY[producer.op].kind in ("pointwise", "layout")

    def _from_indices(self, v: Any) -> bool:
        """Whether ``v`` is computed from loop indices (``arange``) and constants alone."""
        if not isinstance(v, Value) or v.meta is None:
            return not isinstance(v, Value)
        node = self.producer_of.get(v)
        if node is None:
            return False
        kind = REGISTRY[node.op].kind
        if node.op == "arange" or kind == "constant":
            return True
        return kind in ("pointwise", "layout") and all(self._from_indices(x) for x in node.inputs)

    def emit_arange(self, node: Node) -> None:
        """``start + step * i`` where ``i`` is the element's index: the offset of a contiguous
        1-D tensor, which layout analysis keeps as a loop dim of its own."""
        out = node.output
        offsets = [o for o in (self.x_offsets(out), self.r_offsets(out) if self.in_r(out) else "0") if o != "0"]
        var = self.fresh("idx")
        start, step = node.attrs["start"], node.attrs["step"]
        if not offsets:  # one element
            self.emit(f"{var} = tl.full([], {start}, {triton_dtype(out.meta.dtype)})")
        else:
            expr = f"({' + '.join(offsets)}).to(tl.int64)"
            expr = expr if step == 1 else f"{expr} * {step}"
            expr = expr if start == 0 else f"{expr} + {start}"
            self.emit(f"{var} = {convert(f'({expr})', torch.int64, out.meta.dtype)}")
        self.define(out, var, out.meta.dtype)

    def emit_random(self, node: Node) -> None:
        """Philox random numbers keyed by (seed + k, linear position in the iteration space);
        with ``Tuning.codegen.philox_four``, four numbers per Philox call (:meth:`random_by_fours`)."""
        out = node.output
        k = self.random_nodes.index(node)
        var = self.fresh("rnd")
        dt = out.meta.dtype
        if dt == torch.float64:
            self.random_fp64(node, k, var)
            return
        if self.tuning.codegen.philox_four:
            self.random_by_fours(node, k, var)
        else:
            self.emit(f"{var} = tl.{'randn' if node.op == 'randn' else 'rand'}(seed + {k}, {self.random_position(out)})")
        if node.op != "randn":
            if node.op == "bernoulli":
                self.emit(f"{var} = ({var} < {node.attrs['p']!r}).to(tl.float32)")
            elif dt in (torch.float16, torch.bfloat16):
                # keep [0, 1): the largest value below 1 in the narrow dtype, exactly representable
                below_one = 1.0 - (2.0 ** -11 if dt == torch.float16 else 2.0 ** -8)
                self.emit(f"{var} = tl.minimum({var}, {below_one!r})")
        final = self.fresh()
        self.emit(f"{final} = {convert(var, torch.float32, dt)}")
        self.define(out, final, dt)

    def random_position(self, out: Value) -> str:
        """The linear position of each element of random value ``out`` in the kernel's iteration
        space: its Philox counter, whatever the block sizes."""
        return "(xindex * rnumel + rindex)" if self.reduce and self.in_r(out) else "xindex"

    def random_fp64(self, node: Node, k: int, var: str) -> None:
        """fp64 random numbers with 53 random bits, as eager's fp64 draws have
        (``curand_uniform2_double`` on a GPU): one Philox call per element
        (``tl.randint4x``); its first two 32-bit outputs give a uniform number in [0, 1) (27
        and 26 of their bits, times 2**-53), ``randn`` takes a second one from the other two
        and transforms the pair by Box-Muller in fp64, and ``bernoulli`` compares the first
        with ``p`` in fp64. (An fp32 draw cast to fp64 has 24 random bits, so ``bernoulli``
        with ``p`` below 2**-24 would keep only where the draw is exactly 0.)"""
        parts = [f"{var}_{i}" for i in range(4)]
        self.emit(f"{', '.join(parts)} = tl.randint4x(seed + {k}, {self.random_position(node.output)})")

        def uniform(hi: str, lo: str) -> str:
            return f"((({hi} >> 5).to(tl.float64) * 67108864.0 + ({lo} >> 6).to(tl.float64)) * {2.0 ** -53!r})"

        self.emit(f"{var} = {uniform(parts[0], parts[1])}")
        if node.op == "randn":
            self.emit(f"{var} = tl.sqrt(-2.0 * tl.log(1.0 - {var})) * tl.cos({2 * math.pi!r} * {uniform(parts[2], parts[3])})")
        elif node.op == "bernoulli":
            self.emit(f"{var} = ({var} < {node.attrs['p']!r}).to(tl.float64)")
        self.define(node.output, var, torch.float64)

    def random_by_fours(self, node: Node, k: int, var: str) -> None:
        """Four random numbers per Philox call (``Tuning.codegen.philox_four``), as PyTorch's
        CUDA kernels draw them (``curand_uniform4``), where ``tl.rand`` computes all four
        outputs (ten rounds) and keeps one.

        The number at position ``p`` of the iteration space is component ``p % 4`` of
        ``tl.rand4x`` (``tl.randn4x``) for counter ``p // 4``. In a reduction kernel
        ``p = x * rpad + r``, rows padded to a multiple of four, so each aligned run of four
        columns shares one call whatever the row length. A block whose last dim (``XBLOCK`` in a
        pointwise kernel, ``RBLOCK`` in a reduction; its offset a multiple of the block) has at
        least four elements, and which gives every thread of the program four or more, draws a
        quarter-size tile of calls and interleaves the four results (``tf_interleave4``, a
        reshape); another block, or a number that varies along ``x`` alone, draws its
        counter's four per element and keeps its component. Both forms give the same number at
        each position, whatever the launch configuration."""
        fn = "tl.randn4x" if node.op == "randn" else "tl.rand4x"
        parts = [self.fresh("r4_") for _ in range(4)]
        draws = ", ".join(parts)

        def per_element(pos: str) -> None:
            lane = self.fresh("lane")
            self.emit(f"{draws} = {fn}(seed + {k}, ({pos}) // 4)")
            self.emit(f"{lane} = ({pos}) % 4")
            self.emit(f"{var} = tl.where({lane} == 0, {parts[0]}, tl.where({lane} == 1, {parts[1]}, "
                      f"tl.where({lane} == 2, {parts[2]}, {parts[3]})))")

        if not self.reduce:
            quarters, pos, shape = "XBLOCK // 4", "xindex", "[XBLOCK]"
            quarter = "xoffset // 4 + tl.arange(0, XBLOCK // 4)"
        elif self.in_r(node.output):
            rpad = self.fresh("rpad")
            self.emit(f"{rpad} = (rnumel + 3) // 4 * 4")
            quarters, shape = "XBLOCK * (RBLOCK // 4)", "[XBLOCK, RBLOCK]"
            pos = f"xindex.to(tl.int64) * {rpad} + rindex"
            quarter = (f"xindex.to(tl.int64) * ({rpad} // 4) + ({self.r_offset}) // 4"
                       f" + tl.arange(0, RBLOCK // 4)[None, :]") if self.r_offset is not None else None
        else:
            quarters, quarter, pos = None, None, "xindex"
        if quarter is None:
            per_element(pos)
            return
        # the tiled form where every thread holds at least four elements (a block's last dim of
        # four or more): the interleave then stays in registers (see the helpers' comment)
        self.emit(f"if {quarters} >= tf_threads():")
        self.indent += 1
        self.emit(f"{draws} = {fn}(seed + {k}, {quarter})")
        self.emit(f"{var} = tl.reshape(tf_interleave4({draws}), {shape})")
        self.indent -= 1
        self.emit("else:")
        self.indent += 1
        per_element(pos)
        self.indent -= 1

    # ------------------------------------------------------------------ stores
    def store(self, out: Value) -> None:
        var, dt = self.value(out)
        self.emit(f"tl.store({self.address(out)}, {convert(var, dt, out.meta.dtype)}, mask={self.mask_for(out)})")

    @property
    def index_type(self) -> str:
        return "tl.int64" if self.layout.index64 else "tl.int32"

    @property
    def index_sentinel(self) -> str:
        """The largest index of :attr:`index_type`: what masked lanes hold where the smallest
        index is taken (argmax's first index), above every index of a row."""
        return "9223372036854775807" if self.layout.index64 else "2147483647"

    # ------------------------------------------------------------------ whole kernels
    def params(self) -> list[str]:
        params = [self.pname[v] for v in self.g.inputs] + [self.pname[v] for v in self.g.outputs]
        if self.two_stage:
            params += [f"ws{k}" for k in range(len(self.workspaces))]
        params += [f"xs{k}" for k in range(self.layout.n_x)] + [f"rs{k}" for k in range(self.layout.n_r)]
        for t in self.tensors + self.index_values:
            params += self.stride_params[t]
        params += ["xnumel", "rnumel", "xfull", "rfull"]  # 1: every block is full (see emit_x_block)
        if self.two_stage:
            params += ["nsplit", "rchunk"]
        if self.random_nodes:
            params += ["seed_ptr"]
        return params

    def emit_x_block(self, pid: str) -> None:
        """The kept-space indices and mask of block ``pid`` (a column ``[XBLOCK, 1]`` in
        reduction kernels).

        The mask of a kernel's first (or only) stage is or-ed with ``xfull == 1``
        (``Tuning.codegen.all_true_masks``): the caller passes 1 when every block of that stage is full, which
        Triton compiles as a constant, and the mask and every select and predicate built on it
        fold away."""
        self.emit(f"xoffset = {pid} * XBLOCK")
        self.emit(f"xindex = xoffset + tl.arange(0, XBLOCK){'[:, None]' if self.reduce else ''}")
        full = self.tuning.codegen.all_true_masks and self.first_stage
        if full:
            self.emit("# xfull, rfull: 1 when every block is full; Triton then compiles them as constants and")
            self.emit("# the masks, with the selects and predicates built on them, fold away (ALL_TRUE_MASKS)")
        self.emit("xmask = (xindex < xnumel) | (xfull == 1)" if full else "xmask = xindex < xnumel")
        if self.needs_unravel("x"):
            self.unravel("x", self.layout.n_x, "xindex")

    def r_prologue(self, offset: str) -> None:
        self.r_offset = offset  # a multiple of RBLOCK (random_by_fours relies on it)
        ridx = f"{offset} + tl.arange(0, RBLOCK)[None, :]"
        if self.layout.index64:
            # widen before adding: an offset past 2**31 - 1 (a loop over a longer row) must not
            # meet an int32 arange (Triton's interpreter holds the loop's offset as a Python int)
            ridx = f"{offset} + tl.arange(0, RBLOCK)[None, :].to(tl.int64)"
        self.emit(f"rindex = {ridx}")
        if self.tuning.codegen.all_true_masks and self.first_stage and self.r_limit == "rnumel" and (
                offset == "0" or self.loop_start == "0"):
            # blocks from 0 to rnumel: ``rfull`` is 1 when RBLOCK divides rnumel (see emit_x_block)
            self.emit("rmask = (rindex < rnumel) | (rfull == 1)")
        else:
            self.emit(f"rmask = rindex < {self.r_limit}")
        self.emit("xrmask = xmask & rmask")
        if self.needs_unravel("r"):
            self.unravel("r", self.layout.n_r, "rindex")

    def program_id(self, axis: int = 0) -> str:
        """``tl.program_id(axis)``, 64-bit when offsets may pass 2**31 - 1."""
        return f"tl.program_id({axis}).to(tl.int64)" if self.layout.index64 else f"tl.program_id({axis})"

    def function(self, name: str) -> str:
        """The ``@triton.jit`` function ``name`` holding the lines emitted so far."""
        # the seed is read from device memory, where the graph's call drew it from PyTorch's
        # generator: a CUDA graph replay then draws new numbers (the generator's graph-safe offset)
        prologue = ["    seed = tl.load(seed_ptr)"] if self.random_nodes else []
        body = "\n".join(prologue + self.lines)
        sig = ", ".join(self.params() + ["XBLOCK: tl.constexpr", "RBLOCK: tl.constexpr"])
        return f"@triton.jit\ndef {name}({sig}):\n{body}\n"


def _scalar_dtype(v: Value) -> torch.dtype:
    ex = v.example
    if isinstance(ex, (bool,)):
        return torch.bool
    if isinstance(ex, (torch.SymFloat, float)):
        return torch.float32
    return torch.int64


def _is_bool_result(node: Node) -> bool:
    return REGISTRY[node.op].promotion is PROMOTE.ALWAYS_BOOL


def index_values(group) -> list[Value]:
    """The results of the group's ``arange`` nodes that it does not write: computed from loop
    indices, and laid out (``schedulers.layout.analyze``) as contiguous tensors after the
    group's inputs and outputs."""
    return [n.output for n in group.nodes if n.op == "arange" and n.output not in group.outputs]
