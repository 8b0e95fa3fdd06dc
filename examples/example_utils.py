"""What the fusion examples share: command line, device setup, accuracy check, benchmark table.

Each example defines a fusion with :mod:`torchfuse.fusion`, checks it against eager PyTorch
and a float64 reference (``--check``), and on CUDA times it against eager and
``torch.compile`` (``--bench``). With ``--device cpu`` the generated kernels run on CPU
tensors through Triton's interpreter (small sizes); that is how CI runs the examples.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys


def parse_args(description: str, cpu_shapes: str, cuda_shapes: str, dropout: bool = False,
               shape_names: str = "TOKENSxHIDDEN") -> argparse.Namespace:
    """Parse the examples' common options and prepare the device (on a CPU,
    ``TORCHFUSE_INTERPRET=1``, read when a fusion is defined: kernels run in Triton's
    interpreter). ``dropout``: the example has a dropout probability (``--p``);
    ``shape_names``: what the sizes of a ``--shapes`` entry are, for its help."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--device", choices=["cpu", "cuda"], default=None,
                   help="cuda when available, else cpu (kernels run in Triton's interpreter)")
    p.add_argument("--check", action="store_true", help="compare forward and backward with eager and float64")
    p.add_argument("--bench", action="store_true", help="time eager, torch.compile and the fusion (CUDA)")
    p.add_argument("--dtype", default=None, help="float32, float16 or bfloat16, or fp32, fp16, bf16 (default: bfloat16 on cuda, "
                                                  "float32 on cpu)")
    p.add_argument("--shapes", default=None, help=f"comma-separated {shape_names} (default: {cuda_shapes} on "
                                                   f"cuda, {cpu_shapes} on cpu)")
    if dropout:
        p.add_argument("--p", type=float, default=0.1, help="dropout probability")
    p.add_argument("--iters", type=int, default=50, help="timed calls per backend and shape")
    args = p.parse_args()
    if args.device is None:
        import torch

        args.device = "cuda" if torch.cuda.is_available() else "cpu"
    if args.device == "cpu":
        os.environ["TORCHFUSE_INTERPRET"] = "1"
    if not (args.check or args.bench):
        args.check = True
    if args.bench and args.device != "cuda":
        print("--bench needs --device cuda; checking only", file=sys.stderr)
        args.bench = False
    args.dtype = args.dtype or ("bfloat16" if args.device == "cuda" else "float32")
    # the short names torchfuse's command line takes, too
    args.dtype = {"fp32": "float32", "fp16": "float16", "half": "float16", "bf16": "bfloat16"}.get(args.dtype, args.dtype)
    if args.dtype not in ("float32", "float16", "bfloat16"):
        p.error(f"--dtype {args.dtype!r}: use float32, float16 or bfloat16 (or fp32, fp16, bf16)")
    shapes = args.shapes or (cuda_shapes if args.device == "cuda" else cpu_shapes)
    args.shapes = [tuple(int(n) for n in s.split("x")) for s in shapes.split(",")]
    return args


def max_error(got, want) -> float:
    """Largest absolute difference, in float64."""
    return (got.double() - want.double()).abs().max().item()


class Checks:
    """The comparisons of ``--check``: each prints a line; failures are collected and
    :meth:`verdict` ends the output with ``check: OK`` or ``check: FAILED (...)``."""

    def __init__(self):
        self.count = 0
        self.failures: list[str] = []

    def close(self, name: str, fused, eager, reference, floor: float) -> str:
        """Compare the fusion's and eager's errors against a float64 reference; returns the line.

        The fusion passes when its error is at most twice eager's plus ``floor`` (the rounding
        of one value in the dtype): it may round in other places than eager, never worse.
        """
        e_fused, e_eager = max_error(fused, reference), max_error(eager, reference)
        line = f"  {name:18s} max error vs float64: fusion {e_fused:.2e}   eager {e_eager:.2e}"
        ok = e_fused <= 2 * e_eager + floor  # False for NaN too
        self.expect(ok, f"{name} error {e_fused:.2e} > 2 x eager's {e_eager:.2e} + {floor:.0e}", quiet=True)
        return line + ("" if ok else "  <- fusion error too large")

    def expect(self, ok: bool, what: str, quiet: bool = False) -> None:
        """Count one check; ``what`` describes its failure (printed unless ``quiet``)."""
        self.count += 1
        if not ok:
            self.failures.append(what)
            if not quiet:
                print(f"  FAILED: {what}")

    def verdict(self) -> int:
        """Print the final line; returns the exit status (0: every check passed)."""
        if not self.failures:
            print(f"check: OK ({self.count} checks)")
            return 0
        print(f"check: FAILED ({len(self.failures)} of {self.count} checks: {'; '.join(self.failures)})")
        return 1


def run_check(check, *args) -> int:
    """Run ``check(checks, *args)`` with a fresh :class:`Checks`, print the verdict and return
    the exit status; an exception in the check is printed and counts as a failure."""
    checks = Checks()
    try:
        check(checks, *args)
    except Exception as e:  # the verdict line must come in any case
        import traceback

        traceback.print_exc()
        checks.expect(False, f"{type(e).__name__}: {e}", quiet=True)
    sys.stdout.flush()
    return checks.verdict()


def median_ms(step, iters: int) -> float:
    """Median milliseconds of ``step()`` on CUDA (CUDA events, after warm-up)."""
    import torch

    from torchfuse.bench.timing import time_steps

    for _ in range(3):
        step()
    torch.cuda.synchronize()
    return statistics.median(time_steps(step, iters, "cuda"))


def time_modes(rows: list[dict], label: str, backend: str, forward, training, fwd_bytes: int, step_bytes: int,
               iters: int) -> None:
    """Time one backend at one shape (``label``): ``forward()`` and ``training()`` (forward
    and backward), :func:`median_ms` of ``iters`` calls each; appends the two rows
    :func:`print_bench` prints, with the fewest bytes each must move (``fwd_bytes``,
    ``step_bytes``)."""
    rows.append({"shape": label, "mode": "forward", "backend": backend, "bytes": fwd_bytes,
                 "ms": median_ms(forward, iters)})
    rows.append({"shape": label, "mode": "fwd+bwd", "backend": backend, "bytes": step_bytes,
                 "ms": median_ms(training, iters)})


def print_bench(title: str, rows: list[dict], copy_gbs: float) -> None:
    """One line per (shape, mode, backend): ms, GB/s of the fewest bytes, fraction of copy."""
    print(f"\n{title}  (device copy: {copy_gbs:.0f} GB/s, measured in this run)")
    print(f"  {'shape':>12s} {'mode':>9s} {'backend':>14s} {'ms':>9s} {'GB/s':>7s} {'copy%':>6s} {'vs eager':>9s}")
    eager = {(r["shape"], r["mode"]): r["ms"] for r in rows if r["backend"] == "eager"}
    for r in rows:
        gbs = r["bytes"] / r["ms"] / 1e6
        speedup = eager[(r["shape"], r["mode"])] / r["ms"]
        print(f"  {r['shape']:>12s} {r['mode']:>9s} {r['backend']:>14s} {r['ms']:9.3f} {gbs:7.0f} "
              f"{100 * gbs / copy_gbs:5.0f}% {speedup:8.2f}x")
