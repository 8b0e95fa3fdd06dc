"""Compiling kernels in worker processes (``Options.compile_processes``).

Triton's front end (parsing the kernel, building and optimizing its IR) runs Python and
holds the GIL, so threads compile one kernel's front end at a time; only LLVM and ptxas run
in parallel. With ``compile_processes`` above 1, a graph's kernels are first compiled in that
many worker processes, each running exactly what the parent would (:meth:`Kernel.warmup
<torchfuse.runtime.compile.Kernel.warmup>`, with dtypes standing in for tensors), which
writes the compiled binaries to Triton's on-disk cache; the parent's own compile then finds
them there and only loads them. A job that fails in a worker (or a worker that dies) is
simply compiled by the parent as without workers, which reports its errors: the workers can
make compilation faster, never change what runs.

The workers are ``python -m torchfuse.runtime.compile_pool`` processes started once per
process (the first time a graph is compiled with the option, so that they import PyTorch and
Triton while AOTAutograd traces), with the parent's ``sys.path`` and environment
(``TRITON_CACHE_DIR`` included, so that both use one cache). They read one JSON job per line
on stdin and answer one JSON line on stdout: no pickles, and no re-import of the user's main
module (which ``multiprocessing``'s spawn would run again). A worker exits when its stdin
closes (the parent exits).
"""
from __future__ import annotations

import atexit
import json
import logging
import os
import queue
import subprocess
import sys
import threading
from typing import Any

log = logging.getLogger("torchfuse.cache")


def job_spec(job: tuple) -> dict | None:
    """The JSON form of a compile job ``(kernel, stage, grid, args, XBLOCK, RBLOCK, num_warps,
    fp_fusion)`` (see :func:`torchfuse.runtime.compile.compile_all`): tensors become their dtype
    and device, which is all Triton specializes a warm-up on (a stand-in's address counts as
    16-byte aligned, as the parent's fresh allocations are). ``None`` when an argument has no
    such form (the parent compiles that job itself)."""
    import torch

    kernel, stage, grid, args, xblock, rblock, num_warps, fp_fusion = job
    described: list = []
    device = None
    for a in args:
        if isinstance(a, torch.Tensor):
            if a.device.type != "cuda" or a.data_ptr() % 16:
                return None
            device = a.device.index or 0
            described.append(["tensor", str(a.dtype).replace("torch.", "")])
        elif isinstance(a, bool) or a is None:
            described.append(["value", a])
        elif isinstance(a, (int, float)):
            described.append(["value", a])
        else:
            return None
    return {"key": kernel.source.key, "name": kernel.source.name, "text": kernel.source.text,
            "params": list(kernel.source.params), "stages": list(kernel.source.stages), "path": str(kernel.path),
            "stage": stage, "grid": list(grid), "args": described, "XBLOCK": xblock, "RBLOCK": rblock,
            "num_warps": num_warps, "fp_fusion": fp_fusion, "device": device or 0}


def spec_identity(spec: dict) -> str:
    """What makes two jobs the same compilation (everything but the source text, which the
    kernel key stands for): identical kernels of several groups are compiled once."""
    return json.dumps([spec[k] for k in ("key", "stage", "args", "XBLOCK", "RBLOCK", "num_warps", "fp_fusion",
                                         "device")])


class CompilePool:
    """A fixed set of worker processes compiling kernels (see the module docstring).

    Args:
        processes: how many workers.
    """

    def __init__(self, processes: int):
        self.processes = processes
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
        triton_dir = _triton_cache_dir()
        if triton_dir:
            env["TRITON_CACHE_DIR"] = triton_dir
        self.workers = [subprocess.Popen([sys.executable, "-m", "torchfuse.runtime.compile_pool"], env=env,
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                         text=True, bufsize=1)
                        for _ in range(processes)]
        self.jobs_done = 0
        self._lock = threading.Lock()

    def compile(self, specs: list[dict]) -> list[str | None]:
        """Compile ``specs`` (:func:`job_spec`) across the workers; per spec ``None`` or the
        error (a worker's exception, or that the worker died). Blocks until all are done."""
        results: list[str | None] = ["not compiled"] * len(specs)
        todo: queue.Queue = queue.Queue()
        for i in range(len(specs)):
            todo.put(i)

        def serve(worker: subprocess.Popen) -> None:
            while True:
                try:
                    i = todo.get_nowait()
                except queue.Empty:
                    return
                line = ""
                try:
                    worker.stdin.write(json.dumps(specs[i]) + "\n")
                    worker.stdin.flush()
                    line = worker.stdout.readline()
                    results[i] = json.loads(line).get("error") if line else "the worker exited"
                except (OSError, ValueError) as e:
                    results[i] = f"the worker failed: {type(e).__name__}: {e}"
                with self._lock:
                    self.jobs_done += 1
                if not line:
                    return  # a dead worker takes no more jobs; the others take the rest

        with self._lock:
            live = [w for w in self.workers if w.poll() is None]
        threads = [threading.Thread(target=serve, args=(w,), daemon=True) for w in live]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return results

    def close(self) -> None:
        for w in self.workers:
            try:
                w.stdin.close()
            except OSError:
                pass
        for w in self.workers:
            try:
                w.wait(timeout=5)
            except subprocess.TimeoutExpired:
                w.kill()


_pool: CompilePool | None = None
_pool_lock = threading.Lock()


def start_pool(processes: int) -> CompilePool:
    """The process's pool, started now if it is not running (with ``processes`` workers; a
    pool that runs keeps its size)."""
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = CompilePool(processes)
            atexit.register(_pool.close)
        return _pool


def compile_in_workers(jobs: list[tuple], processes: int) -> int:
    """Compile ``jobs`` (as :func:`torchfuse.runtime.compile.compile_all` takes them) in the
    worker processes, each distinct job once, to fill Triton's cache; returns how many distinct
    jobs compiled there. Never raises: what fails here the parent compiles itself."""
    specs: dict[str, dict] = {}
    for job in jobs:
        try:
            spec = job_spec(job)
        except Exception:  # noqa: BLE001 - the parent compiles it
            spec = None
        if spec is not None:
            specs.setdefault(spec_identity(spec), spec)
    if not specs:
        return 0
    try:
        errors = start_pool(processes).compile(list(specs.values()))
    except Exception as e:  # noqa: BLE001 - no workers: the parent compiles everything
        log.info("compile workers unavailable (%s: %s); compiling in this process", type(e).__name__, e)
        return 0
    for spec, err in zip(specs.values(), errors):
        if err is not None:
            log.info("compile worker: %s stage %d not compiled (%s); compiling it in this process", spec["name"],
                     spec["stage"], err.splitlines()[0][:200] if err else err)
    return sum(1 for e in errors if e is None)


def _triton_cache_dir() -> str | None:
    """Triton's cache directory as this process resolved it (set in the environment or by
    ``triton.knobs``), so that the workers write where the parent reads."""
    try:
        import triton

        knobs = getattr(triton, "knobs", None)
        return str(knobs.cache.dir) if knobs is not None and getattr(knobs.cache, "dir", None) else None
    except Exception:  # noqa: BLE001
        return None


def compile_spec(spec: dict) -> None:
    """In a worker: load the spec's kernel and compile it as the parent would.

    Raises:
        whatever loading or Triton's compiler raises.
    """
    from pathlib import Path
    from types import SimpleNamespace

    import torch

    from ..codegen.triton import KernelSource
    from .compile import load

    source = KernelSource(name=spec["name"], text=spec["text"], key=spec["key"], params=tuple(spec["params"]),
                          stages=tuple(spec["stages"]))
    kernel = load(source, SimpleNamespace(path_for=lambda key, text: Path(spec["path"])), interpret=False)
    args = [getattr(torch, value) if kind == "tensor" else value for kind, value in spec["args"]]
    torch.cuda.set_device(spec["device"])
    kernel.warmup(spec["stage"], tuple(spec["grid"]), args, spec["XBLOCK"], spec["RBLOCK"], spec["num_warps"],
                  spec["fp_fusion"])


def _worker_main() -> None:
    """A worker's loop: one JSON job per stdin line, one JSON answer per stdout line."""
    out = sys.stdout
    sys.stdout = sys.stderr  # nothing else may write to the answers' stream
    import torch  # noqa: F401 - imported before the first job
    import triton  # noqa: F401

    for line in sys.stdin:
        try:
            compile_spec(json.loads(line))
            answer: dict[str, Any] = {"error": None}
        except BaseException as e:  # noqa: BLE001 - reported to the parent
            answer = {"error": f"{type(e).__name__}: {e}"}
        out.write(json.dumps(answer) + "\n")
        out.flush()


if __name__ == "__main__":
    _worker_main()
