"""Reductions' combines: what every reduction kernel writes to reduce a tile, accumulate a
loop, and finish a reduction (the part of the code writer the reduction schedulers share).

:class:`Reductions` is a base of :class:`~torchfuse.codegen.writer.KernelWriter` and works on
its state (the group, the emitted lines, the values in scope). Takes the group's reduction
nodes (``REDUCTIONS`` combines: sum, prod, max, min, any, all, welford, argmax, argmin);
emits Triton statements and defines each reduction's results in the kernel's outer scope.

Invariants: a reduction's accumulator is fp32 for fp16/bf16 results (:func:`acc_dtype`);
masked lanes take the combine's identity; max/min propagate NaN as ``torch.amax`` does and
argmax/argmin take the first index of the best value (NaN counting as the largest).
Reductions are written with ``tl.sum`` / ``tl.max`` / ``tl.min`` over the r axis wherever
possible (Triton's tree reductions on a GPU, NumPy in the interpreter); first-index ties and
Welford's combine are expressed with extra such reductions instead of custom combines.
"""
from __future__ import annotations

import torch

from ..ir.emit import convert, literal, triton_dtype
from ..ir.graph import Node, Value
from ..ir.ops import REDUCTIONS, REGISTRY


def acc_dtype(dtype: torch.dtype) -> torch.dtype:
    """The dtype a reduction of ``dtype`` values accumulates in (fp32 for fp16/bf16)."""
    return torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype


def reductions_read(v: Value, producer_of: dict, memo: dict) -> set[Node]:
    """The reduction nodes that value ``v`` depends on inside a group (``producer_of``: each
    value the group computes -> its node; ``memo`` caches the answer per value)."""
    if v in memo:
        return memo[v]
    node = producer_of.get(v)
    out: set[Node] = set()
    if node is not None:
        if REGISTRY[node.op].kind == "reduction":
            out.add(node)
        for x in node.inputs:
            if isinstance(x, Value):
                out |= reductions_read(x, producer_of, memo)
    memo[v] = out
    return out


def workspace_components(node: Node) -> list[tuple[str, torch.dtype]]:
    """The partial results one reduction of a split reduction writes per row and chunk."""
    info = REDUCTIONS[node.op]
    src = node.inputs[0].meta.dtype
    out = node.outputs[0].meta.dtype
    if info.combine in ("sum", "prod"):
        return [("value", acc_dtype(out))]
    if info.combine in ("any", "all"):
        return [("value", torch.int8)]
    if info.combine == "welford":
        acc = acc_dtype(out)
        return [("mean", acc), ("m2", acc), ("w", acc)]
    acc = acc_dtype(src)
    acc = torch.int8 if acc == torch.bool else acc
    if info.combine in ("max", "min"):
        return [("value", acc)]
    return [("v", acc), ("i", torch.int64)]


def workspace_nodes(group) -> list[Node]:
    """The reductions whose partials go through workspaces: every reduction of a split
    reduction, the column sums (``group.outer``) of a ``reduction.inner_outer`` group."""
    outer = set(getattr(group, "outer", ()))
    return [n for n in group.nodes if REGISTRY[n.op].kind == "reduction" and (n in outer or not outer)]


def workspace_dtypes(group) -> list[torch.dtype]:
    """Dtypes of the workspaces of a split reduction (one ``[split, xnumel]`` buffer each) or
    of a ``reduction.inner_outer`` group (one ``[split, rnumel]`` buffer per column sum)."""
    return [dt for n in workspace_nodes(group) for _, dt in workspace_components(n)]


class Reductions:
    """The reduction half of :class:`~torchfuse.codegen.writer.KernelWriter` (see the module
    docstring); it uses the writer's ``emit``, ``fresh``, ``value``, ``define`` and scopes."""

    def reduction_nodes(self) -> list[Node]:
        return [n for n in self.g.nodes if REGISTRY[n.op].kind == "reduction"]

    def deps(self, v: Value, memo: dict) -> set[Node]:
        """Reduction nodes that ``v`` depends on (inside the group)."""
        return reductions_read(v, self.producer_of, memo)

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
            acc = acc_dtype(out_dtype)
        elif info.combine in ("max", "min", "argmax", "argmin"):
            acc = acc_dtype(src.meta.dtype)
            if acc == torch.bool:
                acc = torch.int8
        elif info.combine == "welford":
            acc = acc_dtype(out_dtype)
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
            # Triton's max and min return integers narrower than 32 bits as int32: back to the
            # row's type, as the ops after it expect (uint8 and int32 cannot meet in a division)
            narrow = dtype.itemsize < 4 and dtype != torch.bool
            cast = f".to({triton_dtype(dtype)})" if narrow else ""
            self.emit(f"{res} = {'tl.max' if top else 'tl.min'}({src}, 1)[:, None]{cast}")
        return res

    def first_index(self, vals: str, idxs: str, best: str) -> str:
        """Smallest index among lanes whose value equals ``best`` (NaN matching NaN)."""
        res = self.fresh("first")
        self.emit(f"{res} = tl.min(tl.where(({vals} == {best}) | (({vals} != {vals}) & ({best} != {best})), "
                  f"{idxs}, {self.index_sentinel}), 1)[:, None]")
        return res

    def value_at(self, node: Node, vals: str, idxs: str, first: str, dtype: torch.dtype, best: str) -> str:
        """For a ``max``/``min`` over a dim (``node`` returns a value beside its index), the
        value of the lane whose index is ``first``, where ``best`` may differ from it in
        the sign of a zero: a row max over ``0.0`` and ``-0.0`` returns either, and eager's
        ``max(dim)`` returns the element at its index. A row max whose other lanes are ``-inf``
        picks it exactly (not a sum over ``-0.0``: NumPy's, under the interpreter, starts from
        ``+0.0``); a NaN ``best`` is that lane's value as it is. Integer rows have no signed
        zeros, and ``argmax``/``argmin`` return no value: ``best`` is returned."""
        if not dtype.is_floating_point or "value" not in REDUCTIONS[node.op].outputs:
            return best
        res = self.fresh("at")
        self.emit(f"{res} = tl.where({best} != {best}, {best}, "
                  f"tl.max(tl.where({idxs} == {first}, {vals}, float('-inf')), 1)[:, None])")
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
                            and acc_dtype(n.outputs[0].meta.dtype) == torch.float32):
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
            # The corrected two-pass algorithm (Chan, Golub and LeVeque, "Algorithms for computing
            # the sample variance", 1983): the deviations' own sum corrects the mean and M2. A
            # row of equal values then gets their value as its mean exactly, as eager's Welford
            # kernels give it, so x - mean is 0 (a LayerNorm of a constant row is 0, not
            # (x - mean) times rsqrt(eps)).
            n = self.fresh("n")
            self.emit(f"{n} = tl.full([], rnumel, {triton_dtype(acc)})")
            # (each value scaled before the sum: a row of values near the dtype's largest sums
            # without overflow; the correction below makes a constant row's mean its value)
            self.emit(f"{res}_m0 = tl.sum(tl.where({mask}, {v} * (1.0 / {n}), 0.0), 1)[:, None]")
            # deviations from a preliminary mean beyond 2**(E/2) (E: the dtype's largest exponent)
            # are taken times 2**(-E/2): a rounding error of such a mean squared would overflow
            # (a constant row of 3e38 would get an infinite variance). A power of two scales
            # every sum exactly, so other rows' values are the unscaled ones
            half = 512 if acc == torch.float64 else 64
            self.emit(f"{res}_k = tl.where(tl.abs({res}_m0) > {float(2.0 ** half)!r}, {float(2.0 ** -half)!r}, 1.0)")
            self.emit(f"{res}_d = tl.where({mask}, ({v} - {res}_m0) * {res}_k, 0.0)")
            if self.tuning.codegen.batch_row_sums:
                self.emit(f"{res}_s, {res}_q = tf_row_sum2({res}_d, {res}_d * {res}_d)")
            else:
                self.emit(f"{res}_s = tl.sum({res}_d, 1)[:, None]")
                self.emit(f"{res}_q = tl.sum({res}_d * {res}_d, 1)[:, None]")
            self.emit(f"{res}_c = {res}_s / {n}")
            # (a row with an infinity or NaN keeps the plain two-pass values, eager's there; so
            # does a row whose squared deviations overflow: its M2 is infinite, as eager's, where
            # Q - S*C would be inf - inf)
            self.emit(f"{res}_fin = tl.abs({res}_m0) < float('inf')")
            self.emit(f"{res}_mean = tl.where({res}_fin, {res}_m0 + {res}_c / {res}_k, {res}_m0)")
            self.emit(f"{res}_m2 = tl.where({res}_fin & ({res}_q < float('inf')), "
                      f"tl.maximum({res}_q - {res}_s * {res}_c, 0.0), {res}_q)")
            self.finish_welford(node, f"{res}_mean", f"{res}_m2", n, acc, scale=f"{res}_k")
        elif c in ("argmax", "argmin"):
            self.emit(f"{res}_v = tl.where({mask}, {v}, {ident})")
            best = self.max_nan(f"{res}_v", c, acc)
            idxs = f"tl.where({mask}, rindex, {self.index_sentinel})"
            idx = self.first_index(f"{res}_v", idxs, best)
            value = self.value_at(node, f"{res}_v", idxs, idx, acc, best)
            self.finish_reduction(node, {"value": (value, acc), "index": (idx, torch.int32)})
        else:
            raise AssertionError(c)

    def finish_welford(self, node: Node, mean: str, m2: str, n: str, acc: torch.dtype, scale: str | None = None) -> None:
        """The variance ``m2 / max(n - correction, 0)`` and the mean as the node's results;
        ``scale``: the factor ``m2``'s deviations were taken times, divided out of the variance
        (not of ``m2``, which may overflow where the variance does not)."""
        corr = node.attrs.get("correction", 1.0)
        var = self.fresh("var")
        unscale = "" if scale is None else f" / {scale} / {scale}"
        self.emit(f"{var} = {m2} / tl.maximum({n} - {float(corr)!r}, 0.0){unscale}")
        self.finish_reduction(node, {"var": (var, acc), "mean": (mean, acc)})

    def finish_reduction(self, node: Node, results: dict[str, tuple[str, torch.dtype]]) -> None:
        info = REDUCTIONS[node.op]
        for name, out in zip(info.outputs, node.outputs):
            var, dt = results[name]
            if info.mean and name == "value":
                v2 = self.fresh("mean")
                self.emit(f"{v2} = {var} / tl.full([], rnumel, {triton_dtype(dt)})")
                var = v2
            final = self.fresh("res")
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
            acc = triton_dtype(self.acc_of(node))
            self.emit(f"{a}_inv = 1.0 / tl.full([], (roffset - {self.loop_start}) // RBLOCK + 1, {acc})")
            self.emit(f"{a}_mean = tl.where({mask}, {a}_mean + {a}_delta * {a}_inv, {a}_mean)")
            self.emit(f"{a}_m2 = tl.where({mask}, {a}_m2 + {a}_delta * ({a}_x - {a}_mean), {a}_m2)")
        elif c in ("argmax", "argmin"):
            self.emit(f"{a}_nv = tl.where({mask}, {v}, {ident})")
            self.emit(f"{a}_ni = tl.where({mask}, rindex, {self.index_sentinel}) + tl.zeros([XBLOCK, RBLOCK], {self.index_type})")
            self.emit(f"{a}_v, {a}_i = tf_{c}_combine({a}_v, {a}_i, {a}_nv, {a}_ni)")

    def emit_loop_init(self, node: Node, accs: dict) -> None:
        info = REDUCTIONS[node.op]
        c = info.combine
        a = self.fresh("acc")
        accs[node] = a
        acc = self.acc_of(node)
        tdt = triton_dtype(acc)
        shape = "[XBLOCK, RBLOCK]"
        if c == "welford":
            for part in ("mean", "m2"):
                self.emit(f"{a}_{part} = tl.zeros({shape}, {tdt})")
        elif c in ("argmax", "argmin"):
            self.emit(f"{a}_v = tl.full({shape}, {self.identity(c, acc)}, {tdt})")
            self.emit(f"{a}_i = tl.full({shape}, {self.index_sentinel}, {self.index_type})")
        else:
            self.emit(f"{a} = tl.full({shape}, {self.identity(c, acc)}, {tdt})")

    def acc_of(self, node: Node) -> torch.dtype:
        info = REDUCTIONS[node.op]
        src = node.inputs[0]
        out_dtype = node.outputs[0].meta.dtype
        if info.combine in ("sum", "prod", "welford"):
            return acc_dtype(out_dtype)
        if info.combine in ("any", "all"):
            return torch.int8
        acc = acc_dtype(src.meta.dtype)
        return torch.int8 if acc == torch.bool else acc

    def welford_count(self, node: Node, a: str) -> None:
        """After ``emit_r_loop``'s loop from ``loop_start`` to ``r_limit`` in steps of RBLOCK:
        ``{a}_w``, the number of elements lane j of Welford's accumulator ``a`` took,
        ``ceil((r_limit - loop_start - j) / RBLOCK)`` (at least 0). This equals the count a
        per-element counter would have kept, without its two instructions per element (lanes
        of masked-off rows get the count too; their results are never stored)."""
        tdt = triton_dtype(self.acc_of(node))
        lane = "tl.arange(0, RBLOCK)[None, :]"
        self.emit(f"{a}_w = tl.maximum(({self.r_limit} - ({self.loop_start}) - {lane} + RBLOCK - 1) // RBLOCK, 0)"
                  f".to({tdt}) + tl.zeros([XBLOCK, RBLOCK], {tdt})")
        # the lanes' counts sum to the loop's length: combine_welford_lanes reads it, not a sum across lanes
        self.emit(f"{a}_n = tl.maximum({self.r_limit} - ({self.loop_start}), 0).to({tdt})")
        self.welford_totals.add(a)

    def emit_loop_finish(self, node: Node, accs: dict) -> None:
        info = REDUCTIONS[node.op]
        c = info.combine
        a = accs[node]
        acc = self.acc_of(node)
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
            self.combine_welford_lanes(a, res)
            n = self.fresh("n")
            self.emit(f"{n} = tl.full([], rnumel, {triton_dtype(acc)})")
            self.finish_welford(node, f"{res}_mean", f"{res}_m2", n, acc)
        elif c in ("argmax", "argmin"):
            best = self.max_nan(f"{a}_v", c, acc)
            idx = self.first_index(f"{a}_v", f"{a}_i", best)
            value = self.value_at(node, f"{a}_v", f"{a}_i", idx, acc, best)
            self.finish_reduction(node, {"value": (value, acc), "index": (idx, torch.int32)})

    def combine_welford_lanes(self, a: str, res: str) -> None:
        """Combine the lanes of Welford's accumulator ``a`` (``{a}_mean``, ``{a}_m2``,
        ``{a}_w``: [XBLOCK, RBLOCK] means, M2s and counts) into ``{res}_w``, ``{res}_mean`` and
        ``{res}_m2`` per row, in closed form shifted by lane 0's mean m0 (lane 0 takes the
        first element of every loop and chunk): with d_i = mean_i - m0, S = sum n_i d_i and
        Q = sum (m2_i + n_i d_i^2), mean = m0 + S / N and M2 = Q - S^2 / N (the corrected
        two-pass formula of Chan, Golub and LeVeque). Lanes of one value combine to that value
        exactly, as Welford's pairwise combine does, and M2 is formed from the small d_i, not
        from deviations from the rounded mean (which cost digits where the mean is large
        against the spread). N is the loop's length where ``welford_count`` wrote the counts
        (one sum across lanes fewer, a cost in the short loops of split BatchNorm statistics)."""
        lane = "tl.arange(0, RBLOCK)[None, :]"
        if a in self.welford_totals:  # counts that welford_count gave: their sum is known
            self.emit(f"{res}_w = tl.zeros([XBLOCK, 1], {a}_w.dtype) + {a}_n")
        else:
            self.emit(f"{res}_w = tl.sum({a}_w, 1)[:, None]")
        self.emit(f"{res}_l0 = tl.sum(tl.where({lane} == 0, {a}_mean, 0.0), 1)[:, None]")
        # (lanes with an infinity or NaN combine unshifted: an infinite shift would make every lane NaN)
        self.emit(f"{res}_m0 = tl.where(tl.abs({res}_l0) < float('inf'), {res}_l0, 0.0)")
        self.emit(f"{res}_d = {a}_mean - {res}_m0")
        self.emit(f"{res}_s = tl.sum({a}_w * {res}_d, 1)[:, None]")
        self.emit(f"{res}_q = tl.sum({a}_m2 + {a}_w * {res}_d * {res}_d, 1)[:, None]")
        self.emit(f"{res}_c = {res}_s / tl.where({res}_w == 0.0, 1.0, {res}_w)")
        self.emit(f"{res}_mean = {res}_m0 + {res}_c")
        # (rounding can leave Q - S^2/N a little below 0; a NaN stays NaN; an overflowed Q
        # stays infinite, as eager's M2, where Q - S^2/N would be inf - inf)
        self.emit(f"{res}_m2 = {res}_q - {res}_s * {res}_c")
        self.emit(f"{res}_m2 = tl.where({res}_q < float('inf'), tl.where({res}_m2 < 0.0, 0.0, {res}_m2), {res}_q)")

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
