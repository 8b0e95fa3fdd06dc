"""CUDA graphs for inference graphs: capture a compiled graph (generated kernels and ATen calls
alike) once per input-shape signature and replay it, removing the host cost of every launch.

Takes a :class:`~torchfuse.runtime.executor.CompiledGraph`; returns a callable with the same
boxed calling convention.

* **When**: the first call of a signature runs uncaptured (it plans and compiles the
  kernels); the second call captures: parameters and buffers (AOTAutograd's static inputs, or
  else the tensors whose address did not change between the two calls) are read in place,
  every other input gets a static buffer the replay copies it into. A warm-up run on the
  capture stream precedes the capture, as CUDA requires for libraries that allocate lazily.
* **Signatures**: one graph per signature of the non-static inputs' shapes, strides and
  dtypes, least recently used evicted beyond ``Options.cudagraph_max_graphs``; all of a
  compiled graph's CUDA graphs share one memory pool. Static inputs are checked by address
  on every call (a moved parameter means capturing again), not signed: with hundreds of
  parameters a full signature cost more host time than the replay saved (about 0.8 ms per
  call for 320 tensors, measured on a CPU).
* **Safe outputs**: outputs live in the pool and the next replay overwrites them. With
  ``Options.cudagraph_copy_outputs`` (the default) each replay returns fresh copies; without
  it the replay returns the pool tensors, and a replay that would overwrite an output the
  caller still holds raises :class:`CudaGraphOutputInUse` (the known trap of ``f(f(x))`` and of
  keeping last step's outputs).
* **Random numbers**: kernels read their seeds from device memory, drawn on the device each
  call (``launch.draw_seeds``); the capture registers PyTorch's CUDA generator, whose offset
  every replay advances, so each replay draws new numbers.
* **Not captured** (the graph runs as usual and ``stats["cudagraph"]`` says why): inputs or
  outputs on the CPU, an input written in place that is not a parameter or buffer, autograd
  (inputs that require grad), and any graph whose capture fails (an op that synchronizes with
  the host). Training graphs are captured by :mod:`torchfuse.runtime.training_graphs`.
"""
from __future__ import annotations

import collections
import logging
import warnings
from typing import Any, Callable

import torch

from .calls import copies_sharing_memory, storage_groups
from .warn import user_stacklevel

log = logging.getLogger("torchfuse.recompile")


_warned_not_cuda = [False]


def warn_if_off_cuda(name: str, inputs) -> None:
    """Warn once per process that a graph compiled with ``cudagraphs=True`` (``mode=
    "reduce-overhead"``) runs uncaptured because none of its ``inputs`` is a CUDA tensor: the
    mode then does nothing, which a user trying it on a CPU would otherwise not learn. A graph
    with CUDA inputs that is refused for another reason says why in ``explain`` only."""
    if _warned_not_cuda[0] or any(isinstance(t, torch.Tensor) and t.device.type == "cuda" for t in inputs):
        return
    _warned_not_cuda[0] = True
    warnings.warn(f"torchfuse: mode=\"reduce-overhead\" (cudagraphs=True) replays CUDA graphs, which capture CUDA "
                  f"work only; this {name} graph's tensors are not on a CUDA device, so it runs uncaptured "
                  "(torchfuse.explain says why for each graph). This warning is shown once per process.",
                  UserWarning, stacklevel=user_stacklevel())


class CudaGraphOutputInUse(RuntimeError):
    """A CUDA graph replay would overwrite an output of an earlier replay the caller holds."""


class _Captured:
    def __init__(self):
        self.graph: Any = None
        self.static_inputs: list[torch.Tensor | None] = []  # None: read in place (or not a tensor)
        self.outputs: list[Any] = []
        self.baseline: list[int] = []  # storage use counts of the outputs while nobody holds them
        #: outputs on one memory: (first index, the others' indices), copied as one (_copy_outputs)
        self.shared: tuple = ()


class CudaGraphRunner:
    """Wraps a compiled graph so that its steady-state calls replay a CUDA graph.

    Args:
        compiled: the compiled graph (boxed calling convention; ``stats`` and ``name``).
        options: the compiler options (``cudagraph_max_graphs``, ``cudagraph_copy_outputs``).
        static_inputs: indices of the inputs that are parameters and buffers (AOTAutograd's
            ``static_input_indices``): read in place by every captured graph, checked by
            address on every call. ``None``: learned from the first two calls (the tensors
            whose address did not change).
        mutated_inputs: indices of the inputs the graph writes in place; a graph that writes
            one that is not static is not captured.
        name_input: ``name_input(i)``: how a refusal names input ``i`` (the user's name where
            known, dtype and shape), called only when refusing; default: its index.

    Per call, only the other inputs enter the signature (their shapes, strides, dtypes) and
    are copied into the graph's buffers; the static ones cost one address comparison each.
    Their shapes, strides and dtypes are guarded by TorchDynamo (a change recompiles).
    """

    _boxed_call = True
    device_type = "cuda"

    def __init__(self, compiled, options, static_inputs: list[int] | None = None, mutated_inputs=(),
                 name_input: Callable[[int], str] | None = None):
        self._boxed_call = True
        self.compiled = compiled
        self.options = options
        self.pool = None
        self.graphs: collections.OrderedDict = collections.OrderedDict()
        self.pending: dict = {}  # signature -> input addresses of its first (uncaptured) call
        self.static_given = static_inputs is not None
        self.static_idx: list[int] | None = sorted(static_inputs) if static_inputs is not None else None
        self.dyn_idx: list[int] | None = None
        self.static_ptrs: list[int] | None = None  # addresses the captured graphs read in place
        #: set by a wrapper that has itself checked every static input of this call (the
        #: frozen-weights wrapper); the address check is skipped once and the flag reset
        self.static_vouched = False
        self.disabled: str | None = None
        compiled.stats["cudagraph"] = "not yet captured"
        written = sorted(set(mutated_inputs) - set(static_inputs or ()))
        self.name_input = name_input if name_input is not None else str
        if written:  # a replay would write its private copy of the input, not the caller's tensor
            named = ", ".join(self.name_input(i) for i in written)
            self.disable(f"input(s) {named} written in place but neither a parameter nor a buffer")

    def __getattr__(self, name):
        return getattr(self.compiled, name)

    def disable(self, reason: str) -> None:
        self.disabled = reason
        self.compiled.stats["cudagraph"] = f"not captured: {reason}"
        log.info("%s: CUDA graph %s", self.compiled.name, self.compiled.stats["cudagraph"])

    def _signature(self, args: list, indices) -> tuple | None:
        sig = []
        device = self.device_type
        for i in indices:
            a = args[i]
            if isinstance(a, torch.Tensor):
                if a.device.type != device:
                    return None
                sig.append((tuple(a.shape), a.stride(), a.dtype, a.storage_offset() % 16))
            else:
                sig.append(a if isinstance(a, (int, float, bool)) else type(a).__name__)
        return tuple(sig)

    def _static_unchanged(self, args: list) -> bool:
        for i, p in zip(self.static_idx, self.static_ptrs):
            if args[i].data_ptr() != p:
                return False
        return True

    def __call__(self, args: list) -> Any:
        if self.disabled is not None:
            return self.compiled(args)
        if torch.is_grad_enabled() and any(isinstance(a, torch.Tensor) and a.requires_grad for a in args):
            self.disable("inputs require grad (training graphs run uncaptured)")
            return self.compiled(args)
        vouched, self.static_vouched = self.static_vouched, False
        if self.static_ptrs is not None and not vouched and not self._static_unchanged(args):
            # a parameter or buffer moved (replaced, or the model moved): the captured graphs
            # read the old addresses; capture again
            log.info("%s: a static input moved; CUDA graphs are captured again", self.compiled.name)
            self.graphs.clear()
            self.pending.clear()
            self.static_ptrs = None
            if not self.static_given:
                self.static_idx = self.dyn_idx = None
        if self.static_idx is not None and self.dyn_idx is None:
            self.static_idx = [i for i in self.static_idx if i < len(args)]
            static = set(self.static_idx)
            self.dyn_idx = [i for i in range(len(args)) if i not in static]
        indices = self.dyn_idx if self.dyn_idx is not None else range(len(args))
        sig = self._signature(args, indices)
        if sig is None:
            i = next(i for i in indices if isinstance(args[i], torch.Tensor) and args[i].device.type != self.device_type)
            self.disable(f"input {self.name_input(i)} is on {args[i].device.type}, not a CUDA device")
            warn_if_off_cuda(self.compiled.name, args)
            return self.compiled(args)
        captured = self.graphs.get(sig)
        if captured is not None:
            self.graphs.move_to_end(sig)
            return self._replay(captured, args)
        ptrs = [a.data_ptr() if isinstance(a, torch.Tensor) else None for a in args]
        previous = self.pending.get(sig)
        self.pending[sig] = ptrs
        if previous is None:  # first call of this signature: plan and compile, uncaptured
            return self.compiled(list(args))
        if self.static_idx is None:  # learned: the tensors whose address stayed
            self.static_idx = [i for i, (a, p0, p1) in enumerate(zip(args, previous, ptrs))
                               if isinstance(a, torch.Tensor) and p0 == p1]
            static = set(self.static_idx)
            self.dyn_idx = [i for i in range(len(args)) if i not in static]
            sig = self._signature(args, self.dyn_idx)
        if any(not isinstance(args[i], torch.Tensor) or args[i].device.type != self.device_type
               for i in self.static_idx):
            self.disable("a parameter or buffer is not a CUDA tensor")
            warn_if_off_cuda(self.compiled.name, args)
            return self.compiled(args)
        try:
            captured = self._capture(args)
        except Exception as e:  # e.g. an op that synchronizes with the host during capture
            self.disable(f"capture failed ({type(e).__name__}: {str(e).splitlines()[0][:200]})")
            self._synchronize()
            return self.compiled(args)
        self.static_ptrs = [args[i].data_ptr() for i in self.static_idx]
        self.pending.pop(sig, None)
        self.graphs[sig] = captured
        while len(self.graphs) > self.options.cudagraph_max_graphs:
            self.graphs.popitem(last=False)
        self.compiled.stats["cudagraph"] = f"captured {len(self.graphs)} graph(s)"
        log.info("%s: captured a CUDA graph for a new input signature", self.compiled.name)
        return self._replay(captured, args)

    def _capture(self, args: list) -> _Captured:
        c = _Captured()
        static = set(self.static_idx)
        for i, a in enumerate(args):
            if isinstance(a, torch.Tensor) and i not in static:
                buf = torch.empty_strided(a.shape, a.stride(), dtype=a.dtype, device=a.device)
                buf.copy_(a)
                c.static_inputs.append(buf)
            else:
                c.static_inputs.append(None)
        static_args = [s if s is not None else a for s, a in zip(c.static_inputs, args)]
        c.graph, c.outputs = self._record(static_args)
        c.baseline = [_use_count(o) for o in c.outputs]
        c.shared = _sharing_memory(c.outputs)
        return c

    def _record(self, static_args: list) -> tuple[Any, list]:
        """Warm up on a side stream (libraries allocate lazily), then capture one call.

        Returns:
            ``(graph, outputs)``: an object whose ``replay()`` runs the call again on the same
            buffers, and the call's outputs (in the graph's memory pool).
        """
        if self.pool is None:
            self.pool = torch.cuda.graph_pool_handle()
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            self.compiled(list(static_args))
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, pool=self.pool, stream=stream):
            outputs = self.compiled(list(static_args))
        return graph, outputs

    def _synchronize(self) -> None:
        torch.cuda.synchronize()

    def _replay(self, c: _Captured, args: list) -> Any:
        for i in self.dyn_idx:
            buf = c.static_inputs[i]
            if buf is not None:
                buf.copy_(args[i])
        if isinstance(args, list):
            args.clear()
        if not self.options.cudagraph_copy_outputs:
            if any(_use_count(o) > b for o, b in zip(c.outputs, c.baseline)):
                raise CudaGraphOutputInUse(
                        "torchfuse: this CUDA graph replay would overwrite an output of the previous replay that "
                        "is still in use (e.g. f(f(x)), or last step's outputs kept); clone it first, or compile "
                    "with cudagraph_copy_outputs=True")
        c.graph.replay()
        if self.options.cudagraph_copy_outputs:
            return _copy_outputs(c.outputs, c.shared)
        # new tensor objects over the pool memory: while the caller (or a view) holds one, the
        # storage's use count stays above its baseline
        return [o.detach() if isinstance(o, torch.Tensor) else o for o in c.outputs]


def _sharing_memory(outputs: list) -> tuple:
    """Outputs on one storage (a value and views of it, of any dtypes): per storage,
    ``(the first one's index, the others' indices)``. Storages without bytes (all at address 0)
    share with nothing."""
    return tuple((g[0], tuple(g[1:])) for g in storage_groups(outputs) if len(g) > 1)


def _copy_outputs(outputs: list, shared: tuple) -> list:
    """Copies of a replay's ``outputs``; outputs that share memory (``shared``, from
    :func:`_sharing_memory`) get one copy of that memory, the others views of the first, so that
    a write through one is seen through the others, as in eager (separate copies of a value and
    its view came apart)."""
    if not shared:
        return [o.clone() if isinstance(o, torch.Tensor) else o for o in outputs]
    grouped = {i for first, others in shared for i in (first, *others)}
    out = [o.clone() if isinstance(o, torch.Tensor) and i not in grouped else o for i, o in enumerate(outputs)]
    for first, others in shared:
        group = (first, *others)
        for i, c in zip(group, copies_sharing_memory([outputs[i] for i in group])):
            out[i] = c
    return out


def _use_count(o: Any) -> int:
    if not isinstance(o, torch.Tensor):
        return 0
    return torch._C._storage_Use_Count(o.untyped_storage()._cdata)
