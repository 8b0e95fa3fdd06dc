"""Running cases: every backend on the same inputs in one process, one case at a time.

Per (case, mode), :func:`run_case`:

1. builds the workload once (same weights and inputs for every backend);
2. computes eager's accuracy references (twice, to check determinism, and in float64);
3. per backend, in turn: copies the model, compiles it, times the first call (compilation
   included), checks accuracy on it when the model has no active dropout, runs the warm-up
   steps and measures peak memory;
4. times all backends in interleaved rounds (:func:`torchfuse.bench.timing.time_interleaved`);
5. counts kernel launches of one step per backend (CUDA);
6. for models with active dropout, checks accuracy on separately compiled copies with
   dropout disabled;
7. optionally measures cold and warm first-call times in fresh processes.

A backend that raises at any stage is recorded as failed with its error and stage, and the
others go on. :func:`run_all` runs the selected cases under the time budget, with a progress
bar, and saves the run file after every case.
"""
from __future__ import annotations

import dataclasses
import gc
import importlib.util
import time
from pathlib import Path
from typing import Callable

import torch

from ..runtime.phases import PhaseWindow
from . import timing
from .accuracy import EAGER_DIFFERS, FAIL, NOT_CHECKED, REFERENCE, References, compare, has_active_dropout, results_equal
from .backends import BASELINE, COMPILE_BASELINE, Backend, backend_named, import_modules
from .errors import describe, recorded_warnings
from .modes import MODES, Mode
from .results import OK, SKIPPED, Result, case_label, write_run
from .steps import PreparedBackend
from .workload import BuildContext, Case, Unavailable, Workload


@dataclasses.dataclass(frozen=True)
class Settings:
    """How a run measures (the command line's options).

    Attributes:
        device: ``"cuda"`` or ``"cpu"``.
        backends: backend names, eager first.
        quick: tiny configurations.
        channels_last: vision cases in channels-last layout.
        warmup: untimed steps per backend after the first call.
        rounds: interleaved timing rounds.
        round_seconds: target time of one backend's share of a round.
        max_steps_per_round: at most this many steps per backend per round.
        accuracy: check accuracy against eager and float64.
        cold_start: measure first calls in fresh processes with empty, then filled caches.
        time_budget: seconds after which no new case (or backend) is started; ``None``: none.
        progress: show a progress bar.
    """

    device: str
    backends: tuple[str, ...]
    quick: bool = False
    channels_last: bool = False
    warmup: int = 3
    rounds: int = 5
    round_seconds: float = 0.2
    max_steps_per_round: int = 50
    accuracy: bool = True
    cold_start: bool = False
    time_budget: float | None = None
    progress: bool = True


class Budget:
    """Wall-clock time left for a run (``None``: unlimited)."""

    def __init__(self, seconds: float | None):
        self.seconds = seconds
        self.start = time.monotonic()

    def remaining(self) -> float | None:
        return None if self.seconds is None else self.seconds - (time.monotonic() - self.start)

    def exceeded(self) -> bool:
        left = self.remaining()
        return left is not None and left <= 0


def compute_references(workload: Workload, mode: Mode, device: str) -> References:
    """Eager's results twice (determinism) and in float64, all with dropout disabled."""
    first = PreparedBackend(workload, mode, device, deterministic=True).forward_backward()
    again = PreparedBackend(workload, mode, device, deterministic=True).forward_backward()
    fp64, error = None, None
    try:
        fp64 = PreparedBackend(workload, mode, device, float64=True, deterministic=True).forward_backward()
    except Exception as e:  # noqa: BLE001 - some ops have no float64 kernel; same() then uses eager
        error = describe(e)
    return References(first, results_equal(first, again), fp64, error)


def _compile_fn(backend: Backend, device: str) -> Callable | None:
    if backend.compile is None:
        return None
    return lambda module: backend.compile(module, device)


def _prepare(backend: Backend, workload: Workload, mode: Mode, device: str, deterministic: bool = False):
    return PreparedBackend(workload, mode, device, _compile_fn(backend, device), cuda_graphs=backend.cuda_graphs,
                           mark_step=backend.mark_step, deterministic=deterministic)


def _torchfuse_graphs(before: set[int]) -> list:
    from torchfuse.backend import RECENT

    return [g for g in RECENT if id(g) not in before]


def _record_torchfuse(result: Result, graphs: list) -> None:
    result.graphs = len(graphs)
    result.fusion_groups = sum(len(g.segmentation.groups) for g in graphs)
    result.aten_calls = sum(len(g.segmentation.calls) for g in graphs)
    for key in ("kernels_compiled", "kernels_cached", "fallbacks"):
        setattr(result, key, sum(int(g.stats.get(key, 0)) for g in graphs))


def _free(device: str) -> None:
    """Return freed device memory to the allocator's pool before the next backend."""
    if device == "cuda":
        gc.collect()
        torch.cuda.empty_cache()


class CaseRun:
    """The state of one (case, mode) while :func:`run_case` measures it."""

    def __init__(self, case: Case, mode: Mode, settings: Settings, budget: Budget, run_id: str, device_name: str,
                 copy_gbps: float | None, progress: Callable[[str], None]):
        self.case, self.mode, self.settings, self.budget = case, mode, settings, budget
        self.device = settings.device
        self.copy_gbps = copy_gbps
        self.progress = progress
        channels_last = settings.channels_last and case.vision
        common = dict(run_id=run_id, suite=case.suite, model=case.model, case=case.id, size=case.label,
                      mode=mode.name, precision=mode.precision, training=mode.training,
                      channels_last=channels_last, device=self.device, device_name=device_name)
        self.results = {name: Result(backend=name, **common) for name in settings.backends}
        self.context = BuildContext(self.device, mode, settings.quick, channels_last)
        self.prepared: dict[str, PreparedBackend] = {}
        self.warm_ms: dict[str, float] = {}

    def skip_all(self, reason: str) -> list[Result]:
        """Skip every backend not already skipped for its own reason."""
        for r in self.results.values():
            if r.status != SKIPPED:
                r.status, r.error = SKIPPED, reason
        return list(self.results.values())

    def fail_all(self, stage: str, error: str) -> list[Result]:
        """Fail every backend not skipped (the case itself failed, e.g. to build)."""
        for r in self.results.values():
            if r.status != SKIPPED:
                r.fail(stage, error)
        return list(self.results.values())

    # -- stages
    def prepare_backend(self, backend: Backend, workload: Workload, references: References | None,
                        stochastic: bool) -> None:
        r = self.results[backend.name]
        stage = "prepare"
        before_graphs = {id(g) for g in _torchfuse_graphs(set())} if backend.name.startswith("torchfuse") else None
        messages: list[str] = []
        prepared = None
        try:
            with recorded_warnings(messages):
                baseline = timing.allocated_bytes(self.device)
                prepared = _prepare(backend, workload, self.mode, self.device)
                stage = "first call"
                with PhaseWindow() as phases:  # compile time by phase (runtime.phases)
                    r.first_call_s, result = timing.time_first_call(prepared.forward_backward, self.device)
                r.first_call_phases = phases.seconds
                if references is not None and backend.name != BASELINE and not stochastic:
                    stage = "accuracy"
                    r.accuracy, r.accuracy_detail = compare(references, result, self.mode.accuracy_tolerance)
                del result
                stage = "warm-up"
                timing.reset_peak(self.device)
                warm = timing.time_steps(prepared.step, self.settings.warmup, self.device)
                peak = timing.peak_above(baseline, self.device)
                if peak is not None and peak < 0:
                    # memory allocated before this backend (another backend's, garbage) was
                    # freed while it ran: its own peak cannot be told apart, so none is reported
                    r.info["peak_memory"] = (f"not measured: {-peak:.0f} MiB more was freed than this backend "
                                             "allocated at its peak")
                    peak = None
                r.peak_memory_mib = peak
            self.warm_ms[backend.name] = timing.median(warm[len(warm) // 2:]) or 0.0
            self.prepared[backend.name] = prepared
        except Exception as e:  # noqa: BLE001 - a failing backend is a result
            r.fail(stage, describe(e))
        finally:
            r.warnings = [m for m in messages if "torchfuse" in m]
            if before_graphs is not None:
                _record_torchfuse(r, _torchfuse_graphs(before_graphs))
        if r.status != OK:  # release its memory (out of memory must not sink the next backend)
            prepared = None
            _free(self.device)

    def time_all(self) -> None:
        steps = {name: p.step for name, p in self.prepared.items()}
        s = self.settings
        counts = {name: timing.steps_per_round(self.warm_ms[name], s.round_seconds, s.max_steps_per_round)
                  for name in steps}

        def on_error(name: str, error: BaseException) -> None:
            self.results[name].fail("timing", describe(error))
            self.prepared.pop(name, None)

        times = timing.time_interleaved(steps, counts, s.rounds, self.device, on_error)
        for name, values in times.items():
            r = self.results[name]
            if r.status == OK and values:
                r.median_ms, r.min_ms, r.max_ms = timing.median(values), min(values), max(values)
                r.steps_timed = len(values)

    def profile_steps(self) -> None:
        """Kernels, launches and device time of one step per backend; GPU idle time is the
        median step time minus the device time."""
        if self.device != "cuda":
            return
        for name, prepared in list(self.prepared.items()):
            r = self.results[name]
            try:
                r.kernels_per_step, r.launches_per_step, r.device_ms = timing.profile_step(prepared.step, self.device)
            except Exception as e:  # noqa: BLE001 - the profiler failing is not the backend failing
                r.warnings.append(f"profiler: {describe(e)}")
                continue
            if r.median_ms is not None and r.device_ms is not None:
                r.idle_ms = max(0.0, r.median_ms - r.device_ms)

    def check_accuracy_separately(self, backends: list[Backend], workload: Workload, references: References) -> None:
        """Accuracy on dropout-free copies, compiled anew (models with active dropout). A copy
        that raises fails the check; the backend's timing of the real model stands."""
        for backend in backends:
            r = self.results[backend.name]
            if backend.name == BASELINE or r.status != OK:
                continue
            if self.budget.exceeded():
                r.accuracy, r.accuracy_detail = NOT_CHECKED, "time budget reached"
                continue
            self.progress(f"{self.case.id} {self.mode.name}: accuracy of {backend.name}")
            try:
                with recorded_warnings([]):
                    result = _prepare(backend, workload, self.mode, self.device, deterministic=True).forward_backward()
                r.accuracy, r.accuracy_detail = compare(references, result, self.mode.accuracy_tolerance)
            except Exception as e:  # noqa: BLE001 - its timing stands; the check failed
                r.accuracy, r.accuracy_detail = FAIL, f"the dropout-free copy raised {describe(e)}"
            _free(self.device)

    def finish(self, workload: Workload) -> None:
        eager = self.results.get(BASELINE)
        compiled = self.results.get(COMPILE_BASELINE)
        eager_ms = eager.median_ms if eager and eager.status == OK else None
        compile_ms = compiled.median_ms if compiled and compiled.status == OK else None
        for r in self.results.values():
            if r.status != OK or not r.median_ms:
                continue
            r.speedup_vs_eager = eager_ms / r.median_ms if eager_ms else None
            r.speedup_vs_torch_compile = compile_ms / r.median_ms if compile_ms else None
            if workload.bytes_moved:
                r.bandwidth_gbps = workload.bytes_moved / (r.median_ms * 1e-3) / 1e9
                if self.copy_gbps:
                    r.copy_fraction = r.bandwidth_gbps / self.copy_gbps


def run_case(case: Case, mode_name: str, settings: Settings, budget: Budget, run_id: str = "run",
             device_name: str = "", copy_gbps: float | None = None,
             progress: Callable[[str], None] = lambda text: None) -> list[Result]:
    """Measure every backend of ``settings`` on ``case`` in ``mode_name``; never raises for a
    failing model or backend (see the module docstring)."""
    mode = MODES[mode_name]
    run = CaseRun(case, mode, settings, budget, run_id, device_name, copy_gbps, progress)
    backends = []
    for name in settings.backends:
        backend = backend_named(name)
        reason = backend.skip_reason(settings.device, mode.training)
        if reason:
            run.results[name].status, run.results[name].error = SKIPPED, reason
        else:
            backends.append(backend)
    if case.requires and importlib.util.find_spec(case.requires) is None:
        return run.skip_all(f"{case.requires} is not installed")
    progress(f"{case.id} {mode.name}: building")
    try:
        workload = case.build(run.context)
    except Unavailable as e:
        return run.skip_all(str(e))
    except Exception as e:  # noqa: BLE001
        return run.fail_all("build", describe(e))
    for r in run.results.values():
        r.info, r.bytes_moved = dict(workload.info), workload.bytes_moved
    references = None
    if settings.accuracy:
        progress(f"{case.id} {mode.name}: eager references")
        try:
            references = compute_references(workload, mode, settings.device)
        except Exception as e:  # noqa: BLE001 - eager itself fails; it is recorded below
            for r in run.results.values():
                r.accuracy, r.accuracy_detail = NOT_CHECKED, f"eager reference failed: {describe(e)}"
        _free(settings.device)
    stochastic = has_active_dropout(workload.model)
    for backend in backends:
        if budget.exceeded():
            run.results[backend.name].status = SKIPPED
            run.results[backend.name].error = "time budget reached"
            continue
        progress(f"{case.id} {mode.name}: {backend.name}")
        run.prepare_backend(backend, workload, references, stochastic)
    if references is not None and BASELINE in run.results:
        run.results[BASELINE].accuracy = REFERENCE if references.eager_deterministic else EAGER_DIFFERS
    progress(f"{case.id} {mode.name}: timing")
    run.time_all()
    run.profile_steps()
    run.finish(workload)
    run.prepared.clear()
    _free(settings.device)
    if references is not None and stochastic:
        run.check_accuracy_separately(backends, workload, references)
    if settings.cold_start:
        from .coldstart import measure_first_calls

        measure_first_calls(run, backends, budget)
    for r in run.results.values():
        if r.status == OK and r.accuracy is None:
            r.accuracy = NOT_CHECKED
    return list(run.results.values())


def run_all(items: list[tuple[Case, str]], settings: Settings, meta: dict, out_dir: Path,
            copy_gbps: float | None = None, log: Callable[[str], None] = print) -> list[Result]:
    """Run the (case, mode) items in order under the time budget; save the run file after each.

    No case is started once the time left is shorter than the longest case so far, so a run
    with ``--time-budget`` ends close to it instead of being cut off in the middle of a case.

    A ``KeyboardInterrupt`` (or SIGTERM turned into one by the command line) stops the run;
    what was measured is kept and the items not run are listed in ``meta["not_run"]``.
    """
    import torch._dynamo

    import_modules(settings.backends)
    budget = Budget(settings.time_budget)
    results: list[Result] = []
    bar = _progress_bar(len(items), settings.progress)
    done = 0
    longest = 0.0
    try:
        for case, mode_name in items:
            left = budget.remaining()
            if left is not None and (left <= 0 or left < longest):
                break  # the next case would likely overrun the budget
            started = time.monotonic()
            bar.set_description_str(f"{case.id} {mode_name}")
            results += run_case(case, mode_name, settings, budget, meta["run_id"], meta["device_name"], copy_gbps,
                                progress=lambda text: bar.set_postfix_str(text.split(": ")[-1], refresh=True))
            done += 1
            longest = max(longest, time.monotonic() - started)
            torch._dynamo.reset()
            write_run(out_dir, meta, results)
            bar.update(1)
    except KeyboardInterrupt:
        meta["interrupted"] = True
        log("interrupted: keeping the results measured so far")
    finally:
        bar.close()
        meta["not_run"] = [case_label(case.id, mode_name, settings.channels_last and case.vision)
                           for case, mode_name in items[done:]]
        meta["finished"] = time.strftime("%Y-%m-%dT%H:%M:%S")
        write_run(out_dir, meta, results)
    return results


class _NoBar:
    def set_description_str(self, *a, **k): pass
    def set_postfix_str(self, *a, **k): pass
    def update(self, *a): pass
    def close(self): pass


def _progress_bar(total: int, enabled: bool):
    if not enabled:
        return _NoBar()
    try:
        from tqdm.auto import tqdm
    except ImportError:
        return _NoBar()
    return tqdm(total=total, unit="case", dynamic_ncols=True)
