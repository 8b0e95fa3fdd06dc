"""Launching: output allocation, kernel seeds, and the generated straight-line launch function.

Takes a fusion group's launch plan (:class:`~torchfuse.runtime.group.KernelPlan`) and the
compiled binaries of its stages; :func:`build_launcher` returns ``fast(env) -> bool``, which
launches them with everything but the tensors bound as constants (the per-call work a
compiled graph repeats hundreds of times a step), or returns ``False`` without side effects
when the call differs from the plan. :func:`allocator` gives the fastest allocation entry
point for a device; :func:`draw_seeds` draws the seeds of a call's random kernels in device
memory (graph-safe under CUDA graph capture).
"""
from __future__ import annotations

import contextlib
from typing import Any

import torch

from .compile import launch_hooks_set, raw_stream

# Allocation and aliasing through the C++ entry points of TorchDynamo's guard module (the ones
# Inductor's generated wrappers call): no Python argument parsing, a few microseconds less per
# tensor than ``torch.empty_strided`` and ATen's view ops. ``_empty_strided_cuda`` allocates on
# the current device, so it is used only inside CompiledGraph's device guard.
_GUARDS = getattr(getattr(torch._C, "_dynamo", None), "guards", None)
REINTERPRET = getattr(_GUARDS, "_reinterpret_tensor", None)
_EMPTY_CUDA = getattr(_GUARDS, "_empty_strided_cuda", None)
_EMPTY_CPU = getattr(_GUARDS, "_empty_strided_cpu", None)


def allocator(device: torch.device, guarded: bool):
    """``alloc(shape, stride, dtype) -> Tensor`` for ``device``; the fast entry points for the
    CPU, and for CUDA when the caller runs under a guard that makes ``device`` current."""
    if device.type == "cuda" and guarded and _EMPTY_CUDA is not None:
        return _EMPTY_CUDA
    if device.type == "cpu" and _EMPTY_CPU is not None:
        return _EMPTY_CPU
    return lambda shape, stride, dtype: torch.empty_strided(shape, stride, dtype=dtype, device=device)


#: the profiler range a launch runs in when no profiler is on
NO_RANGE = contextlib.nullcontext()
#: ``torch.autograd.profiler``, whose ``_is_profiler_enabled`` each launch reads
PROFILER = torch.autograd.profiler
#: a profiler range named after the kernel, for launches while a profiler records: the C++ range
#: Inductor's launchers open too, so that a profiled step takes the same launch path as any other
RANGE = getattr(getattr(torch._C, "_profiler", None), "_RecordFunctionFast", None)


def profiler_range(name: str):
    """The range a launch of kernel ``name`` runs in: a named profiler range while
    ``torch.profiler`` records, else a no-op context."""
    if PROFILER._is_profiler_enabled:
        return RANGE(name) if RANGE is not None else torch.profiler.record_function(name)
    return NO_RANGE


#: Kernel seeds are drawn from [0, SEED_MODULUS): Philox keys of 31 bits, as Triton's own tests use
SEED_MODULUS = 2**31 - 1


def draw_seeds(count: int, device: torch.device) -> tuple[torch.Tensor, int]:
    """Draw ``count`` kernel seeds from PyTorch's generator of ``device`` (so
    ``torch.manual_seed`` fixes them), in device memory: under CUDA graph capture this is
    a captured kernel whose Philox offset the generator advances on every replay, so each replay
    draws new seeds (PyTorch's graph-safe generator state), where a seed passed as a kernel
    argument would be frozen into the graph.

    Returns:
        ``(seeds, address)``: an int64 tensor holding seed ``k`` at element ``2 * k`` (16 bytes
        apart, so every seed's address has the alignment Triton specializes pointers on) and
        the address of seed 0.
    """
    seeds = torch.randint(0, SEED_MODULUS, (2 * count,), dtype=torch.int64, device=device)
    return seeds, seeds.data_ptr()


def build_launcher(runner, plan, spec: tuple, direct: list):
    """Generate ``fast(env, trusted=False, stream=None) -> bool``: the direct launch of
    ``plan`` for the alignment specialization ``spec``, as straight-line Python with the
    environment slots, the planned layouts, the allocators, the launch scalars and the
    compiled binaries bound as constants. It returns ``False`` without side effects when a
    checked input's layout (sizes and strides; not checked when the caller passes
    ``trusted=True``, knowing them to be the planned ones) or alignment differs from the
    plan's, or a launch hook is active; then the general path runs. ``stream``: the raw
    handle of the plan's device's current stream, from a caller that checked for launch
    hooks (a graph's generated function, once a call for all its launches); ``None``: this
    function checks and reads it. While ``torch.profiler`` records, it launches the same way
    inside a range named after the kernel, so that a profiled step measures the path an
    unprofiled one takes. It passes the binaries exactly the arguments the general direct
    path passes (``tests/test_host_paths.py`` compares them).

    A compiled graph's kernels are launched from Python, once per fusion group per call,
    so the general path's per-call work (building lists, looking the plan up, checking
    each argument's type) is paid hundreds of times per training step; Inductor's
    generated wrapper code binds the same things at compile time."""
    ns: dict[str, Any] = {"_P": PROFILER, "_range": profiler_range, "_hooks": launch_hooks_set,
                          "_stream": raw_stream}
    lines = ["def fast(env, trusted=False, stream=None):"]
    for k, slot in enumerate(runner.in_slots):
        lines.append(f"    a{k} = env[{slot}]")
    if runner.checked:
        lines.append("    if not trusted:")
    for i in runner.checked:
        ns[f"S{i}"], ns[f"H{i}"] = plan.in_strides[i], plan.in_shapes[i]
        lines.append(f"        if a{i}.stride() != S{i} or a{i}.shape != H{i}:")
        lines.append("            return False")
    for k in range(len(runner.in_slots)):
        lines.append(f"    p{k} = a{k}.data_ptr()")
    for j, i in enumerate(runner.checked):
        lines.append(f"    if (p{i} & 15 == 0) != {bool(spec[j])}:")
        lines.append("        return False")
    lines.append("    if stream is None:")
    lines.append("        if _hooks():")
    lines.append("            return False")
    lines.append(f"        stream = _stream({int(plan.device_index)})")
    ptrs = [f"p{k}" for k in range(len(runner.in_slots))]
    for name, allocs in (("o", plan.allocs), ("w", plan.workspaces)):
        for k, (alloc, sh, st, dt) in enumerate(allocs):
            ns[f"A{name}{k}"], ns[f"SH{name}{k}"], ns[f"ST{name}{k}"], ns[f"DT{name}{k}"] = alloc, sh, st, dt
            lines.append(f"    {name}{k} = A{name}{k}(SH{name}{k}, ST{name}{k}, DT{name}{k})")
            ptrs.append(f"{name}{k}.data_ptr()")
    for k, value in enumerate(plan.scalars):
        ns[f"SC{k}"] = value
        ptrs.append(f"SC{k}")
    if runner.random:  # the call's seed address, set by CompiledGraph, as the general path passes it
        ns["_runner"], ns["_draw"] = runner, draw_seeds
        lines.append("    seed = _runner.seed")
        lines.append("    if seed is None:")
        lines.append("        seed = _draw(1, o0.device)")
        ptrs.append("seed[1]")
    launches = [binary.source(k, int(gx), int(gy), [*ptrs, str(int(xb)), str(int(rb))], ns)
                for k, (binary, gx, gy, xb, rb) in enumerate(direct)]
    # while a profiler records, the same launches inside a range named after the kernel (a
    # branch, not a context manager on every launch: the unprofiled path stays as it was)
    ns["NAME"] = runner.group.name if plan.kernel is None else plan.kernel.source.name
    lines.append("    if _P._is_profiler_enabled:")
    lines.append("        with _range(NAME):")
    lines += [f"            {call}" for call in launches]
    lines.append("    else:")
    lines += [f"        {call}" for call in launches]
    for k, slot in enumerate(runner.out_slots):
        lines.append(f"    env[{slot}] = o{k}")
    lines.append("    return True")
    exec(compile("\n".join(lines), f"<torchfuse launch {runner.group.name}>", "exec"), ns)
    return ns["fast"]
