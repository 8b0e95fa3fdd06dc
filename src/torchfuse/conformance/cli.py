"""``torchfuse conformance``: run PyTorch's OpInfo samples through torchfuse, write the table.

::

    torchfuse conformance [--ops PATTERN,...] [--dtypes NAME,...] [--max-samples N]
                          [--max-error-samples N] [--backward | --no-backward] [--shard I/N]
                          [--time-budget SECONDS] [--sample-timeout SECONDS]
                          [--interpret-integer-division] [--out DIR] [--list]
    torchfuse conformance --merge DIR_OR_JSON... [--out DIR]
    torchfuse conformance --compare TABLE_A TABLE_B [--out DIR]

Without a GPU every kernel runs on CPU tensors through Triton's interpreter. Ops are run
registry ops first (see :func:`torchfuse.conformance.catalog.priority`), so a time budget
covers the fusible ops before the rest; ops left when the budget is spent are listed in the
table as not run. The table is rewritten after every op, so an interrupted run keeps its
results. Shards (``--shard 1/4`` ... ``4/4``, each with its own ``--out``) are combined with
``--merge``.

On a GPU (``--device cuda``, the default when one is present) the reference is CUDA eager and
the kernels are compiled; shards run side by side on one GPU (compilation is CPU work). A CUDA
error that leaves the context unusable (a device-side assert) stops the run: the ops left are
listed as not run, with the error. ``--compare`` lists every (op, dtype) whose verdict differs
between two tables (a CPU and a GPU one), and the entries only one of them covers.
"""
from __future__ import annotations

import argparse
import logging
import sys
import time
import zlib
from pathlib import Path

import torch

from ..cli import parse_shard as _shard
from . import catalog, classify, report, runner

#: a folder of the working directory, so that a run does not overwrite the committed table
#: (``benchmarks/results/conformance``: name it with ``--out`` to refresh that)
DEFAULT_OUT = "conformance-results"


def _dtypes(text: str) -> list[torch.dtype]:
    out = []
    for name in (t.strip() for t in text.split(",") if t.strip()):
        if name not in catalog.DTYPE_NAMES:
            raise argparse.ArgumentTypeError(f"unknown dtype {name!r}; known: {', '.join(catalog.DTYPE_NAMES)}")
        out.append(catalog.DTYPE_NAMES[name])
    return out


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="torchfuse conformance", description=__doc__.split("::")[0].strip())
    p.add_argument("--ops", default="", help="comma-separated name patterns (sin,nn.functional.*); default: all")
    p.add_argument("--dtypes", type=_dtypes, default=None, help="comma-separated dtypes; default: all the op supports")
    p.add_argument("--max-samples", type=int, default=3, help="samples per (op, dtype), spread over the list")
    p.add_argument("--max-error-samples", type=int, default=2, help="OpInfo error inputs per op")
    p.add_argument("--backward", action=argparse.BooleanOptionalAction, default=True,
                   help="compare gradients where the OpInfo supports them")
    p.add_argument("--shard", type=_shard, default=(1, 1), help="I/N: run every N-th op from the I-th")
    p.add_argument("--time-budget", type=float, default=None, help="stop starting new ops after SECONDS")
    p.add_argument("--sample-timeout", type=float, default=120.0, help="skip a sample after SECONDS")
    p.add_argument("--interpret-integer-division", action="store_true",
                   help="fuse integer division on CPU too (Options.interpret_integer_division)")
    p.add_argument("--device", default=None, help="cuda or cpu (default: cuda when present)")
    p.add_argument("--out", default=DEFAULT_OUT, help=f"where table.json and table.md go (default {DEFAULT_OUT})")
    p.add_argument("--list", action="store_true", help="print the ops a run would cover, in order, and exit")
    p.add_argument("--merge", nargs="+", metavar="DIR_OR_JSON", help="combine shard tables into --out")
    p.add_argument("--compare", nargs=2, metavar="DIR_OR_JSON",
                   help="list the verdicts that differ between two tables (written to --out/differences.md "
                        "when --out is given)")
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    return p


def pick(samples: list, n: int) -> list:
    """``n`` samples spread evenly over ``samples`` (first and last included)."""
    if n <= 0 or len(samples) <= n:
        return samples if n > 0 else []
    if n == 1:
        return samples[:1]
    step = (len(samples) - 1) / (n - 1)
    return [samples[round(i * step)] for i in range(n)]


def run_op(case: catalog.OpCase, args, options, device: str, log=None) -> dict[str, classify.Verdict]:
    """Verdicts of one OpInfo entry, per dtype name."""
    info = case.info
    dtypes = catalog.dtypes_of(info, device, args.dtypes)
    if case.skip is not None:
        return {catalog.dtype_name(d): classify.Verdict("skipped", case.skip) for d in dtypes}
    backward_ok = catalog.backward_dtypes(info, device) if args.backward else set()
    error_dtype = torch.float32 if torch.float32 in dtypes else (dtypes[0] if dtypes else None)
    row = {}
    for dtype in dtypes:
        seed = zlib.crc32(f"{case.name}/{dtype}".encode())
        torch.manual_seed(seed)
        grad = dtype in backward_ok
        outcomes = []
        try:
            samples = pick(list(info.sample_inputs(device, dtype, requires_grad=grad)), args.max_samples)
        except Exception as e:
            row[catalog.dtype_name(dtype)] = classify.Verdict("skipped", f"OpInfo samples raise {type(e).__name__}")
            continue
        rtol, atol = catalog.tolerance(info, dtype, device)
        for k, sample in enumerate(samples):
            try:
                outcomes.append(runner.run_sample(info.op, sample, options, rtol, atol, backward=grad, seed=seed + k,
                                                  seconds=args.sample_timeout))
            except Exception as e:  # the harness itself (a sample it cannot copy): no verdict, the run goes on
                outcomes.append(runner.SampleOutcome("skipped", f"the harness failed: {type(e).__name__}: "
                                                                f"{str(e).splitlines()[0][:200] if str(e) else ''}"))
        if dtype == error_dtype and args.max_error_samples > 0 and info.error_inputs_func is not None:
            try:
                errors = list(info.error_inputs(device))
            except Exception:
                errors = []
            for error_input in errors[: args.max_error_samples]:
                outcome = runner.run_error_input(info.op, error_input, options, seconds=args.sample_timeout)
                if outcome.reason != runner.EAGER_DOES_NOT_RAISE:
                    outcomes.append(outcome)
        verdict = classify.classify(outcomes)
        row[catalog.dtype_name(dtype)] = verdict
        if log is not None:
            reason = verdict.reason if len(verdict.reason) <= 160 else verdict.reason[:157] + "..."  # full in the table
            log(f"  {case.name} {catalog.dtype_name(dtype)}: {verdict.status} {reason} "
                f"({verdict.seconds:.1f} s)")
    return row


def _environment(device: str, options) -> dict:
    import triton

    env = {"torch": torch.__version__, "triton": triton.__version__, "device": device,
           "mode": "Triton interpreter on CPU tensors" if options.interpret else "compiled Triton kernels",
           "commit": source_commit()}
    if device.startswith("cuda"):
        env["gpu"] = torch.cuda.get_device_name()
    return env


def source_commit() -> str | None:
    """The git commit of the torchfuse source this process runs (``+`` appended when files
    under ``src/`` differ from it), or ``None`` outside a git checkout."""
    import subprocess

    root = Path(__file__).resolve().parents[3]
    try:
        head = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=root, capture_output=True,
                              text=True, timeout=10)
        if head.returncode != 0:
            return None
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "src"], cwd=root, capture_output=True,
                               text=True, timeout=10)
        return head.stdout.strip() + ("+" if dirty.stdout.strip() else "")
    except (OSError, subprocess.SubprocessError):
        return None


def cuda_failure(device: str) -> str | None:
    """The CUDA error that makes the context unusable (a device-side assert), if one happened;
    ``None`` on other devices or when the device still works."""
    if not device.startswith("cuda"):
        return None
    try:
        torch.cuda.synchronize()
        return None
    except RuntimeError as e:
        return f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"


def _done(table: dict, out: Path) -> int:
    """Print the run's summary and where its table was written; the exit status (0)."""
    print(report.summary_line(table))
    print(f"table: {out / 'table.md'} and {out / 'table.json'}")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    out = Path(args.out)
    if args.compare:
        tables = [report.read_json(Path(p) / "table.json" if Path(p).is_dir() else p) for p in args.compare]
        text = report.differences(tables[0], tables[1], names=tuple(args.compare))
        print(text, end="")
        if "--out" in (argv if argv is not None else sys.argv[1:]):
            out.mkdir(parents=True, exist_ok=True)
            (out / "differences.md").write_text(text)
        return 0
    if args.merge:
        parts = []
        for item in args.merge:
            path = Path(item)
            parts.append(report.read_json(path / "table.json" if path.is_dir() else path))
        table, meta = report.merge(parts)
        report.write(table, meta, out)
        return _done(table, out)
    from ..config import Options

    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    options = Options.from_env(interpret=device == "cpu",
                               interpret_integer_division=args.interpret_integer_division)
    patterns = [p.strip() for p in args.ops.split(",") if p.strip()]
    op_db = catalog.load_op_db()
    unmatched = catalog.unmatched_patterns(op_db, patterns)
    if unmatched:
        print(f"torchfuse conformance: no OpInfo entry matches {', '.join(unmatched)} "
              "(names look like 'sin' or 'nn.functional.layer_norm'; --list shows them)", file=sys.stderr)
        if len(unmatched) == len(patterns):
            return 2
    cases = catalog.select_ops(op_db, patterns, args.shard)
    if args.list:
        for c in cases:
            print(c.name + (f"  (skipped: {c.skip})" if c.skip else ""))
        return 0
    # eager errors the error samples provoke are logged by TorchDynamo and fake tensors as they
    # happen; the table records them
    for name in ("torch._subclasses.fake_tensor", "torch._dynamo", "torch.fx.experimental.symbolic_shapes"):
        logging.getLogger(name).setLevel(logging.CRITICAL)
    log = None if args.quiet else (lambda s: print(s, file=sys.stderr, flush=True))
    command = "torchfuse conformance " + " ".join(argv if argv is not None else sys.argv[1:])
    meta = {"command": command.strip(), **_environment(device, options), "shard": list(args.shard)}
    table: report.Table = {}
    t0 = time.perf_counter()
    not_run: list[str] = []
    for i, case in enumerate(cases):
        if args.time_budget is not None and time.perf_counter() - t0 > args.time_budget:
            not_run = [c.name for c in cases[i:]]
            break
        if log:
            log(f"[{i + 1}/{len(cases)}] {case.name}")
        row = run_op(case, args, options, device, log)
        broken = cuda_failure(device)
        if broken is not None:  # this op's verdicts cannot be trusted, nor can later ones run
            not_run = [c.name for c in cases[i:]]
            meta["stopped"] = f"{case.name}: {broken}"
            print(f"torchfuse conformance: stopped at {case.name}: {broken}", file=sys.stderr)
            break
        table[case.name] = row
        meta.update(seconds=round(time.perf_counter() - t0, 1), not_run=[c.name for c in cases[i + 1:]])
        report.write(table, meta, out)
    meta.update(seconds=round(time.perf_counter() - t0, 1), not_run=not_run)
    report.write(table, meta, out)
    return _done(table, out)
