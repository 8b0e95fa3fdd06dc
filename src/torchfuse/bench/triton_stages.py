"""Where Triton's compile time goes: seconds per compiler stage, summed over the threads that compile.

torchfuse compiles a graph's kernels in threads (:func:`torchfuse.runtime.compile.compile_all`),
so the ``triton_compile`` phase is wall time of many overlapping compilations. This clock splits
it by what Triton runs for each kernel:

``front_end``
    Triton's code generator walking the kernel's Python AST into TTIR (``ASTSource.make_ir``):
    Python, holding the GIL, so these seconds do not overlap between threads;
``ttir``, ``ttgir``, ``llir``, ``ptx``, ``cubin``
    the backend's stages (MLIR passes, LLVM, ptxas), which release the GIL and overlap;
``launcher``
    building the C launcher of a kernel's argument signature (Triton versions that build one:
    a C compiler run on an empty cache);
``load``
    loading a binary onto the device, by Triton's loader or by PyTorch's
    (:func:`torchfuse.runtime.compile.load_cubin`, where PyTorch's C++ launcher launches the
    kernel and no C launcher is built; a GPU only).

The seconds are summed over calls (and so over threads): with ``n`` threads compiling at once
they can add up to ``n`` times the phase's wall time, except ``front_end``, which bounds the
phase from below. Measured with Triton's own stage table and classes, wrapped for the duration
of a ``with`` block; a stage a Triton version does not have is left out. For the benchmark's
``first-call`` child (``first_call_cold_triton`` and ``first_call_warm_triton`` in its rows),
not for use in a program: the wrappers patch Triton process-wide.
"""
from __future__ import annotations

import functools
import threading
import time
from typing import Any, Callable


class TritonStageClock:
    """Context manager: seconds per Triton compile stage while it is open (thread safe).

    Attributes:
        seconds: stage name -> seconds (summed over calls and threads), rounded to 0.1 ms on
            exit; a stage that never ran is absent.
        calls: stage name -> number of calls.

    Raises:
        ImportError: Triton is not installed.
    """

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self.calls: dict[str, int] = {}
        self._lock = threading.Lock()
        self._undo: list[Callable[[], None]] = []

    def _timed(self, stage: str, fn: Callable) -> Callable:
        @functools.wraps(fn)
        def timed(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                seconds = time.perf_counter() - start
                with self._lock:
                    self.seconds[stage] = self.seconds.get(stage, 0.0) + seconds
                    self.calls[stage] = self.calls.get(stage, 0) + 1
        return timed

    def _patch(self, owner: Any, name: str, stage: str) -> None:
        original = owner.__dict__[name] if isinstance(owner, type) else getattr(owner, name)
        setattr(owner, name, self._timed(stage, original))
        self._undo.append(lambda: setattr(owner, name, original))

    def __enter__(self) -> "TritonStageClock":
        from triton.backends import backends
        from triton.compiler.compiler import ASTSource

        self._patch(ASTSource, "make_ir", "front_end")
        clock = self
        for backend in backends.values():
            compiler = backend.compiler
            original = compiler.__dict__.get("add_stages")
            if original is None:
                continue

            def add_stages(self_, stages, *args, _original=original, **kwargs):
                _original(self_, stages, *args, **kwargs)
                for name in list(stages):
                    stages[name] = clock._timed(name, stages[name])

            compiler.add_stages = add_stages
            self._undo.append(lambda c=compiler, o=original: setattr(c, "add_stages", o))
        try:
            from triton.backends.nvidia import driver as nvidia_driver
            self._patch(nvidia_driver.CudaLauncher, "__init__", "launcher")
        except (ImportError, AttributeError):
            pass
        from ..runtime import compile as runtime_compile

        self._patch(runtime_compile, "load_cubin", "load")
        try:  # the active driver's binary loader exists only where a GPU is
            from triton.runtime import driver
            self._patch(driver.active.utils, "load_binary", "load")
        except Exception:  # noqa: BLE001 (no active driver: a CPU)
            pass
        return self

    def __exit__(self, *exc: Any) -> None:
        while self._undo:
            self._undo.pop()()
        self.seconds = {k: round(v, 4) for k, v in self.seconds.items()}
