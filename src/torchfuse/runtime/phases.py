"""Where compile time goes: the phases of a compiled program's first call.

The first call of a program compiled with torchfuse runs, in order:

``dynamo``
    TorchDynamo traces the Python bytecode into an FX graph and builds its guards (read from
    PyTorch's own timers, ``torch._dynamo.utils.compilation_time_metrics``: Dynamo's whole
    compile less the backend call).
``aot_autograd``
    AOTAutograd functionalizes and decomposes the graph, traces the joint forward-backward
    graph and partitions it (the backend call less torchfuse's own stages inside it).
``passes``
    torchfuse's graph passes: the rewrites of the captured graph (once per capture, before
    AOTAutograd), then per ATen graph its rewrites, the conversion to torchfuse's IR and the
    graph cache's lookup (that graph's ``ir`` stage, which ``explain`` lists per graph; the
    phase is the stages' sum plus the captured graphs' rewrites).
``segment``
    segmentation into fusion groups and ATen calls (scheduling included; a graph's
    ``segment`` stage).
``codegen``
    at the graph's first call: launch plans (heuristics), Triton source generation, loading
    the generated modules.
``triton_compile``
    Triton's compilation of the kernels (in threads).
``first_launch``
    the rest of the first call: the kernels' first launches and the ATen calls.

torchfuse's stages add their seconds to the process-wide :data:`CLOCK`; :class:`PhaseWindow`
reads the clock and Dynamo's timers before and after a call and reports the difference, so it
measures whatever ran in between (several graphs, a forward and a backward). Seconds are wall
time of the calling thread.
"""
from __future__ import annotations

import contextlib
import threading
import time

#: the phases in the order they run (see the module docstring)
PHASES = ("dynamo", "aot_autograd", "passes", "segment", "codegen", "triton_compile", "first_launch")

# PyTorch's names of TorchDynamo's whole compile and of its call of the backend
_DYNAMO_TOTAL = "_compile.compile_inner"
_BACKEND_CALL = "OutputGraph.call_user_compiler"


class PhaseClock:
    """Seconds per phase, summed over the process's life (thread safe).

    Besides :data:`PHASES` it keeps ``backend``: the wall time of torchfuse's backend calls
    (TorchDynamo's call of :func:`torchfuse.backend.torchfuse_backend`), of which the
    ``aot_autograd`` phase is the part not spent in torchfuse's own stages.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._seconds: dict[str, float] = {}

    def add(self, phase: str, seconds: float) -> None:
        with self._lock:
            self._seconds[phase] = self._seconds.get(phase, 0.0) + max(0.0, seconds)

    @contextlib.contextmanager
    def timed(self, phase: str):
        """Add the wall time of the ``with`` body to ``phase``."""
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.add(phase, time.perf_counter() - t0)

    def snapshot(self) -> dict[str, float]:
        with self._lock:
            return dict(self._seconds)

    def own_seconds(self) -> float:
        """Seconds of torchfuse's own stages so far (the phases it times itself)."""
        with self._lock:
            return sum(v for k, v in self._seconds.items() if k in PHASES)


#: the process's clock; torchfuse's stages add to it
CLOCK = PhaseClock()


def _dynamo_seconds() -> dict[str, float]:
    """TorchDynamo's cumulative compile seconds and backend-call seconds (0 when this PyTorch
    keeps no such timers)."""
    try:
        from torch._dynamo.utils import compilation_time_metrics
    except ImportError:
        return {}
    return {name: float(sum(compilation_time_metrics.get(name, ()))) for name in (_DYNAMO_TOTAL, _BACKEND_CALL)}


def record_backend_call(seconds: float, own_before: float) -> None:
    """Called by the backend after a call of :func:`~torchfuse.backend.torchfuse_backend` that
    took ``seconds``, with :meth:`PhaseClock.own_seconds` from before it: the seconds not spent
    in torchfuse's own stages were AOTAutograd's."""
    CLOCK.add("backend", seconds)
    CLOCK.add("aot_autograd", seconds - (CLOCK.own_seconds() - own_before))


def record_first_call(graph_stats: dict, before: dict, seconds: float) -> None:
    """Called after a compiled graph's first call, which took ``seconds``: its planning (code
    generation and Triton's compile, from the graph's ``stats`` now and ``before`` the call)
    and the rest, the first launch."""
    plan = graph_stats.get("plan_seconds", 0.0) - before.get("plan_seconds", 0.0)
    compiled = graph_stats.get("compile_seconds", 0.0) - before.get("compile_seconds", 0.0)
    CLOCK.add("codegen", plan - compiled)
    CLOCK.add("triton_compile", compiled)
    CLOCK.add("first_launch", seconds - plan)


class PhaseWindow:
    """Measure the compile phases of what runs inside a ``with`` block.

    After the block, :attr:`seconds` maps each phase that took time to its seconds, ``total``
    to the block's wall time, and ``other`` to the rest of it: everything no phase covers (a
    backend other than torchfuse: Inductor's compile and run; the program's own Python and
    eager ops). For a backend other than torchfuse, ``backend`` is its compile time as
    TorchDynamo measured it.

    Example::

        with PhaseWindow() as w:
            loss = model(x).sum(); loss.backward()
        print(w.seconds)  # {'dynamo': 1.2, 'aot_autograd': 2.0, ..., 'total': 9.1}
    """

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    def __enter__(self) -> "PhaseWindow":
        self._clock = CLOCK.snapshot()
        self._dynamo = _dynamo_seconds()
        self._t0 = time.perf_counter()
        return self

    def __exit__(self, *exc) -> bool:
        total = time.perf_counter() - self._t0
        clock, dynamo = CLOCK.snapshot(), _dynamo_seconds()

        def delta(d: dict, before: dict, k: str) -> float:
            return d.get(k, 0.0) - before.get(k, 0.0)

        backend_call = delta(dynamo, self._dynamo, _BACKEND_CALL)
        out: dict[str, float] = {}
        dynamo_seconds = delta(dynamo, self._dynamo, _DYNAMO_TOTAL) - backend_call
        if dynamo_seconds > 0:
            out["dynamo"] = dynamo_seconds
        ours = delta(clock, self._clock, "backend")
        for phase in PHASES[1:]:
            value = delta(clock, self._clock, phase)
            if value > 0:
                out[phase] = value
        if backend_call > 0 and ours == 0:  # another backend compiled (torch.compile's Inductor)
            out["backend"] = backend_call
        out["other"] = max(0.0, total - sum(out.values()))
        out["total"] = total
        self.seconds = {k: round(v, 4) for k, v in out.items()}
        return False


def format_phases(seconds: dict[str, float]) -> str:
    """``dynamo 1.20 s, aot_autograd 2.00 s, ...`` in phase order (``other``, ``total`` last)."""
    order = list(PHASES) + ["backend", "other", "total"]
    keys = [k for k in order if k in seconds] + [k for k in seconds if k not in order]
    return ", ".join(f"{k} {seconds[k]:.2f} s" for k in keys)
