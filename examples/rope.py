"""Rotary position embeddings (RoPE) of queries and keys as one kernel, written as plain PyTorch.

Llama-style attention rotates each head's query and key by position before the product:
``q * cos + rotate_half(q) * sin``, where ``rotate_half`` concatenates the negated second half
of the head dim with the first. Eager PyTorch runs about ten kernels for the pair (slices
copied by ``cat``, a negation, multiplies and adds), each reading and writing a whole
activation. ``@torchfuse.fusion.fused`` traces the function below as written: the halves are
views of the arguments that the kernel reads through their strides, and the concatenation is
a select in the same kernel, so the forward reads ``q``, ``k``, ``cos`` and ``sin`` once and
writes the two results, rounding each step as eager does. Its backward is derived from the
same function.

Shapes are ``BxHEADSxTxD``: ``q`` and ``k`` are ``[B, HEADS, T, D]`` (``D`` even), ``cos`` and
``sin`` ``[T, D]``, broadcast over batch and heads.

Run (CPU, kernels in Triton's interpreter, small sizes)::

    PYTHONPATH=src python examples/rope.py --device cpu --check

On a GPU, check and compare with eager and torch.compile::

    PYTHONPATH=src python examples/rope.py --device cuda --check --bench
"""
from __future__ import annotations

import math
import sys

from example_utils import parse_args, print_bench, run_check, time_modes

ARGS = parse_args(__doc__.splitlines()[0], cpu_shapes="2x3x5x8,1x2x7x16", cuda_shapes="8x32x2048x128,1x32x8192x128",
                  shape_names="BxHEADSxTxD")

import torch  # noqa: E402

import torchfuse  # noqa: E402


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    """``[-x2, x1]`` of the halves ``x1, x2`` of the last dim (Llama's, as in HuggingFace)."""
    d = x.shape[-1] // 2
    return torch.cat((-x[..., d:], x[..., :d]), dim=-1)


def eager(q, k, cos, sin):
    """RoPE of ``q`` and ``k`` in eager PyTorch."""
    return q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin


rope = torchfuse.fusion.fused(eager, interpret=ARGS.device == "cpu")


def make_inputs(shape, dtype, device):
    b, heads, t, d = shape
    g = torch.Generator(device=device).manual_seed(0)
    q = torch.randn(b, heads, t, d, generator=g, device=device).to(dtype).requires_grad_()
    k = torch.randn(b, heads, t, d, generator=g, device=device).to(dtype).requires_grad_()
    # Llama's tables: angle = position * 10000 ** (-2i / D), the two halves alike
    inv = 10000.0 ** (-torch.arange(0, d, 2, device=device, dtype=torch.float64) / d)
    angles = torch.arange(t, device=device, dtype=torch.float64)[:, None] * inv[None, :]
    angles = torch.cat((angles, angles), dim=-1)
    return [q, k, angles.cos().to(dtype), angles.sin().to(dtype)]


def check(checks, dtype, device) -> None:
    for shape in ARGS.shapes:
        inputs = make_inputs(shape, dtype, device)
        q, k = inputs[:2]
        outs = rope(*inputs)
        grads = [torch.randn_like(o) for o in outs]
        fused_grads = torch.autograd.grad(outs, [q, k], grads)
        eager_outs = eager(*inputs)
        eager_grads = torch.autograd.grad(eager_outs, [q, k], grads)
        ref_inputs = [t.detach().double().requires_grad_() for t in inputs]
        ref_outs = eager(*ref_inputs)
        ref_grads = torch.autograd.grad(ref_outs, ref_inputs[:2], [g.double() for g in grads])
        print(f"shape {'x'.join(map(str, shape))} {str(dtype).replace('torch.', '')}:")
        for name, a, e, r in zip(["q out", "k out", "grad q", "grad k"], [*outs, *fused_grads],
                                 [*eager_outs, *eager_grads], [*ref_outs, *ref_grads]):
            print(checks.close(name, a, e, r, 0.0))
            # the same ops in the same order: eager's values, bit for bit
            checks.expect(torch.equal(a, e), f"{name} differs from eager's")
    fwd = rope.fusion_for(*make_inputs(ARGS.shapes[0], dtype, device)).num_kernels(device)
    print(f"kernels: forward {fwd}, for {len(ARGS.shapes)} shape(s) (sizes are runtime arguments)")
    checks.expect(fwd == 1, f"the forward became {fwd} kernels, not 1")


def bench(dtype) -> None:
    from torchfuse.bench.timing import copy_bandwidth

    compiled = torch.compile(eager)
    rows = []
    es = dtype.itemsize
    copy_gbs = copy_bandwidth("cuda", max(math.prod(s) for s in ARGS.shapes) * es)
    for shape in ARGS.shapes:
        inputs = make_inputs(shape, dtype, "cuda")
        n, table = math.prod(shape), shape[2] * shape[3]
        grads = [torch.randn(shape, device="cuda", dtype=dtype) for _ in range(2)]
        # fewest bytes: q, k, cos and sin read, two results written; the backward reads the
        # two output gradients and the tables and writes the gradients of q and k
        fwd_bytes = 4 * n * es + 2 * table * es
        step_bytes = fwd_bytes + 4 * n * es + 2 * table * es
        for name, fn in {"eager": eager, "torch.compile": compiled, "torchfuse": rope}.items():
            def forward():
                with torch.no_grad():
                    fn(*inputs)

            def training():
                torch.autograd.grad(fn(*inputs), inputs[:2], grads)

            time_modes(rows, "x".join(map(str, shape)), name, forward, training, fwd_bytes, step_bytes, ARGS.iters)
    rows.sort(key=lambda r: (r["shape"], r["mode"]))
    print_bench(f"RoPE of q and k, {str(dtype).replace('torch.', '')}, {torch.cuda.get_device_name()}, "
                f"torch {torch.__version__}", rows, copy_gbs)


def main() -> int:
    dtype = getattr(torch, ARGS.dtype)
    status = 0
    if ARGS.check:
        status = run_check(check, dtype, ARGS.device)
    if ARGS.bench:
        bench(dtype)
    return status


if __name__ == "__main__":
    sys.exit(main())
