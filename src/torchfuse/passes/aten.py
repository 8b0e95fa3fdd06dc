"""ATen-level rewrites: the graphs AOTAutograd produces (forward, backward, inference),
before the IR is built from them.

* :func:`merge_duplicate_pads`: the padded matrix products (``decompose.mm_padded``) pad an
  operand in its memory order, so the gradient of a language model's vocabulary product is
  padded once as ``G`` and once as ``permute(permute(G))``, which AOTAutograd's
  common-subexpression pass does not recognise as one value: two copies of a tensor of
  ``tokens x vocabulary`` elements per step (GPT-2 at 8 x 512 in bf16: 412 MB each).
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
a call with its value). Cross-entropy's rewrites are in :mod:`.cross_entropy`, those of
concatenations in :mod:`.concat`.
"""
from __future__ import annotations

import functools

import torch
import torch.fx

from ..config import GraphPassTuning
from . import calls_to, finish, flat_nodes, view_root

aten = torch.ops.aten


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
    vals = torch.fx.node.map_arg((args, kwargs), _val)
    with fake:  # (first: a call that raises leaves no node behind)
        val = target(*vals[0], **vals[1])
    node = graph.call_function(target, args, kwargs)
    node.meta["val"] = val
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
