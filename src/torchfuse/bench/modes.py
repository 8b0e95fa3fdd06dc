"""Benchmark modes: what one timed step does and in which precision.

A mode is one of the settings of the nvFuser announcement's figures:

========================  ==================================================================
``train-amp-fp16``        forward, loss, backward and ``AdamW(fused=True)`` step, under
                          ``torch.autocast(float16)`` with a ``GradScaler``
``train-amp-bf16``        the same under ``torch.autocast(bfloat16)``, no scaler
``train-fp32``            the same in float32 (the TF32 setting is recorded with the run)
``infer-fp16``            forward only, model and inputs cast to float16, under ``no_grad``
``infer-bf16``            the same in bfloat16
``infer-fp32``            the same in float32 (what CPU runs use)
========================  ==================================================================

The micro suite has no model to train: there ``train-*`` means forward and backward of the
op with its tensors in the mode's dtype (no autocast, no optimizer), ``infer-*`` the forward.
"""
from __future__ import annotations

import dataclasses

import torch


@dataclasses.dataclass(frozen=True)
class Mode:
    """One benchmark mode.

    Attributes:
        name: e.g. ``"train-amp-fp16"``.
        training: forward, backward and optimizer step (``True``) or forward only.
        dtype: the autocast dtype (AMP training), the dtype model and inputs are cast to
            (inference), or ``torch.float32``.
        amp: training runs under ``torch.autocast(dtype)``.
    """

    name: str
    training: bool
    dtype: torch.dtype
    amp: bool = False

    @property
    def precision(self) -> str:
        """``"fp16"``, ``"bf16"`` or ``"fp32"``."""
        return {torch.float16: "fp16", torch.bfloat16: "bf16", torch.float32: "fp32"}[self.dtype]

    @property
    def uses_grad_scaler(self) -> bool:
        """AMP float16 training scales the loss (``torch.amp.GradScaler``); bfloat16 needs not."""
        return self.training and self.amp and self.dtype == torch.float16

    @property
    def accuracy_tolerance(self) -> float:
        """The ``tol`` passed to ``torch._dynamo.utils.same``: 1e-2 for training and for
        half-precision inference, 1e-3 for float32 inference (the defaults of PyTorch's own
        HuggingFace and TIMM benchmark runners)."""
        return 1e-3 if not self.training and self.dtype == torch.float32 else 1e-2


MODES: dict[str, Mode] = {m.name: m for m in [
    Mode("train-amp-fp16", True, torch.float16, amp=True),
    Mode("train-amp-bf16", True, torch.bfloat16, amp=True),
    Mode("train-fp32", True, torch.float32),
    Mode("infer-fp16", False, torch.float16),
    Mode("infer-bf16", False, torch.bfloat16),
    Mode("infer-fp32", False, torch.float32),
]}

TRAIN_MODES = tuple(n for n, m in MODES.items() if m.training)
INFER_MODES = tuple(n for n, m in MODES.items() if not m.training)

#: Modes a suite runs when ``--mode`` is not given: the announcement's figures on a GPU,
#: float32 on a CPU (half precision there measures nothing the GPU figures care about).
DEFAULT_MODES: dict[str, dict[str, tuple[str, ...]]] = {
    "cuda": {
        "micro": ("train-amp-fp16", "infer-fp16"),
        "hf": ("train-amp-fp16",),
        "timm": ("train-amp-fp16", "infer-fp16"),
        "seed": ("train-amp-fp16", "infer-fp16"),
    },
    "cpu": {
        "micro": ("train-fp32", "infer-fp32"),
        "hf": ("infer-fp32",),
        "timm": ("infer-fp32",),
        "seed": ("infer-fp32",),
    },
}


def parse_modes(text: str) -> tuple[str, ...]:
    """Split a comma-separated list of mode names.

    Raises:
        ValueError: a name is not in :data:`MODES`.
    """
    names = tuple(n.strip() for n in text.split(",") if n.strip())
    unknown = [n for n in names if n not in MODES]
    if unknown:
        raise ValueError(f"unknown mode(s) {unknown}; known: {sorted(MODES)}")
    return names
