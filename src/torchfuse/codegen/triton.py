"""Triton source generation for one fusion group.

Takes a :class:`~torchfuse.segment.FusionGroup`, the code-relevant layout of a call
(:class:`~torchfuse.schedulers.layout.KernelLayout`) and the scheduler kind; returns a
:class:`KernelSource`: the text of a Python module holding one Triton kernel and the helpers
it calls, and the order of the kernel's arguments.

Kernel shapes:

* ``pointwise``: a flat loop; program ``p`` handles kept elements
  ``[p*XBLOCK, (p+1)*XBLOCK)``.
* ``reduction.persistent``: program ``p`` handles XBLOCK rows; the whole reduced extent is one
  RBLOCK-wide tile, loaded once; the group's reductions and outputs all work on it.
* ``reduction.loop``: reductions that depend on earlier reductions run in later loops over
  the reduced extent (softmax: max, then sum of exponentials, then the output), values that
  vary along the reduced dims are recomputed in each loop that needs them, and outputs are
  written in the first loop after everything they need is known.

Every generated module is self-contained text (no pickles): the cache stores it as is, and
``TORCHFUSE_DUMP_DIR`` writes it out for reading.
"""
from __future__ import annotations

import dataclasses
import hashlib
import re
from typing import Any

import torch

from ..domain import Domain
from ..ir.graph import Node, Value
from torch._prims_common import ELEMENTWISE_TYPE_PROMOTION_KIND as PROMOTE

from ..ir.ops import REDUCTIONS, REGISTRY, Unsupported, literal, number_operand, triton_dtype
from ..config import Tuning
from ..schedulers import TWO_STAGE
from ..schedulers.layout import KernelLayout, TensorAccess
from . import helpers

#: The text every kernel module starts with, and the helpers only the kernels that call one of
#: them carry (:mod:`torchfuse.codegen.helpers`, read from its source).
HEADER = helpers.kernel_header()
HEADER_ON_DEMAND = helpers.helpers_on_demand()
ON_DEMAND = helpers.ON_DEMAND
HELPERS = helpers.HELPERS
HOST_VARIANTS = helpers.HOST_VARIANTS

_FIRST_STAGE = ("single", "partial", "inner_outer")
@dataclasses.dataclass(frozen=True)
class KernelSource:
    """A generated kernel.

    Attributes:
        name: the kernel function's name (also what profilers show).
        text: the module source.
        key: SHA-256 of ``text``: the kernel cache key (the source fixes everything the
            compiled code depends on, and nothing else).
        params: the kernels' runtime parameter names in order (constexprs excluded); every
            stage takes the same parameters.
        stages: the kernel functions to launch, in order.
    """

    name: str
    text: str
    key: str
    params: tuple[str, ...]
    stages: tuple[str, ...] = ()


def _acc_dtype(dtype: torch.dtype) -> torch.dtype:
    return torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype


def convert(expr: str, src: torch.dtype, dst: torch.dtype) -> str:
    """Triton expression converting ``expr`` from ``src`` to ``dst`` as PyTorch casts."""
    if src == dst:
        return expr
    if dst == torch.bool:
        return f"({expr} != 0)"
    return f"{expr}.to({triton_dtype(dst)})"


class _Writer:
    def __init__(self, group, layout: KernelLayout, scheduler: str, exact_rounding: bool, mode: str = "single",
                 tuning: Tuning = Tuning()):
        self.tuning = tuning
        self.mode = mode  # "single", or the "partial" / "finish" kernel of a split reduction
        self.r_limit = "rnumel"
        self.g = group
        self.dom: Domain = group.domain
        self.layout = layout
        self.scheduler = scheduler
        self.exact = exact_rounding
        self.reduce = scheduler != "pointwise"
        self.loop = scheduler == "reduction.loop"
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

    # ------------------------------------------------------------------ text helpers
    def emit(self, line: str) -> None:
        self.lines.append("    " * self.indent + line)

    def fresh(self, prefix: str = "t") -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"

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
            self.emit(f"{var} = tl.load({self.address(v, load=True)}, mask={self.mask_for(v, load=True)}, other=0)")
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
            if x.meta is None:
                return f"tl.full([], {self.pname[x]}, {triton_dtype(dtype)})" if dtype != torch.bool else f"({self.pname[x]} != 0)"
            return self.cast_operand(*self.value(x), dtype, common)
        return number_operand(x, dtype, common, numbers)

    @staticmethod
    def cast_operand(var: str, dt: torch.dtype, dtype: torch.dtype, common: torch.dtype | None) -> str:
        """Variable ``var`` of dtype ``dt`` as an operand computed in ``dtype`` (see ``operand``)."""
        if common is not None and dt != common and common != dtype:
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
            if opdef.promoted is None or i in opdef.promoted:
                args.append(self.cast_operand(var, dt, compute, common))
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
        """Philox random numbers keyed by (seed + k, linear position in the iteration space)."""
        out = node.output
        k = self.random_nodes.index(node)
        if not self.reduce:
            lin = "xindex"
        elif self.in_r(out):
            lin = "(xindex * rnumel + rindex)"
        else:
            lin = "xindex"
        var = self.fresh("rnd")
        dt = out.meta.dtype
        if node.op == "randn":
            self.emit(f"{var} = tl.randn(seed + {k}, {lin})")
        else:
            self.emit(f"{var} = tl.rand(seed + {k}, {lin})")
            if node.op == "bernoulli":
                self.emit(f"{var} = ({var} < {node.attrs['p']!r}).to(tl.float32)")
            elif dt in (torch.float16, torch.bfloat16):
                # keep [0, 1): the largest value below 1 in the narrow dtype, exactly representable
                below_one = 1.0 - (2.0 ** -11 if dt == torch.float16 else 2.0 ** -8)
                self.emit(f"{var} = tl.minimum({var}, {below_one!r})")
        final = self.fresh()
        self.emit(f"{final} = {convert(var, torch.float32, dt)}")
        self.define(out, final, dt)

    # ------------------------------------------------------------------ reductions
    def reduction_nodes(self) -> list[Node]:
        return [n for n in self.g.nodes if REGISTRY[n.op].kind == "reduction"]

    def deps(self, v: Value, memo: dict) -> set[Node]:
        """Reduction nodes that ``v`` depends on (inside the group)."""
        if v in memo:
            return memo[v]
        node = self.producer_of.get(v)
        out: set[Node] = set()
        if node is not None:
            if REGISTRY[node.op].kind == "reduction":
                out.add(node)
            for x in node.inputs:
                if isinstance(x, Value):
                    out |= self.deps(x, memo)
        memo[v] = out
        return out

    def levels(self) -> dict[Node, int]:
        """Each reduction's dependency level: 1 plus the highest level among the reductions
        its input reads (1 when none). Computed once per kernel (the loop writer, the sum
        batches and the persistent order all use it)."""
        if self._levels is None:
            memo: dict = {}
            lv: dict[Node, int] = {}
            for n in self.reduction_nodes():
                below = self.deps(n.inputs[0], memo)
                lv[n] = 1 + max((lv[b] for b in below), default=0)
            self._levels = lv
        return self._levels

    def _max_shift(self, d, guarded: bool = False):
        """``(u, max node)`` when ``d`` is ``u - m`` with ``m = max(u)`` a row max in this
        kernel, else None. ``guarded`` also takes ``m = where(abs(M) == inf, 0, M)``, the max
        as logsumexp's decomposition guards it."""
        pd = self.producer_of.get(d) if isinstance(d, Value) else None
        if pd is None or pd.op != "sub" or pd.attrs.get("alpha", 1) != 1 or len(pd.inputs) != 2:
            return None
        u, m = pd.inputs
        pg = self.producer_of.get(m) if guarded and isinstance(m, Value) else None
        if pg is not None and pg.op == "where" and self._is_zero(pg.inputs[1]) and isinstance(pg.inputs[2], Value):
            pc = self.producer_of.get(pg.inputs[0]) if isinstance(pg.inputs[0], Value) else None
            pa = self.producer_of.get(pc.inputs[0]) if pc is not None and pc.op == "eq" else None
            if pa is not None and pa.op == "abs" and pa.inputs[0] is pg.inputs[2] and pc.inputs[1] == float("inf"):
                m = pg.inputs[2]
        pm = self.producer_of.get(m) if isinstance(m, Value) else None
        if pm is None or pm.op not in REDUCTIONS or REDUCTIONS[pm.op].combine != "max" or pm.inputs[0] is not u:
            return None
        return u, pm

    def flushable_exp(self, node: Node) -> bool:
        """Whether exp ``node`` may flush results below 2**-126 to zero
        (``Tuning.codegen.flush_summed_exp``):
        its argument is ``u - m`` with ``m`` a row max of ``u`` in this kernel (or that max with
        an infinite one replaced by 0, as logsumexp's decomposition guards it), and it is read
        only by row sums in this kernel (not written, not read by anything else). A row's max
        term is then exp(0) = 1, and terms below 2**-126 leave such a sum unchanged. A row of
        -inf or NaN values gives NaN arguments, which both forms keep; with the guard, a row of
        -inf gives exact zeros and one with +inf an infinite or NaN sum either way."""
        if not self.tuning.codegen.flush_summed_exp or not self.reduce or node.output in self.g.outputs:
            return False
        shift = self._max_shift(node.inputs[0], guarded=True)
        if shift is None or shift[1] in self.outer:
            return False
        readers = [n for n in self.g.nodes if node.output in n.inputs]
        return bool(readers) and all(
            n.op in REDUCTIONS and REDUCTIONS[n.op].combine == "sum" and not REDUCTIONS[n.op].mean
            and n not in self.outer for n in readers)

    def _is_zero(self, v) -> bool:
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            return v == 0
        p = self.producer_of.get(v) if isinstance(v, Value) else None
        return p is not None and p.op == "scalar_tensor" and p.attrs.get("value") == 0

    def reduce_input(self, node: Node) -> tuple[str, torch.dtype]:
        info = REDUCTIONS[node.op]
        src = node.inputs[0]
        var, dt = self.value(src)
        out_dtype = node.outputs[0].meta.dtype if info.combine not in ("argmax", "argmin") else src.meta.dtype
        if info.combine in ("sum", "prod"):
            acc = _acc_dtype(out_dtype)
        elif info.combine in ("max", "min", "argmax", "argmin"):
            acc = _acc_dtype(src.meta.dtype)
            if acc == torch.bool:
                acc = torch.int8
        elif info.combine == "welford":
            acc = _acc_dtype(out_dtype)
        else:
            acc = torch.int8
        if info.combine in ("any", "all"):
            return f"({convert(var, dt, torch.bool)}).to(tl.int8)", torch.int8
        return convert(var, dt, acc), acc

    def identity(self, combine: str, dtype: torch.dtype) -> str:
        if combine in ("sum", "welford"):
            return literal(0, dtype)
        if combine == "prod":
            return literal(1, dtype)
        if combine in ("max", "argmax"):
            return "float('-inf')" if dtype.is_floating_point else literal(torch.iinfo(dtype).min, dtype)
        if combine in ("min", "argmin"):
            return "float('inf')" if dtype.is_floating_point else literal(torch.iinfo(dtype).max, dtype)
        if combine == "any":
            return "0"
        if combine == "all":
            return "1"
        raise AssertionError(combine)

    # Reductions are written with tl.sum / tl.max / tl.min over the r axis wherever possible:
    # those lower to Triton's fast tree reductions on a GPU and to NumPy in the interpreter.
    # First-index ties (torch.argmax) and Welford's combine are expressed with extra such
    # reductions instead of custom combine functions; NaN-propagating max and min use a combine
    # on a GPU (tf_row_max, one reduction) and two NumPy reductions in the interpreter.

    def max_nan(self, src: str, c: str, dtype: torch.dtype) -> str:
        """Row max (c="max") or min of the [XBLOCK, RBLOCK] tile ``src``, NaN-propagating."""
        res = self.fresh("mx")
        top = c in ("max", "argmax")
        if dtype.is_floating_point:
            self.emit(f"{res} = {'tf_row_max' if top else 'tf_row_min'}({src})")
        else:
            self.emit(f"{res} = {'tl.max' if top else 'tl.min'}({src}, 1)[:, None]")
        return res

    def first_index(self, vals: str, idxs: str, best: str) -> str:
        """Smallest index among lanes whose value equals ``best`` (NaN matching NaN)."""
        res = self.fresh("ix")
        self.emit(f"{res} = tl.min(tl.where(({vals} == {best}) | (({vals} != {vals}) & ({best} != {best})), "
                  f"{idxs}, 2147483647), 1)[:, None]")
        return res

    def sum_batches(self) -> dict[Node, list[Node]]:
        """Persistent row sums reduced together (``Tuning.codegen.batch_row_sums``): per batch, its first node
        in graph order mapped to its members (two or three fp32-accumulated sums at one
        dependency level, so none reads another's result; column sums of an inner-outer group
        excluded). Computed once per kernel."""
        if self._sum_batches is None:
            self._sum_batches = {}
            if self.tuning.codegen.batch_row_sums:
                lv = self.levels()
                by_level: dict[int, list[Node]] = {}
                for n in self.reduction_nodes():
                    if (n not in self.outer and REDUCTIONS[n.op].combine == "sum"
                            and _acc_dtype(n.outputs[0].meta.dtype) == torch.float32):
                        by_level.setdefault(lv[n], []).append(n)
                for nodes in by_level.values():
                    while len(nodes) >= 2:  # threes, and pairs where a three would leave one alone
                        take = 3 if len(nodes) in (3, 5) or len(nodes) > 5 else 2
                        self._sum_batches[nodes[0]] = nodes[:take]
                        self._batched.update(nodes[:take])
                        nodes = nodes[take:]
        return self._sum_batches

    def persistent_order(self) -> list[Node]:
        """The reductions a persistent kernel emits (an inner-outer group's column sums
        excepted), in graph order, or with ``batch_row_sums`` by dependency level first: a
        batch of sums is emitted where its first member is, and every reduction its members
        read is at a lower level, so already emitted."""
        nodes = [n for n in self.reduction_nodes() if n not in self.outer]
        if not self.tuning.codegen.batch_row_sums:
            return nodes
        lv = self.levels()
        return sorted(nodes, key=lambda n: lv[n])  # stable: graph order within a level

    def emit_persistent_reduction(self, node: Node) -> None:
        info = REDUCTIONS[node.op]
        c = info.combine
        batch = self.sum_batches().get(node)
        if batch is not None:
            mask = "xrmask"
            srcs, results = [], []
            for n in batch:
                v, acc = self.reduce_input(n)
                srcs.append(f"tl.where({mask}, {v}, 0.0)")
                results.append(self.fresh("red"))
            self.emit(f"{', '.join(results)} = tf_row_sum{len(batch)}({', '.join(srcs)})")
            for n, res in zip(batch, results):
                self.finish_reduction(n, {"value": (res, torch.float32)})
            return
        if node in self._batched:
            return  # reduced with its batch's first node
        v, acc = self.reduce_input(node)
        mask = "xrmask"
        res = self.fresh("red")
        ident = self.identity(c, acc)
        if c == "sum":
            self.emit(f"{res} = tl.sum(tl.where({mask}, {v}, {ident}), 1)[:, None]")
            self.finish_reduction(node, {"value": (res, acc)})
        elif c == "prod":
            self.emit(f"{res} = tl.reduce(tl.where({mask}, {v}, {ident}), 1, tf_prod_combine)[:, None]")
            self.finish_reduction(node, {"value": (res, acc)})
        elif c in ("max", "min"):
            self.emit(f"{res} = tl.where({mask}, {v}, {ident})")
            self.finish_reduction(node, {"value": (self.max_nan(res, c, acc), acc)})
        elif c in ("any", "all"):
            fn = "tl.max" if c == "any" else "tl.min"
            self.emit(f"{res} = ({fn}(tl.where({mask}, {v}, {ident}), 1) != 0)[:, None]")
            self.finish_reduction(node, {"value": (res, torch.bool)})
        elif c == "welford":
            n = self.fresh("n")
            self.emit(f"{n} = tl.full([], rnumel, {triton_dtype(acc)})")
            self.emit(f"{res}_mean = tl.sum(tl.where({mask}, {v}, 0.0), 1)[:, None] / {n}")
            self.emit(f"{res}_d = tl.where({mask}, {v} - {res}_mean, 0.0)")
            self.emit(f"{res}_m2 = tl.sum({res}_d * {res}_d, 1)[:, None]")
            self.finish_welford(node, f"{res}_mean", f"{res}_m2", n, acc)
        elif c in ("argmax", "argmin"):
            self.emit(f"{res}_v = tl.where({mask}, {v}, {ident})")
            best = self.max_nan(f"{res}_v", c, acc)
            idx = self.first_index(f"{res}_v", f"tl.where({mask}, rindex, 2147483647)", best)
            self.finish_reduction(node, {"value": (best, acc), "index": (idx, torch.int32)})
        else:
            raise AssertionError(c)

    def finish_welford(self, node: Node, mean: str, m2: str, n: str, acc: torch.dtype) -> None:
        corr = node.attrs.get("correction", 1.0)
        var = self.fresh("var")
        self.emit(f"{var} = {m2} / tl.maximum({n} - {float(corr)!r}, 0.0)")
        self.finish_reduction(node, {"var": (var, acc), "mean": (mean, acc)})

    def finish_reduction(self, node: Node, results: dict[str, tuple[str, torch.dtype]]) -> None:
        info = REDUCTIONS[node.op]
        for name, out in zip(info.outputs, node.outputs):
            var, dt = results[name]
            if info.mean and name == "value":
                v2 = self.fresh("mean")
                self.emit(f"{v2} = {var} / tl.full([], rnumel, {triton_dtype(dt)})")
                var = v2
            final = self.fresh("r")
            self.emit(f"{final} = {convert(var, dt, out.meta.dtype)}")
            self.define(out, final, out.meta.dtype, outer=True)

    def emit_loop_accumulate(self, node: Node, accs: dict) -> None:
        info = REDUCTIONS[node.op]
        c = info.combine
        v, acc = self.reduce_input(node)
        a = accs[node]
        mask = "xrmask"
        ident = self.identity(c, acc)
        if c == "sum":
            self.emit(f"{a} = {a} + tl.where({mask}, {v}, {ident})")
        elif c in ("prod", "max", "min"):
            fn = {"prod": "tf_prod_combine", "max": "tf_max_combine", "min": "tf_min_combine"}[c]
            self.emit(f"{a} = {fn}({a}, tl.where({mask}, {v}, {ident}))")
        elif c in ("any", "all"):
            fn = "tl.maximum" if c == "any" else "tl.minimum"
            self.emit(f"{a} = {fn}({a}, tl.where({mask}, {v}, {ident}))")
        elif c == "welford":
            self.emit(f"{a}_x = {v}")
            self.emit(f"{a}_delta = {a}_x - {a}_mean")
            # Every lane updated at this step was updated at each earlier one (a lane's mask
            # only turns off at the end of the reduced extent), so its count is the step
            # number plus one: one scalar reciprocal per step instead of a division per
            # element (the split partial stage of BatchNorm's statistics was compute-bound
            # on an H200 with the division: 1.96 TB/s against 3.4 for a plain sum of two
            # inputs), and no per-element count (``welford_count`` after the loop).
            # (in the accumulator's dtype: a float literal alone would make it fp32, which cost
            # fp64 variances over long rows seven digits)
            acc = triton_dtype(self._acc_of(node))
            self.emit(f"{a}_inv = 1.0 / tl.full([], (roffset - {self.loop_start}) // RBLOCK + 1, {acc})")
            self.emit(f"{a}_mean = tl.where({mask}, {a}_mean + {a}_delta * {a}_inv, {a}_mean)")
            self.emit(f"{a}_m2 = tl.where({mask}, {a}_m2 + {a}_delta * ({a}_x - {a}_mean), {a}_m2)")
        elif c in ("argmax", "argmin"):
            self.emit(f"{a}_nv = tl.where({mask}, {v}, {ident})")
            self.emit(f"{a}_ni = tl.where({mask}, rindex, 2147483647) + tl.zeros([XBLOCK, RBLOCK], {self.index_type})")
            self.emit(f"{a}_v, {a}_i = tf_{c}_combine({a}_v, {a}_i, {a}_nv, {a}_ni)")

    @property
    def index_type(self) -> str:
        return "tl.int64" if self.layout.index64 else "tl.int32"

    def emit_loop_init(self, node: Node, accs: dict) -> None:
        info = REDUCTIONS[node.op]
        c = info.combine
        a = self.fresh("acc")
        accs[node] = a
        acc = self._acc_of(node)
        tdt = triton_dtype(acc)
        shape = "[XBLOCK, RBLOCK]"
        if c == "welford":
            for part in ("mean", "m2"):
                self.emit(f"{a}_{part} = tl.zeros({shape}, {tdt})")
        elif c in ("argmax", "argmin"):
            self.emit(f"{a}_v = tl.full({shape}, {self.identity(c, acc)}, {tdt})")
            self.emit(f"{a}_i = tl.full({shape}, 2147483647, {self.index_type})")
        else:
            self.emit(f"{a} = tl.full({shape}, {self.identity(c, acc)}, {tdt})")

    def _acc_of(self, node: Node) -> torch.dtype:
        info = REDUCTIONS[node.op]
        src = node.inputs[0]
        out_dtype = node.outputs[0].meta.dtype
        if info.combine in ("sum", "prod", "welford"):
            return _acc_dtype(out_dtype)
        if info.combine in ("any", "all"):
            return torch.int8
        acc = _acc_dtype(src.meta.dtype)
        return torch.int8 if acc == torch.bool else acc

    def welford_count(self, node: Node, a: str) -> None:
        """After ``emit_r_loop``'s loop from ``loop_start`` to ``r_limit`` in steps of RBLOCK:
        ``{a}_w``, the number of elements lane j of Welford's accumulator ``a`` took,
        ``ceil((r_limit - loop_start - j) / RBLOCK)`` (at least 0). This equals the count a
        per-element counter would have kept, without its two instructions per element (lanes
        of masked-off rows get the count too; their results are never stored)."""
        tdt = triton_dtype(self._acc_of(node))
        lane = "tl.arange(0, RBLOCK)[None, :]"
        self.emit(f"{a}_w = tl.maximum(({self.r_limit} - ({self.loop_start}) - {lane} + RBLOCK - 1) // RBLOCK, 0)"
                  f".to({tdt}) + tl.zeros([XBLOCK, RBLOCK], {tdt})")

    def emit_loop_finish(self, node: Node, accs: dict) -> None:
        info = REDUCTIONS[node.op]
        c = info.combine
        a = accs[node]
        acc = self._acc_of(node)
        res = self.fresh("red")
        if c == "sum":
            self.emit(f"{res} = tl.sum({a}, 1)[:, None]")
            self.finish_reduction(node, {"value": (res, acc)})
        elif c == "prod":
            self.emit(f"{res} = tl.reduce({a}, 1, tf_prod_combine)[:, None]")
            self.finish_reduction(node, {"value": (res, acc)})
        elif c in ("max", "min"):
            self.finish_reduction(node, {"value": (self.max_nan(a, c, acc), acc)})
        elif c in ("any", "all"):
            fn = "tl.max" if c == "any" else "tl.min"
            self.emit(f"{res} = ({fn}({a}, 1) != 0)[:, None]")
            self.finish_reduction(node, {"value": (res, torch.bool)})
        elif c == "welford":
            # Combine the per-lane (mean, m2, count) triples in closed form (Chan et al.):
            # N = sum n_i, mean = sum n_i mean_i / N, M2 = sum m2_i + sum n_i (mean_i - mean)^2.
            self.emit(f"{res}_w = tl.sum({a}_w, 1)[:, None]")
            self.emit(f"{res}_mean = tl.sum({a}_w * {a}_mean, 1)[:, None] / tl.where({res}_w == 0.0, 1.0, {res}_w)")
            self.emit(f"{res}_dm = {a}_mean - {res}_mean")
            self.emit(f"{res}_m2 = tl.sum({a}_m2 + {a}_w * {res}_dm * {res}_dm, 1)[:, None]")
            n = self.fresh("n")
            self.emit(f"{n} = tl.full([], rnumel, {triton_dtype(acc)})")
            self.finish_welford(node, f"{res}_mean", f"{res}_m2", n, acc)
        elif c in ("argmax", "argmin"):
            best = self.max_nan(f"{a}_v", c, acc)
            idx = self.first_index(f"{a}_v", f"{a}_i", best)
            self.finish_reduction(node, {"value": (best, acc), "index": (idx, torch.int32)})

    # ------------------------------------------------------------------ stores
    def store(self, out: Value) -> None:
        var, dt = self.value(out)
        self.emit(f"tl.store({self.address(out)}, {convert(var, dt, out.meta.dtype)}, mask={self.mask_for(out)})")

    # ------------------------------------------------------------------ whole kernels
    def params(self) -> list[str]:
        params = [self.pname[v] for v in self.g.inputs] + [self.pname[v] for v in self.g.outputs]
        if self.mode != "single":
            params += [f"ws{k}" for k in range(len(self.workspaces))]
        params += [f"xs{k}" for k in range(self.layout.n_x)] + [f"rs{k}" for k in range(self.layout.n_r)]
        for t in self.tensors + self.index_values:
            params += self.stride_params[t]
        params += ["xnumel", "rnumel", "xfull", "rfull"]  # 1: every block is full (see emit_x_block)
        if self.mode != "single":
            params += ["nsplit", "rchunk"]
        if self.random_nodes:
            params += ["seed_ptr"]
        return params

    def kernel_text(self, name: str) -> str:
        """The ``@triton.jit`` function ``name`` for this writer's mode."""
        if self.mode == "inner_outer":
            self.write_inner_outer()
            return self._function(name)
        if self.mode == "inner_outer_finish":
            self.write_inner_outer_finish()
            return self._function(name)
        pid = "tl.program_id(0).to(tl.int64)" if self.layout.index64 else "tl.program_id(0)"
        self.emit_x_block(pid)
        if not self.reduce:
            for out in self.g.outputs:
                self.store(out)
        else:
            if self.mode == "partial":
                self.write_split_partial()
            elif self.mode == "finish":
                self.write_split_finish()
            elif self.loop:
                self.write_loops()
            else:
                self.write_persistent()
        return self._function(name)

    def open_row_block_loop(self, stages: int) -> str:
        """Open a grid-stride loop over the blocks of XBLOCK rows (each program takes every
        ``num_programs``-th block; ``stages``: software-pipelining stages, 0 for Triton's
        default); returns the block index expression."""
        pipelined = f", num_stages={stages}" if stages else ""
        self.emit(f"for xblock in tl.range(tl.program_id(0), tl.cdiv(xnumel, XBLOCK), tl.num_programs(0){pipelined}):")
        self.indent += 1
        return "xblock.to(tl.int64)" if self.layout.index64 else "xblock"

    def emit_x_block(self, pid: str) -> None:
        """The kept-space indices and mask of block ``pid`` (a column ``[XBLOCK, 1]`` in
        reduction kernels).

        The mask of a kernel's first (or only) stage is or-ed with ``xfull == 1``
        (``Tuning.codegen.all_true_masks``): the caller passes 1 when every block of that stage is full, which
        Triton compiles as a constant, and the mask and every select and predicate built on it
        fold away."""
        self.emit(f"xoffset = {pid} * XBLOCK")
        self.emit(f"xindex = xoffset + tl.arange(0, XBLOCK){'[:, None]' if self.reduce else ''}")
        full = self.tuning.codegen.all_true_masks and self.mode in _FIRST_STAGE
        if full:
            self.emit("# xfull, rfull: 1 when every block is full; Triton then compiles them as constants and")
            self.emit("# the masks, with the selects and predicates built on them, fold away (ALL_TRUE_MASKS)")
        self.emit("xmask = (xindex < xnumel) | (xfull == 1)" if full else "xmask = xindex < xnumel")
        if self.needs_unravel("x"):
            self.unravel("x", self.layout.n_x, "xindex")

    def _function(self, name: str) -> str:
        # the seed is read from device memory, where the graph's call drew it from PyTorch's
        # generator: a CUDA graph replay then draws new numbers (the generator's graph-safe offset)
        prologue = ["    seed = tl.load(seed_ptr)"] if self.random_nodes else []
        body = "\n".join(prologue + self.lines)
        sig = ", ".join(self.params() + ["XBLOCK: tl.constexpr", "RBLOCK: tl.constexpr"])
        return f"@triton.jit\ndef {name}({sig}):\n{body}\n"

    # ------------------------------------------------------------------ inner-outer reductions
    def write_inner_outer(self) -> None:
        """Stage 1 of ``reduction.inner_outer``: each program loops over blocks of XBLOCK whole
        rows (a grid-stride loop). Per block it runs the row reductions as the persistent
        scheduler does and writes their results, and adds the paired column sums' inputs into
        [XBLOCK, RBLOCK] accumulators; after the loop it sums those over their rows and writes
        one partial per column: ``ws[k][program * rnumel + column]``."""
        self.emit("pid = tl.program_id(0).to(tl.int64)" if self.layout.index64 else "pid = tl.program_id(0)")
        outer = [n for n in self.reduction_nodes() if n in self.outer]
        accs: dict = {}
        for n in outer:
            self.emit_loop_init(n, accs)
        pid = self.open_row_block_loop(self.tuning.inner_outer.stages)
        self.scopes.append({})
        self.emit_x_block(pid)
        self.r_prologue("0")
        if self.tuning.codegen.row_prelude:
            self.row_prelude()
        for node in self.persistent_order():
            self.emit_persistent_reduction(node)
        self.loop_start = "0"
        for n in outer:
            self.emit_loop_accumulate(n, accs)
        for out in self.g.outputs:
            if out not in self.outer_values:
                self.store(out)
        self.scopes.pop()
        self.indent -= 1
        # (names bound inside the loop are not visible after it)
        self.emit("rindex = tl.arange(0, RBLOCK)[None, :]")
        self.emit("rmask = rindex < rnumel")
        for k, n in enumerate(outer):
            part = self.fresh("part")
            self.emit(f"{part} = tl.sum({accs[n]}, 0)[None, :]")
            self.emit(f"tl.store(ws{k} + pid * rnumel + rindex, {part}, mask=rmask)")

    def write_inner_outer_finish(self) -> None:
        """Stage 2 of ``reduction.inner_outer``: each program sums the ``nsplit`` partials of
        RBLOCK columns (XBLOCK >= nsplit) and writes the column sums and what the group
        computes from them."""
        pid = "tl.program_id(0).to(tl.int64)" if self.layout.index64 else "tl.program_id(0)"
        self.emit(f"rindex = {pid} * RBLOCK + tl.arange(0, RBLOCK)[None, :]")
        self.emit("rmask = rindex < rnumel")
        self.emit(f"xindex = tl.zeros([1, 1], {self.index_type})")
        self.emit("xmask = xindex < 1")
        self.emit("xrmask = xmask & rmask")
        if self.needs_unravel("r"):
            self.unravel("r", self.layout.n_r, "rindex")
        self.emit("sindex = tl.arange(0, XBLOCK)[:, None]")
        self.emit("smask = (sindex < nsplit) & rmask")
        for k, n in enumerate(n for n in self.reduction_nodes() if n in self.outer):
            a, res = self.fresh("acc"), self.fresh("red")
            self.emit(f"{a} = tl.load(ws{k} + sindex * rnumel + rindex, mask=smask, other=0)")
            self.emit(f"{res} = tl.sum({a}, 0)[None, :]")
            self.finish_reduction(n, {"value": (res, self._acc_of(n))})
        for out in self.g.outputs:
            if out in self.outer_values:
                self.store(out)

    # ------------------------------------------------------------------ split reductions
    def write_split_partial(self) -> None:
        """Stage 1: program (x block, chunk) reduces its chunk of r into the workspaces."""
        pid1 = "tl.program_id(1).to(tl.int64)" if self.layout.index64 else "tl.program_id(1)"
        self.emit(f"rstart = {pid1} * rchunk")
        self.emit("rend = tl.minimum(rstart + rchunk, rnumel)")
        self.r_limit = "rend"
        reds = self.reduction_nodes()
        accs = self.emit_r_loop(reds, [o for o in self.g.outputs if self.in_r(o)], "rstart", "rend")
        k = 0
        for n in reds:
            for comp, var in self.partial_components(n, accs[n]):
                self.emit(f"tl.store(ws{k} + {pid1} * xnumel + xindex, {var}, mask=xmask)")
                k += 1

    def emit_r_loop(self, reds: list[Node], outs: list[Value], start: str, end: str) -> dict:
        """One loop over the reduced extent, offsets ``start`` to ``end`` (expressions):
        accumulate ``reds``, write ``outs``.

        The kept-space values the loop reads are computed once before it; values that vary
        along the reduced dims are computed inside it (again in every loop that needs them).
        Returns the accumulator names of ``reds``.
        """
        for v in self.x_values_needed(reds, outs):
            self.value(v)
        accs: dict = {}
        for n in reds:
            self.emit_loop_init(n, accs)
        self.emit(f"for roffset in range({start}, {end}, RBLOCK):")
        self.indent += 1
        self.scopes.append({})
        # the loop's first offset: the step number gives Welford's count (emit_loop_accumulate)
        self.loop_start = start
        self.r_prologue("roffset")
        for n in reds:
            self.emit_loop_accumulate(n, accs)
        for o in outs:
            self.store(o)
        self.scopes.pop()
        self.indent -= 1
        for n in reds:
            if REDUCTIONS[n.op].combine == "welford":
                self.welford_count(n, accs[n])
        return accs

    def partial_components(self, node: Node, a: str) -> list[tuple[str, str]]:
        """Reduce the lanes of a loop accumulator to one partial per row, uncombined."""
        c = REDUCTIONS[node.op].combine
        res = self.fresh("part")
        acc = self._acc_of(node)
        if c == "sum":
            self.emit(f"{res} = tl.sum({a}, 1)[:, None]")
            return [("value", res)]
        if c == "prod":
            self.emit(f"{res} = tl.reduce({a}, 1, tf_prod_combine)[:, None]")
            return [("value", res)]
        if c in ("max", "min"):
            return [("value", self.max_nan(a, c, acc))]
        if c in ("any", "all"):
            fn = "tl.max" if c == "any" else "tl.min"
            self.emit(f"{res} = {fn}({a}, 1)[:, None]")
            return [("value", res)]
        if c == "welford":
            self.emit(f"{res}_w = tl.sum({a}_w, 1)[:, None]")
            self.emit(f"{res}_mean = tl.sum({a}_w * {a}_mean, 1)[:, None] / tl.where({res}_w == 0.0, 1.0, {res}_w)")
            self.emit(f"{res}_dm = {a}_mean - {res}_mean")
            self.emit(f"{res}_m2 = tl.sum({a}_m2 + {a}_w * {res}_dm * {res}_dm, 1)[:, None]")
            return [("mean", f"{res}_mean"), ("m2", f"{res}_m2"), ("w", f"{res}_w")]
        best = self.max_nan(f"{a}_v", c, acc)
        idx = self.first_index(f"{a}_v", f"{a}_i", best)
        return [("v", best), ("i", f"{idx}.to(tl.int64)")]

    def write_split_finish(self) -> None:
        """Stage 2: combine the chunks' partials per row, then the group's kept-space epilogue."""
        self.emit("sindex = tl.arange(0, RBLOCK)[None, :]")
        self.emit("xsmask = xmask & (sindex < nsplit)")
        accs: dict = {}
        k = 0
        for n in self.reduction_nodes():
            a = self.fresh("acc")
            accs[n] = a
            c = REDUCTIONS[n.op].combine
            acc = self._acc_of(n)
            for comp, dtype in workspace_components(n):
                name = a if comp == "value" else f"{a}_{comp}"
                other = self.identity(c, acc) if comp in ("value", "v") else ("2147483647" if comp == "i" else "0.0")
                self.emit(f"{name} = tl.load(ws{k} + sindex * xnumel + xindex, mask=xsmask, other={other})")
                k += 1
            self.emit_loop_finish(n, accs)
        for out in self.g.outputs:
            if not self.in_r(out):
                self.store(out)

    def r_prologue(self, offset: str) -> None:
        ridx = f"{offset} + tl.arange(0, RBLOCK)[None, :]"
        if self.layout.index64:
            ridx = f"({ridx}).to(tl.int64)"
        self.emit(f"rindex = {ridx}")
        if self.tuning.codegen.all_true_masks and self.mode in _FIRST_STAGE and self.r_limit == "rnumel" and (
                offset == "0" or getattr(self, "loop_start", None) == "0"):
            # blocks from 0 to rnumel: ``rfull`` is 1 when RBLOCK divides rnumel (see emit_x_block)
            self.emit("rmask = (rindex < rnumel) | (rfull == 1)")
        else:
            self.emit(f"rmask = rindex < {self.r_limit}")
        self.emit("xrmask = xmask & rmask")
        if self.needs_unravel("r"):
            self.unravel("r", self.layout.n_r, "rindex")

    def row_prelude(self) -> None:
        """Emit the loads of the tiles that the row reductions read, then the per-row values
        that depend on no reduction (``Tuning.codegen.row_prelude``), in graph order. (Tiles read only
        after a reduction are loaded there: loaded first they stay live across it, sm_90 gave
        LayerNorm's forward 79 registers instead of 56.)"""
        memo: dict = {}
        reduced: set[Value] = set()
        stack = [n.inputs[0] for n in self.reduction_nodes()]
        while stack:
            v = stack.pop()
            if isinstance(v, Value) and v not in reduced:
                reduced.add(v)
                node = self.producer_of.get(v)
                if node is not None and REGISTRY[node.op].kind != "reduction":
                    stack.extend(node.inputs)
        for v in self.g.inputs:
            if v in reduced and v.meta is not None and self.per_element(v):
                self.value(v)
        for node in self.g.nodes:
            if REGISTRY[node.op].kind in ("reduction", "random") or node.op == "arange":
                continue
            for o in node.outputs:
                if not self.per_element(o) and not self.deps(o, memo) and self.lookup(o) is None:
                    self.value(o)

    def write_persistent(self) -> None:
        self.r_prologue("0")
        if self.tuning.codegen.row_prelude:
            self.row_prelude()
        for node in self.persistent_order():
            self.emit_persistent_reduction(node)
        for out in self.g.outputs:
            self.store(out)

    def write_loops(self) -> None:
        lv = self.levels()
        depth = max(lv.values(), default=0)
        memo: dict = {}
        out_pass: dict[Value, int] = {}
        for out in self.g.outputs:
            if self.in_r(out):
                need = self.deps(out, memo)
                p = 1 + max((lv[n] for n in need), default=0)
                out_pass[out] = p if p <= depth else depth + 1
        for k in range(1, depth + 2):
            reds = [n for n in self.reduction_nodes() if lv[n] == k]
            outs = [o for o in self.g.outputs if out_pass.get(o) == k]
            if not reds and not outs:
                continue
            accs = self.emit_r_loop(reds, outs, "0", "rnumel")
            for n in reds:
                self.emit_loop_finish(n, accs)
        for out in self.g.outputs:
            if not self.in_r(out):
                self.store(out)

    def x_values_needed(self, reds: list[Node], outs: list[Value]) -> list[Value]:
        """Kept-space values (in topological order) that the given loop reads."""
        found: list[Value] = []
        seen: set[Value] = set()

        def visit(v: Value):
            if v in seen or not isinstance(v, Value) or v.meta is None:
                return
            seen.add(v)
            if self.lookup(v) is not None:
                return
            node = self.producer_of.get(v)
            if not self.in_r(v):
                if node is not None and REGISTRY[node.op].kind == "reduction":
                    return
                if node is not None:
                    for x in node.inputs:
                        visit(x)
                found.append(v)
                return
            if node is not None:
                for x in node.inputs:
                    visit(x)

        for n in reds:
            visit(n.inputs[0])
        for o in outs:
            visit(o)
        return found


def _scalar_dtype(v: Value) -> torch.dtype:
    ex = v.example
    if isinstance(ex, (bool,)):
        return torch.bool
    if isinstance(ex, (torch.SymFloat, float)):
        return torch.float32
    return torch.int64


def _is_bool_result(node: Node) -> bool:
    return REGISTRY[node.op].promotion is PROMOTE.ALWAYS_BOOL


def _kernel_name(group) -> str:
    ops = []
    for n in group.nodes:
        if REGISTRY[n.op].kind in ("pointwise", "reduction") and n.op not in ops:
            ops.append(n.op)
    kind = "red" if group.domain.reduced else "pw"
    return f"tf_{kind}_" + "_".join(ops[:5])


def workspace_components(node: Node) -> list[tuple[str, torch.dtype]]:
    """The partial results one reduction of a split reduction writes per row and chunk."""
    info = REDUCTIONS[node.op]
    src = node.inputs[0].meta.dtype
    out = node.outputs[0].meta.dtype
    if info.combine in ("sum", "prod"):
        return [("value", _acc_dtype(out))]
    if info.combine in ("any", "all"):
        return [("value", torch.int8)]
    if info.combine == "welford":
        acc = _acc_dtype(out)
        return [("mean", acc), ("m2", acc), ("w", acc)]
    acc = _acc_dtype(src)
    acc = torch.int8 if acc == torch.bool else acc
    if info.combine in ("max", "min"):
        return [("value", acc)]
    return [("v", acc), ("i", torch.int64)]


def split_workspaces(group) -> list[torch.dtype]:
    """Dtypes of the workspaces of a split reduction (one ``[split, xnumel]`` buffer each) or
    of a ``reduction.inner_outer`` group (one ``[split, rnumel]`` buffer per column sum)."""
    return [dt for n in workspace_nodes(group) for _, dt in workspace_components(n)]


def workspace_nodes(group) -> list[Node]:
    """The reductions whose partials go through workspaces: every reduction of a split
    reduction, the column sums (``group.outer``) of a ``reduction.inner_outer`` group."""
    outer = set(getattr(group, "outer", ()))
    return [n for n in group.nodes if REGISTRY[n.op].kind == "reduction" and (n in outer or not outer)]


def index_values(group) -> list[Value]:
    """The results of the group's ``arange`` nodes that it does not write: computed from loop
    indices, and laid out (``schedulers.layout.analyze``) as contiguous tensors after the
    group's inputs and outputs."""
    return [n.output for n in group.nodes if n.op == "arange" and n.output not in group.outputs]


def has_random(group) -> bool:
    """The group draws random numbers (its kernels take a ``seed_ptr`` argument last: the
    address of an int64 seed in device memory)."""
    return any(REGISTRY[n.op].kind == "random" for n in group.nodes)


def can_split(group) -> bool:
    """A group can run as a split reduction when no reduction depends on another and no
    output that varies along the reduced dims depends on a reduction."""
    w = _Writer.__new__(_Writer)
    w.g = group
    w.producer_of = {o: n for n in group.nodes for o in n.outputs}
    reds = [n for n in group.nodes if REGISTRY[n.op].kind == "reduction"]
    if not reds:
        return False
    memo: dict = {}
    if any(w.deps(n.inputs[0], memo) for n in reds):
        return False
    dom = group.domain
    for o in group.outputs:
        if o.meta is not None and dom.varies_along_reduced(o) and w.deps(o, memo):
            return False
    return True


def generate(group, layout: KernelLayout, scheduler: str, exact_rounding: bool = True,
             tuning: Tuning = Tuning()) -> KernelSource:
    """Generate the Triton module for ``group`` under ``layout``.

    Args:
        group: the fusion group.
        layout: the code-relevant layout of the call (from ``schedulers.layout.analyze``).
        scheduler: ``pointwise``, ``reduction.persistent``, ``reduction.loop``,
            ``reduction.split`` or ``reduction.inner_outer`` (the last two: two kernels,
            ``<name>_partial`` then ``<name>``).
        exact_rounding: round intermediates to their eager dtype (see ``Options``).
        tuning: the forms of code to write (``codegen`` section, and the sections of the
            schedulers whose kernel bodies read one).

    Raises:
        Unsupported: an op or dtype combination has no Triton emission; the group runs
            through ATen instead.
    """
    name = _kernel_name(group)
    if scheduler in TWO_STAGE:
        modes = ("partial", "finish") if scheduler == "reduction.split" else ("inner_outer", "inner_outer_finish")
        first = _Writer(group, layout, scheduler, exact_rounding, mode=modes[0], tuning=tuning)
        second = _Writer(group, layout, scheduler, exact_rounding, mode=modes[1], tuning=tuning)
        kernels = [first.kernel_text(name + "_partial"), second.kernel_text(name)]
        stages = (name + "_partial", name)
        params = first.params()
    else:
        w = _Writer(group, layout, scheduler, exact_rounding, tuning=tuning)
        kernels = [w.kernel_text(name)]
        stages = (name,)
        params = w.params()
    body = "\n\n".join(kernels)
    if any(re.search(rf"\b{h}\(", body) for h in ON_DEMAND):
        body = HEADER_ON_DEMAND + "\n\n" + body
    text = HEADER + "\n\n" + body
    key = hashlib.sha256(text.encode()).hexdigest()
    return KernelSource(name=name, text=text, key=key, params=tuple(params), stages=stages)
