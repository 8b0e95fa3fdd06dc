"""Launch-configuration sweep of persistent row reductions (softmax, log-softmax and
cross-entropy, forward and backward) and of the row max's form.

For each candidate (elements per tile, elements a thread, and whether the NaN-propagating row
max is one reduction with a NaN-aware combine or a plain max plus a NaN-count reduction) the
graph is recompiled with torchfuse alone, and the device time of one call is taken from
``torch.profiler`` (``norms.device_ms``): forward under ``torch.no_grad()``, backward as
``torch.autograd.grad`` of the training graph.

Usage (on a GPU): ``PYTHONPATH=src python benchmarks/sweep_rows.py [--json out.json]``
"""
from __future__ import annotations

import argparse
import json
import sys
import time

import torch

sys.path.insert(0, "benchmarks")
from norms import cases, device_ms  # noqa: E402

#: (TILE_ELEMENTS, ELEMENTS_PER_THREAD, row max form): "nan" is tf_row_max as shipped (one
#: reduction, the device's NaN-propagating max), "where" a combine of compares and selects
#: (tf_max_combine), "two" a plain max and a NaN-count reduction (the interpreter's form)
CANDIDATES = [
    (4096, 32, "two"), (4096, 32, "where"), (4096, 32, "nan"), (2048, 16, "nan"),
]
SHAPES = [(32768, 1024), (16384, 4096)]
OPS = ["softmax", "log_softmax", "cross_entropy"]

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
    p.add_argument("--json", default=None)
    p.add_argument("--dtype", default="bfloat16")
    p.add_argument("--time-budget", type=float, default=240, help="seconds; candidates left are skipped")
    args = p.parse_args(argv)
    import torchfuse
    from torchfuse.codegen import triton as codegen
    from torchfuse.schedulers import reduction

    header = codegen.HEADER
    start = header.index("def tf_row_max(x):")
    end = header.index("@triton.jit", start)
    forms = {name: header[:start] + text + "\n\n" + header[end:] for name, text in FORMS.items()}
    dtype = getattr(torch, args.dtype)
    t0 = time.time()
    results = []
    for case in cases([dtype], OPS):
        op, shape, _, fn, make_inputs, grad_idx, fwd_bytes, bwd_bytes = case
        if op not in OPS or tuple(shape) not in SHAPES:
            continue
        torch.manual_seed(0)
        inputs = make_inputs()
        for tile, ept, form in CANDIDATES:
            if time.time() - t0 > args.time_budget:
                print("time budget spent", flush=True)
                break
            reduction.TILE_ELEMENTS, reduction.ELEMENTS_PER_THREAD = tile, ept
            codegen.HEADER = forms.get(form, header)
            torch._dynamo.reset()
            f = torchfuse.compile(fn, dynamic=False)
            row = {"op": op, "shape": list(shape), "tile": tile, "per_thread": ept, "row_max": form}
            with torch.no_grad():
                row["fwd_us"] = device_ms(lambda: f(*inputs))[0] * 1e3
            ins = [t.detach().clone().requires_grad_(i in grad_idx) for i, t in enumerate(inputs)]
            out = f(*ins)
            dy = torch.ones_like(out) if out.dim() == 0 else torch.randn_like(out)
            wrt = [ins[i] for i in grad_idx]
            row["bwd_us"] = device_ms(lambda: torch.autograd.grad(out, wrt, dy, retain_graph=True))[0] * 1e3
            results.append(row)
            print(f"{op} {'x'.join(map(str, shape))} tile {tile} {ept}/thread max:{form}: "
                  f"fwd {row['fwd_us']:.1f} us, bwd {row['bwd_us']:.1f} us", flush=True)
            out = None
    codegen.HEADER = header
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(results, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
