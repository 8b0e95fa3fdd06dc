"""torchfuse: a just-in-time fusion compiler for PyTorch.

``torch.compile(model, backend="torchfuse")`` or ``torchfuse.compile(model, **options)``
captures the program with TorchDynamo (and AOTAutograd for training), groups its
memory-bound operations into fusions, generates one Triton kernel per fusion, compiles and
caches it, and launches it on every later call. Matrix products and convolutions stay on the
vendor libraries.
"""
from __future__ import annotations

from typing import Any, Callable

import torch

from .backend import register as _register
from .backend import mode_overrides, resolve_options, torchfuse_backend
from .config import Options, configure_logging
from . import fusion  # the fusion-definition API: torchfuse.fusion.Fusion, torchfuse.fusion.fused
from .report import explain

__version__ = "0.1.0"

__all__ = ["compile", "explain", "Options", "torchfuse_backend", "__version__"]


def compile(model: Any = None, *, dynamic: bool | None = None, fullgraph: bool = False,
            mode: str | None = None, options: Options | dict | None = None, **option_overrides) -> Callable:
    """Compile ``model`` (an ``nn.Module`` or a function) with torchfuse.

    The same as ``torch.compile(model, backend="torchfuse", dynamic=..., fullgraph=...)``
    with torchfuse options. Compiling again with the same options reuses one backend callable,
    so TorchDynamo's cache serves a function compiled before (no recompilation).

    Graphs on CPU tensors run through ATen unless ``interpret=True`` (or
    ``TORCHFUSE_INTERPRET=1``) runs the generated kernels in Triton's interpreter; the first
    such graph of a process warns once.

    Args:
        model: what to compile; when omitted, returns a decorator.
        dynamic: passed to ``torch.compile`` (``None``: static first, dynamic after a size
            changes).
        fullgraph: passed to ``torch.compile`` (raise on graph breaks).
        mode: ``"reduce-overhead"`` replays inference and training graphs on CUDA tensors as
            CUDA graphs (``cudagraphs=True``; docs/cuda-graphs.md); ``None``, ``"default"``,
            ``"max-autotune"`` and ``"max-autotune-no-cudagraphs"`` compile as usual.
        options: an :class:`Options` or a dict; keyword arguments override single options
            (``interpret=True``, ``dump_dir="..."`` ...).

    Raises:
        TypeError: an option name is unknown, or an option's value has the wrong type.
        ValueError: ``mode`` is unknown, or a count option (``compile_threads``,
            ``max_group_ops``, ``persistent_max_elements``, ``cudagraph_max_graphs``) is below 1.
    """
    for k, v in mode_overrides(mode).items():
        option_overrides.setdefault(k, v)
    backend = _backend_for(resolve_options(options, **option_overrides))

    def wrap(m):
        return torch.compile(m, backend=backend, dynamic=dynamic, fullgraph=fullgraph)

    return wrap if model is None else wrap(model)


class _Backend:
    """torchfuse's TorchDynamo backend bound to one set of options."""

    def __init__(self, options: Options):
        self.options = options
        self.__name__ = "torchfuse"

    def __call__(self, gm, example_inputs):
        return torchfuse_backend(gm, example_inputs, options=self.options)

    def __repr__(self) -> str:
        return f"torchfuse backend ({self.options})"


#: one backend callable per distinct set of options: TorchDynamo tells backends apart by
#: identity, so compiling the same function again (in a loop, or a re-run notebook cell) with
#: the same options reuses its cached graphs instead of recompiling until its recompile limit
_BACKENDS: dict[Options, _Backend] = {}


def _backend_for(options: Options) -> _Backend:
    backend = _BACKENDS.get(options)
    if backend is None:
        backend = _BACKENDS[options] = _Backend(options)
    return backend


_register()
configure_logging()
