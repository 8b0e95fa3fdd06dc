"""The micro suite: single memory-bound ops, the fusions torchfuse exists for.

Each op is a small module run on tensors in the mode's dtype (no autocast): forward for
``infer-*`` modes, forward and backward (with given output gradients, no optimizer) for
``train-*`` modes. Results carry the fewest bytes a step must move, so the report shows the
achieved bandwidth as a fraction of a device copy measured in the same run.

Bytes moved, a lower bound: the forward reads every input and parameter once and writes every
output once; the backward reads the output gradients and the inputs and parameters again and
writes one gradient per input and parameter that requires one. Random masks, running
statistics and saved statistics (means, reciprocal standard deviations) are not counted.
"""
from __future__ import annotations

import functools

import torch
import torch.nn.functional as F

from ..modes import MODES
from ..workload import BuildContext, Case, Workload


class PointwiseChain(torch.nn.Module):
    """``tanh(0.5 x + y) * sigmoid(x) + y``: a chain eager runs as six kernels."""

    def forward(self, x, y):
        return torch.tanh(x * 0.5 + y) * torch.sigmoid(x) + y


class RowSum(torch.nn.Module):
    def forward(self, x):
        return x.sum(dim=-1)


class ColumnSum(torch.nn.Module):
    def forward(self, x):
        return x.sum(dim=0)


class Softmax(torch.nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=-1)


class LogSoftmax(torch.nn.Module):
    def forward(self, x):
        return torch.log_softmax(x, dim=-1)


class CrossEntropy(torch.nn.Module):
    def forward(self, logits, target):
        return F.cross_entropy(logits, target)


class DropoutResidualLayerNorm(torch.nn.Module):
    """``LayerNorm(dropout(x) + residual)``, the transformer block epilogue."""

    def __init__(self, hidden: int, dtype, device):
        super().__init__()
        self.dropout = torch.nn.Dropout(0.1)
        self.norm = torch.nn.LayerNorm(hidden, dtype=dtype, device=device)

    def forward(self, x, residual):
        return self.norm(self.dropout(x) + residual)


class BiasGelu(torch.nn.Module):
    """``gelu(x + bias)``, the epilogue of a transformer MLP's first matrix product."""

    def __init__(self, hidden: int, dtype, device):
        super().__init__()
        self.bias = torch.nn.Parameter(torch.randn(hidden, dtype=dtype, device=device))

    def forward(self, x):
        return F.gelu(x + self.bias)


class RotaryEmbedding(torch.nn.Module):
    """Rotary position embedding (RoPE): ``q cos + rotate_half(q) sin``."""

    def forward(self, q, cos, sin):
        half = q.shape[-1] // 2
        rotated = torch.cat((-q[..., half:], q[..., :half]), dim=-1)
        return q * cos + rotated * sin


class Unary(torch.nn.Module):
    """A ``torch.nn`` module called as ``forward(x)`` (their own argument names differ)."""

    def __init__(self, module: torch.nn.Module):
        super().__init__()
        self.module = module

    def forward(self, x):
        return self.module(x)


def _x(shape, dtype, device):
    return {"x": torch.randn(shape, dtype=dtype, device=device)}


#: name -> (module factory (hidden size, dtype, device), inputs factory, full shape, quick shape)
OPS = {
    "pointwise_chain": (lambda n, dt, dev: PointwiseChain(),
                        lambda s, dt, dev: {"x": torch.randn(s, dtype=dt, device=dev),
                                            "y": torch.randn(s, dtype=dt, device=dev)},
                        (65536, 1024), (64, 32)),
    "row_sum": (lambda n, dt, dev: RowSum(), _x, (65536, 1024), (64, 32)),
    "column_sum": (lambda n, dt, dev: ColumnSum(), _x, (65536, 1024), (64, 32)),
    "layer_norm": (lambda n, dt, dev: Unary(torch.nn.LayerNorm(n, dtype=dt, device=dev)), _x,
                   (65536, 1024), (64, 32)),
    "rms_norm": (lambda n, dt, dev: Unary(torch.nn.RMSNorm(n, dtype=dt, device=dev)), _x, (65536, 1024), (64, 32)),
    "batch_norm": (lambda n, dt, dev: Unary(torch.nn.BatchNorm2d(n, dtype=dt, device=dev)), _x,
                   (64, 256, 56, 56), (2, 8, 4, 4)),
    "group_norm": (lambda n, dt, dev: Unary(torch.nn.GroupNorm(min(32, n // 2), n, dtype=dt, device=dev)), _x,
                   (64, 256, 56, 56), (2, 8, 4, 4)),
    "softmax": (lambda n, dt, dev: Softmax(), _x, (65536, 1024), (64, 32)),
    "log_softmax": (lambda n, dt, dev: LogSoftmax(), _x, (65536, 1024), (64, 32)),
    "cross_entropy": (lambda n, dt, dev: CrossEntropy(),
                      lambda s, dt, dev: {"logits": torch.randn(s, dtype=dt, device=dev),
                                          "target": torch.randint(0, s[-1], s[:1], device=dev)},
                      (8192, 32768), (16, 40)),
    "dropout_residual_layer_norm": (lambda n, dt, dev: DropoutResidualLayerNorm(n, dt, dev),
                                    lambda s, dt, dev: {"x": torch.randn(s, dtype=dt, device=dev),
                                                        "residual": torch.randn(s, dtype=dt, device=dev)},
                                    (65536, 1024), (64, 32)),
    "bias_gelu": (lambda n, dt, dev: BiasGelu(n, dt, dev), _x, (65536, 4096), (64, 32)),
    "rope": (lambda n, dt, dev: RotaryEmbedding(),
             lambda s, dt, dev: {"q": torch.randn(s, dtype=dt, device=dev),
                                 "cos": torch.randn(s[-2:], dtype=dt, device=dev),
                                 "sin": torch.randn(s[-2:], dtype=dt, device=dev)},
             (16, 32, 2048, 128), (1, 2, 8, 16)),
}

#: inputs that never require a gradient
NO_GRAD_INPUTS = {"target", "cos", "sin"}


def _nbytes(tensors) -> int:
    return sum(t.numel() * t.element_size() for t in tensors)


def minimal_bytes(model: torch.nn.Module, inputs: dict, outputs: list, training: bool) -> int:
    """The lower bound on bytes moved described in the module docstring."""
    params = [p for p in model.parameters()]
    tensors = [t for t in inputs.values() if isinstance(t, torch.Tensor)]
    forward = _nbytes(tensors) + _nbytes(params) + _nbytes(outputs)
    if not training:
        return forward
    needs_grad = [t for t in tensors if t.requires_grad] + [p for p in params if p.requires_grad]
    return forward + _nbytes(outputs) + _nbytes(tensors) + _nbytes(params) + _nbytes(needs_grad)


def build(name: str, shape: tuple[int, ...], ctx: BuildContext) -> Workload:
    """The workload of micro op ``name`` at ``shape``, tensors in ``ctx.mode.dtype``."""
    make_module, make_inputs, _, _ = OPS[name]
    dtype, device, training = ctx.mode.dtype, ctx.device, ctx.mode.training
    torch.manual_seed(ctx.seed)
    hidden = shape[1] if len(shape) == 4 else shape[-1]
    model = make_module(hidden, dtype, device).train(training)
    inputs = make_inputs(shape, dtype, device)
    if ctx.channels_last and len(shape) == 4:
        inputs = {k: v.contiguous(memory_format=torch.channels_last) if v.dim() == 4 else v for k, v in inputs.items()}
    with torch.no_grad():
        out = model(**inputs)
    outputs = [out] if isinstance(out, torch.Tensor) else list(out)
    grad_outputs = None
    if training:
        for k, v in inputs.items():
            if v.is_floating_point() and k not in NO_GRAD_INPUTS:
                v.requires_grad_(True)
        grad_outputs = tuple(torch.randn_like(o) for o in outputs)
    return Workload(model=model, inputs=inputs, loss=None, grad_outputs=grad_outputs, apply_precision=False,
                    bytes_moved=minimal_bytes(model, inputs, outputs, training),
                    info={"shape": list(shape), "dtype": str(dtype).replace("torch.", "")})


def cases(quick: bool) -> list[Case]:
    """One case per op, in every mode, at the full or the ``--quick`` shape."""
    out = []
    for name, (_, _, full, small) in OPS.items():
        shape = small if quick else full
        out.append(Case("micro", name, shape, tuple(MODES), functools.partial(build, name, shape),
                        vision=len(shape) == 4))
    return out
