"""Part of a transformer block as one fusion: bias + dropout + residual add + LayerNorm.

After a transformer block's attention (or MLP) output projection, the projection's bias is
added, dropout applied, the residual stream added, and the sum normalized: pre-LN blocks keep
the sum as the new residual stream and feed the normalized value to the next sublayer. Eager
PyTorch runs this as four kernels (add, dropout, add, layer_norm) that each read and write the
whole activation; the fusion below reads ``x`` and ``residual`` once and writes the normalized
output, the new residual stream and the dropout mask in one kernel. Its backward is derived
automatically (two kernels: the row reductions of the LayerNorm backward, and the column
sums of the weight and bias gradients).

Run (CPU, kernels in Triton's interpreter, small sizes)::

    PYTHONPATH=src python examples/transformer_block_fusion.py --device cpu --check

On a GPU, check and compare with eager and torch.compile::

    PYTHONPATH=src python examples/transformer_block_fusion.py --device cuda --check --bench
"""
from __future__ import annotations

import math
import sys

from example_utils import parse_args, print_bench, run_check, time_modes

ARGS = parse_args(__doc__.splitlines()[0], cpu_shapes="24x40,37x72", cuda_shapes="16384x1024,16384x4096",
                  dropout=True)

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from torchfuse.fusion import Fusion  # noqa: E402

EPS = 1e-5


def define(dtype: torch.dtype, p: float) -> Fusion:
    """The fusion: inputs ``x`` (the projection's output) and ``residual`` of shape [T, H],
    ``bias``, ``weight``, ``ln_bias`` of shape [H]; outputs the normalized value, the new
    residual stream and the dropout keep-mask."""
    with Fusion("bias_dropout_add_layer_norm") as fd:
        x = fd.define_tensor(["T", "H"], dtype, contiguity=True, name="x")
        bias = fd.define_tensor(["H"], dtype, name="bias")
        residual = fd.define_tensor(["T", "H"], dtype, contiguity=True, name="residual")
        weight = fd.define_tensor(["H"], dtype, name="weight")
        ln_bias = fd.define_tensor(["H"], dtype, name="ln_bias")
        h = x + fd.ops.broadcast_in_dim(bias, x.shape, [1])
        h, keep = fd.ops.dropout(h, p)
        z = h + residual
        out, _mean, _rstd = fd.ops.layer_norm(z, weight, ln_bias, eps=EPS)
        fd.add_output(out)
        fd.add_output(z)
        fd.add_output(keep)
    return fd


def eager(x, bias, residual, weight, ln_bias, p: float):
    """The same in eager PyTorch."""
    h, keep = torch.native_dropout(x + bias, p, True)
    z = h + residual
    return F.layer_norm(z, (z.shape[-1],), weight, ln_bias, EPS), z, keep


def with_mask(x, bias, residual, weight, ln_bias, keep, p: float):
    """Eager PyTorch with a given dropout mask (to compare values with the fusion's)."""
    h = (x + bias) * keep * (1.0 / (1.0 - p))
    z = h + residual
    return F.layer_norm(z, (z.shape[-1],), weight, ln_bias, EPS), z


def make_inputs(shape, dtype, device, requires_grad=True):
    t, h = shape
    g = torch.Generator(device=device).manual_seed(0)
    make = lambda *s, scale=1.0: (torch.randn(*s, generator=g, device=device) * scale).to(dtype).requires_grad_(
        requires_grad)
    return [make(t, h), make(h, scale=0.1), make(t, h), 1 + make(h, scale=0.1), make(h, scale=0.1)]


def check(checks, op, dtype, device, p: float) -> None:
    floor = {torch.float32: 1e-5, torch.float64: 1e-12}.get(dtype, 2e-2)
    for shape in ARGS.shapes:
        inputs = make_inputs(shape, dtype, device)
        out, z, keep = op(*inputs)
        grads = [torch.randn_like(out), torch.randn_like(z)]
        fused_grads = torch.autograd.grad([out, z], inputs, grads)
        n = keep.numel()
        rate = keep.float().mean().item()
        checks.expect(abs(rate - (1 - p)) <= 5 * math.sqrt(p * (1 - p) / n) + 1e-9, f"keep rate {rate} for p={p}")
        ref_inputs = [t.detach().double().requires_grad_() for t in inputs]
        ref = with_mask(*ref_inputs, keep, p)
        ref_grads = torch.autograd.grad(ref, ref_inputs, [g.double() for g in grads])
        eager_out = with_mask(*inputs, keep, p)
        eager_grads = torch.autograd.grad(eager_out, inputs, grads)
        print(f"shape {shape[0]}x{shape[1]} {str(dtype).replace('torch.', '')}: keep rate {rate:.3f} (p={p})")
        print(checks.close("out", out, eager_out[0], ref[0], floor))
        print(checks.close("residual stream", z, eager_out[1], ref[1], floor))
        for name, a, e, r in zip(["grad x", "grad bias", "grad residual", "grad weight", "grad ln_bias"],
                                 fused_grads, eager_grads, ref_grads):
            print(checks.close(name, a, e, r, floor * math.sqrt(shape[0])))
    fwd, bwd = op.num_kernels(device)
    sources = len(op.fusion.program(device, op.extras).kernel_keys())
    print(f"kernels: forward {fwd}, backward {bwd}; the forward ran {len(ARGS.shapes)} shape(s) with "
          f"{sources} kernel source(s) (sizes are runtime arguments)")
    if fwd != 1:
        print(op.fusion.explain(device))
    checks.expect(fwd == 1, f"the forward became {fwd} kernels, not 1")


def bench(op, dtype, p: float) -> None:
    from torchfuse.bench.timing import copy_bandwidth

    compiled = torch.compile(eager)
    rows = []
    es = dtype.itemsize
    copy_gbs = copy_bandwidth("cuda", max(t * h for t, h in ARGS.shapes) * es)
    for shape in ARGS.shapes:
        t, h = shape
        inputs = make_inputs(shape, dtype, "cuda")
        grads = [torch.randn(t, h, device="cuda", dtype=dtype) for _ in range(2)]
        # fewest bytes: x, residual read, out and z written, the mask (1 byte) written; the
        # backward reads both output gradients, z and the mask, and writes one input gradient
        fwd_bytes = 4 * t * h * es + t * h + 3 * h * es
        step_bytes = fwd_bytes + 4 * t * h * es + t * h + 6 * h * es
        backends = {"eager": lambda *a: eager(*a, p), "torch.compile": lambda *a: compiled(*a, p),
                    "torchfuse": lambda *a: op(*a)}
        for name, fn in backends.items():
            def forward():
                with torch.no_grad():
                    fn(*inputs)

            def training():
                out, z, _ = fn(*inputs)
                torch.autograd.grad([out, z], inputs, grads)

            time_modes(rows, f"{t}x{h}", name, forward, training, fwd_bytes, step_bytes, ARGS.iters)
    rows.sort(key=lambda r: (r["shape"], r["mode"]))
    print_bench(f"bias + dropout + residual + LayerNorm, {str(dtype).replace('torch.', '')}, "
                f"{torch.cuda.get_device_name()}, torch {torch.__version__}", rows, copy_gbs)


def main() -> int:
    dtype = getattr(torch, ARGS.dtype)
    op = define(dtype, ARGS.p).as_op()
    status = 0
    if ARGS.check:
        status = run_check(check, op, dtype, ARGS.device, ARGS.p)
    if ARGS.bench:
        bench(op, dtype, ARGS.p)
    return status


if __name__ == "__main__":
    sys.exit(main())
