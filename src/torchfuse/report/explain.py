"""``torchfuse.explain``: run a program once under torchfuse and say what the compiler did.

Takes a model or function and example inputs; returns an
:class:`~torchfuse.report.result.ExplainResult` and prints its summary.

The program is compiled with ``torch.compile`` and torchfuse's backend wrapped in PyTorch's
own ``ExplainWithBackend`` (the machinery behind ``torch._dynamo.explain``), so one run
yields TorchDynamo's captured graphs and graph breaks (with the user's source lines) *and*
torchfuse's compiled graphs. Those are read from the compiler's records
(``torchfuse.backend.RECENT`` and ``UNFUSED``: segmentation, group runners, launch plans,
kernel sources, stats) by :mod:`.collect`. TorchDynamo's cache is reset first, as
``torch._dynamo.explain`` does, so every graph is captured anew.
"""
from __future__ import annotations

import dataclasses
import platform
import time
import warnings
from typing import Any, Sequence

import torch

from ..fusion import trace
from ..runtime.phases import PhaseWindow
from ..runtime.recompiles import compile_id_text, compiling_id
from .result import Capture, ExplainResult, GraphBreak, GraphReport, Recompilation, Timing


class _Recorder:
    """A TorchDynamo backend: torchfuse's, noting which compiled graphs each capture produced."""

    def __init__(self, options):
        self.options = options
        self.captures: list[tuple[Any, float, list, list]] = []  # (gm, seconds, compiled, unfused)
        self.rewrites: list[dict[str, int]] = []  # per capture, backend.LAST_REWRITES
        self.compile_ids: list[tuple[int, int] | None] = []  # per capture, TorchDynamo's (frame, compile)

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: list):
        from .. import backend

        compiled_before = {id(c) for c in backend.RECENT}
        unfused_before = {id(u) for u in backend.UNFUSED}
        self.compile_ids.append(compiling_id())
        t0 = time.perf_counter()
        fn = backend.torchfuse_backend(gm, example_inputs, options=self.options)
        seconds = time.perf_counter() - t0
        self.rewrites.append(dict(backend.LAST_REWRITES))
        self.captures.append((gm, seconds, [c for c in backend.RECENT if id(c) not in compiled_before],
                              [u for u in backend.UNFUSED if id(u) not in unfused_before]))
        return fn


def _uncompiled(model_or_fn: Any) -> Any:
    """The module or function inside a ``torch.compile`` wrapper (``_orig_mod`` of a compiled
    module, ``_torchdynamo_orig_callable`` of a compiled function), or the argument itself."""
    inner = getattr(model_or_fn, "_orig_mod", None) if isinstance(model_or_fn, torch.nn.Module) else None
    if inner is None:
        inner = getattr(model_or_fn, "_torchdynamo_orig_callable", None)
    return model_or_fn if inner is None else inner


def explain(model_or_fn: Any, *example_inputs: Any, example_kwargs: dict | None = None,
            more_inputs: Sequence[Sequence[Any] | dict] = (), backward: bool = False, measure: bool = False,
            html: str | None = None, verbose: bool = True, mode: str | None = None, options: Any = None,
            dynamic: bool | None = None, fullgraph: bool = False, **option_overrides: Any) -> ExplainResult:
    """Compile and run ``model_or_fn(*example_inputs, **example_kwargs)`` with torchfuse;
    describe what it did.

    Args:
        model_or_fn: an ``nn.Module`` or a function; one already compiled by ``torch.compile``
            is unwrapped, with a note (explain compiles it with its own options).
        example_inputs: its positional arguments.
        example_kwargs: its keyword arguments (a HuggingFace model's ``input_ids=...``).
        more_inputs: further calls to make afterwards (other sizes), to see recompilations and
            their reasons: each an argument tuple, or a dict of keyword arguments; with
            ``backward``, each of these calls runs its backward pass too.
        backward: also run a backward pass after each call (the first and each of
            ``more_inputs``) from its tensor outputs that require grad, so that every backward
            graph is compiled, run and described (``.grad`` fields change, accumulating over
            the calls).
        measure: on a CUDA device, time each kernel and a device copy
            (:mod:`torchfuse.report.measure`); elsewhere the result's first note says why there
            are no times.
        html: also write the HTML report to this path.
        verbose: print the summary. torchfuse's own warnings are then printed in it, at its
            end, and not also raised as Python warnings; with ``verbose=False`` they are raised
            for the caller's warning filters, and so is the note on an already compiled model
            (the other notes are only in the result). Other libraries' warnings are raised
            either way.
        mode: a ``torch.compile`` mode, as for :func:`torchfuse.compile` (``"reduce-overhead"``:
            CUDA graphs, whose state the summary shows per graph).
        dynamic, fullgraph: passed to ``torch.compile``, as by :func:`torchfuse.compile`.
        options: an :class:`~torchfuse.Options` or dict; keyword arguments override single
            options, as for :func:`torchfuse.compile`. For a program on CPU tensors, interpret
            mode is turned on unless ``interpret`` is given (here or as a whole ``Options``):
            the result then shows the plan with the kernels run in Triton's interpreter, and
            its first note says so.

    Returns:
        the :class:`ExplainResult` (``.save(path)`` writes it as JSON).

    Raises:
        whatever the program raises; TypeError for an unknown option, or for ``more_inputs``
        holding a tensor where an argument tuple belongs; ValueError for an unknown mode.
        torchfuse's own failures do not raise: they are in the result (and warned about,
        with reproducers, as ``verbose`` says).
    """
    from torch._dynamo.backends.debugging import ExplainWithBackend

    from .. import backend
    from . import collect  # here, not at import time: it loads the IR (and sympy)

    if any(isinstance(args, torch.Tensor) for args in more_inputs):  # it would be split into rows
        raise TypeError("explain(more_inputs=...) takes argument tuples (or keyword dicts), one per call: "
                        "more_inputs=[(x,)], not [x]")
    example_kwargs = dict(example_kwargs or {})
    calls = [(tuple(example_inputs), example_kwargs)]
    calls += [((), dict(a)) if isinstance(a, dict) else (tuple(a), {}) for a in more_inputs]
    everything = (tuple(example_inputs), example_kwargs)  # what the device and environment are read from

    for k, v in backend.mode_overrides(mode).items():
        option_overrides.setdefault(k, v)
    opts = backend.resolve_options(options, **option_overrides)
    notes = []
    inner = _uncompiled(model_or_fn)
    if inner is not model_or_fn:  # its own compile (backend, options) would not be the one described
        note = ("the model was already compiled with torch.compile: explain compiled the model inside "
                "the wrapper itself, with explain's options (options=... for others), not the wrapper's")
        if not verbose:  # else the summary's notes say it
            warnings.warn(f"torchfuse.explain: {note}", RuntimeWarning, stacklevel=2)
        notes.append(note)
        model_or_fn = inner
    device = _device(everything, model_or_fn)
    if device is not None and device.type != "cuda" and not opts.interpret and opts.fuse \
            and not _interpret_given(options, option_overrides):
        opts = dataclasses.replace(opts, interpret=True)
        sms = opts.launch_configs_for_sm_count
        configs = (f"the launch configurations of a GPU of {sms} multiprocessors (launch_configs_for_sm_count)" if sms
                   else "the interpreter's launch configurations (a GPU gets its own)")
        notes.append(NOTE_CPU_INTERPRET.format(device=device.type, configs=configs))
    if measure and (device is None or device.type != "cuda"):
        notes.append(NOTE_NO_MEASURE.format(device=device.type if device is not None else "no device"))
    torch._dynamo.reset()
    compiled_before = {id(c) for c in backend.RECENT}
    unfused_before = {id(u) for u in backend.UNFUSED}
    guards_before = _guard_failure_counts()
    unimplemented_before = dict(torch._dynamo.utils.counters["unimplemented"])
    recorder = _Recorder(opts)
    dynamo_explain = ExplainWithBackend(recorder)
    fn = torch.compile(model_or_fn, backend=dynamo_explain, dynamic=dynamic, fullgraph=fullgraph)
    t0 = time.perf_counter()
    trace.OUTSIDE_GRAPH_CALLS = outside = []
    try:
        with warnings.catch_warnings(record=True) as caught, PhaseWindow() as phases:
            warnings.simplefilter("always")
            for args, kwargs in calls:
                out = fn(*args, **kwargs)
                if backward:  # a new capture's backward graph is listed only if it ran
                    _run_backward(out)
    finally:
        trace.OUTSIDE_GRAPH_CALLS = None
    seconds = time.perf_counter() - t0
    for w in caught:  # let the caller's filters see them, as if not intercepted, unless the summary shows them
        if not (verbose and _is_own(w)):
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)

    result = ExplainResult(environment=_environment(everything, model_or_fn, opts), seconds=seconds, notes=notes,
                           compile_phases=phases.seconds, calls=len(calls))
    result.graph_breaks = collect.graph_breaks(dynamo_explain.output().break_reasons)
    unimplemented = torch._dynamo.utils.counters["unimplemented"]
    result.graph_breaks += collect.skipped_frames([k for k, n in unimplemented.items()
                                                   if n > unimplemented_before.get(k, 0)])
    _fused_calls_outside_graphs(result, outside)
    compiled_objects = _add_graphs(result, recorder, compiled_before | unfused_before)
    result.kernels = _kernels(compiled_objects)
    result.recompilations = _dynamo_recompilations(guards_before)
    for g in result.graphs:
        result.recompilations += g.recompilations
    result.warnings = [str(w.message) for w in caught if _is_own(w)]
    result.timing = _timing(measure, compiled_objects, result.graphs, device, opts)
    if verbose:
        print(result.summary())
    if html:
        result.write_html(html)
        if verbose:
            print(f"HTML report: {html}")
    return result


def _is_own(w: warnings.WarningMessage) -> bool:
    """Whether a caught warning is one of torchfuse's (their messages start with its name)."""
    return str(w.message).startswith("torchfuse")


def _add_graphs(result: ExplainResult, recorder: _Recorder, known_before: set[int]) -> list:
    """Fill ``result.captures`` and ``result.graphs`` from what the run compiled; returns the
    ``CompiledGraph`` behind each graph record (``None`` for graphs that run unfused)."""
    from .. import backend
    from . import collect

    compiled_objects: list = []
    seen: set[int] = set()

    def add(obj, capture: int) -> int:
        seen.add(id(obj))
        index = len(result.graphs)
        if isinstance(obj, dict):  # a backend.UNFUSED record
            result.graphs.append(collect.unfused_graph_report(obj, index, capture))
            compiled_objects.append(None)
        else:
            result.graphs.append(collect.compiled_graph_report(obj, index, capture))
            compiled_objects.append(obj)
        return index

    programs: list[tuple[Any, int]] = []  # (program state, capture index) of each capture's graphs
    for i, (gm, seconds, compiled, unfused) in enumerate(recorder.captures):
        capture = Capture(index=i, ops=collect.count_ops(gm), location=collect.capture_location(gm), seconds=seconds,
                          rewrites=recorder.rewrites[i], recompiles=_recompiled(recorder.compile_ids, i),
                          dynamo_id=compile_id_text(recorder.compile_ids[i]))
        capture.graphs = [add(obj, i) for obj in compiled + unfused]
        programs += [(p, i) for p in map(_program, compiled + unfused) if p is not None]
        result.captures.append(capture)
    for obj in list(backend.RECENT) + list(backend.UNFUSED):  # compiled after the captures: a backward
        if id(obj) not in known_before and id(obj) not in seen:
            # by identity: the program state is a dataclass, whose == compares fields
            i = next((i for p, i in programs if p is _program(obj)), -1)
            index = add(obj, i)
            result.graphs[index].at_first_backward = True
            if i >= 0:
                result.captures[i].graphs.append(index)
    return compiled_objects


def _recompiled(compile_ids: list, i: int) -> int | None:
    """The index of the earlier capture of the same TorchDynamo frame that capture ``i``
    recompiles (its guards failed for new inputs), or ``None`` for a frame's first capture."""
    cid = compile_ids[i]
    if cid is None or cid[1] == 0:
        return None
    return next((j for j in range(i) if compile_ids[j] is not None and compile_ids[j][0] == cid[0]), None)


def _program(obj: Any) -> Any:
    """The program state a compiled graph or ``backend.UNFUSED`` record shares with the other
    graphs of its capture (``backend.compile_graph``'s ``capture``), or ``None``."""
    return obj.get("program") if isinstance(obj, dict) else getattr(obj, "program", None)


def _run_backward(out: Any) -> None:
    tensors = [t for t in _flatten(out) if isinstance(t, torch.Tensor) and t.requires_grad]
    if tensors:
        torch.autograd.backward(tensors, [torch.ones_like(t) for t in tensors])


def _flatten(obj: Any) -> list:
    if isinstance(obj, (list, tuple)):
        return [x for o in obj for x in _flatten(o)]
    if isinstance(obj, dict):
        return [x for o in obj.values() for x in _flatten(o)]
    return [obj]


def _fused_calls_outside_graphs(result: ExplainResult, outside: list) -> None:
    """List each ``@fused`` call that ran outside a compiled graph as a graph break at the
    user's line, with torchfuse's reason. TorchDynamo names such a break at torchfuse's own
    code ("Skip inlining ... disable()d function"), which is replaced, or, when the call is the
    first thing its frame does, does not list it at all."""
    from . import collect

    if not outside:
        return
    result.graph_breaks = [b for b in result.graph_breaks
                           if not (b.location is not None and collect._inside(b.location.file, collect._FUSION_DIR))]
    seen = set()
    for name, why, stack in outside:
        loc = collect.location_from_stack(stack)
        if loc is None or (name, loc.file, loc.line) in seen:
            continue
        seen.add((name, loc.file, loc.line))
        result.graph_breaks.append(GraphBreak(
            reason=f"the fused function {name} ran outside the compiled graph: {why}",
            detail="A @fused function called inside a compiled region is one node of the graph once it has a "
                   "trace for its arguments' dtypes and sizes and no branch on sizes; otherwise each call runs "
                   "outside the graph (the README's section on defining fused operations).", location=loc, stack=[loc]))


def _device(example_inputs: tuple, model: Any) -> torch.device | None:
    for x in _flatten(list(example_inputs)):
        if isinstance(x, torch.Tensor):
            return x.device
    if isinstance(model, torch.nn.Module):
        for p in model.parameters():
            return p.device
    return None


def _kernels(compiled_objects: list) -> list:
    from ..runtime.executor import GroupRunner
    from . import collect

    runners = [s for c in compiled_objects if c is not None for s in c.steps if isinstance(s, GroupRunner)]
    return collect.kernel_reports(runners)


def _guard_failure_counts() -> dict:
    failures = getattr(torch._dynamo.utils, "guard_failures", {})
    return {code: len(reasons) for code, reasons in failures.items()}


def _dynamo_recompilations(before: dict) -> list[Recompilation]:
    """TorchDynamo's re-traces during the run, one per recompilation: the guards that failed
    (one per compiled version of the code), placed at the user's frame when the code is
    PyTorch's own (:func:`~torchfuse.runtime.recompiles.recompile_where`)."""
    from ..runtime.recompiles import guard_failure_text, recompilation_spans, recompile_where

    out = []
    for code, reasons in getattr(torch._dynamo.utils, "guard_failures", {}).items():
        for first, end in recompilation_spans(code, before.get(code, 0)):
            out.append(Recompilation(source="dynamo", where=recompile_where(code, end - 1),
                                     reason="; ".join(guard_failure_text(r) for r in reasons[first:end])))
    return out


#: shown first when explain turns interpret mode on for a program on CPU tensors
NOTE_CPU_INTERPRET = ("this program runs on {device} tensors, so explain turned interpret mode on (interpret=True) to "
                      "show the plan: the generated kernels ran in Triton's interpreter, with {configs}. torch.compile on {device} tensors without interpret=True "
                      "runs them through ATen, unfused; pass interpret=False (on the command line: --option interpret=false) "
                      "to explain that")
#: shown first when ``measure=True`` cannot time anything
NOTE_NO_MEASURE = ("measure=True gave no kernel times: timing needs a CUDA device, and this run is on {device} "
                   "(the interpreter's times say nothing about a GPU)")


def _interpret_given(options: Any, overrides: dict) -> bool:
    """Whether the caller chose interpret mode (an ``interpret`` keyword, a dict naming it, or a
    whole :class:`~torchfuse.Options`), rather than leaving it to the default."""
    from ..config import Options

    return "interpret" in overrides or isinstance(options, Options) or (
        isinstance(options, dict) and "interpret" in options)


#: what runs the fused groups, per :func:`_run_mode` (the environment's ``mode``)
MODE_COMPILED = "compiled Triton kernels"
MODE_INTERPRETER = "generated kernels in Triton's interpreter"
MODE_FUSE_OFF = "not fused: fuse=False"
MODE_CPU_UNFUSED = ("not fused: CPU tensors run through ATen; TORCHFUSE_INTERPRET=1 or interpret=True runs "
                    "the generated kernels in Triton's interpreter")


def _run_mode(device: torch.device | None, options) -> str:
    """How the program's fused groups ran: compiled kernels (CUDA), the interpreter
    (``interpret``), or not at all (``fuse=False``; CPU tensors without ``interpret`` run
    through ATen)."""
    if not options.fuse:
        return MODE_FUSE_OFF
    if options.interpret:
        return MODE_INTERPRETER
    if device is not None and device.type != "cuda":
        return MODE_CPU_UNFUSED
    return MODE_COMPILED


def _timing(measure: bool, compiled_objects: list, reports: list[GraphReport], device, options) -> Timing:
    from . import measure as measure_mod
    if device is None:
        return Timing(available=False, note="not measured: no tensor input or parameter says which device ran")
    if not options.fuse:
        return Timing(available=False, note="not measured: fuse=False, no kernel was generated")
    if device.type != "cuda":
        if options.interpret:  # the interpreter's note
            return measure_mod.measure([], [], None)
        return Timing(available=False, note=f"kernel times need a CUDA device, and no kernel ran: without "
                                            f"interpret mode, graphs on {device.type} tensors run through ATen")
    if options.interpret:
        return Timing(available=False, note="not measured: the kernels ran through Triton's interpreter "
                                            "(interpret=True), whose times say nothing about a GPU",
                      device=torch.cuda.get_device_name(device))
    if not measure:
        return Timing(available=False, note="not measured: pass measure=True to time each kernel",
                      device=torch.cuda.get_device_name(device))
    return measure_mod.measure(compiled_objects, reports, device)


def _environment(example_inputs: tuple, model: Any, options) -> dict[str, str]:
    import torchfuse

    try:
        import triton

        triton_version = triton.__version__
    except ImportError:
        triton_version = "not installed"
    device = _device(example_inputs, model)
    name = "unknown"
    if device is not None:
        name = torch.cuda.get_device_name(device) if device.type == "cuda" else f"{device.type} ({platform.processor() or platform.machine()})"
    return {"torchfuse": torchfuse.__version__, "torch": torch.__version__, "triton": triton_version,
            "python": platform.python_version(), "device": name,
            "mode": _run_mode(device, options)}
