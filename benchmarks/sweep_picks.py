"""Cross-entropy forward and backward with and without its rewrites: as before (all off), and
with ``graph_passes.one_hot_picks``, ``graph_passes.log_softmax_sums`` and, on rows longer
than the persistent limit, ``graph_passes.one_hot_sums`` (``LOOPED_ONE_HOT_SUMS``); same
process, same inputs. With ``--toggle online``: looped kernels with and without the max and
its sums in one loop (``codegen.ONLINE_SUMS``). With ``--toggle onehot``: the backward's row sum
of its one-hot gradient kept, against rewritten into per-row terms on every row
(``graph_passes.ONE_HOT_SUMS``), which leaves a pointwise kernel.

For each shape and dtype the loss ``F.cross_entropy(x, t, ignore_index=-100,
label_smoothing=0.1)`` of ``benchmarks/norms.py`` (and without label smoothing) is compiled by
torchfuse alone. The device time of one call comes from ``torch.profiler``
(``norms.device_ms``): the forward under ``torch.no_grad()``, the backward as
``torch.autograd.grad`` of the training graph. Results are checked against eager's.

Usage (on a GPU)::

    PYTHONPATH=src python benchmarks/sweep_picks.py [--dtypes bfloat16,float32] [--json out.json]
"""
from __future__ import annotations

import argparse
import json
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, "benchmarks")
from norms import SHAPES, device_ms  # noqa: E402


def registers() -> list[str]:
    """``kernel: registers a thread / spilled`` of each Triton kernel of the graphs compiled last
    (``backend.RECENT``), read from the compiled kernels Triton caches per device for each
    stage's JIT function (``plan.kernel.fns``); empty where that cache is not there."""
    from torchfuse import backend
    from torchfuse.runtime.executor import GroupRunner

    out = []
    for g in backend.RECENT:
        for step in g.steps:
            for plan in (step.plans.values() if isinstance(step, GroupRunner) else ()):
                for fn in getattr(plan.kernel, "fns", ()) if plan.kernel is not None else ():
                    for cache in getattr(fn, "device_caches", {}).values():
                        for k in (cache[0].values() if isinstance(cache, tuple) and isinstance(cache[0], dict) else ()):
                            out.append(f"{getattr(k, 'name', '?')}: {getattr(k, 'n_regs', '?')}/{getattr(k, 'n_spills', '?')}")
    return sorted(set(out))


def main(argv=None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--dtypes", default="bfloat16,float32")
    p.add_argument("--shapes", default=",".join(f"{n}x{d}" for n, d in SHAPES), metavar="NxD[,NxD]")
    p.add_argument("--json", default=None)
    p.add_argument("--batch", choices=("on", "both"), default="on",
                   help="both: also with sibling row sums reduced apart (codegen.BATCH_ROW_SUMS off)")
    p.add_argument("--backward", action="store_true", help="also time the backward")
    p.add_argument("--toggle", choices=("rewrites", "online", "onehot"), default="rewrites",
                   help="online: compare looped kernels with one loop per reduction step against the max and "
                        "its sums in one loop (codegen.ONLINE_SUMS), the rewrites on; onehot: the backward's "
                        "one-hot row sum kept against rewritten on every row (graph_passes.ONE_HOT_SUMS)")
    args = p.parse_args(argv)
    import torchfuse
    from torchfuse import backend, graph_passes
    from torchfuse.codegen import triton as codegen

    defaults = (graph_passes.ONE_HOT_PICKS, graph_passes.LOG_SOFTMAX_SUMS, graph_passes.LOOPED_ONE_HOT_SUMS,
                codegen.BATCH_ROW_SUMS, codegen.ONLINE_SUMS, graph_passes.ONE_HOT_SUMS)
    results = []
    for dtype in (getattr(torch, d) for d in args.dtypes.split(",")):
        for n, d in (tuple(int(v) for v in s.split("x")) for s in args.shapes.split(",")):
            torch.manual_seed(0)
            x = torch.randn(n, d, device="cuda", dtype=dtype)
            t = torch.randint(0, d, (n,), device="cuda")
            t[::7] = -100
            for smoothing in (0.1, 0.0):
                fn = lambda x, t, s=smoothing: F.cross_entropy(x, t, ignore_index=-100, label_smoothing=s)
                with torch.no_grad():
                    want = fn(x, t)
                    row = {"shape": [n, d], "dtype": str(dtype).replace("torch.", ""), "label_smoothing": smoothing}
                    for batch in ((True, False) if args.batch == "both" else (True,)):
                        for on in (False, True):
                            if args.toggle == "online":
                                codegen.ONLINE_SUMS = on
                            elif args.toggle == "onehot":
                                graph_passes.ONE_HOT_SUMS = on
                            else:
                                graph_passes.ONE_HOT_PICKS = graph_passes.LOG_SOFTMAX_SUMS = on
                                graph_passes.LOOPED_ONE_HOT_SUMS = on
                            codegen.BATCH_ROW_SUMS = batch
                            torch._dynamo.reset()
                            backend.RECENT.clear()
                            f = torchfuse.compile(fn, dynamic=False)
                            got = f(x, t)
                            torch.testing.assert_close(got, want, rtol=2e-2, atol=2e-2)
                            names = {"online": ("two_loops", "online"), "onehot": ("row_sum", "one_hot_sum"),
                                     "rewrites": ("as_before", "rewritten")}[args.toggle]
                            key = f"{names[on]}{'' if batch else '_sums_apart'}"
                            row[f"fwd_us_{key}"] = device_ms(lambda: f(x, t))[0] * 1e3
                            row[f"registers_{key}"] = registers()  # forward kernels: registers/spills
                            if args.backward:
                                with torch.enable_grad():
                                    xg = x.detach().clone().requires_grad_(True)
                                    out = f(xg, t)
                                    gx = torch.autograd.grad(out, [xg], retain_graph=True)[0]
                                    xr = x.detach().clone().requires_grad_(True)
                                    torch.testing.assert_close(gx, torch.autograd.grad(fn(xr, t), [xr])[0],
                                                               rtol=2e-2, atol=2e-2)
                                    row[f"bwd_us_{key}"] = device_ms(
                                        lambda: torch.autograd.grad(out, [xg], retain_graph=True))[0] * 1e3
                                    out = None
                results.append(row)
                print(f"cross_entropy {n}x{d} {row['dtype']} smoothing {smoothing}: device us "
                      + ", ".join(f"{k[:3]} {k[7:]} {v:.1f}" for k, v in row.items() if k[3:7] == "_us_"), flush=True)
                print("  registers/spills: " + "; ".join(f"{k[10:]} {v}" for k, v in row.items()
                                                         if k.startswith("registers_")), flush=True)
    (graph_passes.ONE_HOT_PICKS, graph_passes.LOG_SOFTMAX_SUMS, graph_passes.LOOPED_ONE_HOT_SUMS,
     codegen.BATCH_ROW_SUMS, codegen.ONLINE_SUMS, graph_passes.ONE_HOT_SUMS) = defaults
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(results, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
