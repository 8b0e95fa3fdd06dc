"""Compile progress: a terminal progress bar while one graph's kernels are generated and compiled.

:class:`CompileProgress` is driven by ``CompiledGraph._prepare``: one step per fusion group
whose kernel is generated (code generation and import), then one per kernel compiled by
Triton (on a GPU; under the interpreter nothing is compiled ahead). The bar reads, e.g.::

    torchfuse backward graph: generated N/N, compiled K/M kernels   P%|###      | [elapsed]

tqdm draws it: its ``delay`` holds the bar back until the graph has taken
``Tuning.runtime.progress_delay_seconds``, so quick compiles (and kernels found in the cache) print nothing, and
``disable=None`` hides it when the stream is not a terminal (logs, CI, notebooks' captured
stderr). ``Options.progress=False`` turns it off. Counter updates come from the compile
worker threads and are serialized by a lock.
"""
from __future__ import annotations

import sys
import threading
from typing import TextIO

class CompileProgress:
    """Counts one graph's kernels as they are generated and compiled, drawn by tqdm.

    Args:
        graph: the graph's name (``forward``, ``backward``, ``inference``).
        groups: fusion groups whose kernels will be generated.
        enabled: ``Options.progress``.
        stream: where to draw (default ``sys.stderr``); nothing is drawn unless it is a terminal.
        delay: seconds before the bar appears (``Tuning.runtime.progress_delay_seconds``).
    """

    def __init__(self, graph: str, groups: int, enabled: bool, stream: TextIO | None = None,
                 delay: float = 2.0):
        self.graph = graph
        self.groups = groups
        self.generated_count = 0
        self.jobs = 0
        self.compiled_count = 0
        self._lock = threading.Lock()
        self.bar = None
        if enabled and groups:
            from tqdm import tqdm

            self.bar = tqdm(total=groups, file=sys.stderr if stream is None else stream, leave=False,
                            delay=delay, disable=None, dynamic_ncols=True,
                            bar_format="{desc}  {percentage:3.0f}%|{bar}| [{elapsed}]", desc=self._text())

    def _text(self) -> str:
        text = f"torchfuse {self.graph} graph: generated {self.generated_count}/{self.groups}"
        if self.jobs:
            text += f", compiled {self.compiled_count}/{self.jobs}"
        return text + " kernels"

    def _advance(self) -> None:
        if self.bar is not None:
            self.bar.set_description_str(self._text(), refresh=False)
            self.bar.update(1)

    def generated(self) -> None:
        """One group's kernel was generated (or found in the cache)."""
        with self._lock:
            self.generated_count += 1
            self._advance()

    def compiling(self, jobs: int) -> None:
        """Generation is over; ``jobs`` kernels go to Triton's compiler now."""
        with self._lock:
            self.jobs = jobs
            if self.bar is not None:
                self.bar.total = self.groups + jobs
                self.bar.set_description_str(self._text(), refresh=False)

    def compiled(self) -> None:
        """One kernel finished compiling (called from the compile worker threads)."""
        with self._lock:
            self.compiled_count += 1
            self._advance()

    def close(self) -> None:
        """Remove the bar (it is not left on the terminal)."""
        if self.bar is not None:
            self.bar.close()
            self.bar = None
