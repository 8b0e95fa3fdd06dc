"""CUDA graphs for training: the forward and backward graphs AOTAutograd hands torchfuse,
captured and replayed through PyTorch's CUDA graph trees (``torch._inductor.cudagraph_trees``,
the machinery behind ``torch.compile(mode="reduce-overhead")`` and TorchDynamo's
``cudagraphs`` backend).

Takes a compiled graph (any boxed callable: a :class:`~torchfuse.runtime.executor.CompiledGraph`
or the traced graph) and its ATen-level FX graph; returns a boxed callable.

What the trees provide, and torchfuse relies on:

* one memory pool per device shared by a forward graph and its backward, so the activations the
  forward saves are the backward's inputs in place (no copies);
* parameters and buffers (AOTAutograd's static inputs; a backward graph's saved activations)
  read in place and checked by address before each replay (a moved one records again); other
  inputs copied into the graph's buffers;
* a warm-up call per new input signature (kernels compile, libraries allocate lazily), then a
  recording, then replays; a new value of a size symbol records another graph;
* the default CUDA generator registered with each capture, so random numbers drawn on the device
  in a graph (torchfuse draws its kernels' seeds with ``torch.randint`` on the device each call)
  advance on every replay, and ``torch.manual_seed`` still reproduces a run.

What torchfuse adds:

* the refusals (:func:`~torchfuse.runtime.capture_refusals.capture_refusal`): a graph with CPU tensors or several devices, an op that
  is not safe to capture (a host synchronization, a data-dependent size), or an in-place write to
  an input that is neither a parameter nor a buffer runs uncaptured, and ``stats["cudagraph"]``
  (which ``explain`` prints) says why;
* the forward's user-visible outputs (the loss, the logits, values passed across a graph break)
  kept safe from the next replays, which write the same memory (``Options.cudagraph_copy_outputs``):
  small ones (under ``Tuning.runtime.pool_output_bytes``: a loss, which logging keeps) copied
  out of the pool and large ones returned in it, checked when the
  next step starts (:func:`release_pool_outputs`, at the first forward where the trees start a
  new generation, whose replays may overwrite them): one still held (kept by the user's loop,
  viewed, aliased) makes the graphs run uncaptured while it is held, and its position is
  copied from then on. A warm-up call copies them all, and the copies serve as probes: a
  position whose copy is still held when the next step starts (the user's loop keeps its
  outputs until the next call returns) is copied from the recording on, so that it never costs
  an uncaptured step. The recording leaves in the pool what replays will: the trees replay a
  graph only while the outputs of earlier graphs that are alive are those alive when it was
  recorded, and record another graph otherwise;
* gradients returned in the pool, without copies, and kept safe instead. A replay writes the
  memory an earlier replay returned, and in replay mode the trees neither copy nor mark what
  is still held, so a held gradient would silently change. Autograd takes a gradient as
  ``.grad`` when that was ``None``, so with ``zero_grad(set_to_none=False)`` or accumulation
  over micro-batches a ``.grad`` may still be pool memory at the next step. Before any captured
  forward runs (:func:`release_pool_gradients`), each such ``.grad`` moves to memory of its
  own: one copy per optimizer step at most, none with ``set_to_none=True``. A gradient still
  held anywhere else (kept from ``torch.autograd.grad``, by a hook, or as an old ``.grad``) is
  found by the trees' own weak references to the backward's outputs (:func:`_pool_outputs`):
  every captured graph then runs uncaptured while that memory is held, and that capture's
  gradients are copied out of the pool from then on (as they are when the trees give no such
  references). The
  activations saved for the backward stay in the pool.
"""
from __future__ import annotations

import dataclasses
import functools
import gc
import logging
import sys
import warnings
import weakref
from typing import Any, Callable, Sequence

import torch
import torch.fx
from torch.multiprocessing.reductions import StorageWeakRef

from .capture_refusals import capture_refusal, describe_input
from .launch import allocator
from .warn import user_stacklevel

log = logging.getLogger("torchfuse.recompile")


@dataclasses.dataclass(eq=False)
class CaptureState:
    """Shared by the forward and backward compilers of one TorchDynamo graph.

    Attributes:
        forward_captured: the forward graph is replayed by the trees; a backward graph that is
            not must then tell the trees' manager that a backward runs (as TorchDynamo's
            ``cudagraphs`` backend does), and when the forward is not captured neither is the
            backward.
        device_index: the CUDA device of the forward graph.
        inputs_moved: an input read in place was at another address than in the call before
            (checked in the first ``Tuning.runtime.address_checked_calls`` calls of the
            forward); from then on neither graph is replayed.
        grad_params: weak references to the forward's last inputs that get gradients (leaf
            tensors: the parameters, and inputs that require grad).
        pool_gradients: the trees' weak references to the last backward replay's outputs
            (gradients in the pool), until the next captured forward
            (:func:`release_pool_gradients`).
        pool_addresses: the storage addresses of ``pool_gradients``, made where the backward
            returns (the GPU is busy then), not at the next forward.
        pool_holders: what :func:`_held_in` reads to count the holders of ``pool_gradients``
            (a :class:`_Holders`), or ``None``.
        input_names: the user's names of the forward's inputs (:func:`user_input_names`),
            where they are one per placeholder of the forward graph; the backward's refusals
            name the forward inputs it saves by them.
        copy_gradients: why this capture's backward copies its gradients out of the pool from
            now on (a gradient was held outside ``.grad`` at a later step, or the trees gave no
            weak references to judge by); empty while it returns them in the pool.
        step_uncaptured: this step's forward ran uncaptured (pool memory was held), so its
            backward runs uncaptured too.
        pool_outputs: ``(position, the trees' weak reference)`` of each user-visible output the
            last forward replay returned in the pool, until the next step's check
            (:func:`release_pool_outputs`).
        probe_outputs: ``(position, a storage weak reference)`` of the copies a warm-up call
            returned of its large outputs, until the next step's check.
        copied_outputs: positions of user-visible outputs copied out of the pool from now on,
            since one was still held at a later step.
        steps_outputs_held: forward calls in a row run uncaptured because an output of an
            earlier replay is still held (a second one warns, once per process).
    """

    forward_captured: bool = True
    device_index: int | None = None
    inputs_moved: bool = False
    grad_params: list = dataclasses.field(default_factory=list)
    pool_gradients: list = dataclasses.field(default_factory=list)
    pool_addresses: frozenset = frozenset()
    pool_holders: Any = None
    input_names: tuple = ()
    copy_gradients: str = ""
    step_uncaptured: bool = False
    pool_outputs: list = dataclasses.field(default_factory=list)
    probe_outputs: list = dataclasses.field(default_factory=list)
    copied_outputs: frozenset = frozenset()
    steps_outputs_held: int = 0


#: captures whose backward replayed since the last captured forward ran, process-wide: the next
#: step's first forward may be another capture's (a graph break), and it runs first
_PENDING: list[CaptureState] = []
#: weak references to pool storages of gradients held outside ``.grad``, and of forward outputs
#: held into a later step: while one is alive no captured graph replays, since any replay may
#: write that memory
_HELD: list = []
_HELD_OUTPUTS: list = []
#: captures whose last forward replay returned outputs in the pool, process-wide, until the next
#: step's first forward checks them
_OUTPUTS: list[CaptureState] = []


def release_pool_gradients() -> int:
    """Before a captured forward runs, move every ``.grad`` that is still a gradient output of a
    backward replay (in the CUDA graph pool, which the next replays write) to memory of its
    own, and note the replays' gradients still held elsewhere; see the module. Parameters whose
    ``.grad`` is ``None`` or was accumulated into memory of its own cost a pointer comparison.
    A ``.grad`` the trees already marked overwritten (another program's capture started their
    new generation first) is left as it is: reading it raises the trees' error.

    Returns:
        How many ``.grad`` tensors were copied.
    """
    moved = 0
    for state in _PENDING:
        addresses = state.pool_addresses
        for ref in state.grad_params:
            p = ref()
            if p is not None and p.grad is not None and _address(p.grad) in addresses:
                p.grad = p.grad.clone(memory_format=torch.preserve_format)
                moved += 1
        held = _held_in(state)
        if held:  # a reference cycle may hold one until the cyclic collector runs
            gc.collect()
            held = _held(held)
        if held:
            state.copy_gradients = _HELD_MESSAGE
            _HELD.extend(held)
            log.info("backward: CUDA graph %s", _HELD_MESSAGE)
        state.pool_gradients = []
        state.pool_addresses = frozenset()
        state.pool_holders = None
    _PENDING.clear()
    return moved


def release_pool_outputs() -> int:
    """When a step's first captured forward is about to start the trees' new generation (whose
    replays may write any memory the last step's replays returned), find the forward outputs
    left in the pool that are still held (by the user's loop variable, a list, a view or an
    alias: the trees' weak references follow the storage). Each such position is copied out of
    the pool from then on, and the held memory joins what keeps graphs uncaptured while it is
    alive (:func:`pool_memory_held`). A reference cycle may be what holds it, so one cyclic
    collection runs when something is found; the position is copied from then on even if the
    collection freed it, so that a full collection (0.3-0.4 s with a large model's objects
    alive, measured on an H200's host) runs at most once per position. The copies a warm-up
    call returned (``CaptureState.probe_outputs``) are judged the same way, without a
    collection: a position whose copy is still held is copied from the recording on.

    Returns:
        How many outputs in the pool were still held.
    """
    found = 0
    for state in _OUTPUTS:
        kept = {i for i, ref in state.probe_outputs if not ref.expired()}
        if kept:  # copies, not pool memory: copied from the recording on, with nothing to wait for
            state.copied_outputs = state.copied_outputs | kept
            log.info("forward: CUDA graph outputs %s still held at the next step: copied out of the pool",
                     sorted(kept))
        state.probe_outputs = []
        refs = [r for _, r in state.pool_outputs]
        held = _held(refs)
        if held:
            gc.collect()
            held_ids = set(map(id, held))
            state.copied_outputs = state.copied_outputs | {i for i, r in state.pool_outputs if id(r) in held_ids}
            _HELD_OUTPUTS.extend(_held(held))
            found += len(held_ids)
            log.info("forward: CUDA graph %s", _HELD_OUTPUT_MESSAGE)
        state.pool_outputs = []
    _OUTPUTS.clear()
    return found


_warned_outputs_held = [False]


def _warn_outputs_held() -> None:
    """Warn once per process that an output a replay returned in the pool is kept beyond the
    next step (a list of every step's outputs), which keeps the graphs uncaptured: the user
    would otherwise see a slower step and not learn why."""
    if _warned_outputs_held[0]:
        return
    _warned_outputs_held[0] = True
    warnings.warn("torchfuse: an output of a CUDA graph replay (mode=\"reduce-overhead\") is still referenced two "
                  "steps later; the next replays would overwrite it, so the training graphs run without CUDA "
                  "graphs while it is alive (that output is copied from now on). Keep a copy (.clone(), "
                  ".detach().cpu(), .item()) of what you keep across steps. This warning is shown once per process.",
                  UserWarning, stacklevel=user_stacklevel())


def _new_generation(device_index: int) -> bool:
    """Whether the CUDA graph trees' next call on ``device_index`` starts a new generation (a
    new step: no forward waits for its backward, or the user marked a step), asked before that
    call; True where the trees have no manager or no such test (checking more often only
    copies more)."""
    from torch._inductor.cudagraph_trees import get_manager

    manager = get_manager(device_index, create_if_none_exists=False)
    test = getattr(manager, "can_start_new_generation", None)
    return True if test is None else bool(test())


def _warmed_up(device_index: int) -> bool:
    """Whether the trees' last call on ``device_index`` was a warm-up (not a recording or a
    replay); True where the trees do not say."""
    from torch._inductor.cudagraph_trees import get_manager

    manager = get_manager(device_index, create_if_none_exists=False)
    state = getattr(manager, "path_state", None)
    return getattr(state, "name", None) not in ("RECORDING", "EXECUTION")


def _address(t: torch.Tensor) -> int | None:
    """The address of ``t``'s storage; ``None`` when the trees already marked it overwritten
    (another program's capture started a new generation first), which reading then reports."""
    try:
        return t.untyped_storage().data_ptr()
    except RuntimeError:
        return None


def _trees_node(device_index: int) -> Any:
    """The CUDA graph trees' node that ran last on ``device_index`` (``current_node``), or
    ``None``."""
    from torch._inductor.cudagraph_trees import get_manager

    manager = get_manager(device_index, create_if_none_exists=False)
    return manager.current_node if manager is not None else None


def _pool_outputs(outputs: list, device_index: int) -> tuple[list, _Holders | None] | None:
    """The trees' own weak references to the tensor outputs of the replay just made
    (``outputs_weakrefs`` of the node that ran; the last ``len(outputs)`` of a warm-up
    node's), and their :class:`_Holders`. The trees return the same cached tensor for an
    output on every replay and hold it themselves; their weak reference counts only the
    holders beyond theirs, which a plain storage weak reference cannot. ``None`` when the
    node has no such references."""
    node = _trees_node(device_index)
    refs = getattr(node, "outputs_weakrefs", None)
    if refs is None or len(refs) < len(outputs):
        return None
    pairs = [(o, r) for o, r in zip(outputs, refs[len(refs) - len(outputs):])
             if r is not None and isinstance(o, torch.Tensor)]
    refs = [r for _, r in pairs]
    return refs, _holders(node, [o for o, _ in pairs])


def pool_memory_held() -> bool:
    """Whether a gradient a replay returned is still held outside ``.grad``, or a forward
    output into a later step (see the module)."""
    _HELD[:] = _held(_HELD)
    _HELD_OUTPUTS[:] = _held(_HELD_OUTPUTS)
    return bool(_HELD or _HELD_OUTPUTS)


@dataclasses.dataclass(eq=False)
class _Holders:
    """Where the holders of a backward replay's pool gradients are counted (made where the
    backward returns): weak references to the trees' node and to the tensors it returned (for
    an output the trees check by reference count, their cached tensor), aligned with
    ``CaptureState.pool_gradients``."""

    node: Any
    tensors: list


#: counts of a pool gradient's holders that the trees' own check judged free: (Python references
#: to the returned tensor, C++ references to it, references to its storage, whether the trees
#: check no reference count for it); see _held_in
_FREE: set = set()
_STORAGE_USES = torch._C._storage_Use_Count
_TENSOR_USES = torch._C.TensorBase._use_count


def _holders(node: Any, outputs: list) -> _Holders | None:
    """The :class:`_Holders` of a backward replay's tensor ``outputs`` from the trees' ``node``,
    or ``None`` where the node takes no weak reference."""
    try:
        node_ref = weakref.ref(node)
    except TypeError:
        return None
    return _Holders(node_ref, [weakref.ref(o) for o in outputs if isinstance(o, torch.Tensor)])


def _held_in(state: CaptureState) -> list:
    """:func:`_held` of ``state.pool_gradients``, answered for most gradients without the
    trees' check (several Python calls per gradient, on the path from a step's host
    synchronization to its first replay): the trees' verdict is a function of a gradient's
    holder counts while their node lives, so counts that the trees once judged free are free
    again (:data:`_FREE`). The counts are read for all gradients at once; a gradient whose
    counts are new, or whose node or returned tensor is gone, is judged by the trees."""
    refs, holders = state.pool_gradients, state.pool_holders
    node = holders.node() if holders is not None else None
    if node is None or len(holders.tensors) != len(refs):
        return _held(refs)
    tensors = [w() for w in holders.tensors]
    if any(t is None for t in tensors):
        return _held(refs)
    # the storage the trees' reference follows now (they may point it elsewhere), read here
    counts = list(zip(map(sys.getrefcount, tensors), map(_TENSOR_USES, tensors),
                      map(_STORAGE_USES, [r.ref.cdata for r in refs]), [r.extra_ref_check is None for r in refs]))
    del tensors  # the trees' check below must not see these references
    held = []
    for k, c in enumerate(counts):
        if c not in _FREE:
            r = refs[k]
            if r.expired():
                _FREE.add(c)
            elif not r.ref.expired():
                held.append(r)
    return held


def _held(refs: list) -> list:
    """The trees' weak references in ``refs`` whose storage is held beyond the trees' own
    references. The trees' check runs first, since it is the one that usually decides (one
    call per gradient, each forward); a storage that no longer exists is then not held (the
    trees' check of a cached output reads its node, and reports a node that is gone as
    holding it)."""
    return [r for r in [r for r in refs if not r.expired()] if not r.ref.expired()]


_HELD_OUTPUT_MESSAGE = ("an output returned in the pool was still held at the next step: calls run uncaptured "
                        "while it is held, and that output is copied out of the pool from then on")
_NO_REFERENCES = "the CUDA graph trees gave no weak references to their outputs, to tell which are held"
_HELD_MESSAGE = ("a gradient returned in the pool was still held outside .grad at the next step: calls "
                 "run uncaptured while it is held, and this capture's gradients are copied out of the pool "
                 "from then on")


def forward_static_inputs(static_inputs: list[int] | None, n_inputs: int) -> list[int]:
    """A forward graph's inputs read in place: AOTAutograd's ``static_input_indices``
    (parameters and buffers), all of them when those are unknown."""
    return sorted(i for i in (static_inputs or []) if i < n_inputs)


def backward_static_inputs(gm: torch.fx.GraphModule) -> list[int]:
    """A backward graph's inputs read in place: its leading inputs that are not tangents (the
    activations its forward saved, already in the trees' pool)."""
    from torch._inductor.utils import count_tangents

    return list(range(count_tangents(gm)))


def user_output_count() -> int | None:
    """How many of the forward graph being compiled's outputs reach the user (mutated inputs,
    the module's outputs, intermediate bases), from AOTAutograd's metadata; the rest are
    activations saved for the backward. ``None`` outside its tracing context."""
    ctx = torch._guards.TracingContext.try_get()
    meta = getattr(ctx, "fw_metadata", None) if ctx is not None else None
    n = getattr(meta, "num_forward_returns", None)
    return int(n) if n is not None else None


@functools.lru_cache(maxsize=4096)
def _overlaps(size: tuple, stride: tuple) -> bool:
    """Whether a tensor of ``size`` and ``stride`` has elements at one address (a broadcast,
    stride 0): unless each dimension steps over the whole extent of those with smaller strides.
    Cached: a replay's outputs have the same layouts every step."""
    dims = sorted((st, n) for st, n in zip(stride, size) if n > 1)
    return any(st <= 0 for st, _ in dims) or any(st < prev_st * prev_n
                                                 for (prev_st, prev_n), (st, _) in zip(dims, dims[1:]))


def _fresh_like(t: torch.Tensor, alloc: Callable | None = None) -> torch.Tensor:
    """An uninitialized tensor for a copy of ``t``: ``t``'s strides where its elements do not
    overlap; a broadcast output (a stride of 0, as the gradient of an expanded tensor can be)
    gets dense strides instead, since nothing can be copied into overlapping elements.

    Args:
        alloc: ``alloc(shape, stride, dtype)`` for ``t``'s device (:func:`_allocator`);
            ``None``: ``torch.empty_strided``.
    """
    size, stride = t.shape, t.stride()
    if _overlaps(size, stride):
        return torch.empty_like(t, memory_format=torch.contiguous_format)
    if alloc is None:
        return torch.empty_strided(size, stride, dtype=t.dtype, device=t.device)
    return alloc(tuple(size), stride, t.dtype)


def _allocator(device: torch.device) -> Callable:
    """The fastest allocation entry point for ``device`` (:func:`~torchfuse.runtime.launch.allocator`;
    the fast CUDA one only where ``device`` is the current device)."""
    return allocator(device, device.type == "cuda" and torch.cuda.current_device() == device.index)


#: ``torch._foreach_clone``, where this PyTorch has it
_FOREACH_CLONE = getattr(torch, "_foreach_clone", None)


def _copies(src: list) -> list:
    """Copies of the same-dtype tensors ``src`` (on one device), with their strides (a broadcast
    one's copy dense). Where PyTorch has ``torch._foreach_clone``, one call makes them all (its
    allocations happen in C++, not a Python call each); it lays out the copy of a tensor with
    gaps densely, so such a tensor is copied again with its strides. Else fresh tensors
    (:func:`_fresh_like`) filled by one ``torch._foreach_copy_``."""
    if _FOREACH_CLONE is not None:
        return [d if d.stride() == t.stride() or _overlaps(t.shape, t.stride()) else _copy_keeping_strides(t)
                for t, d in zip(src, _FOREACH_CLONE(src))]
    alloc = _allocator(src[0].device)
    dst = [_fresh_like(t, alloc) for t in src]
    torch._foreach_copy_(dst, src)
    return dst


def _copy_keeping_strides(t: torch.Tensor) -> torch.Tensor:
    """A copy of ``t`` with ``t``'s strides (see :func:`_fresh_like`)."""
    d = _fresh_like(t)
    d.copy_(t)
    return d


class OutputCopier:
    """Copy chosen outputs of a replay out of the CUDA graph pool into fresh tensors, with one
    multi-tensor copy per dtype, so that holding them across steps is safe. Each copy has its
    source's strides (an intermediate base that AOTAutograd regenerates views from must keep
    them), except that a broadcast source's copy is dense.

    Args:
        indices: output positions to copy (a sequence); ``None``: every tensor output.

    The positions are grouped by dtype and device at the first call: a compiled graph's
    outputs keep their dtypes and devices from call to call, and the grouping is host time
    on every forward, where a step with a host synchronization leaves the GPU waiting.
    """

    def __init__(self, indices: Sequence[int] | None):
        self.indices = indices
        self._groups: list[list[int]] | None = None
        self._count = -1

    def __call__(self, outputs: list) -> list:
        groups = self._groups
        if groups is None or len(outputs) != self._count:
            groups = self._groups = self._group(outputs)
            self._count = len(outputs)
        outputs = list(outputs)
        for group in groups:
            for i, d in zip(group, _copies([outputs[i] for i in group])):
                outputs[i] = d
        return outputs

    def _group(self, outputs: list) -> list[list[int]]:
        positions = range(len(outputs)) if self.indices is None else self.indices
        by_dtype: dict = {}
        for i in positions:
            o = outputs[i]
            if isinstance(o, torch.Tensor):
                by_dtype.setdefault((o.dtype, o.device), []).append(i)
        return list(by_dtype.values())


def capture_training_graph(fn: Callable, gm: torch.fx.GraphModule, example_inputs: list, *, name: str,
                           static_inputs: list[int] | None, state: CaptureState, copy_outputs: bool,
                           stats: dict | None, cudagraphify: Callable | None = None,
                           address_checked_calls: int = 3, input_names: tuple[str, ...] = (),
                           pool_output_bytes: int = 0) -> Callable:
    """Wrap the compiled forward or backward graph ``fn`` so that its calls replay CUDA graphs.

    Args:
        fn: the compiled graph, boxed (called with a list of inputs, which it may clear).
        gm: its ATen-level FX graph (for the refusals, devices and stack traces).
        example_inputs: its example (fake) inputs.
        name: ``"forward"`` or ``"backward"``.
        static_inputs: for a forward, AOTAutograd's indices of parameters and buffers.
        state: shared by the forward and the backward of one TorchDynamo graph.
        copy_outputs: copy a forward's user-visible outputs out of the pool (see the module).
        stats: the compiled graph's counters, where ``"cudagraph"`` says what happened.
        cudagraphify: the trees' ``cudagraphify_impl`` (a stand-in in CPU tests).
        address_checked_calls: ``Tuning.runtime.address_checked_calls``: the first calls of a
            forward whose parameters and buffers are compared by address with the call before.
        input_names: the user's names of a forward's inputs (:func:`user_input_names`), for
            the refusals of the forward and of its backward (``state.input_names``).
        pool_output_bytes: ``Tuning.runtime.pool_output_bytes``: with ``copy_outputs``, a
            replayed forward's user-visible outputs of at least this many bytes are returned in
            the pool until one is found held at a later step (see the module); 0: all copied.

    Returns:
        A boxed callable: ``fn`` itself (or a thin wrapper) when the graph is not captured.
    """
    from torch._inductor.cudagraph_utils import get_placeholder_info

    if cudagraphify is None:
        from torch._inductor.cudagraph_trees import cudagraphify_impl as cudagraphify
    stats = stats if stats is not None else {}
    backward = name == "backward"
    static = backward_static_inputs(gm) if backward else forward_static_inputs(static_inputs, len(example_inputs))
    if not backward and len(input_names) == sum(1 for n in gm.graph.nodes if n.op == "placeholder"):
        state.input_names = tuple(input_names)
    reason = capture_refusal(gm, static, state.input_names, name)
    if reason is None and backward and not state.forward_captured:
        reason = "its forward graph is not captured"
    if reason is not None:
        stats["cudagraph"] = f"not captured: {reason}"
        log.info("%s: CUDA graph %s", name, stats["cudagraph"])
        if not backward:
            from .cudagraphs import warn_if_off_cuda

            warn_if_off_cuda(name, example_inputs)
        if not backward:
            state.forward_captured = False
        elif state.forward_captured:
            return _running_backward(fn, state.device_index)
        return fn
    from torch._dynamo.backends.cudagraphs import find_input_mutations, get_stack_traces

    device_index = next(t.device.index or 0 for t in (n.meta.get("val") for n in gm.graph.nodes)
                        if isinstance(t, torch.Tensor))
    if not backward:
        state.device_index = device_index
    settings = dict(device_index=device_index, is_backward=backward, is_inference=False,
                    stack_traces=get_stack_traces(gm), placeholders=get_placeholder_info(gm.graph),
                    mutated_input_idxs=tuple(sorted(find_input_mutations(gm.graph))))
    replay = None
    copier = None
    n_user = None if backward or not copy_outputs else user_output_count()
    if n_user:
        copier = OutputCopier(range(n_user))
    replay_copier: tuple | None = None  # (key, copier, positions left in the pool) of replays
    captured = (f"captured: replayed by PyTorch's CUDA graph trees after a warm-up call per input "
                f"signature; {len(static)} inputs read in place"
                + ("" if copier is None else "; user-visible outputs copied out of the pool" if pool_output_bytes <= 0
                   else f"; user-visible outputs under {pool_output_bytes} bytes copied out of the pool, larger ones "
                   "returned in it unless a later step still finds one kept"))
    stats["cudagraph"] = captured + ("; gradients returned in the pool (a .grad still holding one moves out "
                                     "before the next forward)" if backward else "")
    grad_copier = OutputCopier(None) if backward else None
    grad_inputs = None  # a forward's leaf inputs that get gradients

    addresses: tuple | None = None
    checks_left = address_checked_calls
    uncaptured = _running_backward(fn, device_index) if backward else fn

    def run(args: list) -> Any:
        nonlocal replay, addresses, checks_left, grad_inputs, replay_copier
        if not backward:
            if _PENDING:
                release_pool_gradients()
            if _OUTPUTS and _new_generation(device_index):
                release_pool_outputs()
            if grad_inputs is None:
                grad_inputs = [i for i, a in enumerate(args)
                               if isinstance(a, torch.Tensor) and a.requires_grad and a.is_leaf]
            state.grad_params = [weakref.ref(args[i]) for i in grad_inputs]
            state.step_uncaptured = bool(_HELD or _HELD_OUTPUTS) and pool_memory_held()
            status = captured
            if state.copied_outputs:
                status += (f"; {len(state.copied_outputs)} outputs copied out of the pool from then on (found "
                           "still held at a later step)")
            if state.step_uncaptured:
                status += f"; {_HELD_MESSAGE if _HELD else _HELD_OUTPUT_MESSAGE}"
            state.steps_outputs_held = state.steps_outputs_held + 1 if state.step_uncaptured and not _HELD else 0
            if state.steps_outputs_held == 2:
                _warn_outputs_held()
            stats["cudagraph"] = status
        if state.step_uncaptured:
            return uncaptured(args)
        # a forward's inputs read in place are parameters and buffers; a backward's are saved
        # activations, which move from the warm-up's allocations into the pool by design
        if checks_left and not backward and not state.inputs_moved:
            checks_left -= 1
            now = tuple(args[i].data_ptr() if isinstance(args[i], torch.Tensor) else None for i in static)
            if addresses is not None and now != addresses:
                state.inputs_moved = True
                log.info("%s: CUDA graph %s", name, _MOVED)
            addresses = now
        if state.inputs_moved:
            stats["cudagraph"] = f"not captured: {_MOVED}"
            return uncaptured(args)
        if replay is None:  # made from the first real inputs: the trees key graphs on their ints
            replay = cudagraphify(_clearing(fn), args, static, **settings)
        outputs = replay(args)
        if backward:
            if not state.copy_gradients:
                found = _pool_outputs(outputs, device_index)
                if found is not None:
                    state.pool_gradients, state.pool_holders = found
                    state.pool_addresses = frozenset(r.data_ptr() for r in state.pool_gradients)
                    if state not in _PENDING:
                        _PENDING.append(state)
                    return outputs
                state.copy_gradients = _NO_REFERENCES  # nothing to judge by: the safe way
                log.info("backward: CUDA graph %s", _NO_REFERENCES)
            stats["cudagraph"] = f"{captured}; gradients copied out of the pool: {state.copy_gradients}"
            return grad_copier(outputs)
        if copier is None:
            return outputs
        if pool_output_bytes <= 0:
            return copier(outputs)
        if _warmed_up(device_index):  # warm-up outputs are not the pool's recorded memory
            outputs = copier(outputs)
            state.probe_outputs = [(i, StorageWeakRef(outputs[i].untyped_storage()))
                                   for i in _large_outputs(outputs, n_user, state.copied_outputs, pool_output_bytes)]
            if state.probe_outputs and state not in _OUTPUTS:
                _OUTPUTS.append(state)
            return outputs
        node = _trees_node(device_index)
        refs = getattr(node, "outputs_weakrefs", None)
        if refs is None or len(refs) < len(outputs):
            return copier(outputs)  # nothing to judge by: the safe way
        refs = refs[len(refs) - len(outputs):]
        key = (id(node), state.copied_outputs, len(outputs))
        if replay_copier is None or replay_copier[0] != key:
            left = [i for i in _large_outputs(outputs, n_user, state.copied_outputs, pool_output_bytes)
                    if refs[i] is not None]
            replay_copier = (key, OutputCopier([i for i in range(n_user) if i not in left]), left)
        _, out_copier, left = replay_copier
        if left:
            state.pool_outputs = [(i, refs[i]) for i in left if refs[i] is not None]
            if state not in _OUTPUTS:
                _OUTPUTS.append(state)
        return out_copier(outputs)

    run._boxed_call = True
    return run


def _large_outputs(outputs: list, n_user: int, copied: frozenset, min_bytes: int) -> list[int]:
    """The positions among the first ``n_user`` outputs (the user-visible ones) of tensors whose
    storage holds at least ``min_bytes`` bytes, except those ``copied`` from now on: the outputs
    a replay leaves in the pool (see the module)."""
    return [i for i in range(n_user) if i not in copied and isinstance(outputs[i], torch.Tensor)
            and outputs[i].untyped_storage().nbytes() >= min_bytes]


_MOVED = ("an input read in place (a parameter) was at a new address in a later call, as FSDP2's "
          "unsharded parameters are every step: recording the graph again on every call would cost "
          "more than it saves, so it runs uncaptured from then on")


def _clearing(fn: Callable) -> Callable:
    """``fn`` called with a copy of its input list, which it empties first, as the trees
    require of the functions they wrap (boxed: the inputs can be freed as soon as they die);
    the traced graph AOTAutograd boxes does not empty it."""
    def run(args: list) -> Any:
        inputs = list(args)
        args.clear()
        return fn(inputs)

    return run


def _running_backward(fn: Callable, device_index: int | None) -> Callable:
    """An uncaptured backward whose forward is captured: tell the trees' manager before each
    call, so that it does not take the backward for the next step's forward."""
    from torch._inductor.cudagraph_trees import get_manager

    def run(args: list) -> Any:
        manager = get_manager(device_index or 0, create_if_none_exists=False)
        if manager is not None:
            manager.set_to_running_backward()
        return fn(args)

    run._boxed_call = True
    return run
