"""Bounds checks for kernels run by Triton's interpreter (the tests' CPU path).

On a GPU an address computed wrongly reads another tensor's memory or faults; under the
interpreter, which loads and stores through raw host addresses, it reads or corrupts the
process's heap, and the test that caused it may pass while a later one crashes. With these
checks installed, every interpreted load and store whose mask is on must lie inside a tensor
argument of the kernel being run (its whole storage); one that does not raises
:class:`OutOfBounds` in the kernel, which torchfuse reports as a fusion group that failed
(a warning the test configuration turns into an error), naming the kernel, the access and the
arguments.

The hooks wrap three methods of Triton's interpreter (``GridExecutor.__call__`` for the
arguments, ``InterpreterBuilder.create_masked_load`` and ``create_masked_store``), which
every ``tl.load`` and ``tl.store`` of a generated kernel goes through. Atomics, block
pointers and tensor descriptors are not checked: torchfuse's kernels use none.
"""
from __future__ import annotations

import numpy as np
import torch


class OutOfBounds(AssertionError):
    """An interpreted load or store outside every tensor argument of its kernel."""


#: per kernel being run (innermost last): its name, the (start, end) byte ranges of its tensor
#: arguments' storages, and a description of its arguments
_RUNNING: list[tuple[str, list[tuple[int, int]], str]] = []


def install() -> bool:
    """Wrap the interpreter's kernel call, masked load and masked store (once per process).

    Returns:
        Whether the checks are installed (False where this Triton's interpreter lacks one of
        the methods they wrap).
    """
    from triton.runtime import interpreter

    executor, builder = interpreter.GridExecutor, interpreter.InterpreterBuilder
    if getattr(executor, "_bounds_checked", False):
        return True
    if not all(hasattr(builder, m) for m in ("create_masked_load", "create_masked_store")) or \
            not hasattr(interpreter, "_get_np_dtype"):
        return False
    call, load, store = executor.__call__, builder.create_masked_load, builder.create_masked_store
    element_type = interpreter._get_np_dtype

    def checked_call(self, *args, **kwargs):
        ranges: list[tuple[int, int]] = []
        _storage_ranges([*args, *kwargs.values()], ranges)
        name = getattr(getattr(self, "fn", None), "__name__", "kernel")
        shown = ", ".join(f"{a.dtype}{list(a.shape)}" if isinstance(a, torch.Tensor) else repr(a) for a in args)
        _RUNNING.append((name, ranges, shown))
        try:
            return call(self, *args, **kwargs)
        finally:
            _RUNNING.pop()

    def checked_load(self, ptrs, mask, other, *rest):
        _check(ptrs, mask, "load", np.dtype(element_type(ptrs.get_element_ty())).itemsize)
        return load(self, ptrs, mask, other, *rest)

    def checked_store(self, ptrs, value, mask, *rest):
        _check(ptrs, mask, "store", np.dtype(element_type(ptrs.get_element_ty())).itemsize)
        return store(self, ptrs, value, mask, *rest)

    executor.__call__ = checked_call
    builder.create_masked_load = checked_load
    builder.create_masked_store = checked_store
    executor._bounds_checked = True
    return True


def _storage_ranges(args, out: list) -> None:
    for a in args:
        if isinstance(a, torch.Tensor):
            s = a.untyped_storage()
            out.append((s.data_ptr(), s.data_ptr() + s.nbytes()))
        elif isinstance(a, (tuple, list)):
            _storage_ranges(a, out)


def _check(ptrs, mask, what: str, itemsize: int) -> None:
    if not _RUNNING:
        return
    name, ranges, shown = _RUNNING[-1]
    addresses = np.asarray(ptrs.data)
    on = np.ones(addresses.shape, bool) if mask is None else \
        np.broadcast_to(np.asarray(mask.data).astype(bool), addresses.shape)
    used = np.asarray(addresses[on], dtype=np.int64).ravel()
    if used.size == 0:
        return
    lo, hi = int(used.min()), int(used.max()) + itemsize
    if any(start <= lo and hi <= end for start, end in ranges):
        return  # the usual case: every lane inside one tensor
    inside = np.zeros(used.shape, bool)
    for start, end in ranges:
        inside |= (used >= start) & (used + itemsize <= end)
    if not inside.all():
        raise OutOfBounds(f"{what} out of bounds in {name}: {int((~inside).sum())} of {used.size} lanes outside "
                          f"every tensor argument ({shown})")
