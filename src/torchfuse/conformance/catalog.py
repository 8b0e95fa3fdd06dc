"""Which OpInfo entries the conformance run covers, in which order, and with which tolerances.

Takes PyTorch's operator database (``torch.testing._internal.common_methods_invocations.
op_db``, imported lazily: it costs several seconds and needs the ``expecttest`` package);
returns :class:`OpCase` entries (an OpInfo and its full name, ``name.variant``) ordered so
that ops touching the fusion registry come first, and the tolerance to compare each dtype's
results with.

Sources: ``OpInfo.supported_dtypes``, ``OpInfo.decorators`` (``DecorateInfo`` holding
``toleranceOverride``), and ``torch.testing.assert_close``'s per-dtype defaults.
"""
from __future__ import annotations

import dataclasses
import fnmatch
from typing import Any, Iterable, Sequence

import torch

#: Ops whose results are random numbers, or memory that was never written: eager cannot be
#: a reference for their values. They are listed in the table as ``skipped``.
RANDOM_OPS = frozenset({
    "bernoulli", "cauchy", "exponential", "geometric", "log_normal", "multinomial", "normal", "uniform",
    "rand_like", "randn_like", "randint", "randint_like", "randn", "rand", "nn.functional.dropout",
    "nn.functional.dropout2d", "nn.functional.dropout3d", "nn.functional.alpha_dropout",
    "nn.functional.feature_alpha_dropout", "nn.functional.rrelu", "nn.functional.fractional_max_pool2d",
    "nn.functional.fractional_max_pool3d", "nn.functional.scaled_dot_product_attention",
    "nn.functional.multi_head_attention_forward", "torch._C._nn._test_warn_in_autograd",
})
UNINITIALIZED_OPS = frozenset({"empty", "empty_like", "new_empty", "new_empty_strided", "empty_strided",
                               "empty_permuted", "torch.empty"})

#: Name fragments of ops that decompose into the registry's primitives (pointwise math,
#: reductions, normalizations, activations): run first when time is limited.
_FUSIBLE_HINTS = (
    "norm", "softmax", "sigmoid", "tanh", "relu", "gelu", "silu", "mish", "elu", "hardtanh", "hardswish",
    "hardsigmoid", "softplus", "logsigmoid", "threshold", "where", "clamp", "lerp", "addcmul", "addcdiv",
    "mean", "sum", "var", "std", "amax", "amin", "logsumexp", "prod", "any", "all", "max", "min", "argmax",
    "argmin", "square", "xlogy", "sinc", "frac", "rsub", "hypot", "copysign", "nan_to_num", "masked_fill",
    "cross_entropy", "nll_loss", "mse_loss", "l1_loss", "smooth_l1", "huber", "kl_div", "binary_cross_entropy",
    "cosine_similarity", "pairwise_distance", "normalize", "glu", "prelu", "celu", "selu", "softsign",
    "tanhshrink", "softshrink", "hardshrink", "logit", "expand", "permute", "transpose", "squeeze", "unsqueeze",
    "view", "reshape", "flatten", "t", "clone", "contiguous", "to", "type_as", "double", "float", "half",
    "bfloat16", "int", "long", "bool", "byte", "char", "short",
)


@dataclasses.dataclass(frozen=True)
class OpCase:
    """One OpInfo entry.

    Attributes:
        name: ``op.name``, with ``.variant_test_name`` appended when it has one.
        info: the ``OpInfo``.
        skip: why the entry is not compared at all (``"random"``, ...), or ``None``.
    """

    name: str
    info: Any
    skip: str | None = None


def load_op_db() -> list:
    """PyTorch's OpInfo list.

    Raises:
        ImportError: ``torch.testing._internal`` cannot be imported (it needs ``expecttest``).
    """
    from torch.testing._internal.common_methods_invocations import op_db

    return list(op_db)


def full_name(info: Any) -> str:
    return info.name + (f".{info.variant_test_name}" if info.variant_test_name else "")


def _registry_names() -> set[str]:
    from ..ir.ops import REGISTRY

    return set(REGISTRY)


def priority(info: Any, registry: set[str]) -> int:
    """0: the op is a registry op; 1: elementwise or reduction OpInfo, or a name that
    decomposes into registry ops; 2: everything else."""
    base = info.name.split(".")[-1].lstrip("_")
    if base in registry or info.name in registry:
        return 0
    kind = type(info).__name__
    if kind in ("UnaryUfuncInfo", "BinaryUfuncInfo", "ReductionOpInfo"):
        return 1
    if any(h == base or (len(h) > 3 and h in base) for h in _FUSIBLE_HINTS):
        return 1
    return 2


def select_ops(op_db: Sequence, patterns: Sequence[str] = (), shard: tuple[int, int] = (1, 1)) -> list[OpCase]:
    """The entries to run, registry ops first.

    Args:
        op_db: OpInfo entries.
        patterns: shell-style patterns on the full name (``"sin"``, ``"nn.functional.*"``);
            a dot-less pattern that names no entry selects the entries whose name ends in it
            (``"layer_norm"``: ``nn.functional.layer_norm``); empty selects every entry.
        shard: ``(i, n)``, 1-based: every n-th entry of the ordered list starting at i.
    """
    registry = _registry_names()
    tail_patterns = [p for p in patterns if not any(_matches(info, p) for info in op_db)]
    chosen = []
    for info in op_db:
        name = full_name(info)
        if patterns and not (any(_matches(info, p) for p in patterns)
                             or any(_matches_last_part(info, p) for p in tail_patterns)):
            continue
        skip = None
        if info.name in RANDOM_OPS or name in RANDOM_OPS:
            skip = "random"
        elif info.name in UNINITIALIZED_OPS:
            skip = "uninitialized memory"
        chosen.append(OpCase(name, info, skip))
    chosen.sort(key=lambda c: (priority(c.info, registry), c.name))
    i, n = shard
    return chosen[i - 1::n]


def fnmatchcase_base(info: Any, pattern: str) -> bool:
    return "." not in pattern and fnmatch.fnmatchcase(info.name, pattern)


def _matches(info: Any, pattern: str) -> bool:
    return fnmatch.fnmatchcase(full_name(info), pattern) or fnmatchcase_base(info, pattern)


def _matches_last_part(info: Any, pattern: str) -> bool:
    # a dot-less pattern that names no entry is tried on the last part of dotted names
    # (``layer_norm`` -> ``nn.functional.layer_norm``)
    return "." not in pattern and fnmatch.fnmatchcase(info.name.rsplit(".", 1)[-1], pattern)


def unmatched_patterns(op_db: Sequence, patterns: Sequence[str]) -> list[str]:
    """The patterns of ``patterns`` that select no entry of ``op_db``, by full name or, for a
    dot-less pattern, by the last part of a dotted name."""
    return [p for p in patterns if not any(_matches(info, p) or _matches_last_part(info, p) for info in op_db)]


DTYPE_NAMES = {
    "float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32, "float64": torch.float64,
    "complex32": torch.complex32, "complex64": torch.complex64, "complex128": torch.complex128,
    "int8": torch.int8, "int16": torch.int16, "int32": torch.int32, "int64": torch.int64, "uint8": torch.uint8,
    "uint16": torch.uint16, "uint32": torch.uint32, "uint64": torch.uint64, "bool": torch.bool,
}


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).replace("torch.", "")


def dtypes_of(info: Any, device_type: str, wanted: Iterable[torch.dtype] | None = None) -> list[torch.dtype]:
    """The dtypes ``info`` supports on ``device_type``, in a stable order, limited to ``wanted``."""
    order = list(DTYPE_NAMES.values())
    supported = set(info.supported_dtypes(device_type))
    if wanted is not None:
        supported &= set(wanted)
    return sorted(supported, key=lambda d: order.index(d) if d in order else len(order))


def backward_dtypes(info: Any, device_type: str) -> set[torch.dtype]:
    """The dtypes whose gradients the OpInfo says are supported (none without autograd)."""
    if not getattr(info, "supports_autograd", False):
        return set()
    return set(info.supported_backward_dtypes(device_type))


def default_tolerance(dtype: torch.dtype) -> tuple[float, float]:
    """``(rtol, atol)`` of ``torch.testing.assert_close`` for ``dtype`` (0, 0 for exact dtypes)."""
    from torch.testing._comparison import default_tolerances

    return default_tolerances(dtype)


def tolerance(info: Any, dtype: torch.dtype, device_type: str) -> tuple[float, float]:
    """``(rtol, atol)`` to compare ``dtype`` results of ``info`` with.

    The largest of ``assert_close``'s default for the dtype and every ``toleranceOverride``
    the OpInfo declares for that dtype on this device type (or on any device), whichever
    test it names: the op's own statement of how exact its results are.
    """
    rtol, atol = default_tolerance(dtype)
    try:
        from torch.testing._internal.common_device_type import toleranceOverride
        from torch.testing._internal.opinfo.core import DecorateInfo
    except ImportError:  # pragma: no cover - op_db itself imports both
        return rtol, atol
    for deco in getattr(info, "decorators", ()) or ():
        if not isinstance(deco, DecorateInfo):
            continue
        if deco.device_type not in (None, device_type):
            continue
        for d in deco.decorators:
            if isinstance(d, toleranceOverride) and dtype in d.d:
                rtol = max(rtol, d.d[dtype].rtol)
                atol = max(atol, d.d[dtype].atol)
    return rtol, atol
