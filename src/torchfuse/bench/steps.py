"""Steps: one backend's copy of a workload, and the training or inference step it times.

:class:`PreparedBackend` deep-copies the workload's model, applies the mode's precision,
wraps it in the module that is compiled (:class:`LossStep` for training: forward and loss
under autocast; :class:`ForwardStep` for inference), compiles it with the backend, and
provides:

* :meth:`~PreparedBackend.forward_backward`: forward (and backward) without optimizer step;
  the first call (compile time) and the accuracy check use it.
* :meth:`~PreparedBackend.step`: the timed step. Training: ``zero_grad``, forward and loss,
  backward (through a ``GradScaler`` for fp16), ``AdamW(fused=True)`` step. Inference:
  the forward under ``torch.no_grad``.

Each copy has its own parameters, optimizer and gradient-requiring inputs; inputs that need
no gradient are shared, so every backend reads the same data.
"""
from __future__ import annotations

import copy
from typing import Any, Callable

import torch
from torch.utils._pytree import tree_flatten, tree_map

from .accuracy import disable_dropout, tree_tensors
from .modes import Mode
from .workload import Workload, cast_floating

LEARNING_RATE = 1e-5


class LossStep(torch.nn.Module):
    """What a training backend compiles: the model's forward and the loss.

    ``forward(inputs, targets)`` returns the scalar loss, or ``output(model output)`` when the
    workload back-propagates given gradients instead (``loss=None``).
    """

    def __init__(self, model: torch.nn.Module, workload: Workload, amp_dtype: torch.dtype | None, device_type: str):
        super().__init__()
        self.model = model
        self.loss = workload.loss
        self.output = workload.output
        self.amp_dtype = amp_dtype
        self.device_type = device_type

    def forward(self, inputs: dict, targets: dict):
        if self.amp_dtype is None:
            return self._forward(inputs, targets)
        with torch.autocast(self.device_type, dtype=self.amp_dtype):
            return self._forward(inputs, targets)

    def _forward(self, inputs: dict, targets: dict):
        out = self.model(**inputs)
        return self.output(out) if self.loss is None else self.loss(out, **targets)


class ForwardStep(torch.nn.Module):
    """What an inference backend compiles: ``output(model(**inputs))``."""

    def __init__(self, model: torch.nn.Module, workload: Workload):
        super().__init__()
        self.model = model
        self.output = workload.output

    def forward(self, inputs: dict, targets: dict):
        return self.output(self.model(**inputs))


class CudaGraphCallable:
    """``fn(inputs, targets)`` captured once into a CUDA graph and replayed.

    The first call runs ``fn`` three times on a side stream (so lazy initialization happens
    outside the capture), then captures one call into a ``torch.cuda.CUDAGraph`` on private
    copies of the inputs. Every call copies its inputs into those copies, replays the graph
    and returns the captured outputs (overwritten by the next call), as a serving loop does.
    """

    WARMUP_CALLS = 3

    def __init__(self, fn: Callable):
        self.fn = fn
        self.graph = None

    def __call__(self, inputs: dict, targets: dict):
        if self.graph is None:
            self._capture(inputs, targets)
        for dst, src in zip(self.static_leaves, _tensor_leaves((inputs, targets))):
            dst.copy_(src)
        self.graph.replay()
        return self.static_out

    def _capture(self, inputs: dict, targets: dict) -> None:
        static = tree_map(lambda t: t.clone() if isinstance(t, torch.Tensor) else t, (inputs, targets))
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(self.WARMUP_CALLS):
                self.fn(*static)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            self.static_out = self.fn(*static)
        self.static_leaves = _tensor_leaves(static)
        self.graph = graph


def _tensor_leaves(tree: Any) -> list[torch.Tensor]:
    leaves, _ = tree_flatten(tree)
    return [t for t in leaves if isinstance(t, torch.Tensor)]


def _named_outputs(out: Any) -> dict[str, torch.Tensor]:
    return {f"output.{i}": t for i, t in enumerate(tree_tensors(out))}


def _own_leaf(t: Any) -> Any:
    if isinstance(t, torch.Tensor) and t.requires_grad:
        return t.detach().clone().requires_grad_(True)
    return t


class PreparedBackend:
    """One backend's copy of a workload.

    Args:
        workload: the case's workload (not modified).
        mode: the benchmark mode.
        device: ``"cuda"`` or ``"cpu"``.
        compile_fn: ``compile_fn(module) -> callable``, or ``None`` for eager.
        cuda_graphs: wrap the (compiled) forward in a :class:`CudaGraphCallable`
            (inference only).
        mark_step: call ``torch.compiler.cudagraph_mark_step_begin()`` before every step
            (``torch.compile(mode="reduce-overhead")``).
        float64: the float64 reference: model and floating inputs in float64, no autocast.
        deterministic: a copy with every dropout probability set to 0 (accuracy runs).

    Raises:
        whatever copying, casting or compiling raises (the runner records it).
    """

    def __init__(self, workload: Workload, mode: Mode, device: str, compile_fn: Callable | None = None,
                 cuda_graphs: bool = False, mark_step: bool = False, float64: bool = False,
                 deterministic: bool = False):
        self.mode = mode
        self.training = mode.training
        self.mark_step = mark_step
        self.loss_given = workload.loss is not None
        model = copy.deepcopy(workload.model)
        if deterministic:
            disable_dropout(model)
        inputs, targets, grad_outputs = workload.inputs, workload.targets, workload.grad_outputs
        amp_dtype = mode.dtype if (mode.training and mode.amp and workload.apply_precision) else None
        if float64:
            model = model.double()
            inputs, targets, grad_outputs = cast_floating((inputs, targets, grad_outputs), torch.float64)
            amp_dtype = None
        elif not mode.training and workload.apply_precision:
            model = model.to(mode.dtype)
            inputs, targets = cast_floating((inputs, targets), mode.dtype)
        self.model = model
        self.inputs = tree_map(_own_leaf, inputs)
        self.targets = targets
        self.grad_outputs = grad_outputs
        if mode.training:
            module = LossStep(model, workload, amp_dtype, device)
        else:
            module = ForwardStep(model, workload)
        fn = compile_fn(module) if compile_fn is not None else module
        self.fn = CudaGraphCallable(fn) if cuda_graphs else fn
        params = [p for p in model.parameters() if p.requires_grad]
        self.optimizer = None
        if mode.training and self.loss_given and params and not float64:
            self.optimizer = torch.optim.AdamW(params, lr=LEARNING_RATE, fused=True)
        self.scaler = torch.amp.GradScaler(device) if (mode.uses_grad_scaler and self.optimizer and not float64) else None

    # -- the pieces
    def _call(self):
        if self.mark_step:
            torch.compiler.cudagraph_mark_step_begin()
        return self.fn(self.inputs, self.targets)

    def _backward(self, out, scaler=None) -> None:
        if not self.loss_given:
            torch.autograd.backward(_tensor_leaves(out), list(self.grad_outputs))
        elif scaler is not None:
            scaler.scale(out).backward()
        else:
            out.backward()

    def leaf_inputs(self) -> list[torch.Tensor]:
        return [t for t in _tensor_leaves(self.inputs) if t.requires_grad]

    def zero_grad(self) -> None:
        for p in self.model.parameters():
            p.grad = None
        for t in self.leaf_inputs():
            t.grad = None

    def gradients(self) -> dict[str, torch.Tensor | None]:
        """``grad.<parameter name>`` and ``grad.input.<i>`` -> the gradient (or ``None``)."""
        grads = {f"grad.{n}": p.grad for n, p in self.model.named_parameters() if p.requires_grad}
        grads.update({f"grad.input.{i}": t.grad for i, t in enumerate(self.leaf_inputs())})
        return grads

    # -- what the runner calls
    def forward_backward(self) -> dict[str, torch.Tensor | None]:
        """Forward (and backward when training) without optimizer step.

        Returns:
            detached copies of the outputs (or the loss), ``output.<i>``, and when training of
            every gradient (:meth:`gradients`); the names let an accuracy failure say which
            tensor failed.
        """
        if not self.training:
            with torch.no_grad():
                return _named_outputs(self._call())
        self.zero_grad()
        out = self._call()
        self._backward(out)
        result = _named_outputs(out)
        result.update({k: g.detach().clone() if g is not None else None for k, g in self.gradients().items()})
        self.zero_grad()
        return result

    def step(self) -> None:
        """One timed step (see the module docstring)."""
        if not self.training:
            with torch.no_grad():
                self._call()
            return
        if self.optimizer is not None:
            self.optimizer.zero_grad(set_to_none=True)
        else:
            self.zero_grad()
        out = self._call()
        self._backward(out, self.scaler)
        if self.optimizer is None:
            return
        if self.scaler is not None:
            self.scaler.step(self.optimizer)
            self.scaler.update()
        else:
            self.optimizer.step()
