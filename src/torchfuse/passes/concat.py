"""ATen-level rewrites of concatenations, so that they fuse with their producers and readers.

* :func:`cat_of_one`: a concatenation whose other inputs are empty (a key-value cache's first
  update) as a copy the segmenter can fuse.
* :func:`summed_scatters_as_cat`: a sum of scatters into zeros that tile a dim (the backward
  of slices of one tensor: RoPE's halves) as the pieces' concatenation.
* :func:`views_of_pointwise_values`: a pointwise value only slices read as the same op of its
  operands' slices (the pieces of ``g * sin`` that RoPE's backward concatenates).
* :func:`equal_cats_as_selects`: a concatenation of a few tensors of one shape (the backward
  of a projection split into query, key and value; RoPE's ``rotate_half``) as selects the
  segmenter can fuse, with their pointwise readers applied over the stacked shape.
"""
from __future__ import annotations

import math

import torch
import torch.fx

from . import calls_to, finish
from .aten import _arg, _call_of, _call_with_val, _erase_unused, _same, _val

aten = torch.ops.aten
prims = torch.ops.prims


def cat_of_one(gm: torch.fx.GraphModule) -> int:
    """Replace each ``aten.cat`` that has exactly one non-empty input ``x`` by
    ``aten.clone(x)`` when the clone has the concatenation's dtype, shape and strides; the empty
    inputs, if nothing else reads them, go too.

    HuggingFace's key-value cache starts empty and its first update is ``cat([empty, k])``
    (GPT-2 and T5 with their default ``use_cache=True``, in training too): ATen's
    concatenation copies ``k``, a permuted view, with a kernel that does not vectorize (GPT-2 at
    8 x 512 in bf16 on an H200: 24 such copies, 0.48 ms of a 13 ms training step), where a
    clone is a pointwise op the segmenter fuses and gives one of its tuned kernels. ``cat``
    makes a new tensor and a clone does too, so nothing aliases that did not before.

    Returns:
        The number of concatenations replaced.
    """
    from torch._guards import detect_fake_mode
    from torch.fx.experimental.symbolic_shapes import guard_or_false

    done = 0
    for n in calls_to(gm, (aten.cat.default,)):
        tensors = n.args[0] if n.args else n.kwargs.get("tensors")
        out = _val(n)
        if not isinstance(tensors, (list, tuple)) or not isinstance(out, torch.Tensor):
            continue
        vals = [_val(t) for t in tensors]
        if not all(isinstance(v, torch.Tensor) for v in vals):
            continue
        # cat skips any input with no elements, legacy 1-D ``(0,)`` tensors included
        full = [t for t, v in zip(tensors, vals) if not guard_or_false(v.numel() == 0)]
        if len(full) != 1:
            continue
        x, xv = full[0], _val(full[0])
        if xv.dtype != out.dtype or xv.device != out.device or not _same(xv.shape, out.shape):
            continue
        fake = detect_fake_mode([xv])
        if fake is None:
            continue
        with gm.graph.inserting_before(n):
            clone = _call_with_val(gm.graph, fake, aten.clone.default, x, memory_format=torch.contiguous_format)
        if not (out.is_contiguous() and _same(_val(clone).stride(), out.stride())):
            gm.graph.erase_node(clone)
            continue
        n.replace_all_uses_with(clone)
        gm.graph.erase_node(n)
        _erase_unused([t for t in tensors if t is not x])
        done += 1
    return finish(gm, done, "concatenations of one non-empty tensor made copies")


def _same_fill(a: torch.fx.Node, b: torch.fx.Node) -> bool:
    """``a`` and ``b`` are one tensor of zeros, or two made by the same call (a graph traced
    without common-subexpression elimination makes one per scatter)."""
    return a is b or (a.target is b.target and a.args == b.args and a.kwargs == b.kwargs)


def _scatter_pieces(node, base=None) -> tuple | None:
    """``(zeros, dim, [(start, end, src)])`` when ``node`` is a sum (``add``) of
    ``slice_scatter``s of pieces into one tensor of zeros along one dim, with step 1 and
    static bounds, each read only by that sum; else None."""
    if _call_of(node, aten.add.Tensor) and len(node.args) == 2 and not node.kwargs:
        found = [_scatter_pieces(a, base) for a in node.args]
        if any(f is None for f in found) or found[0][1] != found[1][1] or not _same_fill(found[0][0], found[1][0]):
            return None
        return found[0][0], found[0][1], found[0][2] + found[1][2]
    if not _call_of(node, aten.slice_scatter.default) or node.kwargs or len(node.users) != 1:
        return None
    zeros, src = node.args[0], node.args[1]
    dim, start, end, step = (list(node.args[2:]) + [0, None, None, 1][len(node.args) - 2:])[:4]
    # (a fill of -0.0 keeps a piece's -0.0 in the sum, where the concatenation plus 0.0 would not)
    filled = (_call_of(zeros, aten.full.default) and zeros.args[1] == 0
              and math.copysign(1.0, zeros.args[1]) > 0) or any(
        _call_of(zeros, op) for op in (aten.zeros.default, aten.zeros_like.default, aten.new_zeros.default))
    if not filled or step != 1:
        return None
    size = _val(zeros).shape[dim] if isinstance(dim, int) else None
    if type(size) is not int or not all(type(b) is int or b is None for b in (start, end)):
        return None
    start = 0 if start is None else (start + size if start < 0 else start)
    end = size if end is None else min(end + size if end < 0 else end, size)
    return zeros, dim % _val(zeros).dim(), [(start, end, src)]


def _trailing_scatters(n: torch.fx.Node) -> tuple | None:
    """``(head, zeros, dim, [(start, end, src)])`` when ``n`` is a sum of ``slice_scatter``s
    into zeros (head ``None``), or a chain ``((head + s1) + s2) ...`` whose last terms are
    (sums of) such scatters, each partial sum read only by the next; all scatters of one
    fill along one dim. Else None."""
    found = _scatter_pieces(n)
    if found is not None:
        return None, *found
    cur, terms = n, []
    while (_call_of(cur, aten.add.Tensor) and len(cur.args) == 2 and not cur.kwargs
           and (cur is n or len(cur.users) == 1)):
        a, b = cur.args
        term = _scatter_pieces(b) if isinstance(b, torch.fx.Node) else None
        if term is not None:
            terms.append(term)
            cur = a
            continue
        term = _scatter_pieces(a) if isinstance(a, torch.fx.Node) else None
        if term is None:
            break
        terms.append(term)
        cur = b
    if not terms or not isinstance(cur, torch.fx.Node):
        return None
    zeros, dim = terms[0][0], terms[0][1]
    if any(t[1] != dim or not _same_fill(t[0], zeros) for t in terms):
        return None
    return cur, zeros, dim, [p for t in terms for p in t[2]]


def summed_scatters_as_cat(gm: torch.fx.GraphModule) -> int:
    """Replace each sum of ``slice_scatter``s into zeros whose pieces tile a dim by the
    concatenation of the pieces plus 0.0, and a sum ``((head + s1) + s2) ...`` whose last
    terms are such scatters by ``head + (cat + 0.0)``.

    The backward of a concatenation read by slices (RoPE's ``cat((-x2, x1))`` of ``x``'s
    halves) reaches ``x`` as ``slice_backward`` of each half, decomposed to a scatter into a
    tensor of zeros, and their sum: a kernel writing zeros, two scatters on ATen and a kernel
    adding them. Each element of the sum is one piece's element plus zeros, which is that
    element plus 0.0 (a negative zero becomes +0.0 as in the sum; nothing else changes), so
    the concatenation plus 0.0 is the sum bit for bit, and a concatenation of equal pieces
    fuses (:func:`equal_cats_as_selects`). Where autograd adds the scatters one by one into a
    gradient already summed (``x`` also read whole: ``x * cos``), each element is
    ``head`` plus its piece's element plus zeros, in that order; adding zeros changes at most
    the sign of a zero, and a sum with a +0.0 term is never -0.0, so ``head + (cat + 0.0)``
    is that sum bit for bit too. Floating-point sums of one dtype only (``+ 0.0`` would
    promote an integer one; a head of another dtype would promote differently).

    Returns:
        The number of sums replaced.
    """
    done = 0
    for n in calls_to(gm, (aten.add.Tensor,)):
        user = next(iter(n.users), None) if len(n.users) == 1 else None
        if user is not None and _scatter_pieces(user) is not None:
            continue  # (the outermost sum of a chain is replaced, and with it this one)
        found = _trailing_scatters(n)
        out = _val(n)
        if found is None or not isinstance(out, torch.Tensor) or not out.is_floating_point():
            continue
        head, zeros, dim, pieces = found
        if any(_val(src).dtype != out.dtype for _, _, src in pieces):
            continue  # (a scatter converts its piece to the zeros' dtype, a concatenation promotes)
        if head is not None and (not isinstance(_val(head), torch.Tensor) or _val(head).dtype != out.dtype):
            continue
        pieces.sort(key=lambda p: p[0])
        size = _val(zeros).shape[dim]
        if pieces[0][0] != 0 or pieces[-1][1] != size or any(a[1] != b[0] for a, b in zip(pieces, pieces[1:])):
            continue
        if _val(zeros).dtype != out.dtype or list(_val(zeros).shape) != list(out.shape):
            continue
        from torch._guards import detect_fake_mode

        fake = detect_fake_mode([out])
        if fake is None:
            continue
        with gm.graph.inserting_before(n):
            made = [_call_with_val(gm.graph, fake, aten.cat.default, [src for _, _, src in pieces], dim)]
            made.append(_call_with_val(gm.graph, fake, aten.add.Tensor, made[-1], 0.0))
            if head is not None:
                made.append(_call_with_val(gm.graph, fake, aten.add.Tensor, head, made[-1]))
        total = made[-1]
        if _val(total).stride() != out.stride() or list(_val(total).shape) != list(out.shape):
            for m in reversed(made):
                gm.graph.erase_node(m)
            continue
        for key in ("stack_trace", "nn_module_stack"):
            if key in n.meta:
                for m in made:
                    m.meta.setdefault(key, n.meta[key])
        n.replace_all_uses_with(total)
        _erase_unused([n])
        done += 1
    return finish(gm, done, "sums of scatters into zeros made concatenations")


def equal_cats_as_selects(gm: torch.fx.GraphModule, max_inputs: int) -> int:
    """Replace each ``aten.cat`` of 2 to ``max_inputs`` tensors of one static shape, dtype and
    device by a select the segmenter can fuse with the tensors' producers and readers.

    ``cat(xs, d)`` of ``n`` tensors shaped ``[..., s, ...]`` is, element for element,
    ``where(i == 0, x0', where(i == 1, x1', ... x{n-1}'))`` over the stacked shape
    ``[..., n, s, ...]`` (``xk'``: ``xk`` unsqueezed at ``d``, broadcast along the new dim;
    ``i``: an ``arange(n)`` along it), made contiguous and viewed as the concatenation's
    contiguous result. Where every ``xk`` is a reshape (``view``, ``unsqueeze``) of a tensor
    ``yk`` whose dims group into the dims before ``d``, those of ``d`` and those after, the
    select stacks the ``yk`` instead, at the first of ``d``'s dims: the same elements in the
    same order, with no reshape that merges dims between the select and the ``yk``'s producers
    (the segmenter fuses across none). A select passes its operand's value through, so the
    values are the concatenation's, signed zeros included. Code generation loads each input only where its
    branch is taken (:meth:`~torchfuse.codegen.writer.KernelWriter.mask_branches`), so the
    fused kernel reads every input once, as ATen's concatenation does.

    Why: the backward of a fused projection split three ways (GPT-2's query, key and value;
    timm's ``qkv.unbind``) concatenates three gradients that pointwise kernels have just made
    contiguous; on ATen that is a kernel of its own and one more copy of each gradient, where
    the select is one fusion group with them, as Inductor's pointwise concatenation is.

    Args:
        gm: an ATen-level graph whose nodes carry fake values (``meta["val"]``).
        max_inputs: ``Tuning.graph_passes.cat_select_max_inputs``.

    Returns:
        The number of concatenations replaced.
    """
    from torch._guards import detect_fake_mode

    done = 0
    for n in calls_to(gm, (aten.cat.default,)):
        tensors = _arg(n, 0, "tensors")
        out = _val(n)
        if not isinstance(tensors, (list, tuple)) or not 2 <= len(tensors) <= max_inputs:
            continue
        vals = [_val(t) for t in tensors]
        if not isinstance(out, torch.Tensor) or not all(isinstance(v, torch.Tensor) for v in vals):
            continue
        shape = vals[0].shape
        # every input's sizes are plain ints before they are compared: comparing a symbolic
        # size (an unbacked one of ``x[mask]``) guards on it, which raises for an unbacked one
        if (not shape or not all(type(s) is int for v in vals for s in v.shape) or not out.is_contiguous()
                or any(v.shape != shape or v.dtype != out.dtype or v.device != out.device for v in vals)):
            continue
        fake = detect_fake_mode(vals)
        if fake is None:
            continue
        dim = _arg(n, 1, "dim", 0)
        dim = dim + len(shape) if dim < 0 else dim
        sources, at = _stack_sources(list(tensors), list(shape), dim)
        count, rank = len(sources), len(_val(sources[0]).shape)
        g = gm.graph
        with g.inserting_before(n):
            parts = [_call_with_val(g, fake, aten.unsqueeze.default, t, at) for t in sources]
            select = parts[-1]
            for k in range(count - 2, -1, -1):
                # an index of its own for each select: a value read by one select only fuses
                # into that select's group, where a shared one would be written out
                index = _call_with_val(g, fake, aten.arange.default, count, dtype=torch.int64, device=out.device)
                index = _call_with_val(g, fake, aten.view.default, index, [count] + [1] * (rank - at))
                pick = _call_with_val(g, fake, aten.eq.Scalar, index, k)
                select = _call_with_val(g, fake, aten.where.self, pick, parts[k], select)
            if not _val(select).is_contiguous():
                select = _call_with_val(g, fake, aten.clone.default, select, memory_format=torch.contiguous_format)
            result = select
            if list(_val(select).shape) != list(out.shape):
                result = _call_with_val(g, fake, aten.view.default, select, list(out.shape))
        for new in _nodes_between(parts[0], n):
            # the concatenation's source line and module, for explain's locations
            for key in ("stack_trace", "nn_module_stack"):
                if key in n.meta:
                    new.meta.setdefault(key, n.meta[key])
        n.replace_all_uses_with(result)
        g.erase_node(n)
        _erase_unused(tensors)
        # a reshape of the concatenation back to the stacked shape (``unbind``'s backward
        # stacks so) reads the select itself: two reshapes that merge and split dims would
        # stand between the select and its readers, and the segmenter fuses across neither
        stacked = list(_val(select).shape)
        for user in list(result.users) if result is not select else []:
            if user.op == "call_function" and user.target in _RESHAPES and list(_val(user).shape) == stacked:
                user.replace_all_uses_with(select)
                g.erase_node(user)
        _readers_over_stacked_shape(gm, fake, select, result)
        if result is not select and not result.users:
            g.erase_node(result)
        done += 1
    return finish(gm, done, "concatenations of equal tensors made selects")


def dim_groups(sizes: list, target: list) -> list[list] | None:
    """``sizes`` (ints or ``sympy`` expressions) cut into consecutive groups whose products are
    ``target``'s sizes in order (trailing 1s join the last group); None where no such cut
    exists. Shared with the direct API's concatenation (:mod:`torchfuse.fusion.concat`)."""
    import sympy

    groups: list[list] = []
    k = 0
    for t in target:
        group: list = []
        while k < len(sizes) and (not group or sympy.expand(math.prod(group) - t) != 0):
            group.append(sizes[k])
            k += 1
        if not group or sympy.expand(math.prod(group) - t) != 0:
            return None
        groups.append(group)
    if not groups or any(s != 1 for s in sizes[k:]):
        return None
    groups[-1] += sizes[k:]
    return groups


def elementwise(node: torch.fx.Node) -> bool:
    """An ATen call of one element from the same element of each (broadcast) operand, with
    no tensor passed by keyword: tagged pointwise and drawing no random numbers, or a dtype
    conversion (shared with :mod:`torchfuse.fusion.views`, on ``make_fx`` traces)."""
    t = node.target
    if node.op != "call_function" or not isinstance(t, torch._ops.OpOverload):
        return False
    if t in (aten._to_copy.default, prims.convert_element_type.default):
        return set(node.kwargs) <= {"dtype"}
    if t is aten.clone.default and node.kwargs.get("memory_format") not in (
            None, torch.preserve_format, torch.contiguous_format):
        return False  # (channels-last: of its operand's rank only)
    return (torch.Tag.pointwise in t.tags and torch.Tag.nondeterministic_seeded not in t.tags
            and not any(isinstance(v, torch.fx.Node) for v in node.kwargs.values()))


def _readers_over_stacked_shape(gm: torch.fx.GraphModule, fake, select: torch.fx.Node, result: torch.fx.Node) -> bool:
    """Apply the pointwise readers of ``result`` (a concatenation's select ``select`` viewed
    as the concatenation) over the select's stacked shape, in place.

    A view that merges dims ends a fusion group, so the readers of the concatenation (RoPE's
    ``q * cos + rotate_half(q) * sin``, and the transpose of its heads back) would be a kernel
    of their own, reading the concatenation written out by the select's. Each reader's value
    is kept over the stacked shape instead: its dims are groups of the stacked dims (a
    permute permutes the groups), each reader's other operands split to them by a view (no
    data moves; where they broadcast, size-1 dims), or, where a pointwise producer of one only
    feeds the readers, that producer applied again; the select and its readers are then one
    group. A reader's value read elsewhere is a view of its stacked value, with its strides
    (checked; where a view would not give them, nothing changes). The same elements are
    computed by the same ops.

    Returns:
        Whether the readers moved.
    """
    top = result  # (through the reshapes that merge more dims: GPT-J's stack(...).flatten(-2))
    while len(top.users) == 1 and next(iter(top.users)).op == "call_function" \
            and next(iter(top.users)).target in _RESHAPES:
        top = next(iter(top.users))
    if top is select:  # (its readers fuse with it as they are)
        return False
    first = dim_groups(list(_val(select).shape), list(_val(top).shape))
    if first is None:
        return False
    groups = {top: first}  # per value kept over the stacked shape: the stacked dims of each of its dims
    region: list = []  # its readers, pointwise or permutes, in graph order
    for node in gm.graph.nodes:
        reads = [a for a in node.all_input_nodes if a in groups]
        if not reads or not isinstance(_val(node), torch.Tensor):
            continue
        if _call_of(node, aten.permute.default) and node.args[0] in groups:
            groups[node] = [groups[node.args[0]][d] for d in node.args[1]]
        elif (elementwise(node) and all(list(_val(a).shape) == list(_val(node).shape) for a in reads)
              and all(groups[a] == groups[reads[0]] for a in reads)):
            groups[node] = groups[reads[0]]
        else:
            continue
        region.append(node)
    if not region:
        return False
    made: list = []
    new: dict = {top: select}
    again: set = set()
    g = gm.graph

    def stacked(v, cut: list[list[int]], shape: list):
        """``v`` (an operand of a moved reader whose dims are cut as ``cut``) over the stacked shape."""
        val = _val(v)
        if not isinstance(val, torch.Tensor) or val.dim() == 0:
            return v
        if v in new:
            return new[v]
        offset = len(cut) - val.dim()
        target = []
        for i, size in enumerate(val.shape):
            target += [1] * len(cut[offset + i]) if size == 1 else cut[offset + i]
        if target == list(val.shape):
            return v
        if (elementwise(v) and list(val.shape) == shape
                and all(u in groups or u in again for u in v.users)
                # (an operand kept over the stacked shape already must be so with the same dims)
                and all(a not in new or groups.get(a) == cut for a in v.all_input_nodes)):
            again.add(v)  # (its own operands' producers, read by it alone, move too)
            groups[v] = cut
            out = apply(v)
        else:
            out = _call_with_val(g, fake, aten.view.default, v, target)
            made.append(out)
        new[v] = out
        return out

    def apply(node):
        if _call_of(node, aten.permute.default):
            src = node.args[0]
            starts = [sum(len(c) for c in groups[src][:d]) for d in range(len(groups[src]))]
            dims = [starts[d] + k for d in node.args[1] for k in range(len(groups[src][d]))]
            out = _call_with_val(g, fake, aten.permute.default, new[src], dims)
        else:
            shape = list(_val(node).shape)
            args = tuple(stacked(a, groups[node], shape) if isinstance(a, torch.fx.Node) else a for a in node.args)
            out = _call_with_val(g, fake, node.target, *args, **node.kwargs)
        made.append(out)
        return out

    views = {}
    for node in region:  # (each where the reader was: its outside readers may follow it closely)
        with g.inserting_before(node.next):
            new[node] = apply(node)
            if any(u not in groups for u in node.users):  # read elsewhere: a view with its strides
                views[node] = _call_with_val(g, fake, aten.view.default, new[node], list(_val(node).shape))
                made.append(views[node])
    if any(_val(v).stride() != _val(n).stride() for n, v in views.items()):
        for m in reversed(made):
            g.erase_node(m)
        return False
    for node, view in views.items():
        node.replace_all_uses_with(view, delete_user_cb=lambda u: u not in groups)
    for node in reversed(region):
        g.erase_node(node)
    _erase_unused(list(again))
    while top is not result and not top.users:  # (the reshapes between; the caller erases result)
        below = top.args[0]
        g.erase_node(top)
        top = below
    return True


def _nodes_between(first: torch.fx.Node, end: torch.fx.Node) -> list:
    """The nodes from ``first`` up to, not including, ``end``, in graph order."""
    nodes, node = [], first
    while node is not end:
        nodes.append(node)
        node = node.next
    return nodes


#: ATen reshapes that only regroup a tensor's dims, in its elements' row-major order
_RESHAPES = (aten.view.default, aten._unsafe_view.default, aten.unsqueeze.default, aten.reshape.default)


def _stack_sources(tensors: list, shape: list, dim: int) -> tuple[list, int]:
    """``(sources, at)``: tensors to stack at dim ``at`` for the concatenation of ``tensors``
    (each of ``shape``) along ``dim``, in the concatenation's row-major order. The reshaped
    tensors themselves when every one of ``tensors`` reshapes a tensor of one static shape
    whose leading dims multiply to the dims before ``dim`` and whose next ones to ``dim``'s
    size; else ``tensors`` at ``dim``."""
    if not all(isinstance(t, torch.fx.Node) and t.op == "call_function" and t.target in _RESHAPES
               for t in tensors):
        return tensors, dim
    inner = [t.args[0] for t in tensors]
    vals = [_val(t) for t in inner]
    if not all(isinstance(v, torch.Tensor) for v in vals) or not all(type(s) is int for s in vals[0].shape):
        return tensors, dim
    base = list(vals[0].shape)
    if any(list(v.shape) != base for v in vals) or math.prod(base) != math.prod(shape):
        return tensors, dim
    before, through = math.prod(shape[:dim]), math.prod(shape[:dim + 1])
    prefix = [math.prod(base[:k]) for k in range(len(base) + 1)]
    starts = [k for k, p in enumerate(prefix) if p == before]
    if not starts or through not in prefix[starts[0]:]:
        return tensors, dim
    return inner, starts[0]


def _view_of_operand(graph: torch.fx.Graph, fake, a, out_rank: int, view: tuple, made: list):
    """The operand ``a`` of a pointwise call whose result (of rank ``out_rank``) is viewed as
    ``view`` (``(target, dim, rest)``, a static slice or select): the same view of ``a``,
    ``a`` itself where it broadcasts along the dim, and a 1-element slice for a ``select`` of
    a 1-dim operand (a 0-dim one would promote as a number); None where the view is not static."""
    val = _val(a)
    if not isinstance(a, torch.fx.Node) or not isinstance(val, torch.Tensor) or val.dim() == 0:
        return a
    target, dim, rest = view
    d = dim - (out_rank - val.dim())
    if d < 0:
        return a
    if type(val.shape[d]) is not int:
        return None
    broadcast = val.shape[d] == 1
    if target is aten.select.int:
        if val.dim() == 1 and broadcast:
            return a
        if val.dim() == 1:
            i = rest[0] % val.shape[0]
            target, rest = aten.slice.Tensor, (i, i + 1)
        elif broadcast:
            rest = (0,)
    elif broadcast:
        return a
    node = _call_with_val(graph, fake, target, a, d, *rest)
    made.append(node)
    return node


def _storage_read(view: torch.fx.Node, outputs: set) -> bool:
    """Whether a view of ``view`` (followed through views) is returned, or read by
    ``as_strided``: both see where its elements sit in its storage, which a value computed
    from the operands' views would change (a new storage, offset 0)."""
    from . import aliases_first_argument

    work, seen = [view], set()
    while work:
        node = work.pop()
        if node in seen:
            continue
        seen.add(node)
        for u in node.users:
            if _call_of(u, aten.as_strided.default):
                return True
            if u.op == "call_function" and u.args and u.args[0] is node and aliases_first_argument(u.target):
                if u in outputs:
                    return True
                work.append(u)
    return False


def views_of_pointwise_values(gm: torch.fx.GraphModule, rounds: int = 8) -> int:
    """Replace each pointwise call that only static slices and selects read by the same call of
    those views of its operands, in place (repeated, so that views move up through a chain of
    such calls).

    A view of a value the graph computes must stay a view of that value written out, so the
    pieces of ``g * sin`` that RoPE's backward concatenates (``rotate_half``'s gradient) are
    sliced from a tensor one kernel writes and the next reads. Computed from the same views of
    the operands, each piece is an ordinary pointwise value that fuses with its readers. Each
    element is computed by the same op from the same elements, so the values are the same;
    results whose dtype or sizes, or whose readers' strides, would change are left as they were.

    Returns:
        The number of pointwise calls replaced.
    """
    from torch._guards import detect_fake_mode

    outputs = set(gm.graph.output_node().all_input_nodes)
    done = 0
    for _ in range(rounds):
        before = done
        for e in list(gm.graph.nodes):
            views = list(e.users)
            if (getattr(e, "_erased", False) or not views or e in outputs or not elementwise(e)
                    or not isinstance(_val(e), torch.Tensor)):
                continue
            if not all((_call_of(v, aten.slice.Tensor) or _call_of(v, aten.select.int)) and not v.kwargs
                       and v not in outputs and all(type(x) is int for x in v.args[1:]) for v in views):
                continue
            if any(_storage_read(v, outputs) for v in views):
                continue
            fake = detect_fake_mode([_val(e)])
            if fake is None:
                continue
            made: list = []
            replaced = {}
            for v in views:
                dim = (v.args[1] if len(v.args) > 1 else 0) % _val(e).dim()
                with gm.graph.inserting_before(v):
                    args = [_view_of_operand(gm.graph, fake, a, _val(e).dim(), (v.target, dim, tuple(v.args[2:])), made)
                            for a in e.args]
                    if any(a is None for a in args):
                        break
                    new = _call_with_val(gm.graph, fake, e.target, *args, **e.kwargs)
                made.append(new)
                if _val(new).dtype != _val(v).dtype or list(_val(new).shape) != list(_val(v).shape):
                    break
                replaced[v] = new
            if len(replaced) == len(views):
                for v, new in replaced.items():  # readers whose own layout would change: left as they were
                    for u in v.users:
                        vals = torch.fx.node.map_arg((u.args, u.kwargs), lambda x: _val(new) if x is v else _val(x))
                        try:
                            with fake:
                                again = u.target(*vals[0], **vals[1]) if u.op == "call_function" else None
                        except Exception:  # noqa: BLE001 - a reader that cannot be rerun so: left as it was
                            again = None
                        if not isinstance(again, torch.Tensor) or again.stride() != _val(u).stride():
                            replaced = {}
                            break
            if len(replaced) != len(views):
                for m in reversed(made):
                    gm.graph.erase_node(m)
                continue
            for v, new in replaced.items():
                v.replace_all_uses_with(new)
                gm.graph.erase_node(v)
            gm.graph.erase_node(e)
            done += 1
        if done == before:
            break
    return finish(gm, done, "pointwise values read through slices computed from their operands' slices")
