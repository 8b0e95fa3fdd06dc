"""Why a program compiles again: TorchDynamo's failed guards, logged under ``recompile``.

TorchDynamo compiles a function again when a guard of every compiled version fails (a new
size of a dim it had specialized, another dtype, a changed global). It keeps each failure's
reason in ``torch._dynamo.utils.guard_failures`` (per code object, a list of texts such as
``tensor 'x' size mismatch at index 1. expected 8, actual 12``) before it calls the backend
again; :func:`log_dynamo_recompiles`, called at each backend call, logs the reasons it has not
logged yet to the ``torchfuse.recompile`` logger (``TORCHFUSE_LOGS=recompile``). torchfuse's
own re-plans (new sizes in a graph compiled with dynamic shapes, new input layouts, a new
kernel for a group) are logged to the same logger by :mod:`torchfuse.runtime.executor`.
"""
from __future__ import annotations

import logging
import threading

log = logging.getLogger("torchfuse.recompile")

_logged: dict = {}  # code object -> how many of its guard failures were logged
_lock = threading.Lock()


def log_dynamo_recompiles() -> list[str]:
    """Log TorchDynamo's guard failures not logged before; returns their messages (empty when
    there are none or the ``recompile`` topic is off)."""
    try:
        from torch._dynamo.utils import guard_failures
    except ImportError:
        return []
    messages = []
    with _lock:
        for code, reasons in list(guard_failures.items()):
            start = _logged.get(code, 0)
            _logged[code] = len(reasons)
            if not log.isEnabledFor(logging.INFO):
                continue
            where = (f"{getattr(code, 'co_name', code)} ({getattr(code, 'co_filename', '?')}:"
                     f"{getattr(code, 'co_firstlineno', 0)})")
            for reason in reasons[start:]:
                messages.append(f"TorchDynamo compiles {where} again: {str(reason).strip()}")
    for m in messages:
        log.info("%s", m)
    return messages
