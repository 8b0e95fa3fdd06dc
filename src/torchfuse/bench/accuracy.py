"""Accuracy: each compiled backend against eager, judged against a float64 reference.

The rule is the one PyTorch's own compiler benchmarks apply, through their own helper,
``torch._dynamo.utils.same``: a result passes when it is ``allclose`` to eager's at the
mode's tolerance, or else when its RMS error against the float64 result is no worse than a
small multiple (2, or 3 for fp16/bf16 and small tensors) of eager's RMS error against the
same float64 result. Training compares the loss (or the outputs) and every gradient after
one forward and backward pass (before any optimizer step); inference compares the outputs.

Random ops would make the comparison meaningless, so accuracy runs use a copy of the model
with dropout and drop-path probabilities set to zero (:func:`disable_dropout`), and eager is
run twice to check that it is itself deterministic. Source: ``benchmarks/dynamo/common.py``
in the PyTorch repository (``check_accuracy``).
"""
from __future__ import annotations

import dataclasses
from typing import Any

import torch

from .errors import describe

#: accuracy values recorded in results
PASS, FAIL, EAGER_DIFFERS, REFERENCE, NOT_CHECKED = "pass", "fail", "eager-nondeterministic", "reference", "not-checked"


def _dropout_attributes(model: torch.nn.Module):
    """``(module, attribute name)`` of every dropout probability in ``model``: the ``p`` of
    ``nn.Dropout*`` modules and float attributes named like ``*drop*`` (HuggingFace's
    ``attention_dropout``, T5's ``dropout_rate``, TIMM's ``DropPath.drop_prob``...)."""
    for module in model.modules():
        if isinstance(module, torch.nn.modules.dropout._DropoutNd):
            yield module, "p"
        for name, value in vars(module).items():
            if isinstance(value, float) and not isinstance(value, bool) and "drop" in name.lower():
                yield module, name


def has_active_dropout(model: torch.nn.Module) -> bool:
    """Whether ``model`` has a nonzero dropout or drop-path probability and is in train mode."""
    return model.training and any(getattr(m, a) > 0 for m, a in _dropout_attributes(model))


def disable_dropout(model: torch.nn.Module) -> torch.nn.Module:
    """Set every dropout and drop-path probability of ``model`` to 0, in place; returns it."""
    for module, attr in list(_dropout_attributes(model)):
        setattr(module, attr, 0.0)
    return model


@dataclasses.dataclass
class References:
    """Eager's results for the accuracy check.

    Attributes:
        eager: eager's results in the mode's precision (tensors by name, as
            :meth:`~torchfuse.bench.steps.PreparedBackend.forward_backward` returns them).
        eager_deterministic: a second eager run equals the first; when not, compiled
            backends cannot be judged.
        fp64: the float64 results, or ``None`` when the model does not run in float64.
        fp64_error: why there is no float64 reference.
    """

    eager: Any
    eager_deterministic: bool
    fp64: Any
    fp64_error: str | None = None


def compare(references: References, result: Any, tolerance: float) -> tuple[str, str]:
    """Judge ``result`` (a backend's tensors, by name) against eager's.

    Returns:
        ``(status, detail)``: status is :data:`PASS`, :data:`FAIL` or :data:`EAGER_DIFFERS`;
        detail holds the messages ``same`` logged (the RMS errors), or why there is no
        float64 reference.
    """
    from torch._dynamo.utils import same

    if not references.eager_deterministic:
        return EAGER_DIFFERS, "two eager runs differ; the model is not deterministic"
    messages: list[str] = []

    def log_error(msg, *args):
        messages.append(msg % args if args else str(msg))

    try:
        ok = same(references.eager, result, fp64_ref=references.fp64, cos_similarity=False, tol=tolerance,
                  equal_nan=True, exact_dtype=True, log_error=log_error)
    except Exception as e:  # a structural mismatch (types, keys) is a failure, not a crash
        ok, messages = False, messages + [describe(e)]
    detail = "; ".join(messages[:4])
    if references.fp64 is None:
        detail = f"no float64 reference ({references.fp64_error}); {detail}".rstrip("; ")
    return (PASS if ok else FAIL), detail


def results_equal(a: Any, b: Any) -> bool:
    """Whether two eager runs agree (``same`` at tolerance 1e-4): the check PyTorch's
    benchmarks use to call a model non-deterministic."""
    from torch._dynamo.utils import same

    try:
        return bool(same(a, b, tol=1e-4, equal_nan=True, log_error=lambda *a: None))
    except Exception:
        return False


def tree_tensors(tree: Any) -> list:
    """The tensors of ``tree``, in ``torch.utils._pytree`` order, detached and cloned."""
    from torch.utils._pytree import tree_flatten

    leaves, _ = tree_flatten(tree)
    return [t.detach().clone() for t in leaves if isinstance(t, torch.Tensor)]
