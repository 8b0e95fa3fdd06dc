"""First-call time in fresh processes: cold (empty caches) and warm (caches filled).

For each compiled backend that ran, ``--cold-start`` starts ``python -m torchfuse.bench
first-call ...`` twice with the same new, empty cache directory: the child points
``TORCHFUSE_CACHE_DIR``, ``TRITON_CACHE_DIR`` and ``TORCHINDUCTOR_CACHE_DIR`` into it
before importing any of them, builds the workload and times its first forward (and
backward), compilation included, split into compile phases
(:mod:`torchfuse.runtime.phases`: TorchDynamo, AOTAutograd, torchfuse's passes, segmentation,
code generation, Triton's compile, first launch; for ``torch.compile``, TorchDynamo and the
backend's compile). For torchfuse it also splits Triton's compile time by stage, summed over
the compile threads (:class:`torchfuse.bench.triton_stages.TritonStageClock`). The first child
finds the caches empty (cold), the second finds what the first wrote (warm). Import time is not
part of either figure.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile

#: the cache each compiler keeps, as a subdirectory of the child's cache directory
CACHE_VARIABLES = {"TORCHFUSE_CACHE_DIR": "torchfuse", "TRITON_CACHE_DIR": "triton",
                   "TORCHINDUCTOR_CACHE_DIR": "inductor"}
MIN_SECONDS = 30
MAX_SECONDS = 600


def child_command(case_id: str, mode: str, backend: str, device: str, quick: bool, channels_last: bool,
                  cache_dir: str) -> list[str]:
    cmd = [sys.executable, "-m", "torchfuse.bench", "first-call", "--case", case_id, "--mode", mode,
           "--backend", backend, "--device", device, "--cache-dir", cache_dir]
    return cmd + (["--quick"] if quick else []) + (["--channels-last"] if channels_last else [])


def run_child(cmd: list[str], timeout: float) -> tuple[float | None, str | None, dict | None, dict | None]:
    """``(seconds, None, phases, triton)`` or ``(None, error, None, None)`` from one child
    process; ``phases``: seconds per compile phase of its first call
    (:class:`torchfuse.runtime.phases.PhaseWindow`); ``triton``: seconds per Triton compile
    stage (:class:`~torchfuse.bench.triton_stages.TritonStageClock`), or ``None``."""
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, f"timed out after {timeout:.0f} s", None, None
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if not lines:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return None, f"exit status {done.returncode}: {tail[:300]}", None, None
    data = json.loads(lines[-1])
    return data.get("first_call_s"), data.get("error"), data.get("phases"), data.get("triton_stages")


def measure_first_calls(run, backends, budget) -> None:
    """Fill ``first_call_cold_s`` and ``first_call_warm_s`` of the compiled backends of a
    :class:`~torchfuse.bench.runner.CaseRun` that ran; errors go to their warnings."""
    from .results import OK

    for backend in backends:
        r = run.results[backend.name]
        if not backend.compiled or r.status != OK:
            continue
        with tempfile.TemporaryDirectory(prefix="torchfuse-bench-cache-") as cache_dir:
            cmd = child_command(run.case.id, run.mode.name, backend.name, run.device, run.settings.quick,
                                r.channels_last, cache_dir)
            for attr, label in (("first_call_cold_s", "cold"), ("first_call_warm_s", "warm")):
                left = budget.remaining()
                if left is not None and left < MIN_SECONDS:
                    r.warnings.append(f"{label} start: time budget reached")
                    break
                run.progress(f"{run.case.id} {run.mode.name}: {label} start of {backend.name}")
                seconds, error, phases, triton = run_child(cmd, min(MAX_SECONDS, left) if left is not None
                                                           else MAX_SECONDS)
                setattr(r, attr, seconds)
                setattr(r, attr.replace("_s", "_phases"), phases)
                setattr(r, attr.replace("_s", "_triton"), triton)
                if error:
                    r.warnings.append(f"{label} start: {error}")
                    break


def first_call_main(argv: list[str]) -> int:
    """The child: print ``{"first_call_s": seconds, "phases": ..., "triton_stages": ...}`` or
    ``{"error": ...}`` as the last line (``triton_stages`` for torchfuse's backends only: the
    other compilers compile in processes of their own)."""
    parser = argparse.ArgumentParser(prog="torchfuse bench first-call")
    parser.add_argument("--case", required=True)
    parser.add_argument("--mode", required=True)
    parser.add_argument("--backend", required=True)
    parser.add_argument("--device", required=True)
    parser.add_argument("--cache-dir", required=True)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--channels-last", action="store_true")
    args = parser.parse_args(argv)
    for variable, sub in CACHE_VARIABLES.items():  # each is read when first compiling, not at import
        os.environ[variable] = os.path.join(args.cache_dir, sub)

    from .backends import backend_named, import_modules
    from .errors import describe
    from .modes import MODES
    from .runner import _prepare
    from .suites import find_case
    from ..runtime.phases import PhaseWindow
    from .timing import synchronize, time_first_call
    from .triton_stages import TritonStageClock
    from .workload import BuildContext

    try:
        case = find_case(args.case, args.quick)
        mode = MODES[args.mode]
        workload = case.build(BuildContext(args.device, mode, args.quick, args.channels_last and case.vision))
        import_modules((args.backend,))
        prepared = _prepare(backend_named(args.backend), workload, mode, args.device)
        stages = TritonStageClock() if args.backend.startswith("torchfuse") else contextlib.nullcontext()
        # the device's context starts, and the Triton stage clock installs itself, outside the
        # window, as outside the timed call
        synchronize(args.device)
        with stages, PhaseWindow() as phases:
            seconds, _ = time_first_call(prepared.forward_backward, args.device)
    except Exception as e:  # noqa: BLE001
        print(json.dumps({"error": describe(e)}), flush=True)
        return 1
    triton = stages.seconds if isinstance(stages, TritonStageClock) else None
    print(json.dumps({"first_call_s": seconds, "phases": phases.seconds, "triton_stages": triton}), flush=True)
    return 0
