"""Comparing a sample's values from torchfuse with eager's (and with a float64 reference), and
the exceptions they raised: what :mod:`.runner` decides a sample's outcome with.
"""
from __future__ import annotations

from typing import Any

import torch
import torch.utils._pytree as pytree


def same_exception(raised: BaseException, expected: type) -> bool:
    """``raised`` is ``expected`` or wraps it (TorchDynamo wraps eager errors raised while
    tracing in ``TorchRuntimeError``, whose cause is the eager exception)."""
    seen = 0
    e: BaseException | None = raised
    while e is not None and seen < 4:
        if isinstance(e, expected):
            return True
        e = e.__cause__
        seen += 1
    return False


def compare(actual: Any, expected: Any, rtol: float, atol: float) -> str | None:
    """``None`` when ``actual`` matches ``expected`` (same structure, dtypes and shapes; values
    within tolerance, NaN where eager has NaN); else a one-line description.

    Each tensor is compared at the larger of ``(rtol, atol)`` and ``assert_close``'s default
    for its own dtype (an int8 sample's softmax in float64 is compared as float64)."""
    from .catalog import default_tolerance

    a_flat, a_spec = pytree.tree_flatten(actual)
    e_flat, e_spec = pytree.tree_flatten(expected)
    if len(a_flat) != len(e_flat):
        return f"{len(a_flat)} outputs, eager has {len(e_flat)}"
    for i, (a, e) in enumerate(zip(a_flat, e_flat)):
        if isinstance(e, torch.Tensor):
            if not isinstance(a, torch.Tensor):
                return f"output {i} is {type(a).__name__}, eager has a tensor"
            if a.dtype != e.dtype:
                return f"output {i} has dtype {a.dtype}, eager {e.dtype}"
            if a.shape != e.shape:
                return f"output {i} has shape {tuple(a.shape)}, eager {tuple(e.shape)}"
            if e.layout != torch.strided or e.is_quantized:
                continue
            own_rtol, own_atol = default_tolerance(e.dtype)
            try:
                torch.testing.assert_close(a.detach(), e.detach(), rtol=max(rtol, own_rtol),
                                           atol=max(atol, own_atol), equal_nan=True,
                                           check_device=True, check_stride=False)
            except AssertionError as err:
                lines = [ln.strip() for ln in str(err).splitlines() if ln.strip()]
                return f"output {i}: " + "; ".join(lines[:3])
        elif isinstance(e, float) and isinstance(a, float) and e != e and a != a:
            continue
        elif a != e:
            return f"output {i} is {a!r}, eager {e!r}"
    return None


def compare_with_reference(actual: Any, expected: Any, reference: Any, rtol: float, atol: float) -> str | None:
    """``None`` when every floating-point element of ``actual`` is within tolerance of eager's,
    or no farther from the float64 ``reference`` than eager's is, plus the tolerance; else a
    one-line description.

    Eager on a CPU rounds some fp16/bf16 intermediates (``alpha * b`` in ``add``, the shifted
    logits of ``log_softmax``) that PyTorch's CUDA kernels, and torchfuse, keep in fp32; this
    tells such a difference from an error."""
    from .catalog import default_tolerance

    a_flat, e_flat, r_flat = (pytree.tree_leaves(x) for x in (actual, expected, reference))
    if not len(a_flat) == len(e_flat) == len(r_flat):
        return "the float64 program has other outputs"
    for i, (a, e, r) in enumerate(zip(a_flat, e_flat, r_flat)):
        if not (isinstance(e, torch.Tensor) and isinstance(a, torch.Tensor) and isinstance(r, torch.Tensor)):
            continue
        if e.layout != torch.strided or e.is_quantized or a.shape != e.shape or r.shape != e.shape:
            continue
        if not (e.dtype.is_floating_point or e.dtype.is_complex):
            if not torch.equal(a.detach(), e.detach()):
                return f"output {i} differs from eager"
            continue
        own_rtol, own_atol = default_tolerance(e.dtype)
        tol_r, tol_a = max(rtol, own_rtol), max(atol, own_atol)
        wide = torch.complex128 if e.dtype.is_complex or r.dtype.is_complex else torch.float64
        a64, e64, r64 = (x.detach().to(wide) for x in (a, e, r))
        near_eager = torch.isclose(a64, e64, rtol=tol_r, atol=tol_a, equal_nan=True)
        with torch.no_grad():
            err_a, err_e = (a64 - r64).abs(), (e64 - r64).abs()
            near_exact = (err_a <= err_e + tol_a + tol_r * r64.abs()) | (a64 == r64)
            # eager's NaN where float64 has a number: torchfuse must be close to that number
            near_exact |= e64.isnan() & ~r64.isnan() & torch.isclose(a64, r64, rtol=tol_r, atol=tol_a)
        bad = ~(near_eager | near_exact)
        if bad.any():
            k = int(bad.flatten().nonzero()[0])
            return (f"output {i}: {int(bad.sum())} of {bad.numel()} elements differ from eager and from float64: "
                    f"{a64.flatten()[k].item():.6g} where eager has {e64.flatten()[k].item():.6g}, "
                    f"float64 {r64.flatten()[k].item():.6g}")
    return None
