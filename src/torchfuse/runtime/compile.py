"""Loading generated kernels and compiling them, in parallel, before their first launch.

Takes a :class:`~torchfuse.codegen.triton.KernelSource`; returns a :class:`Kernel` that
launches it. On a GPU the module's functions are Triton JIT functions; with
``Options.interpret`` they are re-wrapped for Triton's interpreter (and ``libdevice`` is
replaced by :mod:`torchfuse.runtime.interpreter_math`), so the same source runs on CPU tensors.
"""
from __future__ import annotations

import concurrent.futures
import importlib.util
import logging
import sys
import threading
from typing import Sequence

from ..codegen.triton import HELPERS, KernelSource
from .cache import SourceStore

log = logging.getLogger("torchfuse.cache")

_loaded: dict[tuple[str, bool], "Kernel"] = {}
_lock = threading.Lock()


class Kernel:
    """A loaded kernel.

    Attributes:
        source: the generated source.
        path: the file it was imported from.
        fn: the Triton JIT (or interpreted) function.
        interpret: whether it runs under Triton's interpreter.
    """

    def __init__(self, source: KernelSource, path, fn, interpret: bool):
        self.source = source
        self.path = path
        self.fn = fn
        self.interpret = interpret

    def launch(self, grid: int, args: Sequence, XBLOCK: int, RBLOCK: int, num_warps: int) -> None:
        """Run on ``grid`` programs. ``args`` follow ``source.params``."""
        if self.interpret:
            with interpreter_stdlib():
                self.fn[(grid,)](*args, XBLOCK=XBLOCK, RBLOCK=RBLOCK)
        else:
            self.fn[(grid,)](*args, XBLOCK=XBLOCK, RBLOCK=RBLOCK, num_warps=num_warps)

    def warmup(self, grid: int, args: Sequence, XBLOCK: int, RBLOCK: int, num_warps: int) -> None:
        """Compile for these argument types without running (no-op under the interpreter)."""
        if self.interpret:
            return
        self.fn.warmup(*args, grid=(grid,), XBLOCK=XBLOCK, RBLOCK=RBLOCK, num_warps=num_warps)


_stdlib_wrappers: dict = {}


class interpreter_stdlib:
    """Context in which Triton's standard library (``tl.max``, ``tl.sum``, ``tl.zeros`` ...)
    runs under the interpreter even though Triton was imported without ``TRITON_INTERPRET``
    (the library's functions are then JIT functions, which the interpreter cannot call)."""

    def __enter__(self):
        try:  # imported lazily by the interpreter; it must see the unpatched library
            import triton.experimental.gluon  # noqa: F401
        except ImportError:
            pass
        import triton.language as tl
        import triton.language.standard as standard
        from triton.runtime.interpreter import InterpretedFunction
        from triton.runtime.jit import JITFunction

        self.saved = []
        for mod in (tl, standard):
            for name, obj in list(vars(mod).items()):
                if isinstance(obj, JITFunction):
                    wrapper = _stdlib_wrappers.get(id(obj))
                    if wrapper is None:
                        wrapper = _stdlib_wrappers[id(obj)] = (obj, InterpretedFunction(obj.fn))
                    self.saved.append((mod, name, obj))
                    setattr(mod, name, wrapper[1])
        return self

    def __exit__(self, *exc):
        for mod, name, obj in self.saved:
            setattr(mod, name, obj)
        return False


def load(source: KernelSource, store: SourceStore, interpret: bool) -> Kernel:
    """Import ``source`` (once per process and mode) and return its kernel.

    Raises:
        SyntaxError, NameError, ImportError: the generated module is broken (a compiler bug);
            the caller runs the group through ATen and warns.
    """
    k = (source.key, interpret)
    with _lock:
        if k in _loaded:
            return _loaded[k]
    path = store.path_for(source.key, source.text)
    modname = f"torchfuse_kernel_{source.key[:24]}_{'i' if interpret else 'j'}"
    spec = importlib.util.spec_from_file_location(modname, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[modname] = module
    spec.loader.exec_module(module)
    if interpret:
        from triton.runtime.interpreter import InterpretedFunction

        from .interpreter_math import libdevice

        module.libdevice = libdevice
        for name in HELPERS + (source.name,):
            obj = getattr(module, name)
            module.__dict__[name] = InterpretedFunction(getattr(obj, "fn", obj))
    kernel = Kernel(source, path, getattr(module, source.name), interpret)
    with _lock:
        _loaded.setdefault(k, kernel)
        return _loaded[k]


def compile_all(jobs: list[tuple[Kernel, int, Sequence, int, int, int]], threads: int) -> list[BaseException | None]:
    """Compile several kernels at once (Triton's compiler runs LLVM and ptxas outside the GIL).

    Args:
        jobs: ``(kernel, grid, args, XBLOCK, RBLOCK, num_warps)`` each.
        threads: worker threads.

    Returns:
        Per job, ``None`` or the exception its compilation raised.
    """
    if not jobs:
        return []

    def one(job):
        try:
            job[0].warmup(*job[1:])
            return None
        except BaseException as e:  # reported per kernel; the group falls back to ATen
            return e

    if len(jobs) == 1 or threads <= 1:
        return [one(j) for j in jobs]
    with concurrent.futures.ThreadPoolExecutor(max_workers=min(threads, len(jobs))) as pool:
        return list(pool.map(one, jobs))
