"""Waiting on the processes of a multi-process run (one per rank) without hanging on one that
failed: shared by the distributed benchmark and the distributed tests."""
from __future__ import annotations

import multiprocessing.connection
import time


def wait_for_ranks(processes: list, deadline_s: float, grace_s: float) -> None:
    """Wait until every process in ``processes`` (started ``multiprocessing.Process``) has
    exited, ``deadline_s`` seconds have passed, or ``grace_s`` seconds have passed since one
    exited with a nonzero code (its peers may be waiting for it in a collective). Kills none:
    the caller decides what to do with those still alive."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        alive = [p for p in processes if p.is_alive()]  # once: one may exit between two looks
        if not alive:
            break
        multiprocessing.connection.wait([p.sentinel for p in alive], timeout=end - time.monotonic())
        if any(p.exitcode not in (None, 0) for p in processes):
            end = min(end, time.monotonic() + grace_s)
