"""The backends compared in one run: one table entry each.

Adding a backend is one entry in :data:`BACKENDS`; a torchfuse variant is
``compile_torchfuse(<option>=<value>)`` with options of :class:`torchfuse.Options`, e.g.
``torchfuse-reduce-overhead`` (torchfuse's CUDA graphs, ``cudagraphs=True``).

Speedups are reported over :data:`BASELINE` (eager) and over :data:`COMPILE_BASELINE`
(``torch.compile`` with its default mode).
"""
from __future__ import annotations

import dataclasses
from typing import Callable

import torch

#: what ``compile(module, device)`` returns is called like the module
CompileFn = Callable[[torch.nn.Module, str], Callable]


@dataclasses.dataclass(frozen=True)
class Backend:
    """One way to run a model.

    Attributes:
        name: as it appears in ``--backends``, tables and charts.
        compile: ``compile(module, device) -> callable``; ``None`` runs the module eagerly.
        cuda_graphs: the harness captures the forward in a CUDA graph (inference only).
        mark_step: call ``torch.compiler.cudagraph_mark_step_begin()`` before each step.
        needs_cuda: skipped (and recorded as such) on a CPU.
        inference_only: skipped in training modes.
        modules: imported before any first call is timed, so that first-call times measure
            compilation rather than whichever backend happens to import the shared
            machinery (TorchDynamo, AOTAutograd) first.
    """

    name: str
    compile: CompileFn | None = None
    cuda_graphs: bool = False
    mark_step: bool = False
    needs_cuda: bool = False
    inference_only: bool = False
    modules: tuple[str, ...] = ()

    @property
    def compiled(self) -> bool:
        """Has a compile step: gets first-call (cold and warm) times and an accuracy check."""
        return self.compile is not None

    def skip_reason(self, device: str, training: bool) -> str | None:
        """Why this backend does not run here, or ``None``."""
        if self.needs_cuda and device != "cuda":
            return "needs CUDA"
        if self.inference_only and training:
            return "inference only"
        return None


def compile_torch(mode: str | None = None, options: dict | None = None) -> CompileFn:
    """``torch.compile(module, mode=mode)`` or ``torch.compile(module, options=options)``
    (TorchInductor)."""
    def compile(module: torch.nn.Module, device: str) -> Callable:
        return torch.compile(module, mode=mode, options=options)
    return compile


def compile_torchfuse(overrides: tuple[str, ...] = (), **options) -> CompileFn:
    """``torchfuse.compile(module, **options)``; on a CPU the generated kernels run in Triton's
    interpreter (``interpret=True``), since otherwise nothing would be fused there.
    ``overrides``: a variant's ``NAME=VALUE`` and ``SECTION.FIELD=VALUE`` settings
    (:func:`torchfuse.bench.variants.options_with`). The function carries ``options`` and
    ``overrides`` as attributes, from which :func:`backend_named` derives variants."""
    def compile(module: torch.nn.Module, device: str) -> Callable:
        import torchfuse

        from .variants import options_with

        return torchfuse.compile(module, options=options_with(overrides, **{"interpret": device == "cpu", **options}))
    compile.options, compile.overrides = options, tuple(overrides)
    return compile


_DYNAMO = ("torch._dynamo", "torch._functorch.aot_autograd", "torch._functorch.partitioners")
_INDUCTOR = _DYNAMO + ("torch._inductor.compile_fx",)
_TORCHFUSE = _DYNAMO + ("triton", "torchfuse.backend", "torchfuse.runtime.executor")

BACKENDS: dict[str, Backend] = {b.name: b for b in [
    Backend("eager"),
    Backend("eager-cudagraphs", cuda_graphs=True, needs_cuda=True, inference_only=True),
    Backend("torch.compile", compile_torch(), modules=_INDUCTOR),
    Backend("torch.compile-reduce-overhead", compile_torch("reduce-overhead"), mark_step=True, needs_cuda=True,
            modules=_INDUCTOR),
    # Inductor's freezing, the peer of torchfuse's freeze=True (PyTorch refuses a mode together
    # with options; "triton.cudagraphs" is what mode="reduce-overhead" sets)
    Backend("torch.compile-reduce-overhead-frozen", compile_torch(options={"triton.cudagraphs": True, "freezing": True}),
            mark_step=True, needs_cuda=True, inference_only=True, modules=_INDUCTOR),
    Backend("torchfuse", compile_torchfuse(), modules=_TORCHFUSE),
    # CUDA graphs (Options.cudagraphs): inference graphs, and training graphs through PyTorch's
    # CUDA graph trees
    Backend("torchfuse-reduce-overhead", compile_torchfuse(cudagraphs=True), mark_step=True, needs_cuda=True,
            modules=_TORCHFUSE + ("torchfuse.runtime.cudagraphs", "torchfuse.runtime.training_graphs",
                                  "torch._inductor.cudagraph_trees")),
    # freeze=True: BatchNorm folded, half-precision convolutions channels-last, weight-only work
    # hoisted (torchfuse.freezing)
    Backend("torchfuse-reduce-overhead-frozen", compile_torchfuse(cudagraphs=True, freeze=True), needs_cuda=True,
            inference_only=True, modules=_TORCHFUSE + ("torchfuse.runtime.cudagraphs", "torchfuse.freezing")),
]}

BASELINE = "eager"
COMPILE_BASELINE = "torch.compile"


def split_variant(name: str) -> tuple[str, tuple[str, ...]] | None:
    """``("BASE", settings)`` for a variant name ``BASE[SETTING;SETTING...]``; None for a
    name without brackets."""
    base, sep, rest = name.partition("[")
    if not sep or not rest.endswith("]"):
        return None
    return base, tuple(t.strip() for t in rest[:-1].split(";") if t.strip())


def backend_named(name: str) -> Backend:
    """The backend called ``name``: an entry of :data:`BACKENDS`, or a variant of a torchfuse
    entry written ``BASE[SETTING;SETTING...]`` with :mod:`torchfuse.bench.variants` settings
    (``torchfuse[runtime.pad_kernel=false;runtime.graph_function=false]``), so that
    one run compares settings in one process, on the same weights and host.

    Raises:
        ValueError: an unknown name or base, a base that is not torchfuse's, or a setting that
            does not parse (:func:`~torchfuse.bench.variants.parse_override`).
    """
    if name in BACKENDS:
        return BACKENDS[name]
    variant = split_variant(name)
    if variant is None or variant[0] not in BACKENDS:
        raise ValueError(f"unknown backend {name!r}; known: {list(BACKENDS)}, or a torchfuse one "
                         "followed by [SETTING;SETTING...]")
    base, overrides = variant
    parent = BACKENDS[base]
    options = getattr(parent.compile, "options", None)
    if options is None:
        raise ValueError(f"{name!r}: settings apply to torchfuse's backends, not {base!r}")
    from .variants import parse_overrides

    parse_overrides(overrides)  # raises here rather than at the first compile
    overrides = parent.compile.overrides + overrides
    return dataclasses.replace(parent, name=name, compile=compile_torchfuse(overrides, **options))


def parse_backends(text: str | None) -> tuple[str, ...]:
    """Names from a comma-separated list (``None``: all); eager
    is always included first, since every speedup is measured against it. A name may be a
    torchfuse variant (:func:`backend_named`).

    Raises:
        ValueError: a name is not in :data:`BACKENDS` and is no variant of one.
    """
    names = (list(BACKENDS) if not text
             else [n.strip() for n in text.split(",") if n.strip()])
    for n in names:
        backend_named(n)
    return tuple([BASELINE] + [n for n in names if n != BASELINE])


def running_backends(names: tuple[str, ...], device: str, training_modes: set[bool]) -> tuple[str, ...]:
    """Those of ``names`` that run on ``device`` in at least one of the run's modes
    (``training_modes``: the ``Mode.training`` values of the run's items)."""
    return tuple(n for n in names if any(backend_named(n).skip_reason(device, t) is None for t in training_modes))


def import_modules(names: tuple[str, ...]) -> None:
    """Import the :attr:`Backend.modules` of the backends of a run (see there)."""
    import importlib

    for backend in names:
        for module in backend_named(backend).modules:
            importlib.import_module(module)
