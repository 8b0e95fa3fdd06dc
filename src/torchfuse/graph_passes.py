"""Rewrites of the captured TorchDynamo graph, before AOTAutograd traces it.

These passes work on the graph of PyTorch-level calls (``torch.nn.functional`` and tensor
methods) that TorchDynamo hands to the backend, where a library's choice of kernel can still
be influenced; after AOTAutograd's trace that choice is made.

* :func:`dense_attention_masks`: ``scaled_dot_product_attention`` runs on a fused GPU kernel
  (memory-efficient or cuDNN attention) only when its ``attn_mask`` has a unit stride in its
  last dimension (PyTorch's ``sdp_utils``: "GPU backends require attn_mask's last dimension to
  have stride 1"). Masks built by broadcasting a padding mask (HuggingFace transformers' masks
  under tracing, where their data-dependent "no padding" shortcut is skipped) have stride 0
  there, and PyTorch falls back to the math path: two batched matrix products, a softmax and
  their backward, the whole attention matrix written to memory. Measured on an H200 with
  BERT-base training: every layer's attention took the math path under ``torch.compile`` with
  any backend. The pass makes the last dimension dense while keeping broadcast leading
  dimensions broadcast (a ``B x 1 x S x S`` mask at most, never ``B x H x S x S``).

Passes on the ATen-level graphs AOTAutograd produces, before they are analysed:

* :func:`merge_duplicate_pads`: the padded matrix products (``decompose.mm_padded``) pad an
  operand in its memory order, so the gradient of a language model's vocabulary product is
  padded once as ``G`` and once as ``permute(permute(G))``, which AOTAutograd's
  common-subexpression pass does not recognise as one value: two copies of a tensor of
  ``tokens x vocabulary`` elements per step (GPT-2 at 8 x 512 in bf16: 412 MB each).
* :func:`one_hot_picks` and :func:`log_softmax_sums`: cross-entropy's forward picks the
  target's log-probability and (with label smoothing) sums every class's; both are taken from
  ``x - max`` per row, so its row kernel runs two reduction steps instead of three (a looped
  kernel over vocabulary-sized rows reads each row twice instead of three times) and computes
  the log-probabilities of no element. Applied to rows of at most
  ``Tuning.graph_passes.picks_max_persistent_row`` elements and rows longer than ``Options.persistent_max_elements``
  (reduced in a loop), where that measured faster; switched off together by
  ``Options(cross_entropy_rewrites=False)``.
"""
from __future__ import annotations

import functools
import logging

import torch
import torch.fx

from .config import GraphPassTuning

log = logging.getLogger("torchfuse.fusion")

_SDPA_TARGETS = (torch._C._nn.scaled_dot_product_attention, torch.nn.functional.scaled_dot_product_attention)


def calls_to(gm: torch.fx.GraphModule, targets) -> list[torch.fx.Node]:
    """The ``call_function`` nodes of ``gm`` whose target is one of ``targets``, in graph
    order, as a list (the passes insert nodes while they walk it)."""
    return [n for n in gm.graph.nodes if n.op == "call_function" and n.target in targets]


def finish(gm: torch.fx.GraphModule, done: int, what: str) -> int:
    """After a pass made ``done`` rewrites: check and regenerate ``gm``, log ``what``."""
    if done:
        gm.graph.lint()
        gm.recompile()
        log.info("%d %s", done, what)
    return done


def dense_last_dim(mask: torch.Tensor) -> torch.Tensor:
    """``mask`` with the same values and shape, and a unit stride in its last dimension.

    Leading dimensions that were broadcast (stride 0) stay broadcast, so the copy made holds
    one element per distinct value of the last two (or fewer) varying dimensions.

    Args:
        mask: any tensor of at least one dimension (an attention mask, bool or float).

    Returns:
        A tensor equal to ``mask`` elementwise; a view of ``mask`` when its last stride is
        already 1.
    """
    if mask.dim() == 0 or mask.stride(-1) == 1 or mask.shape[-1] <= 1:
        return mask
    shape = mask.shape
    base = mask
    for d in range(mask.dim() - 1):
        if mask.stride(d) == 0 and mask.shape[d] != 1:
            base = base.narrow(d, 0, 1)
    return base.contiguous().expand(shape)


def dense_attention_masks(gm: torch.fx.GraphModule, devices: tuple[str, ...] = ("cuda",)) -> int:
    """Make every attention mask on ``devices`` whose last stride is 0 dense in that dimension.

    Args:
        gm: TorchDynamo's graph; nodes carry their fake example values in
            ``meta["example_value"]``.
        devices: device types whose fused attention kernels need the unit stride (PyTorch's
            CPU kernels accept any stride, so only CUDA by default).

    Returns:
        How many masks were rewritten (the graph is recompiled in place when any were).
    """
    done = 0
    for node in calls_to(gm, _SDPA_TARGETS):
        if "attn_mask" in node.kwargs:
            mask, where = node.kwargs["attn_mask"], "kw"
        elif len(node.args) > 3:
            mask, where = node.args[3], 3
        else:
            continue
        if not isinstance(mask, torch.fx.Node):
            continue
        value = mask.meta.get("example_value")
        if not isinstance(value, torch.Tensor) or value.device.type not in devices or value.dim() == 0:
            continue
        try:
            if not (value.stride(-1) == 0 and value.shape[-1] != 1):
                continue
        except Exception:  # a symbolic stride we cannot decide: leave the call as it is
            continue
        with gm.graph.inserting_before(node):
            dense = gm.graph.call_function(dense_last_dim, (mask,))
        dense.meta["example_value"] = dense_last_dim(value)
        if where == "kw":
            node.kwargs = {**node.kwargs, "attn_mask": dense}
        else:
            node.args = node.args[:3] + (dense,) + node.args[4:]
        done += 1
    return finish(gm, done, "attention mask(s) made dense in their last dimension for the fused GPU kernels")


_PERMUTES = (torch.ops.aten.permute.default, torch.ops.aten.t.default)


def _through_permutes(node: torch.fx.Node) -> tuple[torch.fx.Node, tuple[int, ...] | None]:
    """``(base, perm)`` with ``node`` equal to ``base.permute(perm)`` through a chain of
    ``aten.permute`` calls; ``perm`` is ``None`` when the chain composes to the identity."""
    perm = None
    while node.op == "call_function" and node.target in _PERMUTES:
        p = list(node.args[1]) if node.target is torch.ops.aten.permute.default else [1, 0]
        perm = p if perm is None else [p[i] for i in perm]
        node = node.args[0]
    if perm is not None and perm == list(range(len(perm))):
        perm = None
    return node, (tuple(perm) if perm is not None else None)


def merge_duplicate_pads(gm: torch.fx.GraphModule) -> int:
    """Replace each ``aten.constant_pad_nd`` whose input is, through permutes, the same view
    of the same tensor as an earlier pad's with the same padding and value by that earlier
    pad. Returns the number of pads removed."""
    seen: dict = {}
    done = 0
    for n in calls_to(gm, (torch.ops.aten.constant_pad_nd.default,)):
        src, perm = _through_permutes(n.args[0])
        value = n.args[2] if len(n.args) > 2 else n.kwargs.get("value", 0)
        key = (src, perm, tuple(n.args[1]), float(value))
        first = seen.setdefault(key, n)
        if first is n:
            continue
        n.replace_all_uses_with(first)
        chain = n.args[0]
        gm.graph.erase_node(n)
        while isinstance(chain, torch.fx.Node) and not chain.users and chain.target in _PERMUTES:
            up = chain.args[0]
            gm.graph.erase_node(chain)
            chain = up
        done += 1
    return finish(gm, done, "duplicate pads merged")


aten = torch.ops.aten
_SUMS = (aten.sum.dim_IntList,)


def _val(x):
    return x.meta.get("val") if isinstance(x, torch.fx.Node) else None


def _arg(node, i: int, name: str, default=None):
    """Argument ``i`` (or keyword ``name``) of call ``node``."""
    return node.args[i] if len(node.args) > i else node.kwargs.get(name, default)


def _call_of(x, target) -> bool:
    """``x`` is a node calling ``target``."""
    return isinstance(x, torch.fx.Node) and x.op == "call_function" and x.target is target


def _call_with_val(graph: torch.fx.Graph, fake, target, *args, **kwargs) -> torch.fx.Node:
    """Insert ``target(*args, **kwargs)`` at the graph's insertion point with the
    ``meta["val"]`` later passes read: ``target`` run on the arguments' fake values in ``fake``
    (their FakeTensorMode)."""
    node = graph.call_function(target, args, kwargs)
    vals = torch.fx.node.map_arg((args, kwargs), _val)
    with fake:
        node.meta["val"] = target(*vals[0], **vals[1])
    return node


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


def _erase_unused(nodes) -> None:
    """Erase those of ``nodes`` (pure ATen calls) that nothing reads any more, and then
    their arguments that nothing reads, recursively."""
    work = [n for n in nodes if isinstance(n, torch.fx.Node)]
    erased: set = set()
    while work:
        n = work.pop()
        if n in erased or n.users or n.op != "call_function" or n.is_impure():
            continue
        args = n.all_input_nodes
        n.graph.erase_node(n)
        erased.add(n)
        work.extend(args)


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
        if s.kwargs.get("dtype") not in (None, sv.dtype):
            continue  # a wider sum of the rounded log-probabilities: eager's value is that sum
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


def _same(a, b) -> bool:
    """Whether two shapes or stride tuples are known equal (without adding a guard)."""
    from torch.fx.experimental.symbolic_shapes import guard_or_false

    return len(a) == len(b) and all(guard_or_false(x == y) for x, y in zip(a, b))


def _sum_terms(root: torch.fx.Node, shape) -> list:
    """The terms of the sum of ``aten.add.Tensor`` calls (``alpha`` 1) rooted at ``root``:
    adds of the result's ``shape`` read only inside the sum are followed, anything else
    (``root`` itself when it is no such add) is a term."""
    terms, work = [], [root]
    while work:
        n = work.pop()
        v = _val(n)
        if (_call_of(n, aten.add.Tensor)
                and len(n.args) == 2 and n.kwargs.get("alpha", 1) == 1 and len(n.users) == 1
                and isinstance(v, torch.Tensor) and _same(v.shape, shape)):
            work.extend(reversed(n.args))
        else:
            terms.append(n)
    return terms


def _fusable_conv(n, shape, devices, dtypes) -> bool:
    """A 2-D, ungrouped, non-transposed ``aten.convolution`` whose result (of ``shape``) only
    the sum reads, on a device and in a dtype listed."""
    if not (_call_of(n, aten.convolution.default)
            and len(n.users) == 1 and len(n.args) == 9):
        return False
    x, w, _, _, _, _, transposed, output_padding, groups = n.args
    v, xv, wv = _val(n), _val(x), _val(w)
    return (isinstance(v, torch.Tensor) and isinstance(xv, torch.Tensor) and isinstance(wv, torch.Tensor)
            and v.dim() == 4 and xv.dim() == 4 and transposed is False and groups == 1
            and all(p == 0 for p in output_padding) and v.device.type in devices and v.dtype in dtypes
            and xv.dtype == wv.dtype == v.dtype and _same(v.shape, shape))


def conv_relu_epilogues(gm: torch.fx.GraphModule, tuning: GraphPassTuning = GraphPassTuning()) -> int:
    """Give each ``relu(conv(x, w) + bias [+ z])`` of an inference graph to cuDNN as one call
    with a fused epilogue: ``aten.cudnn_convolution_relu`` or ``aten.cudnn_convolution_add_relu``.

    The sum under the ReLU may hold, in any order: one 2-D convolution, once (ungrouped, not
    transposed; its own bias, if any, counts as a bias term), per-channel bias terms (shape
    ``(C, 1, 1)`` or ``(1, C, 1, 1)``: what BatchNorm folding leaves, :mod:`torchfuse.freezing`),
    and at most one other tensor ``z`` of the result's shape, dtype and strides (a residual
    shortcut). When ``z`` is a second such convolution read only by the sum, its bias joins the
    bias terms (ResNet's downsampling shortcut). The bias terms are summed into one ``(C,)``
    vector; in a frozen graph that sum depends on weights alone and is hoisted.

    cuDNN adds the bias and ``z`` to the fp32 accumulator and rounds once, where eager rounds the
    convolution and each add to the dtype: the result differs from eager's by the roundings it
    skips and is closer to an fp64 reference (run AW, ResNet-50's fp16 convolutions with
    unit-variance inputs: max error 0.0019-0.0038 against 0.0022-0.0059 for the convolution and a
    separate kernel). A convolution whose intermediate results are read elsewhere is left alone.

    Only for inference graphs: the cuDNN calls have no derivative formula. Only on
    ``tuning.conv_epilogue_devices`` in ``tuning.conv_epilogue_dtypes``, and only with cuDNN
    enabled on CUDA.

    Args:
        gm: an ATen-level inference graph whose nodes carry ``meta["val"]``; changed in place.
        tuning: the devices and dtypes it rewrites.

    Returns:
        The number of ReLUs replaced.
    """
    from torch._guards import detect_fake_mode

    devices, dtypes = tuning.conv_epilogue_devices, tuning.conv_epilogue_dtypes
    if "cuda" in devices and not (torch.backends.cudnn.is_available() and torch.backends.cudnn.enabled):
        devices = tuple(d for d in devices if d != "cuda")
    if not devices:
        return 0
    graph, done = gm.graph, 0
    order = {n: i for i, n in enumerate(graph.nodes)}
    for relu in calls_to(gm, (aten.relu.default,)):
        out = _val(relu)
        root = relu.args[0]
        if not isinstance(out, torch.Tensor) or out.dim() != 4 or not isinstance(root, torch.fx.Node):
            continue
        from torch.fx.experimental.symbolic_shapes import guard_or_false
        if guard_or_false(out.numel() == 0):  # an empty batch stays on ATen's convolution, which handles it
            continue
        terms = _sum_terms(root, out.shape)
        convs = [t for t in terms if _fusable_conv(t, out.shape, devices, dtypes)]
        # a convolution counted twice (``y + y``, or ``t + t`` with ``t = conv + b``: a node's
        # ``users`` lists each reader once) is not one epilogue's operand: left alone
        if not convs or any(terms.count(c) > 1 for c in convs):
            continue
        conv = max(convs, key=order.__getitem__)  # with two, the one computed last takes the epilogue
        cv = _val(conv)
        if not _same(cv.stride(), out.stride()) or out.dtype != cv.dtype:
            continue
        channels = cv.shape[1]
        biases, full, ok = [], [], True
        for t in terms:
            if t is conv:
                continue
            v = _val(t)
            if not isinstance(v, torch.Tensor) or v.dtype != cv.dtype:
                ok = False
            elif _same(v.shape, out.shape) and _same(v.stride(), cv.stride()):
                full.append(t)
            elif (v.dim() in (3, 4) and _same(v.shape[-3:], (channels, 1, 1)) and all(s == 1 for s in v.shape[:-3])
                  and v.is_contiguous()):
                biases.append(t)
            else:
                ok = False
        fake = detect_fake_mode([cv])
        if not ok or len(full) > 1 or fake is None:
            continue
        z = full[0] if full else None
        shortcut_bias = z is not None and z in convs and z.args[2] is not None
        if shortcut_bias:
            biases.append(z.args[2])  # the shortcut's bias moves into the epilogue's
        if conv.args[2] is not None:
            biases.append(conv.args[2])

        call = functools.partial(_call_with_val, graph, fake)
        x, w, _, stride, padding, dilation, _, _, groups = conv.args
        with graph.inserting_before(relu):
            bias = None
            for b in biases:
                b = b if _val(b).dim() == 1 else call(aten.view.default, b, [channels])
                bias = b if bias is None else call(aten.add.Tensor, bias, b)
            if z is None:
                fused = graph.call_function(aten.cudnn_convolution_relu.default,
                                            (x, w, bias, stride, padding, dilation, groups))
            else:
                fused = graph.call_function(aten.cudnn_convolution_add_relu.default,
                                            (x, w, z, 1, bias, stride, padding, dilation, groups))
        with fake:  # cuDNN's output layout is the convolution's (no meta kernel exists for these ops)
            fused.meta["val"] = torch.empty_strided(cv.shape, cv.stride(), dtype=cv.dtype, device=cv.device)
        if shortcut_bias:  # only once nothing above can fail: the graph stays whole either way
            z.args = z.args[:2] + (None,) + z.args[3:]
        relu.replace_all_uses_with(fused)
        _erase_unused([relu])
        done += 1
    return finish(gm, done, "convolution(s) with bias and ReLU given to cuDNN's fused epilogue")
