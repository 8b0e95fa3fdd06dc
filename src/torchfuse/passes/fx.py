"""FX-level rewrites: the graph of PyTorch-level calls (``torch.nn.functional`` and tensor
methods) TorchDynamo hands to the backend, before AOTAutograd traces it, where a library's
choice of kernel can still be influenced.

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

The freezing passes (:mod:`torchfuse.freezing`) work at this level too;
:mod:`torchfuse.pipeline` lists them all in the order they run.
"""
from __future__ import annotations

import functools
import inspect
import operator

import torch
import torch.fx
from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols

from . import calls_to, finish, flat_nodes, written_arguments

_SDPA_TARGETS = (torch._C._nn.scaled_dot_product_attention, torch.nn.functional.scaled_dot_product_attention)


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


#: ``F.interpolate``'s modes that weigh neighbouring input elements linearly, by input rank
_LINEAR_MODES = {"linear": 3, "bilinear": 4, "trilinear": 5}
#: ``F.interpolate``'s parameters after ``input``, in order
_INTERPOLATE_PARAMETERS = ("size", "scale_factor", "mode", "align_corners", "recompute_scale_factor", "antialias")


def linear_interpolation(input: torch.Tensor, size=None, scale_factor=None, mode: str = "bilinear",
                         align_corners: bool | None = None, recompute_scale_factor: bool | None = None,
                         antialias: bool = False) -> torch.Tensor:
    """``F.interpolate`` in a ``linear``, ``bilinear`` or ``trilinear`` mode, with the weighted
    sums of ATen's kernels (``upsample_bilinear2d_out_frame`` in
    aten/src/ATen/native/cuda/UpSampleBilinear2d.cu, and the 1-D and 3-D ones): per output
    element, nested over the dims from the last, ``l0 * v0 + l1 * v1`` with ``l1`` the source
    coordinate's fraction and ``l0 = 1 - l1``, in the accumulation type (fp32 for fp16/bf16),
    rounded once. Source coordinates as ATen's ``area_pixel_compute_source_index``: ``scale *
    i`` with corners aligned, else ``scale * (i + 0.5) - 0.5`` clamped at 0, the scale
    ``1 / scale_factor`` where one is given and used, else the sizes' ratio.

    Returns: (N, C, *output sizes), ``input``'s dtype, in ``input``'s suggested memory format
    (eager's). PyTorch's decomposition, which ``F.interpolate``'s overloads reach through its
    Python dispatcher before any decomposition table, interpolates as ``v0 + (v1 - v0) * l1``:
    an infinite input gave NaN (``inf - inf``) where eager's weights give the infinity, a -0.0
    gave +0.0, and fp32 elements came out up to 14 ulps from eager's.
    """
    from torch._decomp.decompositions import upsample_compute_output_size
    from torch._prims_common import suggest_memory_format

    dims = input.dim() - 2
    if size is not None:
        output_size = list(size) if isinstance(size, (list, tuple)) else [size] * dims
        scales = None
    else:
        scales = [float(f) for f in scale_factor] if isinstance(scale_factor, (list, tuple)) else [float(scale_factor)] * dims
        output_size = None
        if recompute_scale_factor:
            output_size = [int(input.shape[2 + k] * scales[k]) for k in range(dims)]  # floor, as F.interpolate
            scales = None
    osize = upsample_compute_output_size(input.size(), output_size, scales)
    scales = scales or [None] * dims
    acc = torch.promote_types(input.dtype, torch.float32)
    lows, highs, l1s = [], [], []
    for k in range(dims):
        in_size, out_size = input.shape[2 + k], osize[k]
        if align_corners:
            scale = (in_size - 1) / (out_size - 1) if out_size > 1 else 0.0
        else:
            scale = 1.0 / scales[k] if scales[k] is not None and scales[k] > 0 else in_size / out_size
        i = torch.arange(out_size, device=input.device).to(acc)  # (the registry makes integer aranges)
        src = i * scale if align_corners else (i + 0.5) * scale - 0.5
        src = src.clamp(min=0.0)
        low = src.to(torch.int64)
        shape = [out_size] + [1] * (dims - 1 - k)
        lows.append(low.reshape(shape))
        highs.append((low + 1).clamp(max=in_size - 1).reshape(shape))
        l1s.append((src - low).reshape(shape))
    # widened before the gathers, so that the backward's scatter-adds accumulate in fp32 and
    # round once, as eager's upsample backward does (widened after, each added in bf16)
    wide = input.to(acc)
    corners = []
    for bits in range(2 ** dims):  # the last dim's choice varies fastest
        index = [highs[k] if bits >> (dims - 1 - k) & 1 else lows[k] for k in range(dims)]
        corners.append(torch.ops.aten._unsafe_index(wide, [None, None, *index]))
    for k in reversed(range(dims)):
        l1 = l1s[k]
        l0 = 1.0 - l1
        corners = [l0 * v0 + l1 * v1 for v0, v1 in zip(corners[::2], corners[1::2])]
    return corners[0].to(input.dtype).contiguous(memory_format=suggest_memory_format(input))


def linear_interpolations(gm: torch.fx.GraphModule) -> int:
    """Replace ``F.interpolate`` calls of floating tensors in a linear mode (rank 3, 4 or 5, no
    antialiasing) by :func:`linear_interpolation`, which weighs the neighbours as eager's
    kernels do.

    Args:
        gm: TorchDynamo's graph; nodes carry their fake example values in ``meta["example_value"]``.

    Returns:
        How many calls were replaced (the graph is recompiled in place when any were).
    """
    done = 0
    for node in calls_to(gm, (torch.nn.functional.interpolate,)):
        x = node.args[0] if node.args else None  # (an ``input=`` keyword: left as it is)
        value = x.meta.get("example_value") if isinstance(x, torch.fx.Node) else None
        bound = {**dict(zip(_INTERPOLATE_PARAMETERS, node.args[1:])), **node.kwargs}
        mode, antialias = bound.get("mode", "nearest"), bound.get("antialias", False)
        if (not isinstance(value, torch.Tensor) or _LINEAR_MODES.get(mode) != value.dim() or antialias
                or not value.dtype.is_floating_point):
            continue
        if any(isinstance(v, torch.fx.Node) for v in bound.values()):
            continue  # sizes computed in the graph: left to PyTorch's path
        node.target = linear_interpolation
        done += 1
    return finish(gm, done, "linear interpolation(s) weighed as eager's kernels weigh them")


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


#: calls that store a Python number into a tensor of their result's dtype through PyTorch's
#: checked conversion (``c10::checked_convert``: "value cannot be converted to type ... without
#: overflow"), by target name, with the positions and keywords of their number arguments.
#: AOTAutograd's decompositions drop the check (``masked_fill`` becomes a ``where`` of a
#: ``scalar_tensor``, which converts unchecked), and a fused kernel would write infinities.
_CHECKED_NUMBERS: dict[str, tuple[tuple[int | None, str], ...]] = {
    "masked_fill": ((2, "value"),), "masked_fill_": ((2, "value"),),
    "fill": ((1, "value"),), "fill_": ((1, "value"),),
    "full": ((1, "fill_value"),), "full_like": ((1, "fill_value"),), "new_full": ((2, "fill_value"),),
    "index_fill": ((3, "value"),), "index_fill_": ((3, "value"),),
    "clamp": ((1, "min"), (2, "max")), "clamp_": ((1, "min"), (2, "max")), "clip": ((1, "min"), (2, "max")),
    "clip_": ((1, "min"), (2, "max")), "clamp_min": ((1, "min"),), "clamp_max": ((1, "max"),),
    # hardtanh is ATen's clamp of its bounds; threshold converts both numbers, on every device
    "hardtanh": ((1, "min_val"), (2, "max_val")), "hardtanh_": ((1, "min_val"), (2, "max_val")),
    "threshold": ((1, "threshold"), (2, "value")), "threshold_": ((1, "threshold"), (2, "value")),
    # torch.where(c, x, number): ATen makes the number a one-element tensor of the result's
    # dtype (at::scalar_tensor, a fill): checked as a one-element fill is
    "where": ((1, "input"), (2, "other")),
    # alpha converted checked to the result's dtype (alpha.to<scalar_t>()), on every dtype; a
    # keyword (None: no position), or the second of three arguments in the deprecated
    # add(x, alpha, y) (_DEPRECATED_NUMBER_FIRST)
    "add": ((None, "alpha"),), "add_": ((None, "alpha"),), "sub": ((None, "alpha"),),
    "sub_": ((None, "alpha"),), "rsub": ((None, "alpha"),),
    # addcmul/addcdiv's value converted checked to the op's opmath dtype (fp32 for fp16/bf16)
    "addcmul": ((None, "value"),), "addcmul_": ((None, "value"),), "addcdiv": ((None, "value"),),
    "addcdiv_": ((None, "value"),),
}

#: calls whose deprecated overload takes the checked number second (``torch.add(x, 2, y)``,
#: ``torch.addcmul(x, 2, a, b)``), by the argument count of that overload
_DEPRECATED_NUMBER_FIRST = {"add": 3, "add_": 3, "sub": 3, "sub_": 3,
                            "addcmul": 4, "addcmul_": 4, "addcdiv": 4, "addcdiv_": 4}

#: of those, the calls whose number eager converts to the opmath dtype of the result's
_OPMATH_CHECKED = frozenset({"addcmul", "addcmul_", "addcdiv", "addcdiv_"})


#: of those, the fills: eager converts unchecked when the tensor is floating, has one element
#: and is on the CPU (``scalar_fill``'s path); and the clamps, whose CUDA kernels read their
#: bounds in the accumulation type, unchecked (checked on CUDA tensors with torch 2.11)
_FILLS = frozenset({"fill", "fill_", "full", "full_like", "new_full"})
_CLAMPS = frozenset({"clamp", "clamp_", "clip", "clip_", "clamp_min", "clamp_max", "hardtanh", "hardtanh_"})


def _eager_checks(name: str, dtype: torch.dtype, numel, device: torch.device | None) -> bool:
    """Whether eager's call ``name`` storing a number into a tensor of ``dtype``, ``numel``
    elements (an int, or a symbolic count, decided by a guard) on ``device`` converts the
    number checked (``None``: a CPU tensor)."""
    on_cpu = device is None or torch.device(device).type == "cpu"
    if name in _CLAMPS:
        return on_cpu
    if name == "where":  # a one-element fill (at::scalar_tensor)
        name, numel = "fill", 1
    # CPU eager's one-element fill (scalar_fill) converts through the opmath type: unchecked
    # for fp16/bf16 only; fp32 (torch.full((1,), 1e39)) raises as a larger fill does
    if name in _FILLS and dtype in (torch.float16, torch.bfloat16) and on_cpu:
        return bool(numel > 1)
    return True


def _number_of(x):
    """``x`` as a Python number: a number, a ``torch.tensor(number)`` made in the graph (a 0-dim
    constant the model's code builds), or a symbolic int with a value (a backed ``torch.SymInt``,
    whose comparisons guard the graph on its side of the dtype's bounds); else None."""
    if isinstance(x, (int, float)) and not isinstance(x, bool):
        return x
    value = x.meta.get("example_value") if isinstance(x, torch.fx.Node) else None
    if isinstance(value, torch.SymInt) and not free_unbacked_symbols(value):
        return value  # (an unbacked one, from ``.item()``, has no value to guard on: unchecked)
    if (isinstance(x, torch.fx.Node) and x.op == "call_function" and x.target is torch.tensor and x.args
            and isinstance(x.args[0], (int, float)) and not isinstance(x.args[0], bool)
            and x.kwargs.get("dtype") in (None, torch.float32, torch.float64, torch.int64)):
        return x.args[0]  # (made in a narrower dtype, the tensor holds the value already rounded)
    return None


def _overflows(value, dtype: torch.dtype) -> bool:
    """Whether PyTorch's checked conversion of ``value`` to ``dtype`` raises (c10's
    ``overflows``): a number outside the dtype's range, where infinities and NaN fit floating
    dtypes, a float NaN or infinity never fits an integer dtype, and a negative integer fits an
    unsigned one while its magnitude does (it wraps, as two's complement arithmetic would)."""
    if dtype == torch.bool or dtype.is_complex or dtype == torch.float64:
        return False
    if isinstance(value, torch.SymInt) and dtype in (torch.int64, torch.uint64, torch.float32, torch.bfloat16):
        return False  # (holds any int64, a negative one wrapping in uint64: no guard needed)
    if dtype.is_floating_point:
        if isinstance(value, float) and (value != value or value in (float("inf"), float("-inf"))):
            return False
        return bool(value > torch.finfo(dtype).max) or bool(value < -torch.finfo(dtype).max)
    info = torch.iinfo(dtype)
    if isinstance(value, float) and (value != value or value in (float("inf"), float("-inf"))):
        return True
    if info.min == 0 and isinstance(value, (int, torch.SymInt)) and bool(value < 0):
        return bool(-value > info.max)
    return bool(value < info.min) or bool(value > info.max)


def _checked_overloads() -> dict:
    """The ATen overloads of :data:`_CHECKED_NUMBERS`' calls that take the number as a Python
    scalar, by overload, with the call's name there."""
    aten = torch.ops.aten
    overloads = [aten.masked_fill.Scalar, aten.masked_fill_.Scalar, aten.fill.Scalar, aten.fill_.Scalar,
                 aten.full.default, aten.full_like.default, aten.new_full.default, aten.index_fill.int_Scalar,
                 aten.index_fill_.int_Scalar, aten.clamp.default, aten.clamp_.default, aten.clamp_min.default,
                 aten.clamp_max.default, aten.hardtanh.default, aten.hardtanh_.default, aten.threshold.default,
                 aten.threshold_.default]
    return {op: op.overloadpacket.__name__ for op in overloads}


def _stored_dtype_and_numel(name: str, args: tuple, kwargs: dict):
    """The dtype, element count and device of the tensor an ATen call of
    :data:`_CHECKED_NUMBERS` stores its number into (``full``'s dtype inferred from its number
    as eager infers it)."""
    if name == "full":
        value = args[1] if len(args) > 1 else kwargs.get("fill_value")
        dtype = kwargs.get("dtype") or (torch.bool if isinstance(value, bool) else torch.int64
                                        if isinstance(value, int) else torch.get_default_dtype())
        size, device = args[0], kwargs.get("device")
    elif name == "new_full":
        dtype, size, device = kwargs.get("dtype") or args[0].dtype, args[1], kwargs.get("device") or args[0].device
    elif name.startswith("clamp"):  # the result's dtype: an integer tensor with float bounds is float
        dtype = args[0].dtype
        for i, key in _CHECKED_NUMBERS[name]:
            bound = args[i] if len(args) > i else kwargs.get(key)
            if bound is not None:
                dtype = torch.promote_types(dtype, torch.result_type(args[0], bound))
        return dtype, args[0].numel(), args[0].device
    else:
        dtype = (kwargs.get("dtype") if name == "full_like" else None) or args[0].dtype
        device = (kwargs.get("device") if name == "full_like" else None) or args[0].device
        return dtype, args[0].numel(), device
    numel = 1
    for d in size:
        numel *= d
    return dtype, numel, device


def with_number_checks(table: dict) -> dict:
    """A copy of the decomposition table ``table`` (ATen overload -> function, as ``make_fx``
    takes it) whose calls of :data:`_CHECKED_NUMBERS` first make eager's checked conversion of
    their Python number: ``RuntimeError: value cannot be converted to type ... without
    overflow`` where eager raises it (same rules as :func:`eager_raises`), before decomposing
    as ``table`` does (or not at all, where it has no entry: ``make_fx`` then traces the call).
    For traces that ``make_fx`` decomposes as it goes (``@fused`` functions), where no graph of
    the undecomposed calls exists to check. Numbers that are symbolic are not checked; a
    floating CPU fill's symbolic element count is guarded on (one element is not checked), and
    a clamp of CUDA tensors is not checked (see :func:`_eager_checks`)."""
    out = dict(table)
    for op, name in _checked_overloads().items():
        out[op] = _checking(name, table.get(op))
    return out


def _checking(name: str, decompose):
    def checked(*args, **kwargs):
        dtype, numel, device = _stored_dtype_and_numel(name, args, kwargs)
        # a symbolic count decides with a shape guard, so the trace holds only for counts on its side
        if _eager_checks(name, dtype, numel, device):
            for i, key in _CHECKED_NUMBERS[name]:
                value = args[i] if len(args) > i else kwargs.get(key)
                if (isinstance(value, (int, float)) and not isinstance(value, bool)
                        and _overflows(value, dtype)):
                    raise RuntimeError(f"value cannot be converted to type {_C10_NAMES.get(dtype, dtype)} "
                                       "without overflow")
        return decompose(*args, **kwargs) if decompose is not None else NotImplemented
    return checked


#: c10's names of the dtypes in eager's overflow message
_C10_NAMES = {torch.float16: "c10::Half", torch.bfloat16: "c10::BFloat16", torch.float32: "float",
              torch.int8: "int8_t", torch.uint8: "uint8_t", torch.int16: "int16_t", torch.int32: "int",
              torch.int64: "int64_t"}


def _reduces_nothing(n: torch.fx.Node) -> bool:
    """Whether the call ``n`` of ``max``/``min`` reduces a dim of size 0 (or, without a dim,
    an empty tensor), where eager raises: a reduction with indices has no identity. The sizes
    are TorchDynamo's, which specializes 0."""
    x = n.args[0] if n.args else n.kwargs.get("input")
    val = x.meta.get("example_value") if isinstance(x, torch.fx.Node) else None
    if not isinstance(val, torch.Tensor):
        return False
    dim = n.args[1] if len(n.args) > 1 else n.kwargs.get("dim")
    if isinstance(dim, torch.fx.Node) or "other" in n.kwargs:
        return False  # the elementwise max of two tensors
    if dim is None:
        return type(val.numel()) is int and val.numel() == 0
    if not isinstance(dim, int) or not -val.dim() <= dim < val.dim():
        return False  # (an out-of-range dim raises its own error in tracing)
    size = val.shape[dim]
    return type(size) is int and size == 0


#: calls eager implements for floating results only ("softmax_lastdim_kernel_impl" not
#: implemented for 'Char'); PyTorch's decompositions trace them for any dtype
_FLOATING_ONLY = frozenset({"softmax", "log_softmax", "special_softmax", "special_log_softmax", "softmin"})

#: calls eager implements for floating inputs only ("GeluKernelImpl" not implemented for
#: 'Long'), whatever their result's dtype (an integer ``lerp`` promotes to float)
_FLOATING_INPUT_ONLY = frozenset({"gelu", "silu", "mish", "softplus", "hardsigmoid", "hardswish", "log_sigmoid",
                                  "celu", "hardshrink", "glu", "prelu", "lerp", "lerp_"})


def eager_raises(gm: torch.fx.GraphModule) -> list[str]:
    """The calls of TorchDynamo's graph ``gm`` that raise in eager PyTorch where the traced
    graph would not: a number stored into a tensor whose dtype cannot hold it
    (``x.half().masked_fill(m, -1e30)``, ``torch.full_like(x_half, 1e6)``,
    ``x_half.clamp(max=1e6)``: ``RuntimeError``), or a softmax with an integer result
    (``int_tensor.softmax(-1)``: ``NotImplementedError``) or an activation of an integer tensor
    (``F.gelu(int_tensor)``: ``NotImplementedError``), or a ``max``/``min`` over a dim of
    size 0 or of an empty tensor (``IndexError``, where a kernel would return -inf and an index);
    each described as ``"<call> with <number> for <dtype>"``, ``"<call> for <dtype>"`` or
    ``"<call> over a dim of size 0"``; empty when there are none. The
    backend runs such a graph as traced, so that it raises eager's error at the call. A number
    that is a symbolic int is compared through the shape environment, which guards the graph
    on the outcome: a later value on the other side of the dtype's bounds compiles again."""
    found = []
    for n in gm.graph.nodes:
        if n.op not in ("call_function", "call_method"):
            continue
        name = n.target if isinstance(n.target, str) else getattr(n.target, "__name__", "")
        if name in ("max", "min") and _reduces_nothing(n):
            found.append(f"{name} over a dim of size 0")
            continue
        spots = _CHECKED_NUMBERS.get(name)
        out = n.meta.get("example_value")
        if not isinstance(out, torch.Tensor):
            continue
        if name in _FLOATING_ONLY and not (out.dtype.is_floating_point or out.dtype.is_complex):
            found.append(f"{name} for {str(out.dtype).replace('torch.', '')}")
        if name in _FLOATING_INPUT_ONLY and n.args and isinstance(n.args[0], torch.fx.Node):
            first = n.args[0].meta.get("example_value")
            if isinstance(first, torch.Tensor) and not (first.dtype.is_floating_point or first.dtype.is_complex):
                found.append(f"{name} for {str(first.dtype).replace('torch.', '')}")
        if not spots:
            continue
        if not _eager_checks(name, out.dtype, out.numel() if type(out.numel()) is int else 1, out.device):
            continue  # (a symbolic count of a CPU fill is taken for one element: the graph fuses)
        dtype = out.dtype
        if name in _OPMATH_CHECKED and dtype in (torch.float16, torch.bfloat16):
            dtype = torch.float32
        if (len(n.args) == _DEPRECATED_NUMBER_FIRST.get(name) and _number_of(n.args[1]) is not None
                and isinstance(n.args[2], torch.fx.Node)):
            spots = ((1, ""), *spots)
        for i, key in spots:
            value = _number_of(n.args[i] if i is not None and len(n.args) > i else n.kwargs.get(key))
            if value is not None and _overflows(value, dtype):
                found.append(f"{name} with {value!r} for {str(dtype).replace('torch.', '')}")
    return found


_LINEAR_TARGETS = (torch._C._nn.linear, torch.nn.functional.linear)
_LINEAR_PARAMETERS = ("input", "weight", "bias")


def _linear_operands(node: torch.fx.Node):
    """``(input, weight, bias)`` of a ``linear`` call, or None when one is given in a form the
    rewrite leaves alone (not a node, or a keyword it does not know)."""
    if len(node.args) > 3 or set(node.kwargs) - set(_LINEAR_PARAMETERS):
        return None
    bound = {**dict(zip(_LINEAR_PARAMETERS, node.args)), **node.kwargs}
    x, w, b = bound.get("input"), bound.get("weight"), bound.get("bias")
    if not isinstance(x, torch.fx.Node) or not isinstance(w, torch.fx.Node):
        return None
    if b is not None and not isinstance(b, torch.fx.Node):
        return None
    return x, w, b


#: calls that return their input itself when there is nothing to change (``x.contiguous()`` of a
#: contiguous ``x``, ``x.to(x.dtype)``), writing nothing
_RETURN_THEIR_INPUT = frozenset({"contiguous", "to", "type", "type_as", "float", "double", "half", "bfloat16",
                                 "int", "long", "short", "bool", "byte", "char", "cpu", "cuda"})


def _inplace_argument(node: torch.fx.Node) -> bool | None:
    """The value of a call's ``inplace`` parameter (``F.relu``, ``F.dropout``), None for a call
    that has none."""
    if "inplace" in node.kwargs:
        return bool(node.kwargs["inplace"])
    i = _inplace_position(node.target) if node.op == "call_function" else None
    if i is None:
        return None
    return bool(node.args[i]) if len(node.args) > i else False


@functools.lru_cache(maxsize=None)
def _inplace_position(target) -> int | None:
    """The position of ``target``'s ``inplace`` parameter, None where it has none."""
    try:
        names = list(inspect.signature(target).parameters)
    except (TypeError, ValueError):  # a builtin without a signature
        return None
    return names.index("inplace") if "inplace" in names else None


def written_inputs(node: torch.fx.Node) -> list[torch.fx.Node]:
    """The inputs a call writes in place (empty when none). TorchDynamo's example value of an
    in-place call is its written input's own object (``x.add_(1)``, ``x *= 2``, ``F.relu(x,
    inplace=True)``, ``torch.add(x, 1, out=x)``); a ``setitem`` has no value and writes its
    first argument; an in-place foreach op (``torch._foreach_mul_([w1, w2], 0.5)``) writes
    every tensor of its first list (given by position or as ``self``); ``out=`` writes its
    tensor or each of its tuple's; a user's Triton kernel is taken to write every tensor it
    takes; an operator whose schema marks an argument written
    (``Tensor(a!)``: a custom op's ``mutates_args``) writes that argument, whatever it returns."""
    flag = _inplace_argument(node)
    if flag is not None:  # ``F.dropout(x, training=False)`` returns ``x`` and writes nothing
        return [node.args[0]] if flag and node.args and isinstance(node.args[0], torch.fx.Node) else []
    written = _schema_written(node)
    value = node.meta.get("example_value")
    name = node.target if isinstance(node.target, str) else getattr(node.target, "__name__", "")
    if value is not None and name not in _RETURN_THEIR_INPUT:
        written += [a for a in node.all_input_nodes if a.meta.get("example_value") is value]
    places = []
    if (name.endswith("_") and not name.endswith("__")) or name in ("setitem", "__setitem__"):
        places.append(node.args[0] if node.args else node.kwargs.get("self", node.kwargs.get("input")))
    places.append(node.kwargs.get("out"))  # ``out=`` a tensor, or a tuple of them (``torch.sort``)
    if name == "triton_kernel_wrapper_mutation":  # a user's Triton kernel may write any tensor it takes
        places.append(list((node.kwargs.get("kwargs") or {}).values()))
    for place in places:
        written += [a for a in (place if isinstance(place, (list, tuple)) else [place]) if isinstance(a, torch.fx.Node)]
    return list(dict.fromkeys(written))


def _schema_written(node: torch.fx.Node) -> list[torch.fx.Node]:
    """The arguments of a call of an ATen or custom operator that its schema marks written
    (:func:`~torchfuse.passes.written_arguments`); for an overload packet, those any of its
    overloads writes."""
    target = node.target
    if isinstance(target, torch._ops.OpOverloadPacket):
        schemas = [getattr(target, o)._schema for o in target.overloads()]
    elif isinstance(target, torch._ops.OpOverload):
        schemas = [target._schema]
    else:
        return []
    return [a for schema in schemas for value in written_arguments(schema, node.args, node.kwargs)
            for a in (value if isinstance(value, (list, tuple)) else [value]) if isinstance(a, torch.fx.Node)]


def _tensor_value(node) -> torch.Tensor | None:
    value = node.meta.get("example_value") if isinstance(node, torch.fx.Node) else None
    return value if isinstance(value, torch.Tensor) else None


def _storage(value: torch.Tensor):
    """A key for ``value``'s storage (views of one tensor share it; the fake example values'
    ``_base`` is not always the viewed value's own object)."""
    from torch.multiprocessing.reductions import StorageWeakRef

    return StorageWeakRef(value.untyped_storage())


def _escaping_values(gm: torch.fx.GraphModule) -> set:
    """The storages (:func:`_storage`) of the tensors the graph returns."""
    out = next(n for n in reversed(gm.graph.nodes) if n.op == "output")
    return {_storage(v) for v in map(_tensor_value, flat_nodes(out.args)) if v is not None}


def _views_of(node: torch.fx.Node) -> tuple[list[torch.fx.Node], bool]:
    """The calls that view ``node``'s value (their value shares its storage, and writes none),
    through views of views; and whether one of them reads the storage by offsets and strides
    (``as_strided``), which a column block of a wider product does not keep."""
    value = _tensor_value(node)
    if value is None:
        return [], False
    key, found, work, strided = _storage(value), [], [node], False
    while work:
        for u in work.pop().users:
            v = _tensor_value(u)
            if u in found or v is None or written_inputs(u) or _storage(v) != key:
                continue
            name = u.target if isinstance(u.target, str) else getattr(u.target, "__name__", "")
            strided = strided or name.startswith("as_strided")
            found.append(u)
            work.append(u)
    return found, strided


def _is_dtype_view(node: torch.fx.Node) -> bool:
    """``x.view(dtype)``: a reinterpretation of the bytes, not of the shape."""
    return any(isinstance(a, torch.dtype) for a in node.args[1:]) or "dtype" in node.kwargs


def _grad_live(nodes: list[torch.fx.Node]) -> set:
    """The nodes whose value reaches the graph's outputs through values that require
    gradients (not through ``detach``, comparisons or integer results): a weight read only by
    the others is given no gradient by autograd, where one concatenated with theirs would get
    a zero block."""
    live: set = set()
    for n in reversed(nodes):
        if n.op == "output":
            live.update(a for a in flat_nodes(n.args) if getattr(_tensor_value(a), "requires_grad", False))
            continue
        v = _tensor_value(n)
        if n in live or v is None or not v.requires_grad:
            continue
        if any(u in live for u in n.users):
            live.add(n)
    return live


def grouped_linears(gm: torch.fx.GraphModule, devices: tuple[str, ...] = ("cuda", "cpu"),
                    max_members: int = 16) -> int:
    """Compute the ``linear`` calls that read one input with weights of one dtype as one
    matrix product: ``linear(x, cat(w1, w2, ...), cat(b1, b2, ...))`` split by columns into
    the calls' results (horizontal fusion of matrix products, as attention's query, key and
    value projections, or a decoder's cross-attention keys and values of every layer).

    AOTAutograd then derives one product for the input's gradient and one for the weights'
    (their sum over the calls is the product's own reduction), where there were one of each per
    call: T5's and BERT's attention layers make two of three products of each kind go away.
    Each element is still one fp32-accumulated dot product of the same row and column, so the
    values are those of the separate products up to the library's choice of kernel for the
    wider matrix (its order of accumulation).

    A group forms among calls with no call changing global state between them (autocast or
    grad mode: TorchDynamo records those as calls with no tensor value), whose weights (2-D,
    on ``devices``, one dtype, the input's inner size) and biases (all absent or all 1-D of the
    weight's dtype) exist before the group's first call, where the product is put. A call keeps
    its own product where its result is written in place, or through a view (autograd forbids
    writing a split's parts), and where its result reaches the outputs only through values
    that need no gradient (``detach``): eager gives its weight no gradient, a concatenation
    would give it a zero block. Calls whose results need a gradient and calls whose results
    need none (frozen weight and bias) form separate products. A call whose result the graph
    returns, or returns a view of, or reads with ``as_strided``, is given a contiguous copy of
    its columns, so that what the caller holds has eager's strides; its other views that reshape (``view``) become
    ``reshape``, since a column block's dims do not always merge.
    The gradients of the grouped weights come back as blocks of one tensor;
    :func:`~torchfuse.passes.aten.separate_gradient_views` gives each its own.

    Args:
        gm: TorchDynamo's graph; nodes carry their fake example values in
            ``meta["example_value"]``.
        devices: device types where the rewrite applies.
        max_members: at most this many calls in one product.

    Returns:
        How many ``linear`` calls were folded into another's product (the graph is recompiled
        in place when any were).
    """
    nodes = list(gm.graph.nodes)
    order = {n: i for i, n in enumerate(nodes)}
    groups: dict[tuple, list[tuple[torch.fx.Node, torch.fx.Node, torch.fx.Node | None]]] = {}
    region, written_tensors = 0, []
    for n in nodes:
        targets = written_inputs(n) if n.op in ("call_function", "call_method") else []
        written_tensors += targets
        if n.op in ("call_function", "call_method", "call_module") and (
                n.meta.get("example_value") is None or targets):
            # a call with no value (a context's entry or exit: autocast, grad mode; a
            # ``setitem``) or an in-place write: no product moves across it
            region += 1
            continue
        if n.op != "call_function" or n.target not in _LINEAR_TARGETS:
            continue
        ops = _linear_operands(n)
        if ops is None:
            continue
        x, w, b = ops
        xv, wv, bv, yv = _tensor_value(x), _tensor_value(w), _tensor_value(b), _tensor_value(n)
        if xv is None or wv is None or yv is None or wv.dim() != 2 or xv.dim() < 1:
            continue
        if wv.device.type not in devices or not wv.dtype.is_floating_point or wv.shape[1] != xv.shape[-1]:
            continue
        if type(wv.shape[0]) is not int or type(wv.shape[1]) is not int:
            continue
        if b is not None and (bv is None or bv.dim() != 1 or bv.dtype != wv.dtype or bv.shape[0] != wv.shape[0]):
            continue
        # a result that needs no gradient (frozen weight and bias, an input without one) must
        # not come from a product that needs one: it would get a grad_fn, its weight a gradient
        key = (x, region, b is None, wv.dtype, wv.device, yv.dtype, yv.requires_grad)
        groups.setdefault(key, []).append((n, w, b))
    try:
        escaping = _escaping_values(gm)
        written = {_storage(v) for v in map(_tensor_value, written_tensors) if v is not None}
        storages = {m[0]: _storage(_tensor_value(m[0])) for members in groups.values() for m in members}
    except (NotImplementedError, RuntimeError):  # functorch's wrapped values have no storage
        return 0
    live = _grad_live(nodes)
    done = 0
    for members in groups.values():
        first = members[0][0]
        members = [m for m in members if storages[m[0]] not in written
                   and (m[0] in live or not _tensor_value(m[0]).requires_grad)
                   and all(order[a] < order[first] for a in m[1:] if a is not None)]
        members = members[:max_members]
        if len(members) < 2:
            continue
        first = members[0][0]
        x = _linear_operands(first)[0]
        weights, biases = [m[1] for m in members], [m[2] for m in members if m[2] is not None]
        yv = _tensor_value(first)
        sizes = [_tensor_value(w).shape[0] for w in weights]
        with yv.fake_mode:  # the values later passes read, made before the graph changes
            w_val = torch.cat([_tensor_value(w) for w in weights])
            b_val = torch.cat([_tensor_value(b) for b in biases]) if biases else None
            y_val = torch.empty((*yv.shape[:-1], sum(sizes)), dtype=yv.dtype, device=yv.device)
            part_vals = torch.split(y_val, sizes, dim=-1)
        g = gm.graph
        with g.inserting_before(first):
            w = g.call_function(torch.cat, (weights,), {"dim": 0})
            w.meta["example_value"] = w_val
            b = None
            if biases:
                b = g.call_function(torch.cat, (biases,), {"dim": 0})
                b.meta["example_value"] = b_val
            y = g.call_function(torch._C._nn.linear, (x, w, b))
            y.meta.update({k: v for k, v in first.meta.items() if k != "example_value"})
            y.meta["example_value"] = y_val
            # a split, whose gradient is one concatenation (a narrow's is a zero-filled
            # scatter per part); its parts may not be written in place, hence ``written``
            parts = g.call_function(torch.split, (y, sizes), {"dim": -1})
            parts.meta["example_value"] = part_vals
            for i, (node, _, _) in enumerate(members):
                part = g.call_function(operator.getitem, (parts, i))
                part.meta["example_value"] = part_vals[i]
                views, strided = _views_of(node)
                if storages[node] in escaping or strided:
                    # eager's strides for the caller (an empty part is "contiguous" with the
                    # product's strides, hence a clone), and for ``as_strided``'s offsets
                    part = g.call_method("clone", (part,), {"memory_format": torch.contiguous_format})
                    part.meta["example_value"] = _tensor_value(node)
                else:
                    for v in views:  # dims of a column block may not merge: a view may need a copy
                        if v.op == "call_method" and v.target == "view" and not _is_dtype_view(v):
                            v.target = "reshape"
                node.replace_all_uses_with(part)
        for node, _, _ in members:
            g.erase_node(node)
        done += len(members) - 1
    return finish(gm, done, "linear call(s) computed in another's matrix product")
