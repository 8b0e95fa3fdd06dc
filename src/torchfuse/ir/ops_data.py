"""The registry's constants, random numbers and layout ops (tensors made from no input, Philox
draws, and relabelings of dims that move no data).

Registers into :data:`torchfuse.ir.ops.REGISTRY` when imported (by :mod:`torchfuse.ir.ops`).
"""
from __future__ import annotations

import torch

from .emit import Unsupported
from .graph import Value
from .ops import FLOAT_DTYPES, OpDef, normalize_dim, register, _normalize_dims, _rank

aten = torch.ops.aten
prims = torch.ops.prims


# ----------------------------------------------------------------------------- constants

def _parse_full(args, kwargs):
    value = args[1] if len(args) > 1 else kwargs["fill_value"]
    if isinstance(value, Value) or isinstance(value, complex):
        raise Unsupported("symbolic or complex fill value")
    return [], {"value": value}


def _parse_full_like(args, kwargs):
    value = args[1] if len(args) > 1 else kwargs["fill_value"]
    if isinstance(value, Value) or isinstance(value, complex):
        raise Unsupported("symbolic or complex fill value")
    return [], {"value": value}


def _parse_scalar_tensor(args, kwargs):
    value = args[0]
    if isinstance(value, Value) or isinstance(value, complex):
        raise Unsupported("symbolic or complex value")
    return [], {"value": value}


def _parse_arange(args, kwargs):
    """``arange(end)``, ``arange(start, end)`` and ``arange(start, end, step)`` with integer
    start and step; the length is the output's size, so the end may be symbolic."""
    if kwargs.get("layout") not in (None, torch.strided):
        raise Unsupported("non-strided layout")
    if len(args) == 1:
        start, step = 0, 1
    else:
        start, step = args[0], args[2] if len(args) > 2 else kwargs.get("step", 1)
    if type(start) is not int or type(step) is not int:  # a Value (symbolic), a float or a bool
        raise Unsupported("symbolic or non-integer start or step")
    return [], {"start": start, "step": step}


register(OpDef("full", "constant", (aten.full.default,), _parse_full, promotion=None))
register(OpDef("full_like", "constant", (aten.full_like.default,), _parse_full_like, promotion=None))
register(OpDef("scalar_tensor", "constant", (aten.scalar_tensor.default,), _parse_scalar_tensor, promotion=None))
# The class indices a comparison with targets needs (nll_loss by mask): computed from the loop
# index in the kernel, never loaded. Integer results only: a float arange's rounding of
# ``start + i * step`` is PyTorch's to define.
register(OpDef("arange", "constant", (aten.arange.default, aten.arange.start, aten.arange.start_step), _parse_arange,
               promotion=None, dtypes=frozenset({torch.int32, torch.int64})))


# ----------------------------------------------------------------------------- random numbers
#
# Random ops draw from Triton's Philox generator inside the kernel, keyed by a seed drawn once
# per call from PyTorch's default (CPU) generator, so ``torch.manual_seed`` makes runs
# reproducible; the numbers differ from eager's, as any fused implementation's must. Each
# element's counter is its linear position in the kernel's iteration space, so the numbers do
# not depend on block sizes. A random op must cover its whole group domain (checked by the
# segmenter), so that no two elements share a counter.

def _parse_random_like(args, kwargs):
    if kwargs.get("layout") not in (None, torch.strided):
        raise Unsupported("non-strided layout")
    if kwargs.get("generator") is not None:
        raise Unsupported("explicit generator")
    return [], {}


def _parse_random(args, kwargs):
    return _parse_random_like(args, kwargs)


def _parse_bernoulli_p(args, kwargs):
    p = args[1] if len(args) > 1 else kwargs.get("p", 0.5)
    if isinstance(p, Value) or kwargs.get("generator") is not None:
        raise Unsupported("tensor p or explicit generator")
    return [], {"p": float(p)}


register(OpDef("rand", "random", (aten.rand_like.default, aten.rand.default), _parse_random, promotion=None,
               dtypes=FLOAT_DTYPES))
register(OpDef("randn", "random", (aten.randn_like.default, aten.randn.default), _parse_random, promotion=None,
               dtypes=FLOAT_DTYPES))
register(OpDef("bernoulli", "random", (aten.bernoulli.p,), _parse_bernoulli_p, promotion=None,
               dtypes=FLOAT_DTYPES))


# ----------------------------------------------------------------------------- layout ops

def _parse_permute(args, kwargs):
    x, dims = args[0], args[1]
    return [x], {"dims": tuple(normalize_dim(int(d), _rank(x)) for d in dims)}


def _parse_unsqueeze(args, kwargs):
    x, d = args[0], int(args[1])
    return [x], {"dim": d % (_rank(x) + 1)}


def _parse_squeeze(args, kwargs):
    x = args[0]
    dims = args[1] if len(args) > 1 else None
    if _rank(x) == 0:  # squeeze(0) of a 0-dim tensor is allowed and squeezes nothing
        return [x], {"dims": ()}
    return [x], {"dims": None if dims is None else _normalize_dims(dims, _rank(x))}


def _parse_reshape(args, kwargs):
    return [args[0]], {}


def _parse_broadcast_in_dim(args, kwargs):
    return [args[0]], {"broadcast_dims": tuple(int(d) for d in args[2])}


register(OpDef("permute", "layout", (aten.permute.default,), _parse_permute, promotion=None))
register(OpDef("expand", "layout", (aten.expand.default,), _parse_reshape, promotion=None))
register(OpDef("unsqueeze", "layout", (aten.unsqueeze.default,), _parse_unsqueeze, promotion=None))
register(OpDef("squeeze", "layout", (aten.squeeze.default, aten.squeeze.dim, aten.squeeze.dims),
               _parse_squeeze, promotion=None))
register(OpDef("reshape", "layout", (aten.view.default, aten._unsafe_view.default, aten.reshape.default),
               _parse_reshape, promotion=None))
register(OpDef("alias", "layout", (aten.alias.default,), _parse_reshape, promotion=None))
register(OpDef("broadcast_in_dim", "layout", (prims.broadcast_in_dim.default,), _parse_broadcast_in_dim,
               promotion=None))


