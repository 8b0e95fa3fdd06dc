"""A novel op as one fusion: RMSNorm with a learned weight, gated by SiLU of a second input.

``out = x * rsqrt(mean(x**2, -1) + eps) * weight * silu(gate)``: the gated normalization of
Mamba-2 style blocks (and of gated MLP variants). PyTorch has no single kernel for it; eager
runs ``rms_norm``, ``silu`` and a multiply, and rounds each intermediate to the input dtype.
The fusion reads ``x`` and ``gate`` once, computes everything in float32, rounds once and
writes ``out``; its backward (derived automatically) recomputes the row statistics instead
of saving them.

Run (CPU, kernels in Triton's interpreter, small sizes)::

    PYTHONPATH=src python examples/gated_rmsnorm.py --device cpu --check

On a GPU, check and compare with eager and torch.compile::

    PYTHONPATH=src python examples/gated_rmsnorm.py --device cuda --check --bench
"""
from __future__ import annotations

import math
import sys

from example_utils import parse_args, print_bench, run_check, time_modes

ARGS = parse_args(__doc__.splitlines()[0], cpu_shapes="24x40,37x72", cuda_shapes="16384x1024,16384x4096")

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from torchfuse.fusion import Fusion  # noqa: E402

EPS = 1e-6


def define(dtype: torch.dtype) -> Fusion:
    """The fusion, written with primitive ops: ``x`` and ``gate`` of shape [T, H], ``weight``
    of shape [H]; one output of shape [T, H]."""
    f32 = torch.float32
    with Fusion("gated_rms_norm") as fd:
        x = fd.define_tensor(["T", "H"], dtype, contiguity=True, name="x")
        gate = fd.define_tensor(["T", "H"], dtype, contiguity=True, name="gate")
        weight = fd.define_tensor(["H"], dtype, name="weight")
        xf, gf = fd.ops.cast(x, f32), fd.ops.cast(gate, f32)
        rstd = fd.ops.rsqrt(fd.ops.mean(xf * xf, dims=[1], keepdim=True) + EPS)
        w = fd.ops.cast(fd.ops.broadcast_in_dim(weight, [1, x.shape[1]], [1]), f32)
        out = xf * rstd * w * (gf * fd.ops.sigmoid(gf))
        fd.add_output(fd.ops.cast(out, dtype))
    return fd


def eager(x, gate, weight):
    """The same in eager PyTorch: RMSNorm, SiLU, multiply."""
    return F.rms_norm(x, (x.shape[-1],), weight, EPS) * F.silu(gate)


def make_inputs(shape, dtype, device):
    t, h = shape
    g = torch.Generator(device=device).manual_seed(0)
    make = lambda *s, scale=1.0, shift=0.0: (shift + torch.randn(*s, generator=g, device=device) * scale).to(
        dtype).requires_grad_()
    return [make(t, h), make(t, h), make(h, scale=0.1, shift=1.0)]


def check(checks, op, dtype, device) -> None:
    floor = {torch.float32: 1e-5, torch.float64: 1e-12}.get(dtype, 2e-2)
    for shape in ARGS.shapes:
        inputs = make_inputs(shape, dtype, device)
        out = op(*inputs)
        grad = torch.randn_like(out)
        fused_grads = torch.autograd.grad(out, inputs, grad)
        ref_inputs = [t.detach().double().requires_grad_() for t in inputs]
        ref = eager(*ref_inputs)
        ref_grads = torch.autograd.grad(ref, ref_inputs, grad.double())
        eager_out = eager(*inputs)
        eager_grads = torch.autograd.grad(eager_out, inputs, grad)
        print(f"shape {shape[0]}x{shape[1]} {str(dtype).replace('torch.', '')}:")
        print(checks.close("out", out, eager_out, ref, floor))
        for name, a, e, r in zip(["grad x", "grad gate", "grad weight"], fused_grads, eager_grads, ref_grads):
            print(checks.close(name, a, e, r, floor * math.sqrt(shape[0])))
    fwd, bwd = op.num_kernels(device)
    sources = len(op.fusion.program(device).kernel_keys())
    print(f"kernels: forward {fwd}, backward {bwd}; the forward ran {len(ARGS.shapes)} shape(s) with "
          f"{sources} kernel source(s) (sizes are runtime arguments)")
    if fwd != 1:
        print(op.fusion.explain(device))
    checks.expect(fwd == 1, f"the forward became {fwd} kernels, not 1")


def bench(op, dtype) -> None:
    from torchfuse.bench.timing import copy_bandwidth

    compiled = torch.compile(eager)
    rows = []
    es = dtype.itemsize
    copy_gbs = copy_bandwidth("cuda", max(t * h for t, h in ARGS.shapes) * es)
    for shape in ARGS.shapes:
        t, h = shape
        inputs = make_inputs(shape, dtype, "cuda")
        grad = torch.randn(t, h, device="cuda", dtype=dtype)
        # fewest bytes: x and gate read, out written; the backward reads x, gate and the
        # output gradient and writes the gradients of x and gate
        fwd_bytes = 3 * t * h * es + h * es
        step_bytes = fwd_bytes + 5 * t * h * es + 2 * h * es
        for name, fn in {"eager": eager, "torch.compile": compiled, "torchfuse": op}.items():
            def forward():
                with torch.no_grad():
                    fn(*inputs)

            def training():
                torch.autograd.grad(fn(*inputs), inputs, grad)

            time_modes(rows, f"{t}x{h}", name, forward, training, fwd_bytes, step_bytes, ARGS.iters)
    rows.sort(key=lambda r: (r["shape"], r["mode"]))
    print_bench(f"gated RMSNorm, {str(dtype).replace('torch.', '')}, {torch.cuda.get_device_name()}, "
                f"torch {torch.__version__}", rows, copy_gbs)


def main() -> int:
    dtype = getattr(torch, ARGS.dtype)
    op = define(dtype).as_op()
    status = 0
    if ARGS.check:
        status = run_check(check, op, dtype, ARGS.device)
    if ARGS.bench:
        bench(op, dtype)
    return status


if __name__ == "__main__":
    sys.exit(main())
