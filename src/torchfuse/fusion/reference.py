"""Running a definition op by op through ATen: the fusion's eager reference.

Each recorded node is the ATen call it stands for (``node.target`` with ``node.args``), so the
reference is what PyTorch computes for the same program, op by op and with eager's rounding.
It serves three purposes: the result to check kernels against, the fallback on CPU tensors
when generated kernels cannot run there (no interpreter), and the function whose derivative
:mod:`torchfuse.fusion.autograd` traces (sizes stay symbolic under ``make_fx``: they are read
from the inputs and evaluated with Python arithmetic).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

import sympy
import torch

from ..ir.graph import Value
from ..ir.graph_ops import FMA, fma_reference
from .program import SizeOf
from .sizes import evaluate

if TYPE_CHECKING:
    from .definition import Fusion

aten = torch.ops.aten
prims = torch.ops.prims
_NEEDS_DEVICE = (aten.full.default, aten.scalar_tensor.default, aten.arange.default)


def _broadcast_in_dim(x, shape, broadcast_dims):
    for d in range(len(shape)):
        if d not in broadcast_dims:
            x = x.unsqueeze(d)
    return x.expand(shape)


#: differentiable ATen spellings of the prims and graph ops the definition records (which have
#: no autograd formula functorch can use)
_EAGER = {
    prims.broadcast_in_dim.default: _broadcast_in_dim,
    prims.convert_element_type.default: lambda x, dtype: x.to(dtype),
    FMA: fma_reference,
}


def run_reference(fusion: "Fusion", inputs: Sequence, overrides: dict[Value, Any] | None = None,
                  outputs: Sequence[Value] | None = None) -> list:
    """Evaluate the definition on ``inputs`` with ATen.

    Args:
        fusion: a fusion (finished or not).
        inputs: tensors and numbers, one per declared input (real, fake or traced tensors).
        overrides: values to use instead of computing them (random numbers saved by a
            forward pass, for its backward).
        outputs: which values to return (default: the fusion's outputs).

    Returns:
        the values of ``outputs``, in order.
    """
    overrides = overrides or {}
    env: dict[Value, Any] = dict(zip(fusion.inputs, inputs))
    canon = fusion.sizes.canonical_map()
    sym_values: dict = {}
    for spec, x in zip(fusion.specs, inputs):
        if spec.is_tensor:
            for d, s in enumerate(spec.shape):
                root = sympy.sympify(s).xreplace(canon) if not isinstance(s, int) else s
                if isinstance(root, sympy.Symbol) and root not in sym_values:
                    sym_values[root] = x.shape[d]
    device = next((x.device for x in inputs if isinstance(x, torch.Tensor)), torch.device("cpu"))

    def value(x):
        if isinstance(x, Value):
            return env[x]
        if isinstance(x, sympy.Expr):
            return evaluate(x.xreplace(canon), sym_values)
        if isinstance(x, (list, tuple)):
            return type(x)(value(y) for y in x)
        return x

    for node in fusion.nodes:
        if node.outputs and all(o in overrides for o in node.outputs):
            env.update((o, overrides[o]) for o in node.outputs)
            continue
        if isinstance(node.target, SizeOf):
            result = evaluate(sympy.sympify(node.target.expr).xreplace(canon), sym_values)
        else:
            kwargs = {k: value(v) for k, v in node.kwargs.items()}
            if node.target in _NEEDS_DEVICE:
                kwargs["device"] = device
            result = _EAGER.get(node.target, node.target)(*value(node.args), **kwargs)
        if len(node.outputs) == 1:
            env[node.outputs[0]] = result
        else:
            env.update(zip(node.outputs, result))
    return [env[o] for o in (fusion.outputs if outputs is None else outputs)]
