"""Timing: the one timer and the one copy-bandwidth measurement every benchmark uses.

Every device time of the harness comes from CUDA events (``torch.cuda.Event(enable_timing=True)``)
through :func:`time_steps`: each call of a step is bracketed by two events, so the time is the
device's wall time from the step's first to its last queued work, with no synchronization
between the steps of a round; on a CPU, ``time.perf_counter``. Built on it:

* :func:`time_interleaved`: backends timed in rounds, each round running every backend in turn
  (in an order rotated each round), so slow drifts of clocks and temperature hit all backends
  alike; the reported time is the median over every timed step;
* :func:`median_ms`: one callable, warmed up, median of back-to-back calls;
* :func:`graph_us`: device microseconds of one call inside a CUDA graph of many calls (no host
  time: what a kernel costs inside a captured model);
* :func:`copy_bandwidth`: a ``Tensor.copy_`` of a large buffer, the ceiling every memory-bound
  kernel is judged against.

Two further clocks measure what events cannot: :func:`host_us_per_call` (the host's wall
time per call, for launch overheads) and the profiler's device intervals
(:func:`profile_step`, :func:`kernel_times`: kernels, launches and busy device time).
"""
from __future__ import annotations

import math
import statistics
import time
from typing import Callable

import torch

#: the profiler's host-side names of kernel launches (runtime and driver API)
LAUNCH_CALLS = frozenset({
    "cudaLaunchKernel", "cudaLaunchKernelExC", "cudaLaunchCooperativeKernel", "cuLaunchKernel",
    "cuLaunchKernelEx", "cudaGraphLaunch",
})


def synchronize(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def time_steps(step: Callable[[], None], count: int, device: str) -> list[float]:
    """Run ``step`` ``count`` times back to back.

    Returns:
        each step's time in milliseconds.
    """
    if device == "cuda":
        events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(count)]
        for start, end in events:
            start.record()
            step()
            end.record()
        torch.cuda.synchronize()
        return [start.elapsed_time(end) for start, end in events]
    times = []
    for _ in range(count):
        t0 = time.perf_counter()
        step()
        times.append((time.perf_counter() - t0) * 1e3)
    return times


def time_first_call(call: Callable[[], object], device: str) -> tuple[float, object]:
    """Seconds of wall time of ``call()`` including compilation, and its result."""
    synchronize(device)
    t0 = time.perf_counter()
    result = call()
    synchronize(device)
    return time.perf_counter() - t0, result


def steps_per_round(step_ms: float, round_seconds: float, most: int) -> int:
    """How many steps make a round of about ``round_seconds`` (at least 1, at most ``most``)."""
    if step_ms <= 0 or round_seconds <= 0:
        return 1
    return max(1, min(most, int(round(round_seconds * 1e3 / step_ms))))


def time_interleaved(steps: dict[str, Callable[[], None]], counts: dict[str, int], rounds: int, device: str,
                     on_error: Callable[[str, BaseException], None]) -> dict[str, list[float]]:
    """Time several backends in interleaved rounds.

    Args:
        steps: backend name -> its step.
        counts: backend name -> steps per round.
        rounds: number of rounds; round ``r`` starts at backend ``r mod len(steps)``.
        on_error: called with a backend whose step raised; it is dropped from later rounds.

    Returns:
        backend name -> every timed step's milliseconds.
    """
    names = list(steps)
    times: dict[str, list[float]] = {n: [] for n in names}
    for r in range(rounds):
        order = names[r % len(names):] + names[: r % len(names)] if names else []
        for name in order:
            if name not in steps:
                continue
            try:
                times[name] += time_steps(steps[name], counts[name], device)
            except Exception as e:  # noqa: BLE001 - a failing backend is a result
                del steps[name]
                on_error(name, e)
    return times


def median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def geometric_mean(values: list[float]) -> float | None:
    values = [v for v in values if v and v > 0 and math.isfinite(v)]
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def allocated_bytes(device: str) -> int | None:
    if device != "cuda":
        return None
    torch.cuda.synchronize()
    return torch.cuda.memory_allocated()


def reset_peak(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()


def peak_above(baseline: int | None, device: str) -> float | None:
    """MiB of the peak allocation since :func:`reset_peak` above ``baseline`` bytes."""
    if device != "cuda" or baseline is None:
        return None
    torch.cuda.synchronize()
    return (torch.cuda.max_memory_allocated() - baseline) / 2**20


def profile_step(step: Callable[[], None], device: str) -> tuple[int | None, int | None, float | None]:
    """Device kernels, host-side launch calls and device time of one step, from ``torch.profiler``.

    Returns:
        ``(kernels, launch_calls, device_ms)``; ``(None, None, None)`` on a CPU. Kernels are the
        profiler's device events other than memory copies and sets (a CUDA graph replay counts
        the kernels it runs; its launch calls count one ``cudaGraphLaunch``). ``device_ms`` is
        the time at least one device event (kernel, copy or set) was running: the union of
        their intervals, so overlapping work on several streams counts once. A step's wall
        time minus its device time is the time the GPU sat idle, waiting for the host.
    """
    if device != "cuda":
        return None, None, None
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        step()
        torch.cuda.synchronize()
    kernels = launches = 0
    intervals = []
    for event in prof.events():
        if event.device_type == DeviceType.CUDA:
            name = event.name.lower()
            if not (name.startswith("memcpy") or name.startswith("memset")):
                kernels += 1
            intervals.append((event.time_range.start, event.time_range.end))
        elif event.name in LAUNCH_CALLS:
            launches += 1
    return kernels, launches, busy_time(intervals) / 1e3


def busy_time(intervals: list[tuple[float, float]]) -> float:
    """Length of the union of ``[start, end)`` intervals (in their unit)."""
    total, end = 0.0, float("-inf")
    for a, b in sorted(intervals):
        if b <= end:
            continue
        total += b - max(a, end)
        end = b
    return total


def median_ms(fn: Callable[[], object], iters: int, device: str = "cuda", warmup: int = 3) -> float:
    """Median milliseconds of ``fn()`` over ``iters`` back-to-back calls after ``warmup`` calls
    (:func:`time_steps`: no synchronization between calls, so host overhead shorter than the
    device work is hidden, as in a real program)."""
    for _ in range(warmup):
        fn()
    synchronize(device)
    return statistics.median(time_steps(fn, iters, device))


def graph_us(fn: Callable[[], object], reps: int = 20, iters: int = 10) -> float:
    """Median device microseconds of one ``fn()``: a CUDA graph of ``reps`` back-to-back calls,
    replayed ``iters`` times, each replay timed by :func:`time_steps` (CUDA only).

    Raises:
        RuntimeError: ``fn`` cannot be captured in a CUDA graph (PyTorch's error).
    """
    fn()
    torch.cuda.synchronize()
    side = torch.cuda.Stream()  # warm up on a side stream, as torch.cuda.graphs asks
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(reps):
            fn()
    for _ in range(3):
        graph.replay()
    torch.cuda.synchronize()
    return statistics.median(ms * 1e3 / reps for ms in time_steps(graph.replay, iters, "cuda"))


def host_us_per_call(fn: Callable[[], object], calls: int, device: str = "cuda", warmup: int = 20) -> float:
    """Microseconds of host wall time per call of ``fn()`` over ``calls`` back-to-back calls,
    synchronized once before and once after (``time.perf_counter``). When the device work of
    a call is shorter than its host work, this is the host's cost of the call."""
    for _ in range(warmup):
        fn()
    synchronize(device)
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    synchronize(device)
    return (time.perf_counter() - t0) / calls * 1e6


def kernel_times(fn: Callable[[], object], iters: int = 10) -> tuple[float, float, dict[str, float]]:
    """Device time of ``fn()`` by kernel, from ``torch.profiler`` (host time excluded; CUDA only).

    Returns:
        ``(device_ms, events, per_kernel_us)``: the summed durations of the kernels, copies
        and fills of one call in milliseconds, their number per call, and microseconds per
        call of each kernel name (names cut at 80 characters).
    """
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(iters):
            fn()
        torch.cuda.synchronize()
    events = [e for e in prof.events() if e.device_type == DeviceType.CUDA]
    per_name: dict[str, float] = {}
    for e in events:
        us = getattr(e, "device_time", None) or e.cuda_time
        per_name[e.name[:80]] = per_name.get(e.name[:80], 0.0) + us / iters
    return sum(per_name.values()) / 1e3, len(events) / iters, {k: round(v, 1) for k, v in per_name.items()}


#: bytes of the reference copy: large enough to reach peak bandwidth on a GPU (1 GiB moved)
COPY_BYTES = {"cuda": 512 * 2**20, "cpu": 16 * 2**20}


def copy_bandwidth(device: str, nbytes: int | None = None, repeats: int = 20,
                   timer: Callable[[Callable[[], object]], float] | None = None) -> float:
    """Achieved bandwidth of a device copy, GB/s (bytes read plus bytes written, 1e9 B/s).

    The ceiling every memory-bound figure is divided by: a ``Tensor.copy_`` of ``nbytes``
    bytes (default :data:`COPY_BYTES` of the device), median of ``repeats`` calls timed by
    :func:`time_steps`, or by ``timer`` (``fn -> milliseconds``, e.g. ``triton.testing.do_bench``)
    when given.
    """
    nbytes = nbytes or COPY_BYTES["cuda" if str(device).startswith("cuda") else "cpu"]
    src = torch.empty(nbytes, dtype=torch.uint8, device=device).fill_(1)
    dst = torch.empty_like(src)
    dst.copy_(src)
    if timer is not None:
        ms = timer(lambda: dst.copy_(src))
    else:
        ms = statistics.median(time_steps(lambda: dst.copy_(src), repeats, str(torch.device(device).type)))
    return 2 * nbytes / (ms * 1e-3) / 1e9
