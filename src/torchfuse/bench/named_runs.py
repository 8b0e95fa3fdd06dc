"""Named GPU runs: ``benchmarks/runs.toml`` describes them, ``torchfuse bench run-named NAME``
runs one.

A named run is a short list of steps that fits in one 10-minute command on a GPU machine
(:data:`RUN_LIMIT_S` in all, start-up included). Each step is one command with a time limit
(``limit_s``, after which it gets SIGTERM, which the harness turns into a clean stop that keeps
what it measured, then SIGKILL) and is one of:

* ``bench = [ARGS...]``: ``python -m torchfuse.bench ARGS`` (a subcommand of
  :data:`torchfuse.bench.cli.SUBCOMMANDS`, or the suites); the runner adds
  ``--rows OUT/rows.jsonl --run-name NAME``, so every row it measures lands in one file;
* ``pytest = [ARGS...]``: ``python -m pytest ARGS`` (the test suite on CUDA tensors);
* ``conformance = [ARGS...]``: ``python -m torchfuse.cli conformance ARGS``; with
  ``shards = [FIRST, LAST]`` one process per shard ``FIRST..LAST`` side by side, ``{shard}``
  in the arguments replaced by its number;
* ``script = [PATH, ARGS...]``: ``python PATH ARGS`` (a script of the repository).

``{out}`` in any argument is the run's output directory. A step whose command takes
``--time-budget`` must give one at least :data:`STARTUP_S` seconds under its ``limit_s``
(:func:`check_run`). Each step's output goes to ``OUT/<step>.log``; at the end the runner writes
``OUT/run.json`` (steps, exit statuses, seconds, the end of each log) and, from
``OUT/rows.jsonl``, the charts and tables of :mod:`torchfuse.bench.tables` into
``OUT/charts/``. ``torchfuse bench rows add OUT/rows.jsonl`` then appends the rows to the
repository's rows file.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

#: the named runs, relative to the repository root
RUNS_FILE = Path("benchmarks") / "runs.toml"
#: seconds one named run may take in all: a 10-minute command, less room for starting Python
RUN_LIMIT_S = 570
#: seconds a step's ``--time-budget`` must stay under its ``limit_s`` (imports, model building,
#: the case running when the budget ends)
STARTUP_S = 30
#: subcommands (``run``: the suites) and commands that take ``--time-budget``
BUDGETED = {"run", "norms", "sweep-launch", "conformance"}
KINDS = ("bench", "pytest", "conformance", "script")


@dataclasses.dataclass(frozen=True)
class Step:
    name: str
    kind: str
    args: tuple[str, ...]
    limit_s: float
    shards: tuple[int, int] | None = None

    @property
    def subcommand(self) -> str:
        """The ``torchfuse bench`` subcommand of a bench step (``run`` for the suites)."""
        return self.args[0] if self.args and not self.args[0].startswith("-") else "run"


@dataclasses.dataclass(frozen=True)
class NamedRun:
    name: str
    measures: str
    steps: tuple[Step, ...]

    @property
    def limit_s(self) -> float:
        return sum(s.limit_s for s in self.steps)


def _toml(path: Path) -> dict:
    try:
        import tomllib
    except ImportError:  # Python 3.10
        try:
            import tomli as tomllib
        except ImportError:
            raise RuntimeError("reading benchmarks/runs.toml needs Python 3.11 (tomllib) or the tomli package") from None
    with open(path, "rb") as f:
        return tomllib.load(f)


def load_runs(path: Path = RUNS_FILE) -> tuple[dict[str, NamedRun], dict[str, dict]]:
    """The named runs and the tables of ``path``.

    Raises:
        ValueError: a run or step is malformed (no or several commands, no ``limit_s``).
    """
    data = _toml(Path(path))
    runs = {}
    for name, spec in data.get("runs", {}).items():
        steps = []
        for i, s in enumerate(spec.get("steps", [])):
            kinds = [k for k in KINDS if k in s]
            if len(kinds) != 1:
                raise ValueError(f"run {name!r}, step {i + 1}: needs exactly one of {', '.join(KINDS)}")
            if not isinstance(s.get("limit_s"), (int, float)) or s["limit_s"] <= 0:
                raise ValueError(f"run {name!r}, step {i + 1}: needs a positive limit_s")
            shards = tuple(s["shards"]) if "shards" in s else None
            steps.append(Step(s.get("name", f"{kinds[0]}-{i + 1}"), kinds[0], tuple(map(str, s[kinds[0]])),
                              float(s["limit_s"]), shards))
        if not steps:
            raise ValueError(f"run {name!r} has no steps")
        runs[name] = NamedRun(name, spec.get("measures", ""), tuple(steps))
    return runs, data.get("tables", {})


def _budget(args: tuple[str, ...]) -> float | None:
    for i, a in enumerate(args):
        if a == "--time-budget" and i + 1 < len(args):
            return float(args[i + 1])
        if a.startswith("--time-budget="):
            return float(a.split("=", 1)[1])
    return None


def check_run(run: NamedRun, root: Path = Path(".")) -> list[str]:
    """What is wrong with ``run`` (empty when nothing): a total limit over :data:`RUN_LIMIT_S`,
    an unknown bench subcommand, a suite selection that selects nothing, a missing or too
    large ``--time-budget``, a script or test path that does not exist."""
    from .cli import SUBCOMMANDS

    problems = []
    if run.limit_s > RUN_LIMIT_S:
        problems.append(f"{run.name}: its steps' limits add up to {run.limit_s:.0f} s, over {RUN_LIMIT_S} s")
    names = [s.name for s in run.steps]
    if len(set(names)) != len(names):
        problems.append(f"{run.name}: step names repeat ({names})")
    for step in run.steps:
        where = f"{run.name}/{step.name}"
        if step.kind == "bench" and step.subcommand not in SUBCOMMANDS:
            problems.append(f"{where}: no bench subcommand {step.subcommand!r}")
            continue
        budgeted = step.kind == "conformance" or (step.kind == "bench" and step.subcommand in BUDGETED)
        budget = _budget(step.args)
        if budgeted and budget is None:
            problems.append(f"{where}: no --time-budget")
        elif budget is not None and budget + STARTUP_S > step.limit_s:
            problems.append(f"{where}: --time-budget {budget:.0f} leaves under {STARTUP_S} s of its limit {step.limit_s:.0f}")
        if step.kind == "conformance" and (step.shards is None) != ("{shard}" not in " ".join(step.args)):
            problems.append(f"{where}: shards and a {{shard}} argument go together")
        if step.kind == "script" and not (root / step.args[0]).is_file():
            problems.append(f"{where}: no script {step.args[0]}")
        if step.kind == "pytest":
            paths = [a for a in step.args if not a.startswith("-") and a.split("::")[0].startswith("tests")]
            problems += [f"{where}: no {p}" for p in paths if not (root / p.split("::")[0]).exists()]
        if step.kind == "bench" and step.subcommand == "run":
            problems += [f"{where}: {p}" for p in _check_selection(step.args)]
    return problems


def _check_selection(args: tuple[str, ...]) -> list[str]:
    """A suites step's options parse, and each of its ``--only`` patterns selects a case on a GPU."""
    from .cli import plan, run_parser
    from .suites import matches

    argv = [a for a in args if a != "run"]
    try:
        parsed = run_parser().parse_args([a.replace("{out}", "OUT") for a in argv])
    except SystemExit:
        return [f"its options do not parse: {' '.join(argv)}"]
    items = plan(parsed, "cuda")
    if not items:
        return ["its selection is empty on a GPU"]
    patterns = [p.strip() for group in (parsed.only or []) for p in group.split(",") if p.strip()]
    return [f"--only {p!r} selects nothing" for p in patterns if not any(matches(case, [p]) for case, _ in items)]


def commands(step: Step, run: str, out: Path) -> list[list[str]]:
    """The command lines of ``step`` (several for a sharded conformance step)."""
    args = [a.replace("{out}", str(out)) for a in step.args]
    py = sys.executable
    if step.kind == "bench":
        extra = [] if "--rows" in args else ["--rows", str(out / "rows.jsonl")]
        extra += [] if "--run-name" in args else ["--run-name", run]
        return [[py, "-m", "torchfuse.bench", *args, *extra]]
    if step.kind == "pytest":
        return [[py, "-m", "pytest", *args]]
    if step.kind == "script":
        return [[py, *args]]
    base = [py, "-m", "torchfuse.cli", "conformance"]
    if step.shards is None:
        return [base + args]
    first, last = step.shards
    return [base + [a.replace("{shard}", str(i)) for a in args] for i in range(first, last + 1)]


def _stop(procs: list[subprocess.Popen]) -> None:
    """SIGTERM each process group still running, then SIGKILL what is left after 20 s."""
    for sig, wait in ((signal.SIGTERM, 20.0), (signal.SIGKILL, 5.0)):
        alive = [p for p in procs if p.poll() is None]
        for p in alive:
            try:
                os.killpg(p.pid, sig)
            except ProcessLookupError:
                pass
        end = time.monotonic() + wait
        for p in alive:
            try:
                p.wait(max(0.0, end - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass


def _tail(path: Path, lines: int = 15) -> list[str]:
    try:
        return path.read_text(errors="replace").splitlines()[-lines:]
    except OSError:
        return []


def run_step(step: Step, run: str, out: Path, seconds: float) -> dict:
    """Run ``step`` for at most ``seconds``; its output (all processes') in ``out/<step>.log``."""
    cmds = commands(step, run, out)
    log_path = out / f"{step.name}.log"
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    started = time.monotonic()
    with open(log_path, "w") as log:
        log.write("".join(f"$ {shlex.join(c)}\n" for c in cmds))
        log.flush()
        procs = [subprocess.Popen(c, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
                 for c in cmds]
        timed_out = False
        try:
            for p in procs:
                p.wait(max(0.0, started + seconds - time.monotonic()))
        except subprocess.TimeoutExpired:
            timed_out = True
        finally:
            _stop(procs)
    codes = [p.returncode for p in procs]
    return {"step": step.name, "commands": [shlex.join(c) for c in cmds], "exit": codes, "timed_out": timed_out,
            "seconds": round(time.monotonic() - started, 1), "log": log_path.name, "tail": _tail(log_path)}


def execute(run: NamedRun, out: Path) -> int:
    """Run ``run``'s steps into ``out``; returns 0 when every step exited with 0."""
    out.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + run.limit_s
    report = {"run": run.name, "measures": run.measures, "started": time.strftime("%Y-%m-%dT%H:%M:%S"), "steps": []}
    for step in run.steps:
        left = deadline - time.monotonic()
        if left <= 0:
            report["steps"].append({"step": step.name, "exit": None, "not_run": "the run's time limit was reached"})
            continue
        print(f"[{run.name}] {step.name}: up to {min(step.limit_s, left):.0f} s", flush=True)
        result = run_step(step, run.name, out, min(step.limit_s, left))
        report["steps"].append(result)
        print(f"[{run.name}] {step.name}: exit {result['exit']} after {result['seconds']} s"
              + (" (time limit)" if result["timed_out"] else "") + "\n    " + "\n    ".join(result["tail"][-5:]),
              flush=True)
    rows = out / "rows.jsonl"
    if rows.exists():
        from .rows import load_rows
        from .tables import write_current

        write_current(load_rows(rows), out / "charts")
        report["charts"] = "charts/index.md"
    report["finished"] = time.strftime("%Y-%m-%dT%H:%M:%S")
    (out / "run.json").write_text(json.dumps(report, indent=1))
    ok = all(s.get("exit") is not None and all(c == 0 for c in s["exit"]) for s in report["steps"])
    return 0 if ok else 1


def main(argv: list[str] | None = None) -> int:
    """``torchfuse bench run-named NAME --out DIR`` | ``run-named --list`` | ``run-named NAME --dry-run``."""
    p = argparse.ArgumentParser(prog="torchfuse bench run-named", description="Run a named GPU run of runs.toml.")
    p.add_argument("name", nargs="?")
    p.add_argument("--out", type=Path, default=None, help="output directory (required to run)")
    p.add_argument("--runs", type=Path, default=RUNS_FILE, help=f"the runs file (default {RUNS_FILE})")
    p.add_argument("--list", action="store_true", help="list the named runs and tables")
    p.add_argument("--dry-run", action="store_true", help="print the commands, run nothing")
    args = p.parse_args(argv)
    try:
        runs, tables = load_runs(args.runs)
    except (OSError, ValueError, RuntimeError) as e:
        print(f"torchfuse bench run-named: {e}", file=sys.stderr)
        return 2
    if args.list or not args.name:
        for run in runs.values():
            print(f"{run.name:24s} {run.limit_s:4.0f} s  {run.measures}")
        for name, table in tables.items():
            print(f"\ntable {name}: {table.get('description', '')}\n  runs: {', '.join(table.get('runs', []))}")
        return 0 if args.list else 2
    if args.name not in runs:
        print(f"torchfuse bench run-named: no run {args.name!r}; known: {', '.join(runs)}", file=sys.stderr)
        return 2
    run = runs[args.name]
    problems = check_run(run, args.runs.resolve().parent.parent)
    if problems:
        print("torchfuse bench run-named: " + "; ".join(problems), file=sys.stderr)
        return 2
    out = args.out or Path("OUT")
    if args.dry_run:
        for step in run.steps:
            print(f"# {step.name} (limit {step.limit_s:.0f} s)")
            for c in commands(step, run.name, out):
                print(shlex.join(c))
        return 0
    if args.out is None:
        p.error("--out DIR is required to run (on a GPU machine: --out $OUT)")
    return execute(run, args.out)
