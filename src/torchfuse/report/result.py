"""The explain result: plain records of what the compiler did, saved and loaded as JSON.

Every record is a dataclass of strings, numbers, lists and other records, so a result
round-trips through JSON unchanged (:meth:`ExplainResult.save`, :meth:`ExplainResult.load`);
nothing is pickled. :mod:`torchfuse.report.collect` fills them from the compiler's own
objects; :mod:`.summary` and :mod:`.html` only read them.

Units: seconds for compile stages, milliseconds for kernel times, bytes, and GB/s
(1e9 bytes per second).
"""
from __future__ import annotations

import dataclasses
import json
import types
import typing
from typing import Any

SCHEMA = 1


@dataclasses.dataclass
class SourceLocation:
    """Where an op came from in the user's program.

    Attributes:
        file, line, function, code: the innermost frame of the user's code (from Dynamo's
            stack traces; empty, and ``line`` 0, for ops inside PyTorch's own modules, whose
            frames Dynamo does not record).
        module: the innermost ``nn.Module`` it ran in: ``path (Class)``, e.g.
            ``layers[0].self_attn (MultiheadAttention)``; empty outside modules.
    """

    file: str
    line: int
    function: str = ""
    code: str = ""
    module: str = ""

    def __str__(self) -> str:
        text = f"{self.file}:{self.line}" + (f" in {self.function}" if self.function else "") if self.file else ""
        if self.module:
            text = f"{text} ({self.module})" if text else self.module
        return text


@dataclasses.dataclass
class GraphBreak:
    """Where and why TorchDynamo split the program into several graphs.

    Attributes:
        reason: the first line of Dynamo's reason.
        detail: Dynamo's full explanation (hints, links).
        location: the innermost frame of the user's program (the line that broke the graph).
        stack: every frame of the user's program, outermost first.
    """

    reason: str
    detail: str = ""
    location: SourceLocation | None = None
    stack: list[SourceLocation] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class Capture:
    """One graph TorchDynamo captured (and handed to torchfuse).

    Attributes:
        index: capture order.
        ops: number of call nodes Dynamo counted in it.
        location: the user's line of its first op.
        seconds: wall time of the whole backend call (AOTAutograd tracing and torchfuse).
        graphs: indices into :attr:`ExplainResult.graphs` of the ATen graphs compiled from it:
            forward or inference, and a backward, whether compiled with the forward or at the
            first backward (:attr:`GraphReport.at_first_backward`).
        rewrites: the rewrites torchfuse made to the captured graph before tracing it, by
            pass name (``channels_last_convolutions``: convolutions converted;
            ``dense_attention_masks``: masks made dense; ``fold_conv_batchnorm`` ...); passes
            that changed nothing are left out.
        recompiles: the index of the earlier capture of the same code that this one
            recompiles (TorchDynamo's guards failed for new inputs: the reasons are in
            :attr:`ExplainResult.recompilations`); ``None`` for a first capture.
        dynamo_id: TorchDynamo's compile id of it, ``frame/compile`` (``0/1``: frame 0's second
            capture), as TorchDynamo's guard failures and the ``recompile`` log name it;
            empty when unknown.
    """

    index: int
    ops: int
    location: SourceLocation | None = None
    seconds: float = 0.0
    graphs: list[int] = dataclasses.field(default_factory=list)
    rewrites: dict[str, int] = dataclasses.field(default_factory=dict)
    recompiles: int | None = None
    dynamo_id: str = ""


@dataclasses.dataclass
class LaunchStage:
    """One kernel launch of a plan: ``grid`` programs of XBLOCK x RBLOCK tiles."""

    grid: list[int]
    XBLOCK: int
    RBLOCK: int
    num_warps: int


@dataclasses.dataclass
class PlanReport:
    """A group's launch plan for one set of sizes (its launch configuration and kernel).

    Attributes:
        sizes: the size-symbol values the plan is for (``"s0=8"``; ``"static"`` without symbols).
        input_shapes: sizes of the group's tensor inputs.
        scheduler: ``pointwise``, ``reduction.persistent``, ``reduction.loop`` or ``reduction.split``.
        stages: its launches (two for a split reduction).
        reason: why the heuristic chose this configuration.
        kernel: the kernel function's name (``tf_pw_<ops>`` / ``tf_red_<ops>``), also its name in
            profilers; empty when the domain is empty and nothing launches.
        kernel_key: the kernel cache key (SHA-256 of the source); see ``ExplainResult.kernels``.
        bytes_moved: fewest bytes the kernel must move (inputs read once, outputs written once).
        time_ms: measured time of the group's launches, milliseconds (GPU only, ``measure=True``).
        bandwidth_gbps: ``bytes_moved / time``, GB/s.
        copy_fraction: ``bandwidth_gbps`` over the device copy bandwidth measured in the same run.
    """

    sizes: str
    input_shapes: list[list[int]]
    scheduler: str
    stages: list[LaunchStage]
    reason: str
    kernel: str
    kernel_key: str
    bytes_moved: int
    time_ms: float | None = None
    bandwidth_gbps: float | None = None
    copy_fraction: float | None = None


@dataclasses.dataclass
class GroupReport:
    """One fusion group: the ops one generated kernel runs.

    Attributes:
        id: the group's index in its graph.
        name: the group's name (``tf_<id>_<ops>``).
        kind: ``pointwise`` or ``reduction``.
        kernel: the kernel function's name (as in profiler traces and Nsight).
        ops: the registry ops in order, one entry per node (``mul``, ``var_mean`` ...).
        nodes: the group's IR, one line per node.
        inputs, outputs: ``name: dtype[shape]{stride}@device`` per value.
        domain: the iteration domain (``domain[8, 16*]``; ``*`` marks reduced dims).
        plans: one per set of sizes it ran with.
        failed: why its kernel could not be generated or compiled (it then ran through ATen).
        reproducer: path of the script written for that failure.
        locations: the user's lines its ops came from, in order, without repeats.
    """

    id: int
    name: str
    kind: str
    kernel: str
    ops: list[str]
    nodes: list[str]
    inputs: list[str]
    outputs: list[str]
    domain: str
    plans: list[PlanReport] = dataclasses.field(default_factory=list)
    failed: str | None = None
    reproducer: str | None = None
    locations: list[SourceLocation] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class AtenCall:
    """An op that ran through ATen rather than in a generated kernel.

    Attributes:
        op: the ATen overload (``aten.addmm.default``).
        category: ``library`` (matrix products, convolutions, attention: vendor libraries),
            ``unsupported`` (no fusion rule), ``fallback`` (its group or graph failed to
            compile), ``view`` (no data moves), ``shape`` (arithmetic on sizes), ``constant``
            (a module tensor), ``allocation`` (an uninitialized tensor: the stand-in operand
            of a random draw, no data moves), ``rng_state`` (a random draw of a checkpointed
            region, kept on PyTorch's generator), ``disabled``, ``state`` (a write back to an
            input buffer, such as BatchNorm's running statistics), ``pad`` and ``pool``
            (torchfuse's fixed kernels for zero pads and max pooling), ``fusion`` (an op defined with
            :mod:`torchfuse.fusion`) or ``fusion_aten`` (such an op run op by op through
            ATen: CPU tensors without its ``interpret`` option).
        reason: the compiler's reason, as logged.
        node: its IR line (or FX node name for graphs that failed before the IR existed).
        location: the user's line it came from.
    """

    op: str
    category: str
    reason: str
    node: str = ""
    location: SourceLocation | None = None


#: ATen-call categories that move no data (listed, not drawn, not counted as ATen calls): views,
#: module constants, arithmetic on sizes, uninitialized tensors
NO_WORK = ("view", "constant", "shape", "allocation")
#: call categories that torchfuse's own fixed kernels run (zero pads, max pooling) or an op the
#: user defined with torchfuse.fusion: kernels outside fusion groups, counted apart from ATen's
OWN_KERNELS = ("pad", "pool", "fusion")
#: call categories whose text says why the call is where it is (reports leave the compiler's
#: reason out)
SELF_EXPLAINED = ("library", "fusion_aten", "rng_state", *NO_WORK, *OWN_KERNELS)


@dataclasses.dataclass
class Step:
    """One box of the graph drawing: a fusion group or an ATen call, in execution order.

    Attributes:
        kind: ``group`` or ``aten``.
        index: into the graph's ``groups`` or ``aten_calls``.
        after: indices of earlier drawn steps whose results it reads (views and tuple
            elements in between are looked through).
        output: it writes a value the graph returns.
    """

    kind: str
    index: int
    after: list[int] = dataclasses.field(default_factory=list)
    output: bool = False


@dataclasses.dataclass
class Recompilation:
    """A new trace or new launch plans after the first, and why.

    Attributes:
        source: ``dynamo`` (a guard failed: TorchDynamo traced the code again) or
            ``torchfuse`` (new sizes or input layouts: groups were planned again).
        where: the function compiled again, or the user's frame that called it when the
            function is PyTorch's own, such as TorchDynamo's wrapper of a ``torch.nn`` module
            (dynamo); the graph and group (torchfuse).
        reason: the failed guard, or the new sizes or strides.
    """

    source: str
    where: str
    reason: str


@dataclasses.dataclass
class GraphReport:
    """One ATen-level graph (forward, backward or inference) and what torchfuse did with it.

    Attributes:
        index: position in :attr:`ExplainResult.graphs`.
        name: ``forward``, ``backward`` or ``inference``.
        capture: index of the Dynamo capture it came from (-1: unknown; a result saved before
            backward graphs compiled at the first backward were attributed has -1 for them).
        status: ``fused``, ``nothing to fuse`` (runs as traced), ``not fused: fuse=False`` or
            ``not fused: CPU tensors without interpret`` (runs as traced: fusible ops stayed on
            ATen because fusion is off) or ``compile failed``.
        error: the compiler's error when it failed (the graph then ran unfused).
        reproducer: path of the reproducer written for that failure.
        groups, aten_calls, steps: what runs, in execution order (see :class:`Step`).
        stage_seconds: compile time per stage: ``ir``, ``segment``, ``codegen``, ``compile``
            (Triton, in parallel), ``plan`` (all planning including codegen and compile).
        kernels_compiled, kernels_cached: kernels generated anew (cache misses) and found in
            the kernel cache (in memory or on disk: hits).
        fallbacks: groups that ran through ATen after a failure.
        cudagraph: CUDA graph state (``mode="reduce-overhead"``), or empty.
        graph_function: how the calls after the first run: through generated straight-line
            functions (``one generated straight-line function per set of sizes (N so far)``),
            or ``interpreted:`` and why (``Tuning`` ``runtime.graph_function``); empty for
            graphs not fused.
        frozen: for an inference graph compiled with ``freeze=True``, what was hoisted out of it
            (``12 ops on weights alone hoisted into 4 constants, ...``); empty otherwise.
        recompilations: torchfuse's re-plans of this graph.
        at_first_backward: compiled after its capture's backend call returned: a backward
            graph AOTAutograd compiles at the first backward, not with the forward.
    """

    index: int
    name: str
    capture: int
    status: str
    error: str | None = None
    reproducer: str | None = None
    groups: list[GroupReport] = dataclasses.field(default_factory=list)
    aten_calls: list[AtenCall] = dataclasses.field(default_factory=list)
    steps: list[Step] = dataclasses.field(default_factory=list)
    stage_seconds: dict[str, float] = dataclasses.field(default_factory=dict)
    kernels_compiled: int = 0
    kernels_cached: int = 0
    fallbacks: int = 0
    cudagraph: str = ""
    graph_function: str = ""
    frozen: str = ""
    recompilations: list[Recompilation] = dataclasses.field(default_factory=list)
    at_first_backward: bool = False

    @property
    def aten_work(self) -> list[AtenCall]:
        """The ATen calls that move data: all but views and module constants (which the drawing
        looks through) and the calls of torchfuse's own kernels; the count every report gives
        as "ATen calls"."""
        return [c for c in self.aten_calls if c.category not in NO_WORK and c.category not in OWN_KERNELS]

    @property
    def own_kernel_calls(self) -> list[AtenCall]:
        """The calls that torchfuse's fixed kernels or the user's fused ops run (:data:`OWN_KERNELS`)."""
        return [c for c in self.aten_calls if c.category in OWN_KERNELS]

    @property
    def idle_calls(self) -> list[AtenCall]:
        """The calls that move no data (:data:`NO_WORK`)."""
        return [c for c in self.aten_calls if c.category in NO_WORK]

    @property
    def compile_seconds(self) -> float:
        """torchfuse's own compile time for this graph: IR, segmentation and planning (code
        generation and Triton's compile included), seconds."""
        return sum(v for k, v in self.stage_seconds.items() if k in ("ir", "segment", "plan"))


@dataclasses.dataclass
class KernelReport:
    """A generated kernel's source, once per cache key.

    Attributes:
        name: the kernel function's name; a split reduction also has ``<name>_partial``.
        key: SHA-256 of ``text`` (the cache key).
        stages: the kernel functions launched in order.
        text: the generated Python/Triton module.
        scheduler: the scheduler whose kernel it is (``reduction.persistent`` ...).
        tuning: the tuning it was built with, one ``section.field = value`` line per field of
            the sections its scheduler and code writer read, then every other field changed
            from its default (changed ones marked).
    """

    name: str
    key: str
    stages: list[str]
    text: str
    scheduler: str = ""
    tuning: list[str] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class Timing:
    """Whether kernel times were measured, and the device copy they are compared with.

    Attributes:
        available: times were measured (a CUDA device and ``measure=True``).
        note: why not, or how they were measured.
        device: the device's name.
        copy_gbps: bandwidth of a device-to-device copy measured in the same run, GB/s
            (bytes read plus bytes written per second).
        copy_bytes: the size of that copy, bytes.
    """

    available: bool = False
    note: str = ""
    device: str = ""
    copy_gbps: float | None = None
    copy_bytes: int = 0


@dataclasses.dataclass
class ExplainResult:
    """What torchfuse did to a program, from :func:`torchfuse.explain`.

    Attributes:
        environment: versions, device and mode (``interpret``) of the run.
        captures: the graphs TorchDynamo captured, in order.
        graph_breaks: where and why the program was split.
        graphs: the ATen graphs torchfuse compiled (or ran as traced).
        kernels: each generated kernel's source, once per cache key.
        recompilations: Dynamo re-traces and torchfuse re-plans, with reasons.
        timing: kernel timing availability and the copy bandwidth.
        warnings: torchfuse's warnings during the run (fallbacks, with reproducer paths).
        notes: what a reader must know before the rest, shown first: that a CPU run turned on
            interpret mode to show a plan, or why ``measure=True`` gave no times.
        seconds: wall time of the explained call(s), compilation included.
        calls: how many calls ``seconds`` covers (the example inputs' and ``more_inputs``').
        compile_phases: seconds of the explained call(s) per compile phase (TorchDynamo,
            AOTAutograd, torchfuse's passes, segmentation, code generation, Triton's compile,
            first launch, other and total; :mod:`torchfuse.runtime.phases`).
    """

    environment: dict[str, str] = dataclasses.field(default_factory=dict)
    captures: list[Capture] = dataclasses.field(default_factory=list)
    graph_breaks: list[GraphBreak] = dataclasses.field(default_factory=list)
    graphs: list[GraphReport] = dataclasses.field(default_factory=list)
    kernels: list[KernelReport] = dataclasses.field(default_factory=list)
    recompilations: list[Recompilation] = dataclasses.field(default_factory=list)
    timing: Timing = dataclasses.field(default_factory=Timing)
    warnings: list[str] = dataclasses.field(default_factory=list)
    notes: list[str] = dataclasses.field(default_factory=list)
    seconds: float = 0.0
    compile_phases: dict[str, float] = dataclasses.field(default_factory=dict)
    calls: int = 1
    schema: int = SCHEMA

    # -- totals
    def _every(self, attribute: str) -> list:
        """Every graph's ``attribute`` (a list), concatenated in graph order."""
        return [x for graph in self.graphs for x in getattr(graph, attribute)]

    @property
    def groups(self) -> list[GroupReport]:
        return self._every("groups")

    @property
    def aten_calls(self) -> list[AtenCall]:
        return self._every("aten_calls")

    @property
    def aten_work(self) -> list[AtenCall]:
        """The ATen calls that move data: all but views, module constants and torchfuse's own
        kernels' calls."""
        return self._every("aten_work")

    @property
    def own_kernel_calls(self) -> list[AtenCall]:
        """Every graph's calls of torchfuse's own kernels and the user's fused ops."""
        return self._every("own_kernel_calls")

    @property
    def idle_calls(self) -> list[AtenCall]:
        """Every graph's calls that move no data."""
        return self._every("idle_calls")

    def compile_seconds(self) -> float:
        """Seconds spent compiling: each capture's backend call (AOTAutograd's tracing, and
        torchfuse's IR and segmentation of the graphs made from it), the IR and segmentation
        of graphs compiled later (a backward, at the first backward), and every graph's
        planning (code generation and Triton's compile, at its first call and at new sizes).
        TorchDynamo's own bytecode tracing is not included."""
        captured = sum(c.seconds for c in self.captures)
        later = [g.at_first_backward or not 0 <= g.capture < len(self.captures) for g in self.graphs]
        own = sum(g.compile_seconds for g, late in zip(self.graphs, later) if late)
        planning = sum(g.stage_seconds.get("plan", 0.0) for g, late in zip(self.graphs, later) if not late)
        return captured + own + planning

    @property
    def kernels_compiled(self) -> int:
        return sum(g.kernels_compiled for g in self.graphs)

    @property
    def kernels_cached(self) -> int:
        return sum(g.kernels_cached for g in self.graphs)

    @property
    def fallbacks(self) -> int:
        return sum(g.fallbacks for g in self.graphs)

    def stage_seconds(self) -> dict[str, float]:
        """Compile seconds per stage, summed over the graphs."""
        total: dict[str, float] = {}
        for g in self.graphs:
            for k, v in g.stage_seconds.items():
                total[k] = total.get(k, 0.0) + v
        return total

    def kernel(self, key: str) -> KernelReport | None:
        return next((k for k in self.kernels if k.key == key), None)

    # -- text, JSON, HTML
    def summary(self, tuning: bool = False) -> str:
        """A readable multi-line summary (what :func:`torchfuse.explain` prints); with
        ``tuning``, followed by the tuning each kernel was built with (``torchfuse explain
        --tuning``)."""
        from .summary import format_summary

        return format_summary(self, tuning=tuning)

    def __str__(self) -> str:
        return self.summary()

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "ExplainResult":
        """Rebuild a result from :meth:`to_dict`'s output.

        Raises:
            ValueError: the data is from a newer schema than this torchfuse reads.
        """
        if data.get("schema", SCHEMA) > SCHEMA:
            raise ValueError(f"explain result schema {data.get('schema')} is newer than {SCHEMA}; upgrade torchfuse")
        return _build(cls, data)

    def save(self, path: str) -> str:
        """Write the result as JSON (UTF-8) to ``path``; returns ``path``."""
        with open(path, "w", encoding="utf-8") as f:
            json.dump(self.to_dict(), f, indent=1)
        return str(path)

    @classmethod
    def load(cls, path: str) -> "ExplainResult":
        """Read a result :meth:`save` wrote."""
        with open(path, encoding="utf-8") as f:
            return cls.from_dict(json.load(f))

    def write_html(self, path: str) -> str:
        """Write the HTML report (one self-contained file) to ``path``; returns ``path``."""
        from .html import write_html

        return write_html(self, path)


def _build(tp: Any, data: Any) -> Any:
    """Rebuild a value of (resolved) type ``tp`` from its JSON form."""
    if data is None:
        return None
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if dataclasses.is_dataclass(tp):
        hints = typing.get_type_hints(tp)
        names = {f.name for f in dataclasses.fields(tp)}
        return tp(**{k: _build(hints[k], v) for k, v in data.items() if k in names})
    if origin is list:
        return [_build(args[0], x) for x in data]
    if origin is dict:
        return {k: _build(args[1], v) for k, v in data.items()}
    if origin in (typing.Union, types.UnionType):
        inner = [a for a in args if a is not type(None)]
        return _build(inner[0], data) if len(inner) == 1 else data
    return data
