"""Results as data rows: one JSON object a line, appended by every benchmark run.

Every subcommand of ``torchfuse bench`` that measures something turns its figures into
:class:`Row` objects and appends them to a rows file (``--rows FILE``; by default
:data:`ROWS_FILE` for full-size runs on a GPU, none for ``--quick`` or CPU runs, whose times
are not performance figures). A row says what was measured (suite, case, mode, precision,
layout, backend, variant), where and from which code (run name, date, commit, device, torch
and Triton versions, command) and the figures; figures a suite has beyond the common ones go
to ``extra``. Rows are never rewritten: a re-run appends newer rows, and
:func:`current_rows` keeps the newest row of each measurement, which is what the charts and
tables of :mod:`torchfuse.bench.tables` show.

``torchfuse bench rows add SRC... [--to FILE]`` appends the rows of other files (a GPU run's
``$OUT/rows.jsonl``) that the target does not hold yet; ``torchfuse bench rows show`` prints
them.
"""
from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import sys
from pathlib import Path
from typing import Any, Iterable

#: the repository's rows file (relative to the repository root, where benchmarks run from)
ROWS_FILE = Path("benchmarks") / "results" / "rows.jsonl"


@dataclasses.dataclass
class Row:
    """One measurement of one backend (and variant) on one case.

    Units: milliseconds (``*_ms``), seconds (``first_call_s``), MiB (``peak_mib``, 2**20
    bytes), GB/s (``bandwidth_gbps``, 1e9 bytes per second); ``copy_fraction`` is the
    bandwidth over a device copy measured in the same process
    (:func:`torchfuse.bench.timing.copy_bandwidth`).

    Attributes:
        run: the named run (``benchmarks/runs.toml``) or run id that measured it.
        date: when, ISO 8601 (local time of the measuring machine).
        commit: the torchfuse commit measured (``None`` outside a git checkout).
        device: ``"NVIDIA H200"``-style GPU name, or ``"CPU"``.
        torch, triton: their versions.
        suite: the suite or subcommand (``hf``, ``timm``, ``micro``, ``seed``, ``norms``,
            ``sweep-launch``, ``profile``, ``host``, ``conv-epilogue``, ``sass``).
        case: the case, e.g. ``hf/bert/64x128`` or ``norms/layer_norm/16384x4096``.
        mode: ``train-amp-fp16``, ``infer-fp16``...; ``fwd``/``bwd`` for single ops.
        precision: ``fp16``, ``bf16``, ``fp32`` (or empty).
        layout: ``channels-last`` or empty (channels-first, or not an image).
        backend: ``eager``, ``torch.compile``, ``torchfuse``... as ``--backends`` names them.
        variant: empty for the backend as shipped; else the name of a set of tunable
            overrides (listed in ``extra["overrides"]``) or of a launch configuration.
        status: ``ok``, ``failed`` or ``skipped`` (``error`` says why).
        median_ms: median time of a step or call; ``device_ms`` the time the device was busy
            in it; ``idle_ms`` their difference (the device waiting for the host).
        kernels, launches: device kernels and host-side launch calls of one step.
        speedup_vs_eager, speedup_vs_torch_compile: that backend's median over this row's,
            from the same run (never across runs).
        accuracy: ``pass``, ``fail``, ``reference``, ``not-checked``...
        command: the command line that measured it.
        extra: further figures of the suite (per-kernel times, host times, instructions...).
    """

    run: str
    date: str
    commit: str | None
    device: str
    torch: str | None
    triton: str | None
    suite: str
    case: str
    mode: str = ""
    precision: str = ""
    layout: str = ""
    backend: str = ""
    variant: str = ""
    status: str = "ok"
    error: str | None = None
    median_ms: float | None = None
    device_ms: float | None = None
    idle_ms: float | None = None
    peak_mib: float | None = None
    kernels: float | None = None
    launches: float | None = None
    speedup_vs_eager: float | None = None
    speedup_vs_torch_compile: float | None = None
    accuracy: str | None = None
    first_call_s: float | None = None
    bandwidth_gbps: float | None = None
    copy_fraction: float | None = None
    command: str | None = None
    extra: dict = dataclasses.field(default_factory=dict)

    @property
    def key(self) -> tuple:
        """Rows with the same key measured the same thing (at different times)."""
        return (self.suite, self.case, self.mode, self.precision, self.layout, self.backend, self.variant, self.device)


FIELDS = [f.name for f in dataclasses.fields(Row)]


@dataclasses.dataclass(frozen=True)
class Provenance:
    """Where rows come from: the fields every row of one run shares."""

    run: str
    date: str
    commit: str | None
    device: str
    torch: str | None
    triton: str | None
    command: str | None = None

    def row(self, suite: str, case: str, **fields: Any) -> Row:
        """A :class:`Row` of this run; ``fields`` are :class:`Row` attributes.

        Raises:
            TypeError: a field name is not one of :class:`Row`'s.
        """
        return Row(run=self.run, date=self.date, commit=self.commit, device=self.device, torch=self.torch,
                   triton=self.triton, suite=suite, case=case, command=self.command, **fields)


def provenance(run: str | None, device: str, argv: list[str] | None = None, subcommand: str = "") -> Provenance:
    """The provenance of rows measured now, in this process, on ``device`` (``cuda`` or ``cpu``).

    Args:
        run: the run's name; default a timestamp.
        argv: the subcommand's arguments, recorded as its command line.
        subcommand: the ``torchfuse bench`` subcommand that measures.
    """
    from .environment import command_line, device_name, git_commit, package_version

    now = datetime.datetime.now()
    command = command_line(([subcommand] if subcommand else []) + list(argv or [])) if argv is not None else None
    return Provenance(run=run or now.strftime("%Y%m%d-%H%M%S"), date=now.isoformat(timespec="seconds"),
                      commit=git_commit(), device=device_name(device), torch=package_version("torch"),
                      triton=package_version("triton"), command=command)


def _clean(value: Any) -> Any:
    """JSON-ready: floats rounded to 6 significant digits, tuples as lists, others as text."""
    if isinstance(value, bool) or value is None or isinstance(value, (int, str)):
        return value
    if isinstance(value, float):
        return float(f"{value:.6g}") if value == value else None
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    return str(value)


#: written on every line; the other fields only where they differ from their default
REQUIRED = ("run", "date", "commit", "device", "torch", "triton", "suite", "case")
_DEFAULTS = {f.name: f.default for f in dataclasses.fields(Row) if f.default is not dataclasses.MISSING}


def row_to_json(row: Row) -> str:
    """One line of a rows file: the fields in :class:`Row`'s order, defaults left out."""
    data = {}
    for name in FIELDS:
        value = _clean(getattr(row, name))
        if name in REQUIRED or (value != _DEFAULTS.get(name) and value != {}):
            data[name] = value
    return json.dumps(data, ensure_ascii=False)


def row_from_dict(data: dict) -> Row:
    """A :class:`Row` from its JSON object; keys that are not fields go to ``extra``.

    Raises:
        KeyError: a required field (run, date, commit, device, torch, triton, suite, case) is missing.
    """
    known = {k: v for k, v in data.items() if k in FIELDS}
    unknown = {k: v for k, v in data.items() if k not in FIELDS}
    if unknown:
        known["extra"] = {**known.get("extra", {}), **unknown}
    for name in REQUIRED:
        if name not in known:
            raise KeyError(f"row without {name!r}: {data}")
    return Row(**known)


def append_rows(path: Path, rows: Iterable[Row]) -> int:
    """Append ``rows`` to the rows file ``path`` (created with its folders); returns how many."""
    lines = [row_to_json(r) + "\n" for r in rows]
    if not lines:
        return 0
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8") as f:
        f.write("".join(lines))
    return len(lines)


def load_rows(*paths: Path, **equal: Any) -> list[Row]:
    """The rows of the files ``paths`` in file order, keeping those whose attributes equal
    ``equal`` (``suite="norms", run="BN"``). A missing file holds no rows.

    Raises:
        ValueError: a line is not a JSON object of a row (with its file and line number).
    """
    rows = []
    for path in paths:
        path = Path(path)
        if not path.exists():
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if not line.strip():
                continue
            try:
                row = row_from_dict(json.loads(line))
            except (json.JSONDecodeError, KeyError, TypeError) as e:
                raise ValueError(f"{path}:{number}: not a row ({e})") from None
            if all(getattr(row, k) == v for k, v in equal.items()):
                rows.append(row)
    return rows


def current_rows(rows: Iterable[Row]) -> list[Row]:
    """For each :attr:`Row.key`, the newest row (latest ``date``; the later line on a tie), in
    the order the keys first appear."""
    newest: dict[tuple, Row] = {}
    for r in rows:
        old = newest.get(r.key)
        if old is None or r.date >= old.date:
            newest[r.key] = r
    order = list(dict.fromkeys(r.key for r in rows))
    return [newest[k] for k in order]


def rows_from_results(results: list, meta: dict, run: str | None = None) -> list[Row]:
    """Rows of the harness's :class:`~torchfuse.bench.results.Result` records of one run
    (``meta``: its metadata, :func:`torchfuse.bench.environment.run_metadata`)."""
    versions = meta.get("versions", {})
    prov = Provenance(run=run or meta["run_id"], date=meta.get("started", ""),
                      commit=versions.get("torchfuse_commit"), device=meta.get("device_name", ""),
                      torch=versions.get("torch"), triton=versions.get("triton"), command=meta.get("command"))
    from .backends import split_variant  # here: the backends module imports torch, rows are read without it

    out = []
    for r in results:
        # a variant backend (``torchfuse[SETTING;...]``) is its base with a variant, so that
        # tables and charts of the backends as shipped leave it out
        variant = split_variant(r.backend)
        backend, settings = (r.backend, "") if variant is None else (variant[0], ";".join(variant[1]))
        extra = {k: v for k, v in (("steps_timed", r.steps_timed), ("min_ms", r.min_ms), ("max_ms", r.max_ms),
                                   ("first_call_cold_s", r.first_call_cold_s),
                                   ("first_call_warm_s", r.first_call_warm_s),
                                   ("first_call_phases", r.first_call_phases),
                                   ("first_call_cold_phases", r.first_call_cold_phases),
                                   ("first_call_warm_phases", r.first_call_warm_phases),
                                   ("first_call_cold_triton", r.first_call_cold_triton),
                                   ("first_call_warm_triton", r.first_call_warm_triton), ("stage", r.stage),
                                   ("accuracy_detail", r.accuracy_detail), ("bytes_moved", r.bytes_moved),
                                   ("fusion_groups", r.fusion_groups), ("graphs", r.graphs),
                                   ("fallbacks", r.fallbacks), ("info", r.info or None),
                                   ("warnings", r.warnings or None)) if v is not None}
        out.append(prov.row(
            r.suite, r.case, mode=r.mode, precision=r.precision, layout="channels-last" if r.channels_last else "",
            backend=backend, variant=settings, status=r.status, error=r.error, median_ms=r.median_ms, device_ms=r.device_ms,
            idle_ms=r.idle_ms, peak_mib=r.peak_memory_mib, kernels=r.kernels_per_step, launches=r.launches_per_step,
            speedup_vs_eager=r.speedup_vs_eager, speedup_vs_torch_compile=r.speedup_vs_torch_compile,
            accuracy=r.accuracy, first_call_s=r.first_call_s, bandwidth_gbps=r.bandwidth_gbps,
            copy_fraction=r.copy_fraction, extra=extra))
    return out


# -- the options every measuring subcommand shares ------------------------------------------------

def add_row_arguments(parser: argparse.ArgumentParser) -> None:
    """``--rows FILE`` and ``--run-name NAME`` (see :func:`rows_path`)."""
    group = parser.add_argument_group("rows")
    group.add_argument("--rows", type=Path, default=None, metavar="FILE",
                       help=f"append result rows here (default {ROWS_FILE} for full-size runs on a GPU; "
                            "none for --quick or CPU runs); '-' appends none")
    group.add_argument("--run-name", default=None, metavar="NAME",
                       help="the run the rows belong to (a named run of benchmarks/runs.toml; default a timestamp)")


def rows_path(args: argparse.Namespace, device: str, quick: bool = False) -> Path | None:
    """Where a subcommand appends its rows: ``--rows`` (``-``: nowhere), else :data:`ROWS_FILE`
    on a GPU without ``--quick``, else nowhere."""
    if args.rows is not None:
        return None if str(args.rows) == "-" else args.rows
    return ROWS_FILE if device == "cuda" and not quick else None


def save_rows(args: argparse.Namespace, device: str, rows: list[Row], quick: bool = False) -> Path | None:
    """Append ``rows`` where :func:`rows_path` says; print where; returns the file or ``None``."""
    path = rows_path(args, device, quick)
    if path is not None and rows:
        append_rows(path, rows)
        print(f"{len(rows)} row(s) appended to {path}", file=sys.stderr)
    return path


# -- torchfuse bench rows ---------------------------------------------------------------------------

def _fmt(v: Any) -> str:
    if v is None:
        return ""
    return f"{v:.4g}" if isinstance(v, float) else str(v)


def rows_main(argv: list[str]) -> int:
    """``torchfuse bench rows add SRC... [--to FILE]`` | ``rows show [FILE] [--suite S] [--all]``
    | ``rows show --table steps [--mode M] [--device D] [--layout channels-last]``
    (:func:`torchfuse.bench.tables.steps_table`)."""
    p = argparse.ArgumentParser(prog="torchfuse bench rows", description="Add rows to the rows file, or show them.")
    sub = p.add_subparsers(dest="action", required=True)
    add = sub.add_parser("add", help="append the rows of SRC files that FILE does not hold yet")
    add.add_argument("sources", nargs="+", type=Path)
    add.add_argument("--to", type=Path, default=ROWS_FILE)
    show = sub.add_parser("show", help="print the current rows (newest of each measurement)")
    show.add_argument("file", nargs="?", type=Path, default=ROWS_FILE)
    show.add_argument("--suite", default=None)
    show.add_argument("--run", default=None)
    show.add_argument("--all", action="store_true", help="every row, not only the newest of each measurement")
    show.add_argument("--table", choices=["steps"], default=None,
                      help="print a results table as markdown instead: 'steps', wall ms a step per case and "
                           "backend (the README's table)")
    show.add_argument("--mode", default="train-amp-fp16", help="with --table: the mode (default %(default)s)")
    show.add_argument("--device", default="NVIDIA H200", help="with --table: the device (default %(default)s)")
    show.add_argument("--layout", default="", choices=["", "channels-last"],
                      help="with --table: the memory layout (default channels-first)")
    args = p.parse_args(argv)
    try:
        if args.action == "add":
            have = {row_to_json(r) for r in load_rows(args.to)}
            new = [r for r in load_rows(*args.sources) if row_to_json(r) not in have]
            append_rows(args.to, new)
            print(f"{len(new)} new row(s) appended to {args.to}")
            return 0
        filters = {k: v for k, v in (("suite", args.suite), ("run", args.run)) if v}
        rows = load_rows(args.file, **filters)
    except ValueError as e:
        print(f"torchfuse bench rows: {e}", file=sys.stderr)
        return 2
    if args.table == "steps":
        from .tables import steps_table

        try:
            print(steps_table(rows, mode=args.mode, device=args.device, layout=args.layout))
        except ValueError as e:
            print(f"torchfuse bench rows: {e}", file=sys.stderr)
            return 2
        return 0
    rows = rows if args.all else current_rows(rows)
    columns = ["run", "suite", "case", "mode", "precision", "layout", "backend", "variant", "status", "median_ms",
               "device_ms", "speedup_vs_eager", "copy_fraction", "commit"]
    from .report import text_table

    print(text_table(columns, [[_fmt(getattr(r, c)) for c in columns] for r in rows]))
    print(f"{len(rows)} row(s)", file=sys.stderr)
    return 0
