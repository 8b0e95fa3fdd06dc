"""Inference with frozen weights (``Options.freeze``): folding, layout and hoisting.

Three kinds of rewrite, all off unless ``freeze=True`` and only for graphs compiled with gradients
disabled (TorchDynamo guards on grad mode, so such a graph never runs for training):

1. **BatchNorm folding** (:func:`fold_conv_batchnorm`, on TorchDynamo's graph): an eval-mode
   ``batch_norm`` whose input is a convolution's only use becomes part of the convolution:
   ``W' = W * g / sqrt(var + eps)`` per output channel and ``b' = (b - mean) * g /
   sqrt(var + eps) + beta``, computed in fp32 and rounded once to the weight's dtype. ``b'`` is
   added after the convolution rather than passed as its bias, so that the add joins the
   fusion group that follows (ATen adds a convolution's bias in a kernel of its own: on an
   H200 that cost one extra kernel per convolution in ResNet-50).
   Biases of other convolutions move out the same way (:func:`conv_bias_epilogues`).
2. **Channels-last convolutions** (:func:`channels_last_convolutions`): 2-D convolutions with
   fp16/bf16 weights on CUDA take their input and weight in channels-last layout, cuDNN's fast
   layout for half precision on tensor cores; pointwise ops after them keep the layout, so only
   the first convolution's input is converted. Outputs that eager returns contiguous are
   returned contiguous.
3. **Hoisting** (:func:`split_weight_subgraph` and :class:`FrozenGraph`, on AOTAutograd's
   inference graph): everything computed from parameters and buffers alone (the folded weights,
   layout copies, transposes, casts) moves to a separate graph that runs only when a
   parameter's storage or version counter changed since the last call, so a model whose
   weights are updated in place (``optimizer.step()``, ``load_state_dict``) never runs on
   stale values; steps of optimizers with ``fused=True``, whose kernels leave the counters as
   they were, are counted by an optimizer hook. Not seen: writes through ``param.data``, which
   bypass the version counter (PyTorch's semantics of ``.data``), and through memory shared
   outside PyTorch (``param.numpy()``, DLPack), which has none.

The same ideas appear in Inductor's ``freezing`` and in TensorRT-style engines; here the
constants stay tied to the live parameters by their version counters instead of being
copied once.
"""
from __future__ import annotations

import inspect
import logging
import operator
from typing import Any, Callable, Sequence

import torch
import torch.fx

from .passes import calls_to, finish, view_root
from .passes.fx import written_inputs
from .runtime.calls import copies_sharing_memory, storage_groups

log = logging.getLogger("torchfuse.fusion")

_CONVS = (torch.conv1d, torch.conv2d, torch.conv3d, torch.nn.functional.conv1d, torch.nn.functional.conv2d,
          torch.nn.functional.conv3d)
_BATCH_NORMS = (torch.nn.functional.batch_norm,)


def _conv_signature(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):  # noqa: ARG001
    pass


def _bn_signature(input, running_mean, running_var, weight=None, bias=None, training=False,  # noqa: ARG001
                  momentum=0.1, eps=1e-5):
    pass


def _bind(sig_fn, node: torch.fx.Node) -> inspect.BoundArguments | None:
    try:
        bound = inspect.signature(sig_fn).bind(*node.args, **node.kwargs)
    except TypeError:
        return None
    bound.apply_defaults()
    return bound


def _fold_dtype(*tensors: torch.Tensor | None) -> torch.dtype:
    """The dtype a fold computes in: fp32, or fp64 where one of ``tensors`` is fp64."""
    return torch.float64 if any(t is not None and t.dtype == torch.float64 for t in tensors) else torch.float32


def _bn_scale(running_var: torch.Tensor, bn_weight: torch.Tensor | None, eps: float,
              dtype: torch.dtype = torch.float32) -> torch.Tensor:
    scale = torch.rsqrt(running_var.to(dtype) + eps)
    return scale if bn_weight is None else scale * bn_weight.to(dtype)


def folded_conv_weight(weight: torch.Tensor, running_var: torch.Tensor, bn_weight: torch.Tensor | None,
                       eps: float) -> torch.Tensor:
    """The convolution weight with an eval-mode BatchNorm's scale folded in.

    Args:
        weight: ``(C_out, C_in / groups, *kernel)``, any floating dtype.
        running_var, bn_weight: ``(C_out,)``; ``bn_weight`` may be ``None`` (``affine=False``).
        eps: BatchNorm's epsilon.

    Returns:
        ``weight * bn_weight / sqrt(running_var + eps)`` per output channel, computed in fp32
        (fp64 where a tensor is fp64) and returned in ``weight``'s dtype.
    """
    dtype = _fold_dtype(weight, running_var, bn_weight)
    scale = _bn_scale(running_var, bn_weight, eps, dtype)
    return (weight.to(dtype) * scale.reshape((-1,) + (1,) * (weight.dim() - 1))).to(weight.dtype)


def folded_conv_bias(weight: torch.Tensor, bias: torch.Tensor | None, running_mean: torch.Tensor,
                     running_var: torch.Tensor, bn_weight: torch.Tensor | None, bn_bias: torch.Tensor | None,
                     eps: float) -> torch.Tensor:
    """The convolution bias with an eval-mode BatchNorm folded in: ``(bias - mean) * scale + beta``.

    Args:
        weight: the convolution's weight (only its dtype is used).
        bias: ``(C_out,)`` or ``None``; the BatchNorm tensors ``(C_out,)``, ``bn_weight`` and
            ``bn_bias`` possibly ``None``.
        eps: BatchNorm's epsilon.

    Returns:
        ``(C_out,)`` in ``weight``'s dtype, computed in fp32 (fp64 where a tensor is fp64).
    """
    dtype = _fold_dtype(weight, bias, running_mean, running_var, bn_weight, bn_bias)
    scale = _bn_scale(running_var, bn_weight, eps, dtype)
    b = -running_mean.to(dtype) if bias is None else bias.to(dtype) - running_mean.to(dtype)
    b = b * scale
    if bn_bias is not None:
        b = b + bn_bias.to(dtype)
    return b.to(weight.dtype)


def add_channel_bias(y: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """``y + bias`` broadcast along dim 1 (channels) of a convolution's ``(N, C, *spatial)``
    output, in ``y``'s dtype: a BatchNorm's output has its input's dtype, also where its
    parameters are wider (a bf16 convolution under autocast, fp32 statistics)."""
    return (y + bias.reshape((-1,) + (1,) * (y.dim() - 2))).to(y.dtype)


def _set_example(node: torch.fx.Node, fn: Callable, args: Sequence) -> None:
    """Give a new node the fake example value TorchDynamo's nodes carry (later passes read
    it: :func:`channels_last_convolutions` looks at the folded weight's dtype and device)."""
    from torch._subclasses.fake_tensor import FakeTensor

    values = [a.meta.get("example_value") if isinstance(a, torch.fx.Node) else a for a in args]
    if any(isinstance(a, torch.fx.Node) and v is None for a, v in zip(args, values)):
        return
    # the tensors' own mode: the tracing context may hold another one, and modes cannot mix
    mode = next((v.fake_mode for v in values if isinstance(v, FakeTensor)), None)
    if mode is None:
        return
    try:
        with mode:
            node.meta["example_value"] = fn(*values)
    except Exception as e:  # metadata only: a later pass that needs it leaves the node alone
        log.info("freeze: no example value for %s (%s: %s)", node.name, type(e).__name__, e)


def fold_conv_batchnorm(gm: torch.fx.GraphModule) -> int:
    """Fold eval-mode BatchNorms into the convolutions that feed them (TorchDynamo's graph).

    A BatchNorm is folded when it has running statistics, ``training`` is the constant
    ``False``, its input is a convolution whose result nothing else reads, and nothing between
    the two calls writes a tensor in place or computes the BatchNorm's arguments (the folded
    weight is made before the convolution, where eager's BatchNorm reads its statistics and
    affine parameters after it).

    Returns:
        The number of BatchNorms folded (the graph is recompiled in place when any were).
    """
    done = 0
    for bn in calls_to(gm, _BATCH_NORMS):
        b = _bind(_bn_signature, bn)
        if b is None or b.arguments["training"] is not False:
            continue
        conv = b.arguments["input"]
        if not isinstance(conv, torch.fx.Node) or conv.op != "call_function" or conv.target not in _CONVS:
            continue
        if len(conv.users) != 1 or _unfoldable_between(conv, bn):
            continue
        c = _bind(_conv_signature, conv)
        rm, rv = b.arguments["running_mean"], b.arguments["running_var"]
        if c is None or not isinstance(rm, torch.fx.Node) or not isinstance(rv, torch.fx.Node):
            continue
        # an unbatched convolution's result ((C_out, L)) is a batch of C_out rows to BatchNorm,
        # whose channels are then L, not the convolution's output channels
        if not _batched(c):
            continue
        eps = b.arguments["eps"]
        if not isinstance(eps, (int, float)):
            continue
        w = c.arguments["weight"]
        with gm.graph.inserting_before(conv):
            w_args = (w, rv, b.arguments["weight"], float(eps))
            new_w = gm.graph.call_function(folded_conv_weight, w_args)
            b_args = (w, c.arguments["bias"], rm, rv, b.arguments["weight"], b.arguments["bias"], float(eps))
            new_b = gm.graph.call_function(folded_conv_bias, b_args)
        _set_example(new_w, folded_conv_weight, w_args)
        _set_example(new_b, folded_conv_bias, b_args)
        # the shift stays a separate add, which joins the fusion group after the convolution;
        # as a convolution bias ATen would add it in a kernel of its own
        c.arguments["weight"], c.arguments["bias"] = new_w, None
        conv.args, conv.kwargs = tuple(c.arguments.values()), {}
        with gm.graph.inserting_after(conv):
            shifted = gm.graph.call_function(add_channel_bias, (conv, new_b))
        _set_example(shifted, add_channel_bias, (conv, new_b))
        for new in (new_w, new_b, shifted):  # the BatchNorm's source line, for explain and logs
            new.meta.update({k: bn.meta[k] for k in ("stack_trace", "nn_module_stack", "source_fn_stack")
                             if k in bn.meta})
        bn.replace_all_uses_with(shifted)
        gm.graph.erase_node(bn)
        done += 1
    return finish(gm, done, "BatchNorm(s) folded into convolutions (freeze)")


def _copy_into(old: torch.Tensor, cur: torch.Tensor) -> None:
    """Copy ``cur`` into ``old``'s memory (same sizes and strides), keeping ``old``'s address:
    of an expanded value (a broadcast constant, ``cls.expand(B, -1, -1)``: stride 0) one copy
    of its elements, which ``copy_`` would refuse to write through the broadcast. Any other
    overlap (an ``unfold`` view) gets from ``cur``, of the same strides, one value per
    location, and ``copy_`` writes it."""
    if any(stride == 0 and size > 1 for size, stride in zip(old.shape, old.stride())):
        sizes = [1 if stride == 0 else size for size, stride in zip(old.shape, old.stride())]
        old = old.as_strided(sizes, old.stride(), old.storage_offset())
        cur = cur.as_strided(sizes, cur.stride(), cur.storage_offset())
    old.copy_(cur)


def _unfoldable_between(conv: torch.fx.Node, bn: torch.fx.Node) -> bool:
    """Whether a call after the convolution ``conv`` and before its BatchNorm ``bn`` keeps the
    fold from seeing what ``bn`` reads, the folded weight being made before ``conv``: it
    computes one of ``bn``'s arguments (``F.batch_norm(conv(x), rm, rv.clamp(min=1e-3))``), or
    writes a tensor in place (an in-place op in any form,
    :func:`~torchfuse.passes.fx.written_inputs`; a BatchNorm that is not the constant eval
    form, which updates its running statistics; a module call)."""
    reads = set(bn.all_input_nodes)
    node = conv.next
    while node is not bn and node.op != "output":
        if node in reads or node.op == "call_module":
            return True
        if node.op in ("call_function", "call_method"):
            if written_inputs(node):
                return True
            if node.target in _BATCH_NORMS:
                b = _bind(_bn_signature, node)
                if b is None or b.arguments["training"] is not False:
                    return True
        node = node.next
    return False


def _example(a: Any) -> Any:
    """The traced value of a graph argument (``None`` for a constant or an untraced node)."""
    return a.meta.get("example_value") if isinstance(a, torch.fx.Node) else None


def _batched(conv_args: inspect.BoundArguments) -> bool:
    """Whether a convolution's input has a batch dimension (as many dims as its weight); an
    unbatched input ((C_in, L), (C_in, H, W)) has its channels in dim 0."""
    x, w = _example(conv_args.arguments["input"]), _example(conv_args.arguments["weight"])
    return isinstance(x, torch.Tensor) and isinstance(w, torch.Tensor) and x.dim() == w.dim()


def conv_bias_epilogues(gm: torch.fx.GraphModule, devices: tuple[str, ...] = ("cuda",)) -> int:
    """Move each convolution's bias out of the convolution into an add after it (TorchDynamo's
    graph), on the devices named.

    On an H200, cuDNN ran the bias of fp16 channels-last convolutions as a separate ATen add
    kernel (MobileNetV3 at batch 1: 17 such kernels, one per squeeze-excitation and head
    convolution); as a graph add it joins the fusion group after the convolution (ReLU,
    hard-sigmoid), so it costs no launch of its own. The sum is the same: ``conv(x, w) + b``.

    Returns:
        The number of convolutions rewritten (the graph is recompiled in place when any were).
    """
    done = 0
    for conv in calls_to(gm, _CONVS):
        c = _bind(_conv_signature, conv)
        if c is None or not isinstance(c.arguments["bias"], torch.fx.Node):
            continue
        w = _example(c.arguments["weight"])
        if not isinstance(w, torch.Tensor) or w.device.type not in devices:
            continue
        if not _batched(c):  # unbatched input: channels are dim 0
            continue
        bias = c.arguments["bias"]
        c.arguments["bias"] = None
        conv.args, conv.kwargs = tuple(c.arguments.values()), {}
        with gm.graph.inserting_after(conv):
            biased = gm.graph.call_function(add_channel_bias, (conv, bias))
        conv.replace_all_uses_with(biased, delete_user_cb=lambda user: user is not biased)
        _set_example(biased, add_channel_bias, (conv, bias))  # the convolution's own value keeps its shape
        done += 1
    return finish(gm, done, "convolution bias(es) moved into the following fusion group (freeze)")


def _to_channels_last(t: torch.Tensor) -> torch.Tensor:
    return t.contiguous(memory_format=torch.channels_last)


def _contiguous(t: torch.Tensor) -> torch.Tensor:
    return t.contiguous()


def channels_last_convolutions(gm: torch.fx.GraphModule, devices: tuple[str, ...] = ("cuda",)) -> int:
    """Run 2-D fp16/bf16 convolutions (half-precision weights, or autocast) in channels-last
    layout (TorchDynamo's graph). Used under ``freeze``, for training graphs
    (``Options.channels_last_training``) and for unfrozen inference under CUDA graphs
    (``Options.channels_last_inference``).

    Args:
        gm: TorchDynamo's graph (nodes carry ``meta["example_value"]``).
        devices: device types where channels-last is the faster layout (cuDNN on CUDA).

    Returns:
        The number of convolutions rewritten (the graph is recompiled in place when any were).
    """
    done = 0
    for conv in calls_to(gm, (torch.conv2d, torch.nn.functional.conv2d)):
        c = _bind(_conv_signature, conv)
        if c is None or not isinstance(c.arguments["weight"], torch.fx.Node):
            continue
        w = c.arguments["weight"].meta.get("example_value")
        x = c.arguments["input"].meta.get("example_value") if isinstance(c.arguments["input"], torch.fx.Node) else None
        if not isinstance(w, torch.Tensor) or not isinstance(x, torch.Tensor) or x.dim() != 4:
            continue
        y = conv.meta.get("example_value")
        half = (torch.float16, torch.bfloat16)
        # half-precision weights, or autocast (the convolution's result is half precision)
        if w.device.type not in devices or not (w.dtype in half or (isinstance(y, torch.Tensor) and y.dtype in half)):
            continue
        with gm.graph.inserting_before(conv):
            new_x = gm.graph.call_function(_to_channels_last, (c.arguments["input"],))
            new_w = gm.graph.call_function(_to_channels_last, (c.arguments["weight"],))
        _set_example(new_x, _to_channels_last, (c.arguments["input"],))
        _set_example(new_w, _to_channels_last, (c.arguments["weight"],))
        c.arguments["input"], c.arguments["weight"] = new_x, new_w
        conv.args, conv.kwargs = tuple(c.arguments.values()), {}
        done += 1
    if done:
        # keep eager's layout for 4-D outputs eager returns contiguous
        out = next(n for n in gm.graph.nodes if n.op == "output")

        def restore(a):
            if isinstance(a, torch.fx.Node):
                v = a.meta.get("example_value")
                if isinstance(v, torch.Tensor) and v.dim() == 4 and v.is_contiguous():
                    with gm.graph.inserting_before(out):
                        n = gm.graph.call_function(_contiguous, (a,))
                    n.meta["example_value"] = v
                    return n
            return a

        out.args = torch.fx.node.map_aggregate(out.args, restore)
    return finish(gm, done, "convolution(s) run channels-last")


def _pure(node: torch.fx.Node) -> bool:
    t = node.target
    if t is operator.getitem:
        return True
    if not isinstance(t, torch._ops.OpOverload):
        return False
    if t._schema.is_mutable or torch.Tag.nondeterministic_seeded in t.tags:
        return False
    return True


class WeightSplit:
    """An inference graph split into a weight-only part and the rest.

    Attributes:
        weights: the graph computing ``values`` from the parameters and buffers it reads.
        weight_inputs: indices (into the original inputs) that ``weights`` takes, in order.
        main: the original graph with every value computed from parameters alone replaced by
            an input; it takes the original inputs followed by ``weights``' outputs.
        hoisted: number of ops moved to ``weights``.
    """

    def __init__(self, weights, weight_inputs, main, hoisted):
        self.weights = weights
        self.weight_inputs = weight_inputs
        self.main = main
        self.hoisted = hoisted


def split_weight_subgraph(gm: torch.fx.GraphModule, static_inputs: Sequence[int]) -> WeightSplit | None:
    """Split off what an AOTAutograd inference graph computes from its static inputs alone.

    Args:
        gm: the inference graph (ATen ops; placeholders in input order, ``meta["val"]`` set).
        static_inputs: indices of the inputs that are parameters or buffers (AOTAutograd's
            ``static_input_indices``).

    Returns:
        The :class:`WeightSplit`, or ``None`` when no op depends on static inputs alone.
    """
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    const = {placeholders[i] for i in static_inputs if i < len(placeholders)}
    hoisted: list[torch.fx.Node] = []
    for n in gm.graph.nodes:
        if n.op == "call_function" and n.all_input_nodes and all(a in const for a in n.all_input_nodes) and _pure(n):
            const.add(n)
            hoisted.append(n)
    frontier = [n for n in hoisted if any(u not in const for u in n.users)]
    if not frontier:
        return None
    used = [p for p in placeholders if p in const and any(u in hoisted for u in p.users)]
    wg = torch.fx.Graph()
    env: dict = {}
    for p in used:
        env[p] = wg.node_copy(p)
    for n in hoisted:
        env[n] = wg.node_copy(n, lambda a: env[a])
    wg.output(tuple(env[f] for f in frontier))
    weights = torch.fx.GraphModule(gm, wg)

    mg = torch.fx.Graph()
    env2: dict = {}
    for p in placeholders:
        env2[p] = mg.node_copy(p)
    for i, f in enumerate(frontier):
        ph = mg.placeholder(f"frozen_{i}")
        ph.meta = dict(f.meta)
        env2[f] = ph
    for n in gm.graph.nodes:
        if n.op == "placeholder" or n in env2 or n in const:
            continue
        env2[n] = mg.node_copy(n, lambda a: env2[a])
    main = torch.fx.GraphModule(gm, mg)
    main.graph.eliminate_dead_code()
    main.recompile()
    index = {p: i for i, p in enumerate(placeholders)}
    return WeightSplit(weights, [index[p] for p in used], main, len(hoisted))


def norm_counters(tensors: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    """The ``num_batches_tracked`` counters of the BatchNorm and InstanceNorm modules (those
    with running statistics) whose ``running_mean`` or ``running_var`` is one of ``tensors``.

    Eager BatchNorm in training mode updates the running statistics inside ATen's kernel
    without raising their version counters (checked on a CPU with torch 2.14: 1 before and
    after), while ``num_batches_tracked.add_(1)`` in the module's Python raises its counter.
    The modules are found among the objects the garbage collector tracks: the compiled graph
    holds the statistics but not their modules. One pass, at a frozen graph's first call and
    when its parameters are new tensors."""
    import gc

    from torch.nn.modules.batchnorm import _NormBase

    wanted = {id(t) for t in tensors}
    return [obj.num_batches_tracked for obj in gc.get_objects()
            if issubclass(type(obj), _NormBase) and obj.num_batches_tracked is not None  # (not a weak proxy)
            and (id(obj.running_mean) in wanted or id(obj.running_var) in wanted)]


def values_returned(main: torch.fx.GraphModule) -> dict[int, int]:
    """Output position -> index of the weight-only value (``frozen_<index>`` placeholder of
    :attr:`WeightSplit.main`) that the output is or views, through ops whose result aliases
    their first argument (by the ATen schema's alias annotation: ``view``, ``t``, ``permute``,
    ``slice``...); outputs computed from a value are not listed."""
    frozen = {n: int(n.name.rsplit("_", 1)[1]) for n in main.graph.nodes
              if n.op == "placeholder" and n.name.startswith("frozen_")}
    out = next(n for n in reversed(main.graph.nodes) if n.op == "output")
    found = {}
    outs = out.args[0]
    for i, a in enumerate(outs if isinstance(outs, (tuple, list)) else [outs]):
        a = view_root(a)
        if a in frozen:
            found[i] = frozen[a]
    return found


#: steps taken by optimizers with a fused parameter group (``fused=True``) since the first
#: frozen graph was made: PyTorch's fused optimizer kernels (``torch._fused_adamw_``...) write
#: the parameters without raising their version counters, so the counters alone miss them
_FUSED_STEPS = [0]
_FUSED_STEP_HOOK: list = []


def _count_fused_optimizer_steps() -> None:
    """Register, once per process, the optimizer post-step hook that counts fused steps."""
    if _FUSED_STEP_HOOK:
        return

    def hook(optimizer, args, kwargs) -> None:
        if any(group.get("fused") for group in optimizer.param_groups):
            _FUSED_STEPS[0] += 1

    from torch.optim.optimizer import register_optimizer_step_post_hook

    _FUSED_STEP_HOOK.append(register_optimizer_step_post_hook(hook))


class FrozenGraph:
    """Runs a :class:`WeightSplit`: the weight part when a parameter changed, then the rest.

    The weight part's results are cached with the storage address and version counter of
    every parameter and buffer it reads; a call whose parameters match runs only the compiled
    main graph. Recomputed results are copied into the cached tensors when their layout is
    unchanged, so their addresses stay fixed (a CUDA graph reads them in place).

    Never stale: every in-place write to a parameter or buffer raises its version counter (an
    optimizer step, ``load_state_dict``, a write of the graph itself to a buffer, which
    AOTAutograd counts twice), and the memory of the last call's tensors is held (a detached
    tensor on it: ``p.data = new`` keeps the object, with its counter, and not the memory), so
    that a tensor replacing one of them cannot take its address with an equal counter. (So
    after ``model.half()``, ``.cpu()`` or a ``.data`` swap, which assign ``.data``, the old
    weights are freed at the next call, or with the compiled model.) A counter that rose by
    more than one only recomputes. A step of an optimizer with ``fused=True``, whose kernels
    write without raising the counters, is counted by a process-wide post-step hook
    (``torch.optim.optimizer.register_optimizer_step_post_hook``), and any such step recomputes.
    Eager BatchNorm in training writes its running statistics without raising their counters
    either, but raises its ``num_batches_tracked``'s: those of the modules owning the checked
    statistics are watched too (:func:`norm_counters`). Inference tensors (parameters made under
    ``torch.inference_mode()``) have no counter: a call reading one recomputes the weight part.
    A cached value that views a parameter of the last call is replaced, never written into,
    when a new tensor takes that parameter's place. Not seen: writes through ``.data`` (no
    version counter; ``torch.nn.utils.vector_to_parameters`` assigns ``.data`` views of its
    vector, so later writes into the vector), PyTorch's fused optimizer kernels called outside
    an optimizer, and ``F.batch_norm(..., training=True)`` called on statistics outside a module.

    Calling convention: boxed (one list of inputs), as AOTAutograd's compiled graphs.
    """

    _boxed_call = True

    def __init__(self, split: WeightSplit, inner: Callable, static_inputs: Sequence[int] | None = None):
        """
        Args:
            split: the weight-only graph and the rest.
            inner: the compiled rest (a :class:`~torchfuse.runtime.cudagraphs.CudaGraphRunner`
                when CUDA graphs are on); takes the original inputs followed by the values.
            static_inputs: indices of all parameters and buffers among the original inputs
                (default: the ones the weight graph reads). All of them are checked per call;
                when none changed, a CUDA-graph runner inside is told so and skips its own
                address check of them and of the values (on an H200, ResNet-50 at batch 1
                checked 640 addresses per call in the two places).
        """
        self.split = split
        self.inner = inner
        self.checked = sorted(set(static_inputs if static_inputs is not None else split.weight_inputs)
                              | set(split.weight_inputs))
        self.key: list | None = None
        #: the parameters and buffers the key was read from (see the class doc), and detached
        #: tensors on their memory at that call: a ``p.data = new`` keeps the object, not the memory
        self.held: list = []
        self.held_memory: list = []
        self.values: list[torch.Tensor] = []
        self.refreshes = 0
        #: ``num_batches_tracked`` of the normalization modules whose running statistics are
        #: checked (:func:`norm_counters`), found at the first call and for new tensors
        self.counters: list[torch.Tensor] = []
        self._vouch_memo: tuple | None = None
        #: output position -> index of the value it is (or views): returned as a copy, since the
        #: value is this wrapper's, kept across calls, and eager returns a new tensor each call
        self.escaping = values_returned(split.main) if split.main is not None else {}
        self.weight_views: set[int] = set()  # of the escaping values, those on a parameter's memory
        _count_fused_optimizer_steps()

    def __getattr__(self, name: str) -> Any:  # reports read the inner graph's stats
        return getattr(self.__dict__["inner"], name)

    def _refresh(self, params: list) -> None:
        with torch.no_grad():
            new = list(self.split.weights(*params))
        # a value that views a parameter or buffer of the last call (``w.t()``) is that tensor's
        # memory, not this wrapper's: a copy into it would overwrite a weight the user still holds
        held = {p.untyped_storage().data_ptr() for p in self.held_memory}
        if len(self.values) == len(new):
            for k, (old, cur) in enumerate(zip(self.values, new)):
                if not isinstance(cur, torch.Tensor) or cur.data_ptr() == old.data_ptr():
                    self.values[k] = cur
                elif (cur.shape == old.shape and cur.stride() == old.stride() and cur.dtype == old.dtype
                      and old.untyped_storage().data_ptr() not in held):
                    _copy_into(old, cur)
                else:
                    self.values[k] = cur
        else:
            self.values = new
        self.refreshes += 1

    def _vouches_for(self, n_args: int) -> bool:
        """Whether every static input of the CUDA-graph runner inside is one this wrapper checks
        (a parameter or buffer) or owns (a value)."""
        static = getattr(self.inner, "static_idx", None)
        if static is None or not hasattr(self.inner, "static_vouched"):
            return False
        memo = self._vouch_memo  # the answer only changes with the runner's list or the counts
        if memo is not None and memo[0] is static and memo[1:3] == (n_args, len(self.values)):
            return memo[3]
        covered = set(self.checked) | set(range(n_args, n_args + len(self.values)))
        ok = set(static) <= covered
        self._vouch_memo = (static, n_args, len(self.values), ok)
        return ok

    def __call__(self, args: list) -> Any:
        checked = [args[i] for i in self.checked]
        # inference tensors (made under torch.inference_mode()) keep no version counter and may
        # be written in place there: a call that reads one recomputes the weight-only part
        untracked = any(p.is_inference() for p in checked)
        key = [(p.data_ptr(), None if untracked else p._version) for p in checked]
        key.append(_FUSED_STEPS[0])
        key.append(sum(c._version for c in self.counters if not c.is_inference()))
        unchanged = key == self.key and not untracked
        if not unchanged:
            if not self.held or any(a is not b for a, b in zip(checked, self.held)):
                self.counters = norm_counters(checked)  # other tensors: find their modules' counters
                key[-1] = sum(c._version for c in self.counters if not c.is_inference())
            self._refresh([args[i] for i in self.split.weight_inputs])
            self.key, self.held = key, checked
            self.held_memory = [p.detach() for p in checked]
            if self.escaping:  # values that view a parameter or buffer: returned as they are
                held = {p.untyped_storage().data_ptr() for p in checked}
                self.weight_views = {k for k in self.escaping.values()
                                     if self.values[k].untyped_storage().data_ptr() in held}
        if unchanged and self._vouches_for(len(args)):
            self.inner.static_vouched = True  # read and reset by the runner's next call
        full = list(args) + self.values
        args.clear()
        out = self.inner(full)
        if self.escaping:
            out = self._copy_escaping(out)
        return out

    def _copy_escaping(self, out):
        """``out`` with the outputs that are values or views of them (the same value, one copy
        per call) re-pointed at copies sharing one memory: outputs that alias each other in
        eager (two views of one intermediate, which the weight graph returns as two values)
        still do. Views of a parameter or buffer stay: eager's output aliases it too."""
        out = list(out)
        copied = [i for i, k in self.escaping.items() if k not in self.weight_views]
        # grouped by the values' memory: the compiled weight graph returns views as tensors of their own
        for group in storage_groups([self.values[self.escaping[i]] for i in copied]):
            positions = [copied[j] for j in group]
            for i, c in zip(positions, copies_sharing_memory([out[i] for i in positions])):
                out[i] = c
        return out