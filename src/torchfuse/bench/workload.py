"""Cases and workloads: what the suites hand to the runner.

A :class:`Case` names one model at one size and knows how to build its :class:`Workload`
(model, inputs, loss) for a :class:`BuildContext` (device, mode, ``--quick``,
``--channels-last``). Suites (``torchfuse.bench.suites.*``) return lists of cases; the runner
never imports a model library itself.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable

import torch
from torch.utils._pytree import tree_map

from .modes import Mode


@dataclasses.dataclass(frozen=True)
class BuildContext:
    """What a case's builder may depend on.

    Attributes:
        device: ``"cuda"`` or ``"cpu"``.
        mode: the benchmark mode (training or inference, precision).
        quick: tiny configurations (the CPU check of the harness).
        channels_last: vision models and their image inputs in ``torch.channels_last``.
        seed: seeds weights and inputs, so every backend sees the same ones.
    """

    device: str
    mode: Mode
    quick: bool = False
    channels_last: bool = False
    seed: int = 0


@dataclasses.dataclass
class Workload:
    """One model (or fused op) with its inputs.

    Attributes:
        model: an ``nn.Module`` with float32 parameters on the device, in train mode for
            training and eval mode for inference. The harness casts it for inference.
        inputs: keyword arguments of ``model.forward``; tensors on the device. Floating
            tensors are float32 (the harness casts them for inference) unless
            ``apply_precision`` is off, when they are already in the mode's dtype.
        targets: keyword arguments of ``loss`` besides the model output (labels).
        loss: ``loss(output, **targets) -> scalar tensor`` for training; ``None`` when the
            step instead back-propagates ``grad_outputs`` through ``output(model output)``.
        output: ``output(model output)`` -> the tensor or tuple of tensors an inference step
            returns, and that accuracy checks compare.
        grad_outputs: for ``loss=None`` training, the gradients of ``output``'s tensors.
        apply_precision: the harness applies the mode's precision: ``torch.autocast`` for
            AMP training, a cast of model and inputs for inference. ``False`` for the micro
            suite, whose builders create tensors in the mode's dtype themselves.
        bytes_moved: the fewest bytes one step must read and write (each input, output and
            gradient once), for the bandwidth figures; ``None`` for whole models.
        info: free-form facts recorded with the results (parameter count, config names).
    """

    model: torch.nn.Module
    inputs: dict[str, Any]
    targets: dict[str, Any] = dataclasses.field(default_factory=dict)
    loss: Callable[..., torch.Tensor] | None = None
    output: Callable[[Any], Any] = lambda out: out
    grad_outputs: tuple[torch.Tensor, ...] | None = None
    apply_precision: bool = True
    bytes_moved: int | None = None
    info: dict[str, Any] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class Case:
    """One benchmark case: a model at one size, in the modes it supports.

    Attributes:
        suite: ``"micro"``, ``"hf"``, ``"timm"`` or ``"seed"``.
        model: the model (or op) name, e.g. ``"bert"``.
        size: what the numbers mean is the suite's: ``(batch, sequence)`` for HF,
            ``(batch, source, target)`` for encoder-decoders, ``(batch,)`` for images...
        modes: names of the modes the case runs in.
        build: ``build(BuildContext) -> Workload``.
        vision: image inputs; ``--channels-last`` applies.
        requires: a Python module the case needs; when it cannot be imported the case is
            recorded as skipped with that reason.
        size_label: how ``size`` prints (defaults to ``"64x128"`` style).
    """

    suite: str
    model: str
    size: tuple[int, ...]
    modes: tuple[str, ...]
    build: Callable[[BuildContext], Workload]
    vision: bool = False
    requires: str | None = None
    size_label: str | None = None

    @property
    def label(self) -> str:
        return self.size_label or "x".join(str(s) for s in self.size)

    @property
    def id(self) -> str:
        """``suite/model/size``: unique, stable, used by ``--only`` and merges."""
        return f"{self.suite}/{self.model}/{self.label}"


class Unavailable(RuntimeError):
    """A case cannot be built here (a model missing from the installed library version);
    the runner records it as skipped with this message, not as a failure."""


def cast_floating(tree: Any, dtype: torch.dtype) -> Any:
    """``tree`` with every floating-point tensor cast to ``dtype`` (others unchanged)."""
    return tree_map(lambda t: t.to(dtype) if isinstance(t, torch.Tensor) and t.is_floating_point() else t, tree)


def channels_last(tree: Any) -> Any:
    """``tree`` with every 4-d floating tensor in ``torch.channels_last`` layout."""
    def convert(t):
        if isinstance(t, torch.Tensor) and t.is_floating_point() and t.dim() == 4:
            return t.contiguous(memory_format=torch.channels_last)
        return t
    return tree_map(convert, tree)


def count_parameters(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())
