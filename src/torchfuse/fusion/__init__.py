"""Defining fused operations directly: build a fusion op by op, get one kernel.

``torch.compile`` finds fusions in a captured program; this package lets a program *state*
one, as nvFuser's Python frontend does, on the same IR, segmenter, schedulers, code generator
and kernel cache as the compiler::

    import torch
    from torchfuse.fusion import Fusion

    with Fusion("bias_relu") as fd:
        x = fd.define_tensor([-1, -1], torch.float32)
        b = fd.define_tensor([1, -1], torch.float32)
        fd.add_output(fd.ops.relu(x + b))
    (y,) = fd.execute([torch.randn(8, 32, device="cuda"), torch.randn(1, 32, device="cuda")])
    fd.num_kernels()   # 1

Modules: :mod:`.definition` (:class:`Fusion`), :mod:`.ops` (the op namespace ``fd.ops``),
:mod:`.composites` (silu, gelu, softmax, dropout, layer_norm, rms_norm from primitives),
:mod:`.concat` (``cat`` as a select over a stacked dim), :mod:`.views` (``@fused``'s views
of its arguments as inputs),
:mod:`.apply` (checks and inference of one op), :mod:`.sizes` (symbolic sizes),
:mod:`.inputs` (declarations and their check at execution), :mod:`.program` (IR graph,
segmentation and runtime per device), :mod:`.reference` (the eager op-by-op reference),
:mod:`.autograd` (a fusion as a differentiable PyTorch operator), :mod:`.trace` (the
:func:`fused` decorator), :mod:`.traces` (one trace of it and the conditions on sizes that
choose it).
"""
from __future__ import annotations

from .autograd import FusionOp
from .definition import Fusion
from .errors import DefinitionError, DefinitionTypeError
from .tensor import FusionScalar, FusionTensor
from .trace import fused

__all__ = ["Fusion", "FusionOp", "FusionTensor", "FusionScalar", "DefinitionError", "DefinitionTypeError",
           "fused"]
