"""Sweep of persistent row reductions (LayerNorm, RMSNorm, softmax, log-softmax and
cross-entropy, forward and backward): launch configuration and code-generation variants.

Each candidate sets elements per tile and per thread (``reduction.TILE_ELEMENTS``,
``reduction.ELEMENTS_PER_THREAD``), the row max's form, and whether sibling row sums are
reduced together (``codegen.BATCH_ROW_SUMS``), and whether one-hot row sums are replaced by
the selected value (``graph_passes.ONE_HOT_SUMS``: cross-entropy's backward; "flat": with 0-d
inputs of pointwise kernels loaded as full blocks, ``codegen.SCALAR_LOADS`` off). The graph is recompiled with torchfuse alone,
and the device time of one call is taken from ``torch.profiler`` (``norms.device_ms``): forward
under ``torch.no_grad()``, backward as ``torch.autograd.grad`` of the training graph.

Row max forms: "nan" is ``tf_row_max`` as shipped (one reduction whose combine is the device's
NaN-propagating max), "where" a combine of compares and selects (``tf_max_combine``), "two" a
plain max and a NaN-count reduction (the interpreter's form).

Usage (on a GPU)::

    PYTHONPATH=src python benchmarks/sweep_rows.py [--sweep forms|batch|onehot|warps] [--json out.json]
"""
from __future__ import annotations

import argparse
import json
import sys
import time

import torch

sys.path.insert(0, "benchmarks")
from norms import cases, device_ms  # noqa: E402

#: (TILE_ELEMENTS, ELEMENTS_PER_THREAD, row max form, sibling sums together, one-hot sums
#: replaced), per sweep
SWEEPS = {
    "forms": [(4096, 32, "two", True, True), (4096, 32, "where", True, True), (4096, 32, "nan", True, True),
              (2048, 16, "nan", True, True)],
    "batch": [(4096, 32, "nan", False, True), (4096, 32, "nan", True, True)],
    "onehot": [(1024, 32, "nan", True, False), (1024, 32, "nan", True, True), (1024, 32, "nan", True, "flat")],
    # rows of 1024: 4 rows x 4 warps (shipped), 1 x 1, 2 x 1, 2 x 2, 4 x 2, 8 x 4; rows of 4096:
    # 1 x 4 (shipped), 1 x 2, 1 x 1, 2 x 4
    "warps": [(4096, 32, "nan", True, True), (1024, 32, "nan", True, True), (2048, 64, "nan", True, True),
              (2048, 32, "nan", True, True), (4096, 64, "nan", True, True), (8192, 64, "nan", True, True),
              (4096, 128, "nan", True, True)],
}
DEFAULT_OPS = {"forms": "softmax,log_softmax,cross_entropy", "batch": "layer_norm,rms_norm,cross_entropy",
               "onehot": "cross_entropy", "warps": "softmax,cross_entropy,layer_norm,rms_norm"}

FORMS = {
    "two": """def tf_row_max(x):
    m = tl.max(x, 1)[:, None]
    return tl.where(tl.max((x != x).to(tl.int8), 1)[:, None] > 0, float('nan'), m)
""",
    "where": """def tf_row_max(x):
    return tl.reduce(x, 1, tf_max_combine)[:, None]
""",
}


def main(argv=None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--sweep", choices=sorted(SWEEPS), default="forms")
    p.add_argument("--ops", default=None, help="comma-separated (default: per sweep)")
    p.add_argument("--shapes", default="32768x1024,16384x4096", metavar="NxD[,NxD]")
    p.add_argument("--json", default=None)
    p.add_argument("--dtype", default="bfloat16")
    p.add_argument("--time-budget", type=float, default=240, help="seconds; candidates left are skipped")
    args = p.parse_args(argv)
    import torchfuse
    from torchfuse import graph_passes
    from torchfuse.codegen import triton as codegen
    from torchfuse.schedulers import reduction

    ops = (args.ops or DEFAULT_OPS[args.sweep]).split(",")
    shapes = {tuple(int(v) for v in s.split("x")) for s in args.shapes.split(",")}
    header = codegen.HEADER
    start = header.index("def tf_row_max(x):")
    end = header.index("@triton.jit", start)
    forms = {name: header[:start] + text + "\n\n" + header[end:] for name, text in FORMS.items()}
    defaults = (reduction.TILE_ELEMENTS, reduction.ELEMENTS_PER_THREAD, codegen.BATCH_ROW_SUMS,
                graph_passes.ONE_HOT_SUMS)
    dtype = getattr(torch, args.dtype)
    one_warp_row, reduction.ONE_WARP_ROW = reduction.ONE_WARP_ROW, 0  # each candidate as given
    t0 = time.time()
    results = []
    for case in cases([dtype], ops):
        op, shape, _, fn, make_inputs, grad_idx, fwd_bytes, bwd_bytes = case
        if op not in ops or tuple(shape) not in shapes:
            continue
        torch.manual_seed(0)
        inputs = make_inputs()
        seen = set()
        for tile, ept, form, batch, one_hot in SWEEPS[args.sweep]:
            if time.time() - t0 > args.time_budget:
                print("time budget spent", flush=True)
                break
            # rows a program and warps, as reduction.heuristic derives them: skip repeats
            rpow = 1 << (shape[-1] - 1).bit_length()
            rows = max(1, tile // rpow)
            warps = max(1, min(8, (1 << (max(rows * rpow // ept, 1) - 1).bit_length()) // 32 or 1))
            if (rows, warps, form, batch, one_hot) in seen:
                continue
            seen.add((rows, warps, form, batch, one_hot))
            reduction.TILE_ELEMENTS, reduction.ELEMENTS_PER_THREAD = tile, ept
            codegen.BATCH_ROW_SUMS = batch
            graph_passes.ONE_HOT_SUMS = bool(one_hot)
            codegen.SCALAR_LOADS = one_hot != "flat"  # "flat": 0-d inputs loaded as blocks
            codegen.HEADER = forms.get(form, header)
            torch._dynamo.reset()
            f = torchfuse.compile(fn, dynamic=False)
            row = {"op": op, "shape": list(shape), "tile": tile, "per_thread": ept, "rows": rows, "warps": warps, "row_max": form,
                   "batch_sums": batch, "one_hot_sums": one_hot}
            with torch.no_grad():
                row["fwd_us"] = device_ms(lambda: f(*inputs))[0] * 1e3
            ins = [t.detach().clone().requires_grad_(i in grad_idx) for i, t in enumerate(inputs)]
            out = f(*ins)
            dy = torch.ones_like(out) if out.dim() == 0 else torch.randn_like(out)
            wrt = [ins[i] for i in grad_idx]
            row["bwd_us"] = device_ms(lambda: torch.autograd.grad(out, wrt, dy, retain_graph=True))[0] * 1e3
            results.append(row)
            print(f"{op} {'x'.join(map(str, shape))} tile {tile} {ept}/thread ({rows} rows x {warps} warps) max:{form} batch sums:{batch} one-hot:{one_hot}: "
                  f"fwd {row['fwd_us']:.1f} us, bwd {row['bwd_us']:.1f} us", flush=True)
            out = None
    codegen.HEADER = header
    reduction.ONE_WARP_ROW = one_warp_row
    codegen.SCALAR_LOADS = True
    (reduction.TILE_ELEMENTS, reduction.ELEMENTS_PER_THREAD, codegen.BATCH_ROW_SUMS,
     graph_passes.ONE_HOT_SUMS) = defaults
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(results, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
