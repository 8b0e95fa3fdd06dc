"""ATen-level rewrites of cross-entropy's row reductions.

* :func:`one_hot_picks` and :func:`log_softmax_sums`: cross-entropy's forward picks the
  target's log-probability and (with label smoothing) sums every class's; both are taken from
  ``x - max`` per row, so its row kernel runs two reduction steps instead of three (a looped
  kernel over vocabulary-sized rows reads each row twice instead of three times) and computes
  the log-probabilities of no element. Applied to rows of at most
  ``Tuning.graph_passes.picks_max_persistent_row`` elements and rows longer than
  ``Options.persistent_max_elements`` (reduced in a loop), where that measured faster;
  switched off together by ``Options(cross_entropy_rewrites=False)``.
"""
from __future__ import annotations

import functools

import torch
import torch.fx

from ..config import GraphPassTuning
from . import calls_to, finish
from .aten import _arg, _call_of, _call_with_val, _erase_unused, _val

aten = torch.ops.aten
_SUMS = (aten.sum.dim_IntList,)


def _unit_last(x) -> bool:
    """Whether ``x`` (a node or a Python scalar) broadcasts along the last dimension of a
    result it takes part in: a scalar, a 0-dim tensor, or a last dimension of size 1."""
    if not isinstance(x, torch.fx.Node):
        return isinstance(x, (int, float, bool))
    v = _val(x)
    if not isinstance(v, torch.Tensor):
        return False
    from torch.fx.experimental.symbolic_shapes import guard_or_false

    return v.dim() == 0 or guard_or_false(v.shape[-1] == 1)


def _class_index(a, n: int | object) -> bool:
    """``a`` is ``arange(n)``: ``0, 1, ..., n - 1`` as a 1-dim integer tensor."""
    from torch.fx.experimental.symbolic_shapes import guard_or_false

    if not isinstance(a, torch.fx.Node) or a.op != "call_function":
        return False
    if a.target is aten.arange.default:
        start, step = 0, 1
    elif a.target is aten.arange.start_step:
        start = a.args[0]
        step = a.args[2] if len(a.args) > 2 else a.kwargs.get("step", 1)
    elif a.target is aten.arange.start:
        start, step = a.args[0], 1
    else:
        return False
    v = _val(a)
    return (start == 0 and step == 1 and isinstance(v, torch.Tensor) and v.dim() == 1
            and not v.dtype.is_floating_point and guard_or_false(v.shape[0] == n))


def _is_one_hot_compare(node, n) -> torch.fx.Node | None:
    """When ``node`` is ``arange(n) == p`` (either side) with ``p`` an integer tensor that
    broadcasts along the last dimension: ``p``; else None. Such a comparison holds at most
    one true element per last-dim row: at ``p``, when ``0 <= p < n``."""
    if not _call_of(node, aten.eq.Tensor):
        return None
    a, b = node.args[0], node.args[1]
    for index, p in ((a, b), (b, a)):
        pv = _val(p)
        if (_class_index(index, n) and _unit_last(p) and isinstance(pv, torch.Tensor)
                and not pv.dtype.is_floating_point and pv.dtype is not torch.bool):
            return p
    return None


def _in_range(call, p: torch.fx.Node, n: int) -> torch.fx.Node:
    """``(0 <= p) & (p < n)`` for an integer ``p``, compared in int64: in ``p``'s own dtype a
    bound that does not fit wraps (``n = 300`` is 44 in uint8), where ``arange(n) == p``
    promotes both sides and compares the true values."""
    if _val(p).dtype is not torch.int64:
        p = call(aten._to_copy.default, p, dtype=torch.int64)
    return call(aten.bitwise_and.Tensor, call(aten.ge.Scalar, p, 0), call(aten.lt.Scalar, p, n))


def _replace_sum(s: torch.fx.Node, call, r: torch.fx.Node, keepdim: bool, *dead: torch.fx.Node) -> None:
    """Make ``r`` stand for ``s``, a sum over the last dimension: ``r`` has (or broadcasts to)
    the sum's shape with that dimension kept as 1; it is expanded to it, squeezed unless
    ``keepdim`` and cast to the sum's dtype with ``call`` (``_call_with_val``, at an insertion
    point before ``s``). Then ``s`` and ``dead`` are erased where nothing reads them."""
    out = _val(s)
    shape = list(out.shape) if keepdim else list(out.shape) + [1]
    if list(_val(r).shape) != shape:
        r = call(aten.expand.default, r, shape)
    if not keepdim:
        r = call(aten.squeeze.dim, r, -1)
    if _val(r).dtype != out.dtype:
        r = call(aten._to_copy.default, r, dtype=out.dtype)
    s.replace_all_uses_with(r)
    _erase_unused([s, *dead])


def _rewrites_row(n: int, persistent_max: int, max_row: int) -> bool:
    """Whether the cross-entropy forward rewrites apply to rows of ``n`` elements: rows of at
    most ``max_row`` (``Tuning.graph_passes.picks_max_persistent_row``) and looped rows."""
    return n <= max_row or n > persistent_max


#: Ops a one-hot pick moves through: one operand varies along the row, the others do not. Each
#: maps ``+0.0`` and ``-0.0`` to results that differ at most in the sign of a zero (``div`` only
#: with the varying operand as the dividend), which the pick's final ``+ 0.0`` makes equal.
_PICK_THROUGH = {aten.add.Tensor, aten.sub.Tensor, aten.mul.Tensor, aten.div.Tensor, aten.neg.default,
                 aten._to_copy.default, aten.exp.default, aten.log.default}


def _is_zero(x) -> bool:
    """``x`` is the number 0 (any sign), as a Python scalar or an ``aten.scalar_tensor`` call."""
    if isinstance(x, (int, float)) and not isinstance(x, bool):
        return x == 0
    return (_call_of(x, aten.scalar_tensor.default)
            and isinstance(x.args[0], (int, float)) and x.args[0] == 0)


def _row_sums(gm: torch.fx.GraphModule, persistent_max: int, max_row: int):
    """``(sum, summed node, its value, keepdim)`` for each ``aten.sum`` in ``gm`` over exactly
    the last dimension of a floating-point tensor whose size there is static and a row length
    the cross-entropy rewrites take (``_rewrites_row``)."""
    for s in calls_to(gm, _SUMS):
        src, out = s.args[0], _val(s)
        dims = _arg(s, 1, "dim")
        sv = _val(src)
        if (isinstance(src, torch.fx.Node) and isinstance(out, torch.Tensor) and isinstance(sv, torch.Tensor)
                and sv.dim() > 0 and isinstance(dims, (list, tuple)) and len(dims) == 1
                and dims[0] % sv.dim() == sv.dim() - 1 and isinstance(sv.shape[-1], int) and sv.shape[-1] >= 1
                and sv.dtype.is_floating_point and _rewrites_row(sv.shape[-1], persistent_max, max_row)):
            yield s, src, sv, _arg(s, 2, "keepdim", False)


def _pick_chain(y: torch.fx.Node):
    """``(v, chain)`` when ``y`` is ``v`` carried through ``chain`` (ops of ``_PICK_THROUGH``,
    nearest ``v`` first), each read only by the next (``y`` only by the pick), every other
    operand constant along the last dimension, and ``v`` floating-point; else None. The walk
    stops at the first value read elsewhere too: the kernel computes that one anyway."""
    chain = []
    x = y
    while (isinstance(x, torch.fx.Node) and x.op == "call_function" and x.target in _PICK_THROUGH
           and len(x.users) == 1):
        if x.target is aten._to_copy.default and set(x.kwargs) - {"dtype"}:
            break
        varying = [i for i, a in enumerate(x.args) if isinstance(a, torch.fx.Node) and not _unit_last(a)]
        if len(varying) != 1 or any(isinstance(a, torch.fx.Node) for a in x.kwargs.values()):
            break
        if x.target is aten.div.Tensor and varying != [0]:
            break
        chain.append(x)
        x = x.args[varying[0]]
    xv = _val(x)
    if not chain or not isinstance(xv, torch.Tensor) or not xv.dtype.is_floating_point:
        return None
    return x, chain[::-1]


def one_hot_picks(gm: torch.fx.GraphModule, persistent_max: int = 8192,
                  tuning: GraphPassTuning = GraphPassTuning()) -> int:
    """Move the pointwise work of a one-hot pick from every element of the row to the picked one.

    ``sum(where(arange(n) == p, h(v), 0), -1)``, with ``p`` constant along the last dimension
    and ``h`` a chain of pointwise ops whose other operands are too (``_pick_chain``), is
    ``h(v[p])`` where ``0 <= p < n`` and 0 elsewhere. The rewrite picks ``v`` itself (the same
    sum over ``where(arange(n) == p, v, 0)``, exact: one value and zeros), applies ``h`` to the
    per-row result, and adds 0, as a sum that starts from zero turns ``-0.0`` into ``+0.0``.
    Every op of ``h`` gives the same value on the picked element either way, so the result
    equals the sum bit for bit (NaN and infinities included); the row kernel no longer computes
    ``h`` for every element.

    This is cross-entropy's forward after ``decompose.nll_loss_forward_by_mask``: the picked
    log-probability ``bf16(x - max - log(sum(exp(x - max))))`` was computed and rounded for
    every class; after the rewrite it is one sum of ``where(hit, x - max, 0)``, which the row
    kernel reduces together with the sum of exponentials (``codegen`` batches sibling sums).

    Args:
        gm: an ATen-level graph whose nodes carry ``meta["val"]``; changed in place.
        persistent_max: the persistent scheduler's longest row (elements); rows are rewritten
            as ``tuning.picks_max_persistent_row`` says.
        tuning: ``one_hot_picks`` off: nothing is rewritten.

    Returns:
        The number of sums rewritten.
    """
    from torch._guards import detect_fake_mode

    if not tuning.one_hot_picks:
        return 0
    done = 0
    graph = gm.graph
    for s, w, sv, keepdim in _row_sums(gm, persistent_max, tuning.picks_max_persistent_row):
        if not (_call_of(w, aten.where.self) and len(w.users) == 1
                and len(w.args) == 3 and _is_zero(w.args[2])):
            continue
        compare, y, zero = w.args
        n = sv.shape[-1]
        p = _is_one_hot_compare(compare, n)
        chain = _pick_chain(y) if p is not None else None
        fake = detect_fake_mode([_val(x) for x in (s, w, p)]) if chain else None
        if fake is None:
            continue
        v, ops_ = chain
        call = functools.partial(_call_with_val, graph, fake)
        with graph.inserting_before(s):
            q = call(aten.sum.dim_IntList, call(aten.where.self, compare, v, zero), [-1], True)
            env = {v: q}
            for x in ops_:
                env[x] = call(x.target, *torch.fx.node.map_arg(x.args, lambda a: env.get(a, a)), **x.kwargs)
            in_range = _in_range(call, p, n)
            r = call(aten.add.Tensor, call(aten.where.self, in_range, env[y], zero), 0.0)
            _replace_sum(s, call, r, keepdim, w)
        done += 1
    return finish(gm, done, "one-hot picks moved ahead of their pointwise work")


def _widened(node: torch.fx.Node) -> bool:
    """Whether ``node`` converts its input to a wider dtype (``_to_copy``)."""
    if not _call_of(node, aten._to_copy.default) or not isinstance(node.args[0], torch.fx.Node):
        return False
    out, src = _val(node), _val(node.args[0])
    return (isinstance(out, torch.Tensor) and isinstance(src, torch.Tensor)
            and out.dtype.itemsize > src.dtype.itemsize)


def _log_softmax_parts(lp: torch.fx.Node):
    """``(shifted, lse)`` when ``lp`` is a last-dim log-softmax as PyTorch's decomposition
    writes it, optionally rounded by ``_to_copy``: ``shifted = x - amax(x)`` and
    ``lse = log(sum(exp(shifted)))`` (both reductions over the last dim, kept), ``lp =
    shifted - lse`` in fp32 or fp64; else None."""
    o = lp.args[0] if _call_of(lp, aten._to_copy.default) and set(lp.kwargs) <= {"dtype"} else lp
    if not (_call_of(o, aten.sub.Tensor) and len(o.args) == 2 and not o.kwargs):
        return None
    shifted, lse = o.args
    ov = _val(o)
    if not isinstance(ov, torch.Tensor) or ov.dtype not in (torch.float32, torch.float64):
        return None
    last = ov.dim() - 1

    def last_dim_kept(node) -> bool:
        dims = _arg(node, 1, "dim")
        return (isinstance(dims, (list, tuple)) and len(dims) == 1 and dims[0] % ov.dim() == last
                and _arg(node, 2, "keepdim", False) is True)

    if not (_call_of(shifted, aten.sub.Tensor) and len(shifted.args) == 2 and not shifted.kwargs
            and _call_of(lse, aten.log.default)):
        return None
    x, m = shifted.args
    se = lse.args[0]
    if not (_call_of(m, aten.amax.default) and m.args[0] is x and last_dim_kept(m)
            and _call_of(se, aten.sum.dim_IntList) and last_dim_kept(se) and "dtype" not in se.kwargs
            and _call_of(se.args[0], aten.exp.default) and se.args[0].args[0] is shifted):
        return None
    return shifted, lse


def log_softmax_sums(gm: torch.fx.GraphModule, persistent_max: int = 8192,
                     tuning: GraphPassTuning = GraphPassTuning()) -> int:
    """Replace a row sum of a log-softmax by ``sum(x - max) - n * lse``.

    Label smoothing sums the log-probabilities of every class: ``sum(lp, -1)`` with ``lp =
    round(shifted - lse)``, ``shifted = x - amax(x)`` and ``lse = log(sum(exp(shifted)))``
    per row (PyTorch's log-softmax decomposition, computed in fp32 and rounded to the input's
    dtype). The sum is ``sum(shifted) - n * lse``, computed in fp32 and rounded once. That sum
    of ``shifted`` depends only on the row max, so the row kernel reduces it together with the
    sum of exponentials, and no element is rounded to 16 bits and back.

    Eager rounds each ``lp`` to the input's dtype before summing; this rewrite rounds once, so
    it differs from eager by eager's own rounding and is never further from the exact sum:
    ``shifted <= 0 <= lse`` (or NaN), so ``|shifted - lse|`` bounds both terms and no
    cancellation enlarges the fp32 error. Infinities and NaN match eager's: ``-inf`` logits
    give ``-inf``, a NaN or ``+inf`` logit NaN, for the row. A 16-bit element that overflows
    in eager makes the row's sum overflow in both.

    Args:
        gm: an ATen-level graph whose nodes carry ``meta["val"]``; changed in place.
        persistent_max: the persistent scheduler's longest row (elements); rows are rewritten
            as ``tuning.picks_max_persistent_row`` says.
        tuning: ``log_softmax_sums`` off: nothing is rewritten.

    Returns:
        The number of sums replaced.
    """
    from torch._guards import detect_fake_mode

    if not tuning.log_softmax_sums:
        return 0
    done = 0
    graph = gm.graph
    for s, lp, sv, keepdim in _row_sums(gm, persistent_max, tuning.picks_max_persistent_row):
        if _widened(lp):
            # a wider sum of the rounded log-probabilities (``sum(dtype=)`` is a conversion
            # before the sum: ``decompose.reduce_at_dtype``): eager's value is that sum
            continue
        parts = _log_softmax_parts(lp)
        fake = detect_fake_mode([_val(s), _val(lp)]) if parts else None
        if fake is None:
            continue
        shifted, lse = parts
        call = functools.partial(_call_with_val, graph, fake)
        with graph.inserting_before(s):
            r = call(aten.sub.Tensor, call(aten.sum.dim_IntList, shifted, [-1], True),
                     call(aten.mul.Tensor, lse, sv.shape[-1]))
            _replace_sum(s, call, r, keepdim, lp)
        done += 1
    return finish(gm, done, "row sums of a log-softmax taken from its shifted input")
