"""CUDA graphs: capture a compiled graph (generated kernels and ATen calls alike) once per
input-shape signature and replay it, removing the host cost of every launch.

Takes a :class:`~torchfuse.runtime.executor.CompiledGraph`; returns a callable with the same
boxed calling convention.

* **When**: the first call of a signature runs uncaptured (it plans and compiles the
  kernels); the second call captures: inputs whose address did not change between the two
  calls (parameters and buffers) are read in place, every other input gets a static buffer the
  replay copies it into. A warm-up run on the capture stream precedes the capture, as CUDA
  requires for libraries that allocate lazily.
* **Signatures**: one graph per signature of input shapes, strides, dtypes and static
  addresses, least recently used evicted beyond ``Options.cudagraph_max_graphs``; all of a
  compiled graph's CUDA graphs share one memory pool.
* **Safe outputs**: outputs live in the pool and the next replay overwrites them. With
  ``Options.cudagraph_copy_outputs`` (the default) each replay returns fresh copies; without
  it the replay returns the pool tensors, and a replay that would overwrite an output the
  caller still holds raises :class:`CudaGraphOutputInUse` (the known trap of ``f(f(x))`` and of
  keeping last step's outputs).
* **Not captured** (the graph runs as usual and ``stats["cudagraph"]`` says why): inputs or
  outputs on the CPU, graphs that draw random numbers, autograd (graphs with inputs that
  require grad), and any graph whose capture fails (an op that synchronizes with the host).
"""
from __future__ import annotations

import collections
import logging
from typing import Any

import torch

log = logging.getLogger("torchfuse.recompile")


class CudaGraphOutputInUse(RuntimeError):
    """A CUDA graph replay would overwrite an output of an earlier replay the caller holds."""


class _Captured:
    def __init__(self):
        self.graph: torch.cuda.CUDAGraph | None = None
        self.static_inputs: list[torch.Tensor | None] = []  # None: read in place
        self.inputs_in_place: list[int] = []
        self.input_ptrs: list[int] = []
        self.outputs: list[Any] = []
        self.baseline: list[int] = []  # storage use counts of the outputs while nobody holds them


class CudaGraphRunner:
    """Wraps a compiled graph so that its steady-state calls replay a CUDA graph."""

    _boxed_call = True

    def __init__(self, compiled, options):
        self._boxed_call = True
        self.compiled = compiled
        self.options = options
        self.pool = None
        self.graphs: collections.OrderedDict = collections.OrderedDict()
        self.seen_ptrs: dict = {}
        self.disabled: str | None = None
        compiled.stats["cudagraph"] = "not yet captured"
        if getattr(compiled, "has_random", False):
            self.disable("the graph draws random numbers (each replay would repeat them)")

    def __getattr__(self, name):
        return getattr(self.compiled, name)

    def disable(self, reason: str) -> None:
        self.disabled = reason
        self.compiled.stats["cudagraph"] = f"not captured: {reason}"
        log.info("%s: CUDA graph %s", self.compiled.name, self.compiled.stats["cudagraph"])

    def _signature(self, args: list) -> tuple | None:
        sig = []
        for a in args:
            if isinstance(a, torch.Tensor):
                if a.device.type != "cuda":
                    return None
                sig.append((tuple(a.shape), a.stride(), a.dtype, a.storage_offset() % 16))
            else:
                sig.append(a if isinstance(a, (int, float, bool)) else type(a).__name__)
        return tuple(sig)

    def __call__(self, args: list) -> Any:
        if self.disabled is not None:
            return self.compiled(args)
        if any(isinstance(a, torch.Tensor) and a.requires_grad for a in args) and torch.is_grad_enabled():
            self.disable("inputs require grad (training graphs run uncaptured)")
            return self.compiled(args)
        sig = self._signature(args)
        if sig is None:
            self.disable("an input is not a CUDA tensor")
            return self.compiled(args)
        captured = self.graphs.get(sig)
        if captured is not None:
            self.graphs.move_to_end(sig)
            return self._replay(captured, args)
        ptrs = [a.data_ptr() if isinstance(a, torch.Tensor) else None for a in args]
        previous = self.seen_ptrs.get(sig)
        self.seen_ptrs[sig] = ptrs
        if previous is None:  # first call of this signature: plan and compile, uncaptured
            return self.compiled(list(args))
        try:
            captured = self._capture(args, previous, ptrs)
        except Exception as e:  # e.g. an op that synchronizes with the host during capture
            self.disable(f"capture failed ({type(e).__name__}: {str(e).splitlines()[0][:200]})")
            torch.cuda.synchronize()
            return self.compiled(args)
        self.graphs[sig] = captured
        while len(self.graphs) > self.options.cudagraph_max_graphs:
            self.graphs.popitem(last=False)
        self.compiled.stats["cudagraph"] = f"captured {len(self.graphs)} graph(s)"
        log.info("%s: captured a CUDA graph for a new input signature", self.compiled.name)
        return self._replay(captured, args)

    def _capture(self, args: list, previous: list, ptrs: list) -> _Captured:
        c = _Captured()
        for i, (a, p0, p1) in enumerate(zip(args, previous, ptrs)):
            if isinstance(a, torch.Tensor) and p0 == p1:
                c.static_inputs.append(None)
                c.inputs_in_place.append(i)
            elif isinstance(a, torch.Tensor):
                buf = torch.empty_strided(a.shape, a.stride(), dtype=a.dtype, device=a.device)
                buf.copy_(a)
                c.static_inputs.append(buf)
            else:
                c.static_inputs.append(None)
        c.input_ptrs = ptrs
        static_args = [s if s is not None else a for s, a in zip(c.static_inputs, args)]
        if self.pool is None:
            self.pool = torch.cuda.graph_pool_handle()
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            self.compiled(list(static_args))  # warm-up on the capture stream
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, pool=self.pool, stream=stream):
            c.outputs = self.compiled(list(static_args))
        c.graph = graph
        c.baseline = [_use_count(o) for o in c.outputs]
        return c

    def _replay(self, c: _Captured, args: list) -> Any:
        for i in c.inputs_in_place:
            if args[i].data_ptr() != c.input_ptrs[i]:
                # a parameter moved: the captured graph reads the old address; capture again
                self.graphs = collections.OrderedDict((k, v) for k, v in self.graphs.items() if v is not c)
                self.seen_ptrs.clear()
                return self.compiled(args)
        for buf, a in zip(c.static_inputs, args):
            if buf is not None:
                buf.copy_(a)
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
            return [o.clone() if isinstance(o, torch.Tensor) else o for o in c.outputs]
        # new tensor objects over the pool memory: while the caller (or a view) holds one, the
        # storage's use count stays above its baseline
        return [o.detach() if isinstance(o, torch.Tensor) else o for o in c.outputs]


def _use_count(o: Any) -> int:
    if not isinstance(o, torch.Tensor):
        return 0
    return torch._C._storage_Use_Count(o.untyped_storage()._cdata)
