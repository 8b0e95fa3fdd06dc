"""Fall back, never fail, at run time: the guarded first call of a compiled graph.

Takes a :class:`~torchfuse.runtime.executor.CompiledGraph` and its boxed inputs; returns what
the call returns. An exception raised on a graph's first call (while planning or launching a
fusion group, or in one of its ATen calls) before any step has written to a graph input is
caught, and the call runs again as the traced graph through ATen (the graph's ``fx_graph``,
set by :func:`torchfuse.backend.compile_graph`), as do all later calls (``traced``), with a
warning naming a reproducer script (``write_reproducer``).

Why that is safe: until the first input write the graph has only read its inputs and written
tensors of its own, so running the traced graph from the start changes nothing the program can
see (an ATen run draws its random numbers anew). When the traced graph raises too, the error is
the program's own (eager raises it: an out-of-range index): that exception propagates, and the
graph stays compiled. Not caught: an exception after an input write (a BatchNorm statistic, a
buffer's in-place update) has run, or on a later call, since running the graph again would
apply those writes twice; a fusion group whose launch fails on a later call still runs through
ATen by itself (``GroupRunner.fail``).
"""
from __future__ import annotations

import logging
import time
import warnings
from typing import Any

from ..ir.graph import Node, values_in
from ..passes import written_arguments
from .phases import record_first_call
from .warn import user_stacklevel

log = logging.getLogger("torchfuse.schedule")


def first_call(graph, args: list) -> Any:
    """Run ``graph``'s first call on ``args`` (boxed: the list is cleared), guarded as the
    module doc says.

    Raises:
        Exception: the first call's own exception when it cannot run again (no traced graph,
            or an input was written), or the traced graph's when it raises too.
    """
    inputs = list(args)
    progress = [0]
    # compile-time report hook (torchfuse.runtime.phases): planning, Triton's compile, first launch
    stats_before, t0 = dict(graph.stats), time.perf_counter()
    try:
        result = graph._run(args, progress)
        record_first_call(graph.stats, stats_before, time.perf_counter() - t0)
        return result
    except Exception as e:
        if graph.fx_graph is None or progress[0] >= graph.first_input_write:
            raise
        try:
            result = graph.fx_graph(*inputs)
        except Exception as eager_error:  # the program's own error: ATen raises it too
            raise eager_error from None
        message = f"{type(e).__name__}: {e}"
        reproducer = graph.write_reproducer(f"run time, first call: {message}") if graph.write_reproducer else None
        graph.stats["failed_at_run_time"] = message
        log.warning("%s graph: run-time failure on its first call", graph.name, exc_info=True)
        warnings.warn(f"torchfuse: the {graph.name} graph failed on its first call "
                      f"({message.splitlines()[0][:300]}) and runs through ATen as traced from now on"
                      + (f"; reproducer: {reproducer}" if reproducer else ""), RuntimeWarning, stacklevel=user_stacklevel())
        fx_graph = graph.fx_graph
        graph.traced = lambda a: call_traced(fx_graph, a)
        return list(result) if isinstance(result, tuple) else result


def call_traced(fx_graph, args: list) -> Any:
    """Run the traced ATen graph on a boxed list of inputs (cleared, as a compiled graph's)."""
    inputs = list(args)
    args.clear()
    result = fx_graph(*inputs)
    return list(result) if isinstance(result, tuple) else result


def writes_input(step, graph_inputs: set) -> bool:
    """Whether ``step`` is an ATen call that writes to one of ``graph_inputs`` (an argument its
    schema marks as written: ``copy_``'s destination)."""
    if not isinstance(step, Node) or not step.is_call:
        return False
    schema = getattr(step.target, "_schema", None)
    if schema is None:
        return False
    return any(v in graph_inputs for value in written_arguments(schema, step.args, step.kwargs)
               for v in values_in(value))


