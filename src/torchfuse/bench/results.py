"""Results: the record of one backend on one case, and how runs are stored and merged.

Every run writes ``<out>/runs/<run id>.json`` (``{"run": metadata, "results": [...]}``),
rewritten after each case, so a run that is killed keeps what it measured. The reports of a
results directory (``results.json``, ``results.csv``, charts, ``summary.md``) are generated
from all the run files in it; :func:`combine` keeps, for each (case, mode, layout), the
results of the newest run that measured it, so a sequence of short runs (shards, re-runs
of failures) adds up to one set of results. Speedups are computed within one run, where the
backends were timed interleaved on the same inputs, never across runs.
"""
from __future__ import annotations

import csv
import dataclasses
import json
import os
import tempfile
from pathlib import Path
from typing import Any

OK, FAILED, SKIPPED = "ok", "failed", "skipped"


@dataclasses.dataclass
class Result:
    """One backend on one case in one mode. Times in milliseconds (steps) or seconds (first
    calls); memory in MiB (2**20 bytes); bandwidth in GB/s (1e9 bytes per second).

    Attributes:
        status: :data:`OK`, :data:`FAILED` (``error`` says why, ``stage`` where) or
            :data:`SKIPPED` (``error`` gives the reason).
        median_ms: median step time over ``steps_timed`` steps; ``min_ms``/``max_ms`` the
            extremes.
        speedup_vs_eager, speedup_vs_torch_compile: that backend's median over this one's,
            from the same run.
        first_call_s: wall time of the first forward (and backward), compilation included,
            in the benchmark process (caches as found; the compilers' main modules imported
            beforehand). ``first_call_cold_s``: the same in a
            fresh process with empty torchfuse, Triton and Inductor caches;
            ``first_call_warm_s``: again with the caches that run filled (``--cold-start``).
            ``first_call_phases`` (and ``_cold_``, ``_warm_``): those seconds per compile phase
            (:class:`torchfuse.runtime.phases.PhaseWindow`); ``first_call_cold_triton`` and
            ``_warm_triton``: torchfuse's Triton compile seconds per stage, summed over its
            compile threads (:class:`torchfuse.bench.triton_stages.TritonStageClock`).
        peak_memory_mib: peak allocation over steady-state steps above what was allocated
            before this backend's copy of the model was made (its weights, gradients,
            optimizer state, CUDA graph pools, activations); CUDA only. ``None`` (with a line in
            ``info["peak_memory"]``) when more memory allocated before it was freed while it
            ran than it allocated itself (seen with Inductor's CUDA graphs on an H200), since a
            negative number would not be this backend's peak.
        kernels_per_step: device kernels of one step; ``launches_per_step``: host-side
            launch calls (``torch.profiler``); CUDA only.
        device_ms: milliseconds of one profiled step during which the device ran work (the
            union of its kernels', copies' and sets' intervals); ``idle_ms``: ``median_ms``
            minus that, the time the GPU waited for the host. CUDA only.
        accuracy: ``pass``, ``fail``, ``eager-nondeterministic``, ``reference`` (eager
            itself) or ``not-checked``; ``accuracy_detail``: the errors measured.
        bytes_moved, bandwidth_gbps, copy_fraction: micro suite only; the fraction is of the
            device-copy bandwidth measured in the same run.
        graphs, fusion_groups, aten_calls, kernels_compiled, kernels_cached, fallbacks:
            torchfuse's compiled graphs and their statistics.
        warnings: distinct torchfuse warnings raised while compiling and running.
        info: facts about the workload (parameter count, shapes).
    """

    run_id: str
    suite: str
    model: str
    case: str
    size: str
    mode: str
    precision: str
    training: bool
    channels_last: bool
    device: str
    device_name: str
    backend: str
    status: str = OK
    error: str | None = None
    stage: str | None = None
    median_ms: float | None = None
    min_ms: float | None = None
    max_ms: float | None = None
    steps_timed: int = 0
    speedup_vs_eager: float | None = None
    speedup_vs_torch_compile: float | None = None
    first_call_s: float | None = None
    first_call_cold_s: float | None = None
    first_call_warm_s: float | None = None
    first_call_phases: dict | None = None
    first_call_cold_phases: dict | None = None
    first_call_warm_phases: dict | None = None
    first_call_cold_triton: dict | None = None
    first_call_warm_triton: dict | None = None
    peak_memory_mib: float | None = None
    kernels_per_step: int | None = None
    launches_per_step: int | None = None
    device_ms: float | None = None
    idle_ms: float | None = None
    accuracy: str | None = None
    accuracy_detail: str | None = None
    bytes_moved: int | None = None
    bandwidth_gbps: float | None = None
    copy_fraction: float | None = None
    graphs: int | None = None
    fusion_groups: int | None = None
    aten_calls: int | None = None
    kernels_compiled: int | None = None
    kernels_cached: int | None = None
    fallbacks: int | None = None
    warnings: list = dataclasses.field(default_factory=list)
    info: dict = dataclasses.field(default_factory=dict)

    def fail(self, stage: str, error: str) -> None:
        """Mark failed (keeping the first failure when several stages fail)."""
        if self.status != FAILED:
            self.status, self.stage, self.error = FAILED, stage, error

    @property
    def group_key(self) -> tuple:
        """Results with this key were measured together (one case, mode and layout)."""
        return (self.case, self.mode, self.channels_last, self.device_name)


FIELDS = [f.name for f in dataclasses.fields(Result)]


def result_from_dict(data: dict) -> Result:
    return Result(**{k: v for k, v in data.items() if k in FIELDS})


def _write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def write_run(out_dir: Path, meta: dict, results: list[Result]) -> Path:
    """Write (or rewrite) ``<out_dir>/runs/<run id>.json``; returns its path."""
    path = Path(out_dir) / "runs" / f"{meta['run_id']}.json"
    payload = {"run": meta, "results": [dataclasses.asdict(r) for r in results]}
    _write_atomic(path, json.dumps(payload, indent=1, default=str))
    return path


def load_runs(paths: list[Path]) -> list[tuple[dict, list[Result]]]:
    """Read run files: each path is a run file, a results directory (its ``runs/*.json``) or a
    directory of run files.

    Raises:
        FileNotFoundError: a path holds no run file.
    """
    files: list[Path] = []
    for p in map(Path, paths):
        if p.is_file():
            files.append(p)
            continue
        found = sorted((p / "runs").glob("*.json")) or sorted(p.glob("*.json"))
        found = [f for f in found if f.name != "results.json"]
        if not found:
            raise FileNotFoundError(f"no run files under {p}")
        files += found
    runs = []
    for f in files:
        data = json.loads(f.read_text())
        runs.append((data["run"], [result_from_dict(r) for r in data["results"]]))
    return runs


def combine(runs: list[tuple[dict, list[Result]]]) -> tuple[list[dict], list[Result]]:
    """All runs' metadata (oldest first) and their results, keeping for each group (case,
    mode, layout, device) only the newest run's results."""
    runs = sorted(runs, key=lambda run: (run[0].get("started", ""), run[0]["run_id"]))
    newest: dict[tuple, str] = {}
    for meta, results in runs:
        for r in results:
            newest[r.group_key] = meta["run_id"]
    kept = [r for meta, results in runs for r in results if newest[r.group_key] == meta["run_id"]]
    return [meta for meta, _ in runs], kept


def write_tables(out_dir: Path, metas: list[dict], results: list[Result]) -> tuple[Path, Path]:
    """``results.json`` (runs and results) and ``results.csv`` (one row per result, with the
    command and versions of its run) in ``out_dir``."""
    out_dir = Path(out_dir)
    json_path = out_dir / "results.json"
    _write_atomic(json_path, json.dumps({"runs": metas, "results": [dataclasses.asdict(r) for r in results]},
                                        indent=1, default=str))
    by_id = {m["run_id"]: m for m in metas}
    run_columns = ["command", "started", "torch", "triton", "torchfuse", "cuda"]
    csv_path = out_dir / "results.csv"
    out_dir.mkdir(parents=True, exist_ok=True)
    with open(csv_path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=FIELDS + run_columns)
        writer.writeheader()
        for r in results:
            row: dict[str, Any] = dataclasses.asdict(r)
            row["warnings"] = " | ".join(r.warnings)
            row["info"] = json.dumps(r.info, default=str)
            meta = by_id.get(r.run_id, {})
            versions = meta.get("versions", {})
            row.update(command=meta.get("command"), started=meta.get("started"), torch=versions.get("torch"),
                       triton=versions.get("triton"), torchfuse=versions.get("torchfuse"), cuda=versions.get("cuda"))
            writer.writerow(row)
    return json_path, csv_path


def case_label(case_id: str, mode: str, channels_last: bool) -> str:
    """How a run lists a case it did not reach: ``suite/model/size mode[ channels-last]``."""
    return f"{case_id} {mode}" + (" channels-last" if channels_last else "")
