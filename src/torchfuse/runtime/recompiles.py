"""Why a program compiles again: TorchDynamo's failed guards, logged under ``recompile``.

TorchDynamo compiles a function again when a guard of every compiled version fails (a new
size of a dim it had specialized, another dtype, a changed global). It keeps each failure's
reason in ``torch._dynamo.utils.guard_failures`` (per code object, a list of texts such as
``tensor 'x' size mismatch at index 1. expected 8, actual 12``) before it calls the backend
again; :func:`log_dynamo_recompiles`, called at each backend call, logs the reasons it has not
logged yet to the ``torchfuse.recompile`` logger (``TORCHFUSE_LOGS=recompile``). torchfuse's
own re-plans (new sizes in a graph compiled with dynamic shapes, new input layouts, a new
kernel for a group) are logged to the same logger by :mod:`torchfuse.runtime.executor`.

Each failure is placed at the function TorchDynamo compiles again, unless that function is
PyTorch's own (the wrapper TorchDynamo puts around a ``torch.nn`` module such as
``Sequential``, in ``torch/_dynamo/external_utils.py``): then at the user's frame, the
innermost frame of the call stack outside PyTorch's and torchfuse's files, read while
TorchDynamo compiles that function again (:func:`recompile_where` gives either).
"""
from __future__ import annotations

import logging
import os
import re
import sys
import threading
from functools import lru_cache

log = logging.getLogger("torchfuse.recompile")

#: code object -> (its list in TorchDynamo's ``guard_failures``, where each failure of it seen
#: so far happened, and the number of failures seen at the end of each backend call); the
#: list is compared by identity, as ``torch._dynamo.reset()`` starts new ones
_seen: dict = {}
_lock = threading.Lock()


def log_dynamo_recompiles() -> list[str]:
    """Note where each of TorchDynamo's guard failures not seen before happened (see
    :func:`recompile_where`) and log them, one message per recompilation: the failures that
    appeared since the last backend call are one recompilation's, one per compiled version
    whose guards failed. Returns the messages (empty when there are none or the ``recompile``
    topic is off)."""
    try:
        from torch._dynamo.utils import guard_failures
    except ImportError:
        return []
    messages = []
    compiling = _compiling_frame_id()
    with _lock:
        for code, reasons in list(guard_failures.items()):
            seen = _seen.get(code)
            if seen is None or seen[0] is not reasons:
                seen = _seen[code] = (reasons, [], [])
            new = reasons[len(seen[1]):]
            if not new:
                continue
            for reason in new:
                seen[1].append(_where(code, str(reason), compiling))
            seen[2].append(len(seen[1]))
            if log.isEnabledFor(logging.INFO):
                texts = "; ".join(guard_failure_text(r) for r in new)
                messages.append(f"TorchDynamo compiles {seen[1][-1]} again: {texts}")
    for m in messages:
        log.info("%s", m)
    return messages


def recompilation_spans(code, start: int) -> list[tuple[int, int]]:
    """The guard failures of ``code`` from index ``start`` on, as ``(first, end)`` index ranges,
    one per recompilation (the failures one backend call found, :func:`log_dynamo_recompiles`);
    a failure no backend call noted (TorchDynamo gave up compiling again) is a range of its own."""
    from torch._dynamo.utils import guard_failures

    reasons = guard_failures.get(code, [])
    with _lock:
        seen = _seen.get(code)
        ends = list(seen[2]) if seen is not None and seen[0] is reasons else []
    spans, first = [], start
    for end in ends:
        if end > first:
            spans.append((first, end))
            first = end
    spans += [(i, i + 1) for i in range(first, len(reasons))]
    return spans


_COMPILE_ID = re.compile(r"^\s*(\d+)/(\d+): ")


def compile_id_text(compile_id: tuple[int, int] | None) -> str:
    """``"0/1"`` for TorchDynamo's compile id ``(0, 1)`` (:func:`compiling_id`; frame 0, its
    second compile), as its guard failures print it; ``""`` when unknown."""
    return f"{compile_id[0]}/{compile_id[1]}" if compile_id is not None else ""


def guard_failure_text(reason) -> str:
    """TorchDynamo's guard failure message with its leading compile id (``0/1: ...``) spelled
    out, as the ``recompile`` log and ``explain`` name captures by it."""
    text = str(reason).strip()
    m = _COMPILE_ID.match(text)
    return f"the guards of TorchDynamo compile {m[1]}/{m[2]} failed: {text[m.end():]}" if m else text


def compile_label(compile_id: tuple[int, int] | None) -> str:
    """`` of TorchDynamo compile 0/1`` for a graph compiled in that capture, ``""`` when
    unknown."""
    return f" of TorchDynamo compile {compile_id_text(compile_id)}" if compile_id is not None else ""


def recompile_where(code, index: int) -> str:
    """Where the ``index``-th guard failure of ``code`` (a key of TorchDynamo's
    ``guard_failures``) happened: ``the call in name (file:line)`` of the user's frame, or
    ``name (file:line)`` of the function compiled again when that is not PyTorch's own or no
    user's frame was noted."""
    from torch._dynamo.utils import guard_failures

    with _lock:
        seen = _seen.get(code)
        if seen is not None and seen[0] is guard_failures.get(code) and index < len(seen[1]):
            return seen[1][index]
    return _code_where(code)


def _code_where(code) -> str:
    return (f"{getattr(code, 'co_name', code)} ({getattr(code, 'co_filename', '?')}:"
            f"{getattr(code, 'co_firstlineno', 0)})")


def _where(code, reason: str, compiling: int | None) -> str:
    """The user's frame for a failure of PyTorch's own code that the current backend call
    compiles again (its reason starts with the failed entry's compile id, ``frame/count``);
    the code's own place otherwise (a failure with no compile after it, such as at the
    recompile limit, must not take a later compile's stack)."""
    if not _torch_file(getattr(code, "co_filename", "")):
        return _code_where(code)
    failed = re.match(r"\s*(\d+)/\d+", reason)
    if compiling is not None and failed is not None and int(failed.group(1)) != compiling:
        return _code_where(code)
    frame = sys._getframe(1)
    while frame is not None and _compiler_file(frame.f_code.co_filename):
        frame = frame.f_back
    if frame is None:
        return _code_where(code)
    return f"the call in {frame.f_code.co_name} ({frame.f_code.co_filename}:{frame.f_lineno})"


def compiling_id() -> tuple[int, int] | None:
    """TorchDynamo's ``(frame id, compile count of that frame)`` of the capture being compiled
    (``(0, 1)``: frame 0's second capture, a recompilation), or ``None`` outside a compile (or
    on a PyTorch without compile ids)."""
    try:
        from torch._guards import CompileContext

        compile_id = CompileContext.current_compile_id()
    except (ImportError, AttributeError):
        return None
    frame, count = getattr(compile_id, "frame_id", None), getattr(compile_id, "frame_compile_id", None)
    return (frame, count) if isinstance(frame, int) and isinstance(count, int) else None


def _compiling_frame_id() -> int | None:
    """TorchDynamo's id of the frame being compiled, or ``None`` outside a compile."""
    cid = compiling_id()
    return cid[0] if cid is not None else None


def _under(filename: str, root: str) -> bool:
    return os.path.realpath(filename).startswith(os.path.realpath(root) + os.sep)


@lru_cache(maxsize=None)
def _torch_file(filename: str) -> bool:
    """Whether ``filename`` is one of PyTorch's own files."""
    import torch

    return _under(filename, os.path.dirname(torch.__file__))


@lru_cache(maxsize=None)
def _compiler_file(filename: str) -> bool:
    """Whether ``filename`` is PyTorch's or torchfuse's (the backend, explain): not the user's."""
    return _torch_file(filename) or _under(filename, os.path.dirname(os.path.dirname(__file__)))
