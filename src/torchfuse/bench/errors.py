"""Recording failures and warnings: a failing backend is a result, not a crash."""
from __future__ import annotations

import contextlib
import warnings

MAX_ERROR_CHARS = 500


def describe(error: BaseException) -> str:
    """``"TypeName: first line of the message"``, at most :data:`MAX_ERROR_CHARS` characters."""
    text = str(error).strip()
    first = text.splitlines()[0] if text else ""
    out = f"{type(error).__name__}: {first}" if first else type(error).__name__
    return out[:MAX_ERROR_CHARS]


@contextlib.contextmanager
def recorded_warnings(into: list[str]):
    """Collect the warnings raised inside the block into ``into`` (deduplicated messages),
    whatever filters are active outside (a test configuration may turn some into errors)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            yield
        finally:
            for w in caught:
                message = f"{w.category.__name__}: {str(w.message).splitlines()[0][:300]}"
                if message not in into:
                    into.append(message)
