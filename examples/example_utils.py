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


def parse_args(description: str, cpu_shapes: str, cuda_shapes: str) -> argparse.Namespace:
    """Parse the examples' common options and prepare the device (before torchfuse is
    imported: the interpreter must be chosen before Triton loads)."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--device", choices=["cpu", "cuda"], default=None,
                   help="cuda when available, else cpu (kernels run in Triton's interpreter)")
    p.add_argument("--check", action="store_true", help="compare forward and backward with eager and float64")
    p.add_argument("--bench", action="store_true", help="time eager, torch.compile and the fusion (CUDA)")
    p.add_argument("--dtype", default=None, help="float32, float16 or bfloat16 (default: bfloat16 on cuda, "
                                                  "float32 on cpu)")
    p.add_argument("--shapes", default=None, help=f"comma-separated TOKENSxHIDDEN (default: {cuda_shapes} on "
                                                   f"cuda, {cpu_shapes} on cpu)")
    p.add_argument("--p", type=float, default=0.1, help="dropout probability (where the example has dropout)")
    p.add_argument("--iters", type=int, default=50, help="timed calls per backend and shape")
    args = p.parse_args()
    if args.device is None:
        import torch

        args.device = "cuda" if torch.cuda.is_available() else "cpu"
    if args.device == "cpu":
        os.environ["TORCHFUSE_INTERPRET"] = "1"
        os.environ["TRITON_INTERPRET"] = "1"
    if not (args.check or args.bench):
        args.check = True
    if args.bench and args.device != "cuda":
        print("--bench needs --device cuda; checking only", file=sys.stderr)
        args.bench = False
    args.dtype = args.dtype or ("bfloat16" if args.device == "cuda" else "float32")
    shapes = args.shapes or (cuda_shapes if args.device == "cuda" else cpu_shapes)
    args.shapes = [tuple(int(n) for n in s.split("x")) for s in shapes.split(",")]
    return args


def max_error(got, want) -> float:
    """Largest absolute difference, in float64."""
    return (got.double() - want.double()).abs().max().item()


def check_close(name: str, fused, eager, reference, floor: float) -> str:
    """Compare the fusion's and eager's errors against a float64 reference.

    The fusion passes when its error is at most twice eager's plus ``floor`` (the rounding
    of one value in the dtype): it may round in other places than eager, never worse.

    Raises:
        AssertionError: it does not pass.
    """
    e_fused, e_eager = max_error(fused, reference), max_error(eager, reference)
    line = f"  {name:18s} max error vs float64: fusion {e_fused:.2e}   eager {e_eager:.2e}"
    assert e_fused <= 2 * e_eager + floor, line + "  <- fusion error too large"
    return line


def median_ms(step, iters: int) -> float:
    """Median milliseconds of ``step()`` on CUDA (CUDA events, after warm-up)."""
    import torch

    from torchfuse.bench.timing import time_steps

    for _ in range(3):
        step()
    torch.cuda.synchronize()
    return statistics.median(time_steps(step, iters, "cuda"))


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
