"""The registry's reductions: each one's combine (``ReductionInfo``), outputs and argument parser.

Registers into :data:`torchfuse.ir.ops.REGISTRY` and :data:`REDUCTIONS` when imported (by
:mod:`torchfuse.ir.ops`, which re-exports both).
"""
from __future__ import annotations

import dataclasses

import torch

from .emit import Unsupported
from .graph import Value
from .ops import ALL_DTYPES, FLOAT, NUMERIC, OpDef, normalize_dim, register, _normalize_dims, _rank

aten = torch.ops.aten
prims = torch.ops.prims


# ----------------------------------------------------------------------------- reductions
#
# attrs of every reduction: dims (sorted, normalized), keepdim, and per op: correction (var),
# out_dtype is the output value's dtype. The code generator keys on ``combine``.

@dataclasses.dataclass(frozen=True)
class ReductionInfo:
    """How a reduction combines: ``sum``, ``prod``, ``max``, ``min``, ``welford``, ``argmax``,
    ``argmin``, ``any``, ``all``; and which outputs it has (``value``, ``index``, ``mean``...)."""

    combine: str
    outputs: tuple[str, ...] = ("value",)
    mean: bool = False


REDUCTIONS: dict[str, ReductionInfo] = {}


def _parse_reduce(default_keepdim=False, dims_arg=1, keep_arg=2, dtype_kw=True):
    def parse(args, kwargs):
        x = args[0]
        rank = _rank(x)
        dims = args[dims_arg] if len(args) > dims_arg else kwargs.get("dim")
        keepdim = args[keep_arg] if len(args) > keep_arg else kwargs.get("keepdim", default_keepdim)
        attrs = {"dims": _normalize_dims(dims, rank), "keepdim": bool(keepdim)}
        return [x], attrs
    return parse


def _parse_reduce_all(args, kwargs):
    x = args[0]
    return [x], {"dims": tuple(range(_rank(x))), "keepdim": False}


def _parse_prims_reduce(args, kwargs):
    x = args[0]
    return [x], {"dims": _normalize_dims(args[1], _rank(x)), "keepdim": False}


def _parse_var(args, kwargs):
    x = args[0]
    dims = args[1] if len(args) > 1 else kwargs.get("dim")
    correction = kwargs.get("correction")
    if correction is None:
        correction = 1
    keepdim = kwargs.get("keepdim", False)
    if isinstance(correction, Value):
        raise Unsupported("symbolic correction")
    return [x], {"dims": _normalize_dims(dims, _rank(x)), "keepdim": bool(keepdim),
                 "correction": float(correction)}


def _parse_prims_var(args, kwargs):
    x = args[0]
    correction = args[2] if len(args) > 2 else kwargs.get("correction", 1)
    return [x], {"dims": _normalize_dims(args[1], _rank(x)), "keepdim": False, "correction": float(correction)}


def _parse_arg(args, kwargs):
    x = args[0]
    dim = args[1] if len(args) > 1 else kwargs.get("dim")
    keepdim = args[2] if len(args) > 2 else kwargs.get("keepdim", False)
    if dim is None:
        # argmax over the flattened tensor: the index is into the flattened tensor, which
        # matches a reduction over all dims of a contiguous view only; keep it on ATen.
        raise Unsupported("argmax/argmin without dim")
    return [x], {"dims": _normalize_dims(int(dim), _rank(x)), "keepdim": bool(keepdim)}


def reduction(name, overloads, parse, info: ReductionInfo, dtypes=ALL_DTYPES):
    register(OpDef(name, "reduction", tuple(overloads), parse, promotion=None, dtypes=frozenset(dtypes)))
    REDUCTIONS[name] = info


reduction("sum", [aten.sum.dim_IntList], _parse_reduce(), ReductionInfo("sum"))
reduction("sum_all", [aten.sum.default], _parse_reduce_all, ReductionInfo("sum"))
reduction("prims_sum", [prims.sum.default], _parse_prims_reduce, ReductionInfo("sum"))
reduction("prod", [aten.prod.dim_int], _parse_reduce(), ReductionInfo("prod"), dtypes=NUMERIC | {torch.bool})
reduction("mean", [aten.mean.dim], _parse_reduce(), ReductionInfo("sum", mean=True), dtypes=FLOAT)
reduction("mean_all", [aten.mean.default], _parse_reduce_all, ReductionInfo("sum", mean=True), dtypes=FLOAT)
reduction("amax", [aten.amax.default], _parse_reduce(), ReductionInfo("max"))
reduction("amin", [aten.amin.default], _parse_reduce(), ReductionInfo("min"))
reduction("any", [aten.any.dim, aten.any.dims, aten.any.default], _parse_reduce(), ReductionInfo("any"))
reduction("all", [aten.all.dim, aten.all.dims, aten.all.default], _parse_reduce(), ReductionInfo("all"))
reduction("var", [aten.var.correction], _parse_var, ReductionInfo("welford", outputs=("var",)), dtypes=FLOAT)
reduction("prims_var", [prims.var.default], _parse_prims_var, ReductionInfo("welford", outputs=("var",)),
          dtypes=FLOAT)
reduction("var_mean", [aten.var_mean.correction], _parse_var,
          ReductionInfo("welford", outputs=("var", "mean")), dtypes=FLOAT)
reduction("argmax", [aten.argmax.default], _parse_arg, ReductionInfo("argmax", outputs=("index",)),
          dtypes=NUMERIC)
reduction("argmin", [aten.argmin.default], _parse_arg, ReductionInfo("argmin", outputs=("index",)),
          dtypes=NUMERIC)
reduction("max_dim", [aten.max.dim], _parse_arg, ReductionInfo("argmax", outputs=("value", "index")),
          dtypes=NUMERIC)
reduction("min_dim", [aten.min.dim], _parse_arg, ReductionInfo("argmin", outputs=("value", "index")),
          dtypes=NUMERIC)
