"""The command line: ``torchfuse bench`` (also ``python -m torchfuse.bench``).

::

    torchfuse bench [run] [--suite S,...] [--mode M,...] [--backends B,...] [--only PATTERN,...]
                    [--shard I/N] [--time-budget SECONDS] [--quick] [--channels-last]
                    [--cold-start] [--no-accuracy] [--tf32] [--device cuda|cpu] [--out DIR]
    torchfuse bench list  [same selection options]     what a run would measure
    torchfuse bench merge DIR_OR_RUN_FILE... [--out DIR]   combine runs into one report
    torchfuse bench SUBCOMMAND ...                         see :data:`SUBCOMMANDS`
"""
from __future__ import annotations

import argparse
import contextlib
import datetime
import os
import shutil
import signal
import sys
from pathlib import Path

from ..cli import parse_shard as _shard
from .backends import BACKENDS, parse_backends, running_backends
from .modes import DEFAULT_MODES, MODES, parse_modes
from .rows import add_row_arguments
from .suites import SUITES, select, suite_cases

def _suites(text: str) -> tuple[str, ...]:
    names = tuple(SUITES) if text == "all" else tuple(s.strip() for s in text.split(",") if s.strip())
    unknown = [s for s in names if s not in SUITES]
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown suite(s) {unknown}; known: {list(SUITES)} or 'all'")
    return names


def _modes(text: str) -> tuple[str, ...]:
    try:
        return parse_modes(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _backends(text: str) -> tuple[str, ...]:
    try:
        return parse_backends(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def run_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="torchfuse bench",
        description="Benchmark torchfuse against eager and torch.compile: every backend in one process, "
                    "on the same inputs, timed in interleaved rounds. Subcommands: 'list' (what would run), "
                    "'merge DIR...' (combine runs into one report).")
    sel = p.add_argument_group("what to run")
    sel.add_argument("--suite", type=_suites, default=tuple(SUITES), help=f"comma-separated: {', '.join(SUITES)} or all")
    sel.add_argument("--mode", type=_modes, default=None,
                     help=f"comma-separated modes ({', '.join(MODES)}); default per suite")
    sel.add_argument("--backends", type=_backends, default=parse_backends(None),
                     help=f"comma-separated ({', '.join(BACKENDS)}); eager is always included; a torchfuse "
                          "backend followed by [SETTING;SETTING...] is a variant of it, e.g. "
                          "'torchfuse[inner_outer=False]' or 'torchfuse[persistent.tile_elements=4096;inner_outer=False]'")
    sel.add_argument("--only", action="append", default=None, metavar="PATTERN[,PATTERN]",
                     help="run cases whose model name or id (suite/model/size) matches a shell pattern")
    sel.add_argument("--shard", type=_shard, default=None, metavar="I/N", help="run the I-th of N shards")
    sel.add_argument("--quick", action="store_true", help="tiny configurations and few iterations")
    sel.add_argument("--channels-last", action="store_true", help="vision models and images in channels-last")
    sel.add_argument("--device", choices=("cuda", "cpu"), default=None, help="default: cuda when available")
    how = p.add_argument_group("how to measure")
    how.add_argument("--time-budget", type=float, default=None, metavar="SECONDS",
                     help="start no case (or backend) after this many seconds; the rest is listed as not run")
    how.add_argument("--warmup", type=int, default=None,
                     help="untimed steps per backend after the first call (default 3; 1 with --quick on a CPU)")
    how.add_argument("--rounds", type=int, default=None, help="interleaved timing rounds (default 5, quick 2)")
    how.add_argument("--round-seconds", type=float, default=None,
                     help="target seconds per backend per round (default 0.2, quick 0)")
    how.add_argument("--cold-start", action="store_true",
                     help="also time first calls in fresh processes with empty, then warm caches")
    how.add_argument("--no-accuracy", dest="accuracy", action="store_false", help="skip the accuracy checks")
    how.add_argument("--tf32", action="store_true", help="allow TF32 for float32 matrix products and convolutions")
    out = p.add_argument_group("output")
    out.add_argument("--out", type=Path, default=None, help="results directory (default benchmarks/results/<date>-<gpu>)")
    out.add_argument("--no-progress", dest="progress", action="store_false", help="no progress bar")
    add_row_arguments(p)
    return p


def resolve_device(requested: str | None) -> str:
    import torch

    if requested == "cuda" and not torch.cuda.is_available():
        raise SystemExit("torchfuse bench: --device cuda but no CUDA device is available")
    return requested or ("cuda" if torch.cuda.is_available() else "cpu")


def plan(args: argparse.Namespace, device: str) -> list:
    """The selected ``(case, mode name)`` items, in suite, case, mode order."""
    items = []
    for suite in args.suite:
        modes = args.mode or DEFAULT_MODES[device][suite]
        for case in suite_cases(suite, args.quick):
            items += [(case, m) for m in modes if m in case.modes]
    only = [p.strip() for group in (args.only or []) for p in group.split(",") if p.strip()] or None
    return select(items, only, args.shard)


def settings_from(args: argparse.Namespace, device: str):
    from .runner import Settings

    quick = args.quick
    return Settings(
        device=device, backends=args.backends, quick=quick, channels_last=args.channels_last,
        # CUDA graphs (reduce-overhead, torchfuse's) are recorded in the second or third call
        warmup=args.warmup if args.warmup is not None else (1 if quick and device == "cpu" else 3),
        rounds=args.rounds if args.rounds is not None else (2 if quick else 5),
        round_seconds=args.round_seconds if args.round_seconds is not None else (0.0 if quick else 0.2),
        accuracy=args.accuracy, cold_start=args.cold_start, time_budget=args.time_budget, progress=args.progress)


def _run_id(args: argparse.Namespace) -> str:
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    suites = "+".join(args.suite) if len(args.suite) < len(SUITES) else "all"
    shard = f"-shard{args.shard[0]}of{args.shard[1]}" if args.shard else ""
    return f"{stamp}-{suites}{shard}-{os.getpid()}"


@contextlib.contextmanager
def _torch_settings(args: argparse.Namespace):
    """TF32 as asked, and room in TorchDynamo's cache for every backend's compilation of the
    same model code; the previous settings come back afterwards."""
    import torch
    import torch._dynamo

    saved = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    if args.tf32:
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    name = next(n for n in ("recompile_limit", "cache_size_limit") if hasattr(torch._dynamo.config, n))
    try:
        with torch._dynamo.config.patch(**{name: max(getattr(torch._dynamo.config, name), 64)}):
            yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved


def run_main(argv: list[str]) -> int:
    args = run_parser().parse_args(argv)
    device = resolve_device(args.device)
    items = plan(args, device)
    if not items:
        print("torchfuse bench: nothing selected (see 'torchfuse bench list' with the same options)", file=sys.stderr)
        return 2
    if device == "cpu" and not args.quick:
        print("torchfuse bench: full-size models on a CPU run for a long time; --quick is meant for CPUs",
              file=sys.stderr)
    with _torch_settings(args):
        return _run(args, argv, device, items)


def _run(args: argparse.Namespace, argv: list[str], device: str, items: list) -> int:
    from .environment import default_output_dir, run_metadata
    from .report import terminal_report, write_reports
    from .rows import rows_from_results, save_rows
    from .runner import run_all
    from .timing import copy_bandwidth

    settings = settings_from(args, device)
    out_dir = args.out or default_output_dir(device, args.quick)
    meta = run_metadata(_run_id(args), argv, device, {k: (list(v) if isinstance(v, tuple) else v)
                                                      for k, v in vars(settings).items()})
    meta["settings"]["suites"] = list(args.suite)
    meta["settings"]["modes"] = list(args.mode) if args.mode else None
    meta["settings"]["only"] = args.only
    meta["settings"]["shard"] = list(args.shard) if args.shard else None
    meta["copy_gbps"] = copy_bandwidth(device) if any(c.suite == "micro" for c, _ in items) else None
    running = running_backends(settings.backends, device, {MODES[mode].training for _, mode in items})
    skipped = [n for n in settings.backends if n not in running]
    print(f"torchfuse bench: {len(items)} case(s) x {len(running)} backend(s) on {meta['device_label']}"
          + (f" (not run here: {', '.join(skipped)})" if skipped else "") + f"; results in {out_dir}", file=sys.stderr)
    previous = _terminate_on_sigterm()
    try:
        results = run_all(items, settings, meta, out_dir, meta["copy_gbps"], log=lambda s: print(s, file=sys.stderr))
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
    paths = write_reports(out_dir)
    save_rows(args, device, rows_from_results(results, meta, args.run_name), args.quick)
    labels = {meta["device_name"]: meta["device_label"]}
    print(terminal_report(results, labels))
    print(f"\nsummary: {paths['summary']}\njson: {paths['json']}\ncsv: {paths['csv']}")
    if meta["not_run"]:
        print(f"not run ({len(meta['not_run'])}): time budget reached or interrupted; see {paths['summary']}")
    return 130 if meta["interrupted"] else 0


def _terminate_on_sigterm():
    """Turn SIGTERM (``timeout``, a scheduler) into ``KeyboardInterrupt`` so results are saved."""
    def handler(signum, frame):
        raise KeyboardInterrupt
    try:
        return signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread
        return None


def list_main(argv: list[str]) -> int:
    args = run_parser().parse_args(argv)
    device = resolve_device(args.device)
    items = plan(args, device)
    for case, mode in items:
        print(f"{case.id:55s} {mode}")
    print(f"{len(items)} item(s) on {device}", file=sys.stderr)
    return 0


def merge_main(argv: list[str]) -> int:
    from .report import terminal_report, write_reports
    from .results import combine, load_runs

    p = argparse.ArgumentParser(prog="torchfuse bench merge",
                                description="Combine runs (result directories or run files) into one report; "
                                            "for each case the newest run's results are kept.")
    p.add_argument("sources", nargs="+", type=Path)
    p.add_argument("--out", type=Path, default=None, help="default: the first source directory")
    args = p.parse_args(argv)
    out_dir = args.out or (args.sources[0] if args.sources[0].is_dir() else args.sources[0].parent.parent)
    try:
        runs = load_runs(args.sources)
    except (FileNotFoundError, ValueError, KeyError) as e:
        print(f"torchfuse bench merge: {e}", file=sys.stderr)
        return 2
    (out_dir / "runs").mkdir(parents=True, exist_ok=True)
    for src in args.sources:  # the merged directory keeps copies of its run files
        files = [src] if src.is_file() else sorted((src / "runs").glob("*.json")) or sorted(src.glob("*.json"))
        for f in files:
            if f.name != "results.json" and f.resolve().parent != (out_dir / "runs").resolve():
                shutil.copy2(f, out_dir / "runs" / f.name)
    paths = write_reports(out_dir)
    metas, results = combine(runs)
    labels = {m["device_name"]: m.get("device_label", m["device_name"]) for m in metas}
    print(terminal_report(results, labels))
    print(f"\nmerged {len(runs)} run(s) into {out_dir}\nsummary: {paths['summary']}")
    return 0


#: ``torchfuse bench SUBCOMMAND ...`` -> (module, function, what it does); without a
#: subcommand (or with ``run``) the suites run
SUBCOMMANDS = {
    "run": (".cli", "run_main", "the suites micro, hf, timm, seed: training and inference steps (the default)"),
    "list": (".cli", "list_main", "what a run of the suites would measure"),
    "merge": (".cli", "merge_main", "combine result directories of the suites into one report"),
    "first-call": (".coldstart", "first_call_main", "one first call in a fresh process (--cold-start's child)"),
    "norms": (".norms", "main", "the norm table: normalizations, softmax, cross-entropy against a device copy"),
    "sweep-launch": (".launch_sweeps", "main", "one fusion group's kernel under other launch configurations"),
    "profile": (".profiles", "main", "one training step or inference call, kernel by kernel"),
    "host": (".host", "main", "host time per call, per launch and per CUDA-graph replay"),
    "conv-epilogue": (".conv_epilogue", "main", "cuDNN's fused convolution epilogues against torchfuse's"),
    "sass": (".sass", "main", "instructions and registers of the norm table's kernels compiled for sm_90"),
    "run-named": (".named_runs", "main", "a named GPU run of benchmarks/runs.toml, results under --out"),
    "rows": (".rows", "rows_main", "add rows to the rows file, or show them"),
    "charts": (".tables", "main", "regenerate the current charts and tables from the rows"),
}


def main(argv: list[str] | None = None) -> int:
    import importlib

    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in ("-h", "--help"):
        print("torchfuse bench [SUBCOMMAND] ...\n\nsubcommands:\n"
              + "\n".join(f"  {name:14s} {what}" for name, (_, _, what) in SUBCOMMANDS.items())
              + "\n\nwithout a subcommand the suites run; the options of a run follow:\n")
        run_parser().print_help()
        return 0
    if argv and argv[0] in SUBCOMMANDS:
        module, function, _ = SUBCOMMANDS[argv[0]]
        return getattr(importlib.import_module(module, __package__), function)(argv[1:])
    return run_main(argv)
