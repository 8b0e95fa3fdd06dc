"""Capture: the TorchDynamo backend and the AOTAutograd glue.

Takes an FX graph of Torch-level ops from TorchDynamo; returns a callable. AOTAutograd
functionalizes the graph (so in-place updates of inputs, aliased outputs and views behave as
in eager: its runtime wrappers replay them), decomposes it with
:func:`torchfuse.decompose.decomposition_table`, and, when inputs require grad, traces the
joint forward-backward graph and splits it with PyTorch's min-cut rematerialization
partitioner. Each resulting graph (forward, backward, or inference) goes through
:func:`compile_graph`: IR, segmentation, and the runtime that generates, compiles and launches
kernels.
"""
from __future__ import annotations

import contextlib
import functools
import logging
import time
import warnings
from typing import Any, Callable

import torch
import torch.fx

from .config import Options
from .runtime import phases as _phases
from .decompose import decomposition_table
from .ir.from_fx import CPU_REASON as _CPU_REASON
from .pipeline import run_aten_passes, run_fx_passes
from .runtime.calls import alias_as
from .runtime.warn import user_stacklevel

log = logging.getLogger("torchfuse.fusion")

#: The most recent compiled graphs (name -> CompiledGraph), newest last; for reports.
RECENT: list = []
_MAX_RECENT = 64
#: The most recent graphs that run as traced, unfused, newest last; for reports (torchfuse.report):
#: dicts with name, fx_graph, segmentation (None after a failure), error, reproducer and stage seconds,
#: and for a forward or backward graph its ``program`` (see :func:`compile_graph`'s ``capture``).
UNFUSED: list = []


def _boxed(fn: Callable) -> Callable:
    from torch._functorch.aot_autograd import make_boxed_func

    return make_boxed_func(fn)


def compile_graph(gm: torch.fx.GraphModule, example_inputs: list, options: Options, name: str = "graph",
                  static_inputs: list[int] | None = None, capture: "CaptureState | None" = None,
                  input_names: tuple[str, ...] = ()) -> Callable:
    """Compile one ATen-level FX graph (as AOTAutograd produces) into a boxed callable.

    Never raises for a graph it cannot fuse: anything unsupported runs through ATen, and an
    unexpected failure of the compiler itself runs the whole graph as traced, with a warning.

    Args:
        name: ``"forward"``, ``"backward"`` or ``"inference"`` (AOTAutograd's graphs), or
            another name for a graph compiled on its own.
        static_inputs: indices of inputs that are parameters or buffers; ``None`` reads them
            from AOTAutograd's metadata (``static_input_indices``) where it has them.
        capture: the state the forward and backward graphs of one captured program share
            (:mod:`torchfuse.runtime.training_graphs`). The graph's record (its
            ``CompiledGraph``, or its entry in :data:`UNFUSED`) keeps it as ``program``, so that
            reports can tell which capture a backward compiled at the first backward belongs
            to. With ``Options.cudagraphs``, forward and backward graphs are also replayed as
            CUDA graphs where that is safe.
        input_names: the user's names of the inputs of TorchDynamo's graph, which a forward
            or inference graph takes in the same order
            (:func:`~torchfuse.runtime.capture_refusals.user_input_names`): refusals to capture
            name inputs by them.
    """
    if static_inputs is None:
        static_inputs = _static_input_indices()
    compiled = _compile_graph(gm, example_inputs, options, name, static_inputs, input_names)
    record = _report_record(compiled, gm)
    if name == "forward":
        compiled = _saving_inputs_as_eager(compiled, gm)
    elif name == "backward" and record is compiled:
        compiled = _batched_gradients_as_traced(compiled, gm)
    if capture is not None and record is not None:
        if isinstance(record, dict):
            record["program"] = capture
        else:
            record.program = capture
    if not (options.cudagraphs and name in ("forward", "backward")):
        return compiled
    from .runtime.training_graphs import CaptureState, capture_training_graph

    stats = record if isinstance(record, dict) else record.stats if record is not None else {}
    return capture_training_graph(compiled, gm, example_inputs, name=name, static_inputs=static_inputs,
                                  state=capture if capture is not None else CaptureState(),
                                  copy_outputs=options.cudagraph_copy_outputs, stats=stats,
                                  address_checked_calls=options.tuning.runtime.address_checked_calls,
                                  pool_output_bytes=options.tuning.runtime.pool_output_bytes,
                                  input_names=input_names)


def _saved_inputs(gm: torch.fx.GraphModule) -> list[tuple[int, int, bool]]:
    """``(output position, input position, needs no gradient)`` of each activation a forward
    graph saves for the backward that is a view of one of its inputs, or an input that needs
    no gradient (data, not parameters)."""
    from .passes import view_root
    from .runtime.training_graphs import user_output_count

    returned = user_output_count()
    out = next((o for o in reversed(gm.graph.nodes) if o.op == "output"), None)
    if returned is None or out is None:
        return []
    placeholders = {p: i for i, p in enumerate(x for x in gm.graph.nodes if x.op == "placeholder")}
    # which inputs need a gradient: AOTAutograd's metadata (the graph's fake values do not say)
    ctx = torch._guards.TracingContext.try_get()
    info = getattr(getattr(ctx, "fw_metadata", None), "input_info", None)
    if info is not None and len(info) != len(placeholders):
        info = None  # inputs not one to one (a synthetic base): check every saved input
    found = []
    for k, v in enumerate(out.args[0]):
        if k < returned or not isinstance(v, torch.fx.Node):
            continue
        root = view_root(v)
        if root in placeholders:
            i = placeholders[root]
            no_grad = info is None or not info[i].requires_grad
            if no_grad or root is not v:
                found.append((k, i, no_grad))
    return found


def _saving_inputs_as_eager(compiled: Callable, gm: torch.fx.GraphModule) -> Callable:
    """The forward graph ``compiled``, whose activations saved for the backward that are its
    inputs, or views of them, are saved as eager saves them:

    * a view of an input is returned as a view of that input (``as_strided`` of it), sharing
      its version counter. The graph's runtime makes views as tensors of their own on the
      input's memory (``runtime.calls._no_view``, the generated function's reinterpretations),
      so an in-place write to the input between the forward and the backward (the next batch
      copied into the same buffer) went unseen, and the backward computed a gradient from the
      written values where eager raises "one of the variables needed for gradient computation
      has been modified by an inplace operation" (``aot_eager`` keeps eager's views; Inductor
      has the same gap). A saved input itself is the input, and always was checked so.
    * an input made under ``torch.inference_mode()`` is copied where the forward saves it (or
      a view of it) and it needs no gradient. Autograd refuses to save inference tensors.
      Eager saves what each op's derivative reads (``layer_norm(x) * w`` saves the normalized
      values for ``w``'s gradient), while the partitioner may save the input and recompute
      from it; PyTorch's min-cut partitioner, and so Inductor, then raise "Inference tensors
      cannot be saved for backward" where eager runs.

    Costs a few microseconds of host time per such activation a call (an ``is_inference()``,
    a storage comparison, an ``as_strided``); a graph saving none is returned as it is."""
    saved = _saved_inputs(gm)
    if not saved:
        return compiled
    roots = [i for _, i, _ in saved]

    def run(args: list):
        inputs = [args[i] for i in roots]  # before the call clears ``args`` (boxed convention)
        outs = compiled(args)
        changed = None
        for (k, _, no_grad), x in zip(saved, inputs):
            t = outs[k]
            if not isinstance(t, torch.Tensor):
                continue
            if no_grad and t.is_inference():
                new = t.clone()
            elif (t is not x and t._base is not x and isinstance(x, torch.Tensor) and t.device == x.device
                  and t.untyped_storage().data_ptr() == x.untyped_storage().data_ptr()):
                new = alias_as(x, t)
                if new is None:
                    continue
            else:
                continue
            if changed is None:
                changed = list(outs)
            changed[k] = new
        return outs if changed is None else changed

    run._boxed_call = True
    return run


def _report_record(compiled: Callable, gm: torch.fx.GraphModule) -> Any:
    """The record reports read for the graph just compiled (report hook): its ``CompiledGraph``,
    its entry in :data:`UNFUSED` when the traced graph runs, or ``None``."""
    from .runtime.executor import CompiledGraph

    if isinstance(compiled, CompiledGraph):
        return compiled
    return UNFUSED[-1] if UNFUSED and UNFUSED[-1]["fx_graph"] is gm else None


def _batched_gradients_as_traced(compiled: Callable, gm: torch.fx.GraphModule) -> Callable:
    """The backward graph ``compiled``, whose calls with batched incoming gradients run the
    traced graph through ATen. ``torch.autograd.grad(..., is_grads_batched=True)`` (and so
    ``torch.autograd.functional.jacobian`` and ``hessian`` with ``vectorize=True``) calls the
    backward under vmap: its gradients are batched tensors, which have no storage a kernel could
    read, and ATen's ops have batching rules for them (``aot_eager`` runs them so). Only the
    incoming gradients are checked (the saved activations are the forward's own tensors): a
    ``has_storage`` per gradient a call; a graph without incoming gradients is returned as it is."""
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    tangents = [i for i, n in enumerate(placeholders) if n.name.startswith("tangents")]
    if not tangents:
        return compiled
    traced = _boxed(gm.forward)

    def run(args: list):
        for i in tangents:
            t = args[i]
            if isinstance(t, torch.Tensor) and not torch._C._has_storage(t):
                return traced(args)
        return compiled(args)

    run._boxed_call = True
    return run


def _compile_graph(gm: torch.fx.GraphModule, example_inputs: list, options: Options, name: str,
                   static_inputs: list[int] | None, input_names: tuple[str, ...] = ()) -> Callable:
    """:func:`compile_graph` without the training graphs' CUDA graph capture: the passes of
    :mod:`torchfuse.pipeline` at the ATen and IR levels, then the runtime."""
    from .ir.from_fx import graph_from_fx
    from .segment import segment

    with _phases.CLOCK.timed("passes"):  # before freezing, which compiles the frozen graph anew
        run_aten_passes(gm, options, name, LAST_REWRITES, before_freezing=True)
    if options.freeze and name == "inference" and static_inputs:
        frozen = _compile_frozen(gm, example_inputs, options, static_inputs)
        if frozen is not None:
            return frozen
    t0 = time.perf_counter()
    try:
        run_aten_passes(gm, options, name, LAST_REWRITES)
        graph = graph_from_fx(gm, options)
        plan_cache = _open_plan_cache(name, gm, graph, example_inputs, options, static_inputs)
        t1 = time.perf_counter()
        seg = segment(graph, options, plan_cache.partitions if plan_cache is not None else None)
        if plan_cache is not None:  # graph cache hook: the partitions, written with the kernels' sources
            plan_cache.record_partitions(seg.partitions)
        # the graph's stages and the process's phases count the same seconds: the graph
        # cache's lookup with the passes, segmentation apart (runtime.phases)
        ir_seconds, segment_seconds = t1 - t0, time.perf_counter() - t1
        _phases.CLOCK.add("passes", ir_seconds)
        _phases.CLOCK.add("segment", segment_seconds)
    except Exception as e:  # a compiler bug must not break the user's program
        return _run_unfused_after_failure(gm, example_inputs, options, name, e, time.perf_counter() - t0)
    dump_stem = _dump_stage(options, name, gm, graph, seg) if options.dump_dir else None
    if not options.interpret:
        _warn_cpu_unfused(seg)
    if not seg.groups and not (options.cudagraphs and name == "inference"):
        _log_aten_calls(name, seg)
        log.info("%s: nothing to fuse; running the traced graph", name)
        _record_unfused(name, gm, seg, None, None, ir_seconds, segment_seconds)
        return _boxed(gm.forward)
    compiled = _make_runtime(gm, example_inputs, options, name, seg, ir_seconds, segment_seconds, plan_cache)
    # after the runtime exists: its pad and max-pool runners decide which calls leave ATen
    _log_aten_calls(name, seg)
    compiled.dump_stem = dump_stem
    if options.cudagraphs and name == "inference":
        from .runtime.cudagraphs import CudaGraphRunner

        from torch._dynamo.backends.cudagraphs import find_input_mutations

        from .runtime.capture_refusals import describe_input

        placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
        return CudaGraphRunner(compiled, options, static_inputs, mutated_inputs=find_input_mutations(gm.graph),
                               name_input=lambda i: describe_input(gm, placeholders[i], input_names, name))
    return compiled


def _run_unfused_after_failure(gm: torch.fx.GraphModule, example_inputs: list, options: Options, name: str,
                               error: Exception, seconds: float) -> Callable:
    """The graph as traced, after the compiler failed on it: a warning naming a reproducer
    script (:mod:`torchfuse.report.reproducer`), and a record for the report."""
    from .report.reproducer import write_reproducer

    repro = write_reproducer(gm, example_inputs, name, error, options)
    warnings.warn(f"torchfuse: could not compile {name} graph ({type(error).__name__}: {error}); running it unfused"
                  + (f"; reproducer: {repro}" if repro else ""), RuntimeWarning, stacklevel=user_stacklevel())
    log.exception("compile failure", exc_info=error)
    _record_unfused(name, gm, None, f"{type(error).__name__}: {error}", repro, seconds, 0.0)
    return _boxed(gm.forward)


def _log_aten_calls(name: str, seg) -> None:
    """With the ``fusion`` log topic: each ATen target left unfused, with its reason and count
    (the ATen calls explain counts: views and module constants apart)."""
    if log.isEnabledFor(logging.INFO):
        import collections

        from .report.collect import split_calls

        reasons = collections.Counter((str(n.target), n.reason) for n in split_calls(seg.calls)[0])
        for (target, reason), count in sorted(reasons.items()):
            log.info("%s: %d x %s on ATen: %s", name, count, target, reason)


def _make_runtime(gm: torch.fx.GraphModule, example_inputs: list, options: Options, name: str, seg,
                  ir_seconds: float, segment_seconds: float, plan_cache=None):
    """The :class:`~torchfuse.runtime.executor.CompiledGraph` of ``seg``, remembered in
    :data:`RECENT`, with the reproducer hook of its groups and the graph cache entry
    ``plan_cache`` (:mod:`torchfuse.runtime.plan_cache`) attached when there is one."""
    from .report.reproducer import ReproducerWriter
    from .runtime.executor import CompiledGraph, GroupRunner

    compiled = CompiledGraph(seg, options, name=name)
    compiled.stats["ir_seconds"] = ir_seconds
    compiled.stats["segment_seconds"] = segment_seconds
    compiled.fx_graph = gm
    # reproducer hook (torchfuse.report.reproducer): a group whose kernel fails writes a script of this graph
    writer = ReproducerWriter(gm, example_inputs, name, options)
    compiled.write_reproducer = writer  # and a failure of the graph's first call (CompiledGraph)
    for step in compiled.steps:
        if isinstance(step, GroupRunner):
            step.write_reproducer = writer
    if plan_cache is not None:  # graph cache hook: sources a previous process generated for this graph
        from .runtime.plan_cache import attach
        attach(compiled, plan_cache)
    RECENT.append(compiled)
    del RECENT[:-_MAX_RECENT]
    if log.isEnabledFor(logging.INFO):  # counted as explain counts them: views apart from ATen calls
        from .report.collect import split_calls
        from .report.summary import counts_text

        work, idle, own = split_calls(seg.calls)
        log.info("%s: %s", name, counts_text(len(seg.groups), len(work), len(idle), len(own)))
    return compiled


def _open_plan_cache(name: str, gm, graph, example_inputs: list, options: Options, static_inputs):
    """The graph cache entry of this graph (:mod:`torchfuse.runtime.plan_cache`), or ``None``
    without a cache directory or when the key cannot be made."""
    if options.cache_dir is None:
        return None
    from .runtime.plan_cache import PlanCache, key_of, key_parts

    try:
        parts = key_parts(name, gm, str(graph), example_inputs, options, static_inputs)
        key = key_of(parts)
    except Exception as e:  # noqa: BLE001 - the cache is an optimization only
        log.debug("no graph cache key (%s: %s)", type(e).__name__, e)
        return None
    return PlanCache.open(options.cache_dir, key, parts)


def _static_input_indices() -> list[int] | None:
    """AOTAutograd's indices of the parameters and buffers among the graph being compiled's
    inputs, or ``None`` outside its tracing context."""
    ctx = torch._guards.TracingContext.try_get()
    meta = getattr(ctx, "fw_metadata", None) if ctx is not None else None
    static = getattr(meta, "static_input_indices", None)
    return list(static) if static is not None else None


def _compile_frozen(gm: torch.fx.GraphModule, example_inputs: list, options: Options,
                    static: list[int]) -> Callable | None:
    """``Options.freeze``: hoist what the inference graph computes from its static inputs
    (parameters and buffers) alone, compile the rest; ``None`` when nothing depends on them alone."""
    import dataclasses

    from .freezing import FrozenGraph, split_weight_subgraph

    split = split_weight_subgraph(gm, static)
    if split is None:
        return None
    log.info("inference: %d ops on weights alone hoisted (recomputed only when a weight changes)", split.hoisted)
    frozen_inputs = [n.meta.get("val") for n in split.main.graph.nodes if n.op == "placeholder"][len(example_inputs):]
    n = len(example_inputs)
    last = RECENT[-1] if RECENT else None
    inner = compile_graph(split.main, list(example_inputs) + frozen_inputs, dataclasses.replace(options, freeze=False),
                          name="inference", static_inputs=list(static) + list(range(n, n + len(frozen_inputs))))
    if RECENT and RECENT[-1] is not last:  # explain labels the graph (none is remembered when its compile failed)
        ops, values = split.hoisted, len(frozen_inputs)
        RECENT[-1].stats["frozen"] = (f"{ops} op{'s' if ops != 1 else ''} on weights alone hoisted into {values} "
                                      f"constant{'s' if values != 1 else ''}, recomputed only when a parameter or "
                                      "buffer changes")
    return FrozenGraph(split, inner, static_inputs=static)


_warned_cpu = [False]
_warned_freeze_grad = [False]


def _warn_cpu_unfused(seg) -> None:
    """Warn once per process when ops on CPU tensors stay on ATen because interpret mode is off
    (the default: Triton's interpreter is orders of magnitude slower than ATen)."""
    if _warned_cpu[0] or not any(n.reason == _CPU_REASON for n in seg.calls):
        return
    _warned_cpu[0] = True
    warnings.warn("torchfuse: this graph runs on CPU tensors, which run through ATen (unfused) by default; "
                  "pass interpret=True (or set TORCHFUSE_INTERPRET=1 and leave the option unset) to run the "
                  "generated kernels in "
                  "Triton's interpreter (slow: a testing path). This warning is shown once per process.",
                  UserWarning, stacklevel=user_stacklevel())


def _record_unfused(name: str, gm, seg, error: str | None, reproducer: str | None, ir_seconds: float,
                    segment_seconds: float) -> None:
    """Remember a graph that runs as traced (report hook: torchfuse.report reads UNFUSED)."""
    UNFUSED.append({"name": name, "fx_graph": gm, "segmentation": seg, "error": error, "reproducer": reproducer,
                    "ir_seconds": ir_seconds, "segment_seconds": segment_seconds})
    del UNFUSED[:-_MAX_RECENT]


_dump_counter = [0]


def _dump_stage(options: Options, name: str, gm, graph, seg) -> str | None:
    """Write the graph's stages under ``options.dump_dir``; returns their common stem
    (``<dump_dir>/<nnn>_<name>``), beside which the graph's generated functions go, or None
    (with a warning) where the directory cannot be written: a debugging aid, the graph
    compiles without it."""
    import os

    _dump_counter[0] += 1
    stem = os.path.join(options.dump_dir, f"{_dump_counter[0]:03d}_{name}")
    try:
        os.makedirs(options.dump_dir, exist_ok=True)
        with open(stem + ".fx.py", "w") as f:
            f.write(gm.print_readable(print_output=False))
        with open(stem + ".ir.txt", "w") as f:
            f.write(str(graph))
        with open(stem + ".groups.txt", "w") as f:
            f.write(str(seg))
    except OSError as e:
        why = "it is a file, not a directory" if os.path.isfile(options.dump_dir) else f"{type(e).__name__}: {e}"
        warnings.warn(f"torchfuse: dump_dir {options.dump_dir!r} cannot be written ({why}); "
                      "the graph compiles without its dump", RuntimeWarning, stacklevel=user_stacklevel())
        return None
    return stem


#: ``torch.compile`` modes torchfuse accepts: ``"reduce-overhead"`` turns on its CUDA graphs
#: for inference graphs; the others compile as usual.
COMPILE_MODES = (None, "default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")


def mode_overrides(mode: str | None) -> dict:
    """The options a ``torch.compile`` mode stands for.

    Raises:
        ValueError: ``mode`` is not one of :data:`COMPILE_MODES` (a misspelled mode would
            otherwise silently lose CUDA graphs).
    """
    if mode not in COMPILE_MODES:
        raise ValueError(f"torchfuse: unknown mode {mode!r}; known: {', '.join(repr(m) for m in COMPILE_MODES)}")
    return {"cudagraphs": True} if mode == "reduce-overhead" else {}


def resolve_options(options: Any = None, **overrides) -> Options:
    """An :class:`Options` from an ``Options``, a dict, or keyword overrides of the environment."""
    if isinstance(options, Options):
        return options if not overrides else Options.from_env(**{**options.__dict__, **overrides})
    merged = dict(options or {})
    merged.update(overrides)
    return Options.from_env(**merged)


#: The rewrites the last :func:`torchfuse_backend` call made to its captured graph, by pass
#: name (a count of rewritten sites); ``torchfuse.explain`` reports them per capture.
LAST_REWRITES: dict[str, int] = {}


def _warn_freeze_with_grad(options: Options) -> None:
    """Warn once per process that ``freeze=True`` does nothing to a graph captured with grad enabled."""
    if options.freeze and torch.is_grad_enabled() and not _warned_freeze_grad[0]:
        _warned_freeze_grad[0] = True
        warnings.warn("torchfuse: freeze=True applies to graphs compiled under torch.no_grad() or "
                      "torch.inference_mode(); this graph is compiled with grad enabled, so its weights are not "
                      "frozen (no BatchNorm folding or hoisting). This warning is shown once per process.",
                      UserWarning, stacklevel=user_stacklevel())


def torchfuse_backend(gm: torch.fx.GraphModule, example_inputs: list, *, options: Any = None,
                      mode: str | None = None, **kwargs) -> Callable:
    """The TorchDynamo backend: ``torch.compile(model, backend="torchfuse", options={...})``.

    Args:
        gm: the graph TorchDynamo captured.
        example_inputs: its (fake) example inputs.
        options: an :class:`Options` or a dict of option names to values.
        mode: ``torch.compile``'s mode: ``"reduce-overhead"`` turns on CUDA graphs for
            inference graphs (``Options.cudagraphs``); ``None``, ``"default"`` and
            ``"max-autotune"`` compile as usual.

    Raises:
        TypeError: an option name is unknown, or an option's value has the wrong type.
        ValueError: ``mode`` is unknown, or a count option is below 1.
    """
    for k, v in mode_overrides(mode).items():
        kwargs.setdefault(k, v)
    opts = resolve_options(options, **kwargs)
    _warn_freeze_with_grad(opts)
    # compile-time report hooks (runtime.phases, runtime.recompiles): this call's time less
    # torchfuse's own stages is AOTAutograd's; why TorchDynamo compiles again
    own_before, started = _phases.CLOCK.own_seconds(), time.perf_counter()
    from .runtime.recompiles import log_dynamo_recompiles
    log_dynamo_recompiles()
    LAST_REWRITES.clear()
    try:
        from .passes.fx import eager_raises

        raising = eager_raises(gm)
        if raising:  # eager raises at these calls; the graph as traced raises its error
            log.info("running the graph as traced: eager raises at %s", "; ".join(raising))
            _record_unfused("captured", gm, None, "eager raises: " + "; ".join(raising), None, 0.0, 0.0)
            return gm.forward  # (not the module: its __call__ prints the traceback of an error it raises)
        with _phases.CLOCK.timed("passes"):
            run_fx_passes(gm, opts, torch.is_grad_enabled(), LAST_REWRITES)
        return _trace_and_compile(gm, example_inputs, opts)
    finally:
        _phases.record_backend_call(time.perf_counter() - started, own_before)


def _trace_and_compile(gm: torch.fx.GraphModule, example_inputs: list, opts: Options) -> Callable:
    """AOTAutograd on ``gm`` (functionalized, decomposed, the joint graph partitioned), each of
    its graphs through :func:`compile_graph`; a graph AOTAutograd rejects runs eagerly, with a
    warning."""
    from torch._dynamo.backends.common import aot_autograd

    from .passes.joint import partition
    from .runtime.capture_refusals import user_input_names
    from .runtime.training_graphs import CaptureState

    capture = CaptureState()  # shared by this program's forward and backward graphs
    names = user_input_names(gm)
    backend = aot_autograd(
        fw_compiler=functools.partial(compile_graph, options=opts, name="forward", capture=capture, input_names=names),
        bw_compiler=functools.partial(compile_graph, options=opts, name="backward", capture=capture),
        inference_compiler=functools.partial(compile_graph, options=opts, name="inference", input_names=names),
        partition_fn=partition,  # min-cut, never recomputing from an input the forward writes
        decompositions=decomposition_table(opts.tuning.decompose),
        # writes to inputs that need no gradient (BatchNorm's running statistics and batch
        # counter) stay in the graph as ``copy_`` calls, which the runtime batches into one
        # multi-tensor copy (and CUDA graphs capture), instead of one copy per buffer after
        # the graph returns
        keep_inference_input_mutations=True,
    )
    try:
        with _tangents_in_a_memory_format_if_an_output_overlaps(gm):
            compiled = backend(gm, example_inputs)
    except Exception as e:  # AOTAutograd's tracing (an op without a derivative): run the graph eagerly
        if isinstance(e, torch._dynamo.exc.TorchDynamoException):
            raise  # TorchDynamo's own signals (restart the analysis, a graph break), not failures
        if isinstance(e, _GRAPH_BREAK_ERRORS) and _graph_breaks_allowed():
            # an op whose output's size depends on the data (a boolean mask's gradient needs
            # ``nonzero``): TorchDynamo splits the graph there, as for its own backends, and
            # the parts around it are compiled; eager for the whole graph only under fullgraph
            raise
        first = (str(e).splitlines() or [""])[0][:300]
        warnings.warn(f"torchfuse: AOTAutograd rejected this graph ({type(e).__name__}: {first}); it runs "
                      "eagerly, unfused", RuntimeWarning, stacklevel=user_stacklevel())
        log.info("AOTAutograd failure", exc_info=True)
        _record_unfused("captured", gm, None, f"AOTAutograd: {type(e).__name__}: {first}", None, 0.0, 0.0)
        return gm
    meta = getattr(torch._guards.TracingContext.try_get(), "fw_metadata", None)
    if getattr(meta, "bw_donated_idxs", None):
        # AOTAutograd lists saved activations a backward may write over (donated buffers, which
        # Inductor reuses) and then refuses ``retain_graph``/``create_graph`` at any backward
        # after the first, where eager allows them; torchfuse's backward never writes them
        meta.bw_donated_idxs = []
    compiled = _with_alias_check(compiled, gm, example_inputs, meta)
    compiled = _with_overlap_check(compiled, gm, example_inputs, meta)
    return _with_shared_version_counters(compiled, gm, meta)


def _tangents_in_a_memory_format_if_an_output_overlaps(gm: torch.fx.GraphModule):
    """A context for AOTAutograd's trace of ``gm``: where an output of TorchDynamo's graph
    overlaps itself in a way PyTorch cannot tell cheaply (``unfold`` or ``as_strided``
    windows: ``torch._debug_has_internal_overlap`` is 2), the backward expects its gradients
    in the outputs' memory formats instead of their strides.

    AOTAutograd copies each incoming gradient into the strides it expects; it falls back to a
    memory format only for outputs whose overlap it is sure of (``expand``), so the gradient of
    ``(x * 1).unfold(0, 7, 6)`` was copied into the windows' overlapping strides and lost one
    of each two overlapping elements (``x.grad[6]`` 214 where eager's is 213; ``aot_eager``
    too). Other graphs keep the default (a no-op context)."""
    if any(isinstance(v, torch.Tensor) and v.layout == torch.strided and not v._has_symbolic_sizes_strides
           and torch._debug_has_internal_overlap(v) != 0 for v in _output_values(gm)):
        return torch._functorch.config.patch(guess_tangent_strides_as_outputs=False)
    return contextlib.nullcontext()


#: what TorchDynamo answers with a graph break when a backend raises it
#: (``torch._dynamo.exc.exceptions_allowed_to_be_fallback``)
_GRAPH_BREAK_ERRORS = getattr(torch._dynamo.exc, "exceptions_allowed_to_be_fallback", ())


def _graph_breaks_allowed() -> bool:
    """Whether the frame TorchDynamo is compiling may be split (not ``fullgraph=True``, nor
    ``error_on_graph_break``); ``False`` where that cannot be told."""
    try:
        from torch._dynamo.symbolic_convert import InstructionTranslator

        tx = InstructionTranslator.current_tx()
    except Exception:  # noqa: BLE001 - TorchDynamo's internals moved: keep the whole graph eager
        return False
    return tx is not None and not getattr(tx, "one_graph", True) and not getattr(tx, "error_on_graph_break", False)


def _is_symbolic(inputs: list) -> bool:
    """Whether a graph's inputs carry size symbols (TorchDynamo passes them as ``SymInt``s)."""
    return any(isinstance(x, torch.SymInt) for x in inputs)


def _written_bases_of_outputs(meta, inputs: list) -> list[int] | None:
    """The inputs (indices into ``inputs``, the graph's inputs as TorchDynamo passes them)
    that the graph writes to and that one of its outputs is a view of, by AOTAutograd's
    metadata of the graph (``ViewAndMutationMeta``); ``None`` when the metadata does not
    index ``inputs`` one to one (inputs merged into one base, a subclass's inner tensors,
    parameters held by the graph) and every tensor input must be taken for one."""
    bases = {o.base_idx for o in meta.output_info
             if o.output_type.name == "alias_of_input" and o.base_idx is not None}
    if not bases or not any(i.mutates_data for i in meta.input_info):
        return []
    if len(meta.input_info) != len(inputs) or not all(isinstance(inputs[i], torch.Tensor) for i in bases):
        return None
    return sorted(i for i in bases if meta.input_info[i].mutates_data)


def _with_alias_check(compiled: Callable, gm: torch.fx.GraphModule, example_inputs: list, meta) -> Callable:
    """``compiled``, running TorchDynamo's graph eagerly for calls where an output that views
    a written input could get the wrong strides.

    With size symbols, AOTAutograd rebuilds such an output from its input with the strides
    of the view of the written copy in its functional graph, not of the input: ``x.add_(1);
    return x.flatten(0, 1)`` on ``x = b.view(1, n, 2)[..., ::2]`` returns a view that reads
    every element of ``b`` instead of every other one (``aot_eager`` and Inductor too). The
    written copy of a dense input (contiguous, channels-last, transposed) has the input's
    strides, so its views are rebuilt right; a call where such an input has gaps runs
    eagerly, with a warning (where the metadata cannot name the input, any tensor input with
    gaps). Graphs without size symbols (views replayed) or without such outputs are returned
    as they are. The returned callable counts its eager calls in ``eager_calls``."""
    if meta is None or not _is_symbolic(example_inputs):
        return compiled
    bases = _written_bases_of_outputs(meta, example_inputs)
    if bases == []:
        return compiled
    checked = bases if bases is not None else [i for i, a in enumerate(example_inputs) if isinstance(a, torch.Tensor)]
    dense = torch.ops.aten.is_non_overlapping_and_dense.default  # no gaps or overlaps, in any dim order

    def has_gaps(args: tuple) -> bool:
        return not all(dense(args[i]) for i in checked)

    return _eager_when(has_gaps, compiled, gm,
                       "this graph returns a view of an input it writes to, and the input's elements have gaps in "
                       "memory; with dynamic sizes AOTAutograd would give that view the wrong strides")


def _eager_when(needs_eager: Callable[[tuple], bool], compiled: Callable, gm: torch.fx.GraphModule,
                why: str) -> Callable:
    """``compiled``, but calls whose arguments ``needs_eager`` picks run TorchDynamo's graph
    ``gm`` eagerly, with one warning (``why``, then that such calls run eagerly); the
    returned callable counts those calls in ``eager_calls``."""
    warned = False

    def run(*args):  # TorchDynamo calls what a backend returns with the graph's inputs
        nonlocal warned
        if not needs_eager(args):
            return compiled(*args)
        run.eager_calls += 1
        if not warned:
            warned = True
            warnings.warn(f"torchfuse: {why}; such calls run eagerly, unfused", RuntimeWarning,
                          stacklevel=user_stacklevel())
        return gm(*args)

    run.eager_calls = 0
    return run


def _shared_storages(inputs: list, indices: list[int] | None = None) -> tuple:
    """The inputs (of ``indices``, default all) that share a storage with another of them:
    per storage, ``(input indices, their storage offsets in elements)``, in input order."""
    from torch.multiprocessing.reductions import StorageWeakRef
    from torch.utils._python_dispatch import is_traceable_wrapper_subclass

    groups: dict[int, list[int]] = {}
    for i in range(len(inputs)) if indices is None else indices:
        x = inputs[i]
        # a wrapper subclass (DTensor) holds its data in inner tensors: its own storage says nothing
        if not isinstance(x, torch.Tensor) or x.layout != torch.strided or is_traceable_wrapper_subclass(x):
            continue
        try:
            groups.setdefault(StorageWeakRef(x.untyped_storage()).cdata, []).append(i)
        except (RuntimeError, NotImplementedError):  # a tensor without a storage to compare
            continue
    return tuple((tuple(g), tuple(inputs[i].storage_offset() for i in g)) for g in groups.values() if len(g) > 1)


def _with_overlap_check(compiled: Callable, gm: torch.fx.GraphModule, example_inputs: list, meta) -> Callable:
    """``compiled``, checking at each call that inputs which shared a storage when it was
    compiled still share it at the same offsets, where the graph writes to an input.

    AOTAutograd compiles a graph whose mutated input overlaps another as views of one base,
    with the offsets it traced; TorchDynamo guards that inputs overlap, not where, so a call
    with another overlap (``f(b[:6], b[4:10])``, then ``f(b[:6], b[2:8])``) would get values
    computed for the first one (``aot_eager`` too). Such a call runs TorchDynamo's graph
    eagerly instead, with a warning. A graph without such inputs is returned as it is (no cost
    at run time)."""
    shared = _shared_storages(example_inputs)
    if not shared:
        return compiled
    if meta is not None and not any(i.mutates_data or i.mutates_metadata for i in meta.input_info):
        return compiled  # reads alone give the same values at any overlap
    indices = [i for g, _ in shared for i in g]
    return _eager_when(lambda args: _shared_storages(args, indices) != shared, compiled, gm,
                       "inputs that share memory overlap differently from when this graph was compiled, and the "
                       "graph writes to one of them")


def _output_values(gm: torch.fx.GraphModule) -> list:
    """The traced values (TorchDynamo's ``example_value``) of the outputs of ``gm``, in order:
    ``None`` for an output that is not a node; empty where the graph has no output node."""
    out = next((n for n in reversed(gm.graph.nodes) if n.op == "output"), None)
    if out is None:
        return []
    nodes = list(out.args[0]) if isinstance(out.args[0], (list, tuple)) else [out.args[0]]
    return [n.meta.get("example_value") if isinstance(n, torch.fx.Node) else None for n in nodes]


def _outputs_sharing_storage(gm: torch.fx.GraphModule, meta) -> tuple:
    """Outputs of TorchDynamo's graph ``gm`` that share a storage with an earlier output, need
    no gradient, and that AOTAutograd returns as tensors of their own: per storage,
    ``(first output's index, (the others' indices))``. Read from the outputs' traced values
    (TorchDynamo's ``example_value``); ``meta`` (AOTAutograd's ``ViewAndMutationMeta``)
    excludes outputs it rebuilds itself (views of inputs, of outputs that need a gradient)."""
    values = _output_values(gm)
    infos = meta.output_info if meta is not None and len(meta.output_info) == len(values) else None
    candidates = [j for j in range(len(values))
                  if infos is None or infos[j].output_type.name in ("non_alias", "unsafe_view_alias")]
    plan = []
    for group, _ in _shared_storages(values, candidates):
        others = tuple(j for j in group[1:] if not values[j].requires_grad)
        if others:
            plan.append((group[0], others))
    return tuple(plan)


def _with_shared_version_counters(compiled: Callable, gm: torch.fx.GraphModule, meta) -> Callable:
    """``compiled``, whose outputs that share memory with an earlier output also share its
    version counter, as eager's views and ``detach()`` do.

    The graph's runtime returns such an output (``y.detach()[:, :3]`` beside ``y``, or any
    view of ``y`` under ``torch.no_grad()``) as a tensor of its own on ``y``'s memory
    (``runtime.calls._no_view``), so an in-place write through it left ``y``'s version
    unchanged, and a backward that had saved ``y`` read the written values where eager
    raises (``aot_eager`` keeps eager's views; Inductor has the same gap). Each such output is
    rebuilt at every call as a view of the earlier output's detached alias, with its own sizes,
    strides and offset, when the two share memory at run time (a view of the earlier output
    itself where that needs no gradient). A graph without such outputs is
    returned as it is (no cost at run time)."""
    plan = _outputs_sharing_storage(gm, meta)
    if not plan:
        return compiled

    def run(*args):
        outs = compiled(*args)
        rebuilt = list(outs)
        for first, others in plan:
            y = rebuilt[first]
            if not isinstance(y, torch.Tensor):
                continue
            ptr = y.untyped_storage().data_ptr()
            for j in others:
                d = rebuilt[j]
                if (not isinstance(d, torch.Tensor) or d.requires_grad or d._base is y
                        or d.untyped_storage().data_ptr() != ptr):
                    continue
                if (d.dtype == y.dtype and d.size() == y.size() and d.stride() == y.stride()
                        and d.storage_offset() == y.storage_offset() and d.is_conj() == y.is_conj()
                        and d.is_neg() == y.is_neg()):
                    rebuilt[j] = y.detach()  # (eager's ``y.detach()``: no view, y's version counter)
                else:  # a view of y itself where that needs no gradient, as eager's under no_grad
                    view = alias_as(y if not y.requires_grad else y.detach(), d)
                    rebuilt[j] = d if view is None else view
        return type(outs)(rebuilt) if isinstance(outs, tuple) else rebuilt

    return run


def register() -> None:
    """Register ``"torchfuse"`` with TorchDynamo unless its entry point is about to."""
    from torch._dynamo.backends import registry

    if "torchfuse" in registry._COMPILER_FNS or registry._BACKENDS.get("torchfuse") is not None:
        return
    registry.register_backend(compiler_fn=torchfuse_backend, name="torchfuse")
