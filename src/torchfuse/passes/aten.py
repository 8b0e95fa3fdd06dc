"""ATen-level rewrites: the graphs AOTAutograd produces (forward, backward, inference),
before the IR is built from them.

* :func:`merge_duplicate_pads`: the padded matrix products (``decompose.mm_padded``) pad an
  operand in its memory order, so the gradient of a language model's vocabulary product is
  padded once as ``G`` and once as ``permute(permute(G))``, which AOTAutograd's
  common-subexpression pass does not recognise as one value: two copies of a tensor of
  ``tokens x vocabulary`` elements per step (GPT-2 at 8 x 512 in bf16: 412 MB each).
* :func:`cat_of_one`: a concatenation whose other inputs are empty (a key-value cache's first
  update) as a copy the segmenter can fuse.
* :func:`equal_cats_as_selects`: a concatenation of a few tensors of one shape (the backward
  of a projection split into query, key and value) as selects the segmenter can fuse.
* :func:`conv_relu_epilogues`: ReLU-ended convolutions of inference graphs to cuDNN's fused
  epilogue.
* :func:`scalar_copies_from_device`: a 0-dim CPU constant copied into a device tensor read
  from a device fill instead, which a CUDA graph can capture.
* :func:`lifted_scalar_constants`: a 0-dim tensor constant made in the model's code
  (``torch.tensor(0.0, device=...)``) as a fill the segmenter fuses.
* :func:`resolved_negative_views`: a lazily negated view (``x.conj().imag``, ``_neg_view``)
  and a graph input with ATen's negative bit computed as a negation first, since kernels read
  a tensor's memory, not its bits.
* :func:`separate_gradient_views`: gradients a backward graph returns as views of one tensor
  (the weights of a product of :func:`~torchfuse.passes.fx.grouped_linears`) as tensors of
  their own, as eager's are.

Also the helpers the ATen-level passes share (a node's fake value, its arguments, inserting
a call with its value). Cross-entropy's rewrites are in :mod:`.cross_entropy`.
"""
from __future__ import annotations

import functools
import math

import torch
import torch.fx

from ..config import GraphPassTuning
from . import calls_to, finish, flat_nodes, view_root

aten = torch.ops.aten
prims = torch.ops.prims


_PERMUTES = (aten.permute.default, aten.t.default)


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
        # repr tells -0.0 from 0.0 (equal as numbers, different bits) and takes complex values
        key = (src, perm, tuple(n.args[1]), repr(value))
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


def resolved_negative_views(gm: torch.fx.GraphModule) -> int:
    """Replace each ``aten._neg_view(x)`` by ``aten.neg(x)``, and read each graph input whose
    value has ATen's negative bit (``Tensor.is_neg()``: ``x.conj().imag``, ``torch._neg_view``)
    through ``aten.resolve_neg``.

    A negative view shares its input's memory and leaves the negation to whatever reads it
    (ATen's kernels resolve the bit on their way in); a generated kernel and a view replayed
    from recorded strides read the memory alone, and gave ``x.conj().imag * 1`` with the
    wrong sign. TorchDynamo's guards check a tensor's dispatch keys, the negative bit among
    them, so an input's bit is the same at every call of the graph. A graph whose value is
    read as a negation is functional (AOTAutograd's), so giving up the alias changes no value.

    Returns:
        The number of views and inputs resolved.
    """
    done = 0
    for n in calls_to(gm, (aten._neg_view.default,)):
        n.target = aten.neg.default
        done += 1
    inputs = [n for n in gm.graph.nodes if n.op == "placeholder"]
    for x in inputs:
        val = _val(x)
        if not (isinstance(val, torch.Tensor) and val.is_neg()):
            continue
        from torch._guards import detect_fake_mode

        with gm.graph.inserting_after(inputs[-1]):
            resolved = _call_with_val(gm.graph, detect_fake_mode([val]), aten.resolve_neg.default, x)
        # (a write back into the input, AOTAutograd's copy_, still writes the input itself)
        x.replace_all_uses_with(resolved, delete_user_cb=lambda user: user is not resolved and not (
            user.target is aten.copy_.default and user.args[0] is x))
        done += 1
    return finish(gm, done, "negative views resolved")


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


def _dim_groups(sizes: list[int], target: list[int]) -> list[list[int]] | None:
    """``sizes`` cut into consecutive groups whose products are ``target``'s sizes in order
    (trailing 1s join the last group); None where no such cut exists."""
    groups: list[list[int]] = []
    k = 0
    for t in target:
        group: list[int] = []
        while k < len(sizes) and (not group or math.prod(group) != t):
            group.append(sizes[k])
            k += 1
        if not group or math.prod(group) != t:
            return None
        groups.append(group)
    if not groups or any(s != 1 for s in sizes[k:]):
        return None
    groups[-1] += sizes[k:]
    return groups


def _elementwise(node: torch.fx.Node) -> bool:
    """An ATen call of one element from the same element of each (broadcast) operand, with
    no tensor passed by keyword: tagged pointwise and drawing no random numbers, or a dtype
    conversion."""
    t = node.target
    if node.op != "call_function" or not isinstance(t, torch._ops.OpOverload):
        return False
    if t in (aten._to_copy.default, prims.convert_element_type.default):
        return set(node.kwargs) <= {"dtype"}
    return (torch.Tag.pointwise in t.tags and torch.Tag.nondeterministic_seeded not in t.tags
            and not any(isinstance(v, torch.fx.Node) for v in node.kwargs.values()))


def _readers_over_stacked_shape(gm: torch.fx.GraphModule, fake, select: torch.fx.Node, result: torch.fx.Node) -> bool:
    """Apply the pointwise readers of ``result`` (a concatenation's select ``select`` viewed
    as the concatenation) over the select's stacked shape, in place.

    A view that merges dims ends a fusion group, so the readers of the concatenation (RoPE's
    ``q * cos + rotate_half(q) * sin``) would be a kernel of their own, reading the
    concatenation written out by the select's. Applied over the stacked shape instead, each
    reader's other operands split to it by a view (no data moves; where they broadcast, size-1
    dims), or, where a pointwise producer of one only feeds the readers, that producer applied
    again over the stacked shape, the select and its readers are one group. A reader's value
    read elsewhere is a view of its stacked value, with its strides (checked; where a view would
    not give them, nothing changes). The same elements are computed by the same ops.

    Returns:
        Whether the readers moved.
    """
    top = result  # (through the reshapes that merge more dims: GPT-J's stack(...).flatten(-2))
    while len(top.users) == 1 and next(iter(top.users)).op == "call_function" \
            and next(iter(top.users)).target in _RESHAPES:
        top = next(iter(top.users))
    if top is select:  # (its readers fuse with it as they are)
        return False
    shape = list(_val(top).shape)
    groups = _dim_groups(list(_val(select).shape), shape)
    if groups is None:
        return False
    region: list = []  # pointwise calls over the concatenation's shape, from it
    inside = {top}
    for node in gm.graph.nodes:
        if (_elementwise(node) and any(a in inside for a in node.all_input_nodes)
                and isinstance(_val(node), torch.Tensor) and list(_val(node).shape) == shape):
            region.append(node)
            inside.add(node)
    if not region:
        return False
    made: list = []
    new: dict = {top: select}
    again: set = set()
    g = gm.graph

    def stacked(v):
        """``v`` (an operand of a moved reader) over the stacked shape."""
        val = _val(v)
        if not isinstance(val, torch.Tensor) or val.dim() == 0:
            return v
        if v in new:
            return new[v]
        offset = len(shape) - val.dim()
        target = []
        for i, size in enumerate(val.shape):
            target += [1] * len(groups[offset + i]) if size == 1 else groups[offset + i]
        if target == list(val.shape):
            out = v
        elif (_elementwise(v) and list(val.shape) == shape
              and all(u in inside or u in again for u in v.users)):
            again.add(v)  # (its own operands' producers, read by it alone, move too)
            out = apply(v)
        else:
            out = _call_with_val(g, fake, aten.view.default, v, target)
            made.append(out)
        new[v] = out
        return out

    def apply(node):
        args = tuple(stacked(a) if isinstance(a, torch.fx.Node) else a for a in node.args)
        out = _call_with_val(g, fake, node.target, *args, **node.kwargs)
        made.append(out)
        return out

    views = {}
    with g.inserting_before(region[-1].next):
        for node in region:
            new[node] = apply(node)
        for node in region:
            if any(u not in inside for u in node.users):  # read elsewhere: a view with its strides
                views[node] = _call_with_val(g, fake, aten.view.default, new[node], shape)
                made.append(views[node])
    if any(_val(v).stride() != _val(n).stride() for n, v in views.items()):
        for m in reversed(made):
            g.erase_node(m)
        return False
    for node, view in views.items():
        node.replace_all_uses_with(view, delete_user_cb=lambda u: u not in inside)
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


def scalar_copies_from_device(gm: torch.fx.GraphModule) -> int:
    """Give each ``aten.copy(dst, src)`` of a 0-dim CPU constant of the graph into a device
    tensor a device source: ``aten.full([], value)`` on ``dst``'s device, of ``src``'s dtype.
    The copy stays (``dst``'s layout, the same broadcast and cast), and its values are the
    same: ``value`` is the constant's, read exactly as a Python number. A copy from host
    memory is what a CUDA graph capture refuses (HuggingFace's T5 writes its decoder start
    token into the shifted labels so: ``shifted[..., 0] = start``, which TorchDynamo traces as
    a copy of a lifted 0-dim constant); a fill kernel is captured.

    Only constants whose value the graph holds (a ``get_attr``, possibly through
    ``lift_fresh_copy``, or ``scalar_tensor`` of a number); complex ones are left alone.

    Returns:
        The number of copies given a device source.
    """
    done = 0
    for n in calls_to(gm, (aten.copy.default,)):
        dst, src = _arg(n, 0, "self"), _arg(n, 1, "src")
        dv, sv = _val(dst), _val(src)
        if not (isinstance(dv, torch.Tensor) and isinstance(sv, torch.Tensor)):
            continue
        if sv.device.type != "cpu" or sv.dim() != 0 or dv.device.type == "cpu" or sv.is_complex():
            continue
        full = _scalar_fill(gm, n, src, sv.device, like=dv, dtype=sv.dtype, device=dv.device)
        if full is None:
            continue
        n.replace_input_with(src, full)
        _erase_unused([src])
        for attr in [a for a in gm.graph.nodes if a.op == "get_attr" and not a.users]:
            gm.graph.erase_node(attr)
        done += 1
    return finish(gm, done, "copies of a CPU constant given a device source")


def lifted_scalar_constants(gm: torch.fx.GraphModule) -> int:
    """Replace each ``aten.lift_fresh_copy`` of a 0-dim real tensor constant of the graph by
    ``aten.full([], value)`` of its dtype on its device, where the graph's tensor inputs are on
    that device.

    ``torch.tensor(0.0, device=mask.device, dtype=dtype)`` in a model's code (HuggingFace's
    additive attention mask, transformers 5.17) is traced as a module constant and its copy,
    two ATen calls a step outside any fusion group; a fill is a constant op the segmenter
    fuses into its reader. Both make a new tensor holding the constant's value, read exactly
    as a Python number.

    Returns:
        The number of copies replaced.
    """
    devices = {v.device for v in (_val(p) for p in gm.graph.nodes if p.op == "placeholder")
               if isinstance(v, torch.Tensor)}
    done = 0
    for n in calls_to(gm, (aten.lift_fresh_copy.default,)):
        src, out = n.args[0] if n.args else None, _val(n)
        if not (isinstance(src, torch.fx.Node) and src.op == "get_attr" and isinstance(out, torch.Tensor)):
            continue
        if devices != {out.device}:
            continue
        full = _scalar_fill(gm, n, src, out.device, like=out, dtype=out.dtype, device=out.device)
        if full is None:
            continue
        n.replace_all_uses_with(full)
        gm.graph.erase_node(n)
        if not src.users:
            gm.graph.erase_node(src)
        done += 1
    return finish(gm, done, "0-dim constants made by the model's code as fills")


def _scalar_fill(gm: torch.fx.GraphModule, before: torch.fx.Node, constant, constant_device: torch.device,
                 like: torch.Tensor, dtype: torch.dtype, device: torch.device) -> torch.fx.Node | None:
    """``aten.full([], value, dtype=dtype, device=device)`` inserted before node ``before``,
    ``value`` the number the 0-dim constant node ``constant`` (on ``constant_device``) holds;
    ``None``, and nothing inserted, when it holds none (:func:`_constant_number`) or ``like``
    (a fake value of the graph) has no fake mode."""
    from torch._guards import detect_fake_mode

    value = _constant_number(gm, constant, device=constant_device)
    fake = detect_fake_mode([like])
    if value is None or fake is None:
        return None
    with gm.graph.inserting_before(before):
        return _call_with_val(gm.graph, fake, aten.full.default, [], value, dtype=dtype, layout=torch.strided,
                              device=device, pin_memory=False)


def _constant_number(gm: torch.fx.GraphModule, node, device: torch.device = torch.device("cpu")
                     ) -> bool | int | float | None:
    """The Python number a 0-dim real constant node of ``gm`` on ``device`` holds, or ``None``
    when it is not one whose value the graph holds."""
    if _call_of(node, aten.lift_fresh_copy.default):
        node = node.args[0]
    if _call_of(node, aten.scalar_tensor.default):
        value = node.args[0]
        return value if isinstance(value, (bool, int, float)) else None
    if not (isinstance(node, torch.fx.Node) and node.op == "get_attr"):
        return None
    tensor = gm
    for name in node.target.split("."):
        tensor = getattr(tensor, name, None)
    if not isinstance(tensor, torch.Tensor) or tensor.dim() != 0 or tensor.is_complex() or tensor.device != device:
        return None
    from torch._subclasses.fake_tensor import FakeTensor, unset_fake_temporarily

    if isinstance(tensor, FakeTensor):  # a constant whose value the graph does not hold
        return None
    with unset_fake_temporarily():  # a real constant, read while AOTAutograd's fake mode is active
        return tensor.item()


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


def separate_gradient_views(gm: torch.fx.GraphModule) -> int:
    """Give each gradient a backward graph returns as a view of a tensor that another returned
    gradient also views (or is), or as a view of a part of a tensor the graph computes, a
    tensor of its own: ``clone`` of the view, contiguous.

    Why: the weights concatenated into one product (:func:`~torchfuse.passes.fx.grouped_linears`)
    get their gradients as row blocks of the product's weight gradient. Eager gives each
    parameter a ``.grad`` of its own storage; views of one storage would keep the whole
    product's gradient alive while any is held (also where the other weights need no
    gradient), save it whole with ``torch.save``, and make CUDA graph replays see gradients
    held across steps (each view holds the storage the others were moved out of). The copy is a pointwise kernel the segmenter fuses with the gradient's
    producer where that is pointwise (autocast's cast of a half-precision gradient to the
    parameter's dtype).

    Args:
        gm: a backward graph whose nodes carry fake values (``meta["val"]``).

    Returns:
        How many returned views were replaced by copies.
    """
    from torch._guards import detect_fake_mode

    out = gm.graph.output_node()
    flat = flat_nodes(out.args)
    roots: dict = {}
    for a in flat:
        if isinstance(_val(a), torch.Tensor):
            roots.setdefault(view_root(a), []).append(a)
    replace = {a: None for root, views in roots.items() for a in views if a is not root
               and (len(views) > 1 or (root.op == "call_function" and _smaller(a, root)))}
    if not replace:
        return 0
    fake = detect_fake_mode([_val(a) for a in replace])
    with gm.graph.inserting_before(out):
        for a in replace:
            replace[a] = _own_copy(gm.graph, fake, a)
    out.args = torch.fx.node.map_arg(out.args, lambda n: replace.get(n, n))
    _erase_unused(list(replace))
    return finish(gm, len(replace), "returned gradient view(s) of a shared tensor copied into their own")


def _smaller(view: torch.fx.Node, root: torch.fx.Node) -> bool:
    """Whether ``view`` covers fewer elements than ``root`` (a block of it), or may. At dynamic
    sizes a view whose element count is provably the root's (a transposed product's gradient,
    ``permute(bmm(...))``) covers all of it, as at static sizes."""
    from torch.fx.experimental.symbolic_shapes import statically_known_true

    a, b = _val(view).numel(), _val(root).numel()
    if type(a) is int and type(b) is int:
        return a < b
    return not statically_known_true(a == b)


#: views whose result does not depend on their input's strides (``view`` may need a layout the
#: conversion's input does not have)
_LAYOUT_FREE_VIEWS = frozenset({aten.slice.Tensor, aten.select.int, aten.narrow.default, aten.permute.default,
                                aten.t.default, aten.transpose.int, aten.unsqueeze.default, aten.squeeze.dim,
                                aten.expand.default})


def _own_copy(graph: torch.fx.Graph, fake, view: torch.fx.Node) -> torch.fx.Node:
    """A contiguous copy of ``view`` (a chain of views). Where the chain views a dtype
    conversion (autocast's cast of a half-precision gradient to fp32), the copy converts the
    same view of the conversion's input instead: one kernel per gradient, as without the
    shared tensor, where a copy after the conversion would be one more."""
    chain, v = [], view
    while v is not view_root(v):
        chain.append(v)
        v = v.args[0]
    root = v
    src_val = _val(root.args[0]) if _call_of(root, aten._to_copy.default) and len(root.args) == 1 else None
    if (isinstance(src_val, torch.Tensor) and set(root.kwargs) <= {"dtype", "layout", "device"}
            and root.kwargs.get("layout", torch.strided) == torch.strided
            and torch.device(root.kwargs.get("device", src_val.device)) == src_val.device
            and "dtype" in root.kwargs and src_val.shape == _val(root).shape
            and all(step.target in _LAYOUT_FREE_VIEWS for step in chain)):
        src = root.args[0]
        for step in reversed(chain):
            src = _call_with_val(graph, fake, step.target, src, *step.args[1:], **step.kwargs)
        return _call_with_val(graph, fake, aten._to_copy.default, src, dtype=root.kwargs["dtype"],
                              memory_format=torch.contiguous_format)
    return _call_with_val(graph, fake, aten.clone.default, view, memory_format=torch.contiguous_format)
