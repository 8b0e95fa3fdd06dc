"""Measure: each fusion group's kernel time and bandwidth, against a device copy of the same run.

Takes compiled graphs (``CompiledGraph``) and their :class:`~torchfuse.report.result.GraphReport`
records; fills each :class:`~torchfuse.report.result.PlanReport`'s ``time_ms``,
``bandwidth_gbps`` and ``copy_fraction`` and returns a :class:`~torchfuse.report.result.Timing`.

Each plan is timed by calling its group runner (the same code path as a real call: plan
lookup, output allocation, the kernel launches) on random inputs with the plan's sizes,
strides and dtypes, through ``triton.testing.do_bench`` (median; the L2 cache is flushed
before each launch, so the bandwidth is the DRAM bandwidth). The reference is a
``Tensor.copy_`` of :data:`COPY_BYTES` bytes on the same device, timed the same way:
``copy_fraction`` says how close a kernel comes to moving its bytes at copy speed, which is
the ceiling for a memory-bound kernel (the roof of a roofline chart).

On a CPU the kernels run through Triton's interpreter, whose times say nothing about a GPU;
:func:`measure` then returns ``Timing(available=False)`` with the reason.
"""
from __future__ import annotations

from typing import Callable

import torch

from ..ir.graph import as_int
from .result import GraphReport, Timing

#: size of the reference copy, as the benchmark's (bytes; large enough to reach peak bandwidth)
COPY_BYTES = 512 * 2**20

Timer = Callable[[Callable[[], object]], float]  # fn -> milliseconds


def do_bench_timer(fn: Callable[[], object]) -> float:
    """Median milliseconds of ``fn`` by ``triton.testing.do_bench`` (L2 flushed per call)."""
    from triton.testing import do_bench

    return float(do_bench(fn, warmup=10, rep=50, return_mode="median"))


def random_strided(shape, stride, dtype: torch.dtype, device) -> torch.Tensor:
    """A tensor of these sizes and strides (overlapping ones included) with random values:
    normal floats, and 0/1 for integers and booleans (safe as indices)."""
    extent = 1 + sum((s - 1) * st for s, st in zip(shape, stride)) if all(s > 0 for s in shape) else 0
    if dtype.is_floating_point or dtype.is_complex:
        flat = torch.randn(extent, device=device).to(dtype)
    else:
        flat = torch.randint(0, 2, (extent,), device=device).to(dtype)
    return flat.as_strided(tuple(shape), tuple(stride))


def _scalar(value, sym_values: dict):
    """A group's non-tensor input at these sizes (a traced SymInt becomes its value)."""
    if isinstance(value, (bool, int, float)):
        return value
    node = getattr(value, "node", None)
    if node is not None:
        try:
            return as_int(node.expr, sym_values)
        except (ValueError, TypeError):
            return node.hint if node.hint is not None else 1
    return 1


def group_env(compiled, runner, plan, sym_values: dict) -> list:
    """The value slots a group runner reads, filled with random inputs matching ``plan``."""
    env: list = [None] * compiled.n_slots
    k = 0
    for i, v in enumerate(runner.group.inputs):
        slot = runner.in_slots[i]
        if v.meta is not None:
            env[slot] = random_strided(plan.in_shapes[k], plan.in_strides[k], v.meta.dtype, v.meta.device)
            k += 1
        else:
            env[slot] = _scalar(v.example, sym_values)
    return env


def time_plans(compiled, report: GraphReport, timer: Timer) -> None:
    """Time every launch plan of ``compiled``'s groups; write ``time_ms`` and ``bandwidth_gbps``."""
    from ..runtime.executor import GroupRunner

    runners = [s for s in compiled.steps if isinstance(s, GroupRunner)]
    for runner, group in zip(runners, report.groups):
        if runner.failed:
            continue
        for (key, plan), plan_report in zip(list(runner.plans.items()), group.plans):
            if plan.kernel is None:
                continue
            sym_key = key[0] if key and isinstance(key[0], tuple) else key
            sym_values = {sym: value for (sym, _), value in zip(compiled.symbols, sym_key)}
            env = group_env(compiled, runner, plan, sym_values)
            ms = timer(lambda: runner(env, sym_key, sym_values))
            plan_report.time_ms = ms
            plan_report.bandwidth_gbps = plan.bytes_moved / (ms * 1e-3) / 1e9 if ms > 0 else None


def copy_bandwidth(device, nbytes: int, timer: Timer) -> float:
    """GB/s of a ``Tensor.copy_`` of ``nbytes`` bytes (bytes read plus bytes written)."""
    src = torch.empty(nbytes, dtype=torch.uint8, device=device).fill_(1)
    dst = torch.empty_like(src)
    ms = timer(lambda: dst.copy_(src))
    return 2 * nbytes / (ms * 1e-3) / 1e9


def measure(compiled_graphs: list, reports: list[GraphReport], device: torch.device | None,
            timer: Timer | None = None, copy_bytes: int = COPY_BYTES) -> Timing:
    """Time every plan of ``compiled_graphs`` (paired with ``reports``) and a device copy.

    Args:
        compiled_graphs: the ``CompiledGraph`` objects, one per entry of ``reports``.
        reports: their records; plans get ``time_ms``, ``bandwidth_gbps``, ``copy_fraction``.
        device: the device the graphs ran on.
        timer: ``fn -> milliseconds``; default :func:`do_bench_timer` (CUDA only). Tests pass
            their own to run this on CPU.
        copy_bytes: size of the reference copy.

    Returns:
        the :class:`Timing` (``available=False`` with the reason on a CPU without ``timer``).
    """
    if device is None or (device.type != "cuda" and timer is None):
        return Timing(available=False, note="kernel times need a CUDA device: on a CPU the kernels run through "
                                            "Triton's interpreter, whose times say nothing about a GPU")
    timer = timer or do_bench_timer
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else str(device)
    for compiled, report in zip(compiled_graphs, reports):
        if compiled is not None:
            time_plans(compiled, report, timer)
    copy_gbps = copy_bandwidth(device, copy_bytes, timer)
    for report in reports:
        for group in report.groups:
            for plan in group.plans:
                if plan.bandwidth_gbps is not None and copy_gbps > 0:
                    plan.copy_fraction = plan.bandwidth_gbps / copy_gbps
    how = "triton.testing.do_bench, median, L2 flushed" if timer is do_bench_timer else "custom timer"
    return Timing(available=True, note=f"each group's launches timed on random inputs of its sizes ({how}); "
                                       f"reference: a {copy_bytes / 2**20:.0f} MiB device copy",
                  device=name, copy_gbps=copy_gbps, copy_bytes=copy_bytes)
