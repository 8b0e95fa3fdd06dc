"""Tuning: the constants of the heuristics, passes and code writers, as typed data.

A :class:`Tuning` is frozen and hashable; it travels inside :class:`~torchfuse.config.Options`
(``Options.tuning``) to every scheduler, pass and code writer that reads one of its values, so
a benchmark variant or a test changes a value by building another ``Tuning``, never by setting
a module global. It has one section per scheduler and per pass; each field documents its unit
and where its value comes from (measurements on an H200 are named by their run in
``benchmarks/NOTES.md``).

Changing a value::

    tuning = Tuning().replace("persistent.writing_rows_xblock", 2)
    tuning = parse_tuning("codegen.all_true_masks=False, split.min_r=4096")
    torchfuse.compile(model, tuning=tuning)          # or tuning="codegen.all_true_masks=False"

``TORCHFUSE_TUNING`` (the same ``section.field=value`` list) gives the default of
``Options.tuning``, so a script run unchanged can be measured with another value.
"""
from __future__ import annotations

import ast
import dataclasses
import typing
from typing import Any, Iterable

import torch


@dataclasses.dataclass(frozen=True)
class PointwiseTuning:
    """The pointwise scheduler (:mod:`torchfuse.schedulers.pointwise`).

    Attributes:
        large_block: elements per program of large tensors (16 a thread at ``large_warps``).
            Sweep on an H200 (bf16 ``a * b + 1`` over 2**27 elements, 2026-11-30 sweep,
            NOTES.md): 1024 x 2 warps and 2048 x 2 reach 95% of a device copy.
        large_warps: warps per program of large tensors.
        interpret_block: largest block under the interpreter (each program is one NumPy
            evaluation: larger is faster).
        small_threads_per_sm: elements per multiprocessor per unit of elements-per-thread for
            latency-bound small tensors: below ``2 * small_threads_per_sm * sm_count``
            elements a kernel runs one element a thread. Fitted to run AC's sweep (batch-1
            kernels of 47K to 1M elements, NOTES.md): between 94K and 100K elements on 132
            multiprocessors, 736 x 132 = 97K.
        small_configs: ``(elements per thread, elements per program, warps)`` for small
            tensors, by elements per thread below the large configuration's 16 (run AC).
        scalar_loads: load an input read at one address by every element (a 0-d tensor) as a
            one-element block, so what is computed from it alone runs once a thread; False
            loads it as a block of the kernel's shape (run AS, NOTES.md).
    """

    large_block: int = 1024
    large_warps: int = 2
    interpret_block: int = 1 << 16
    small_threads_per_sm: int = 736
    small_configs: tuple[tuple[int, int, int], ...] = ((1, 256, 8), (2, 512, 8), (4, 512, 4), (8, 2048, 8))
    scalar_loads: bool = True


@dataclasses.dataclass(frozen=True)
class PersistentTuning:
    """The persistent reduction scheduler (:mod:`torchfuse.schedulers.persistent`): whole
    rows (or columns) in registers.

    Attributes:
        tile_elements: elements of one program's [XBLOCK, RBLOCK] tile; rows shorter than it
            share a program. Sweep on an H200 (bf16 row sums, softmax, LayerNorm, 2026-11-30
            sweep, NOTES.md): the best tiles hold 16 to 32 elements a thread, at most 8 warps.
        elements_per_thread: elements a thread of such a tile (warps = tile / 1024, 1 to 8).
        one_warp_row: rows that pad to this many elements run one row a program on one warp
            (reductions within a warp, no shared memory); run AQ, NOTES.md.
        writing_rows_xblock: rows a program (on as many warps) at ``one_warp_row`` when the
            kernel writes whole 16-bit rows (a softmax's output); run BM, NOTES.md: 1 was as
            fast as or faster than 2.
        interpret_tile: elements of a tile under the interpreter.
        interpret_max_row: longest row kept in registers under the interpreter.
    """

    tile_elements: int = 4096
    elements_per_thread: int = 32
    one_warp_row: int = 1024
    writing_rows_xblock: int = 1
    interpret_tile: int = 1 << 16
    interpret_max_row: int = 1 << 14


@dataclasses.dataclass(frozen=True)
class OuterTuning:
    """Outer (column) reductions, persistent or looped: the unit-stride dim is kept (a bias
    gradient, a channels-last mean).

    Attributes:
        xblock: contiguous columns of a tile.
        rblock: rows a step of a looped tile (at least; ``tile // XBLOCK``).
        warps: warps of a looped tile.
        min_xblock: narrowest persistent tile when too few columns fill the GPU (a
            squeeze-excitation mean at batch 1). Run AD, NOTES.md: 2 columns x 1024 rows took
            3.9-4.1 us where 8 columns took 6.3-6.5.
        min_xblock_loop: narrowest looped tile (16 bytes of fp16 a row).
        tile: elements of a looped tile (``max(rblock, tile // XBLOCK)`` rows a step).
        small_elements_per_warp: elements a warp of a narrowed persistent tile (2 a thread:
            latency-bound, like the small pointwise kernels; run AD).
    """

    xblock: int = 128
    rblock: int = 16
    warps: int = 8
    min_xblock: int = 2
    min_xblock_loop: int = 8
    tile: int = 2048
    small_elements_per_warp: int = 64


@dataclasses.dataclass(frozen=True)
class LoopedTuning:
    """The looped reduction scheduler (:mod:`torchfuse.schedulers.looped`): rows longer than
    ``Options.persistent_max_elements``.

    Attributes:
        rblock: elements of a row a step (inner reductions). Sweep on an H200 (rows of 32768
            and 262144, 2026-11-30 sweep, NOTES.md): 4096 x 16 warps best for a sum (84% of
            a copy).
        warps: warps of an inner looped reduction.
        interpret_rblock: elements a step under the interpreter (tests lower it to run many
            steps on short rows).
    """

    rblock: int = 4096
    warps: int = 16
    interpret_rblock: int = 1 << 14


@dataclasses.dataclass(frozen=True)
class SplitTuning:
    """The split reduction scheduler (:mod:`torchfuse.schedulers.split`): a long reduced
    extent cut into chunks reduced by separate programs, then combined.

    Attributes:
        min_r: reduced extent (elements) from which a group with fewer kept elements than
            multiprocessors splits (inner), or ``min_r // 8`` (outer).
        interpret_min_r: the same under the interpreter (at most 4 kept elements), so tests
            exercise it.
        outer_below: an outer reduction splits when it would run fewer than this many
            programs per multiprocessor...
        outer_programs: ...into about this many programs per multiprocessor.
        outer_xblock: columns of the partial stage of a split outer reduction.
        outer_rblock: rows a step of that stage (``torchfuse bench sweep-launch split`` and
            ``torchfuse bench norms --sweep split-norms`` on an H200, NOTES.md: 64 x 16 with
            4 warps best or within 3%
            on every normalization case).
        outer_warps: warps of that stage.
        outer_rblock_one_input: rows a step when the group reads one tensor along the reduced
            dims (a BatchNorm forward's statistics); run BM, NOTES.md: bf16 42.7 -> 37.0 us.
    """

    min_r: int = 8192
    interpret_min_r: int = 2048
    outer_below: int = 4
    outer_programs: int = 8
    outer_xblock: int = 64
    outer_rblock: int = 16
    outer_warps: int = 4
    outer_rblock_one_input: int = 32


@dataclasses.dataclass(frozen=True)
class InnerOuterTuning:
    """The inner-outer scheduler (:mod:`torchfuse.schedulers.inner_outer`): a row reduction
    paired with column sums over the same rows (a normalization's backward). Values from runs
    AG, AH, AJ and AK on an H200 (``torchfuse bench norms --sweep inner-outer-all``, NOTES.md).

    Attributes:
        programs_per_sm: programs a multiprocessor before the first kernel is compiled.
        fit: size the grid to the programs of the compiled kernel that fit on a
            multiprocessor at once (RMSNorm 16384 x 4096: 158 -> 125 us, run AJ).
        max_per_sm: at most this many programs a multiprocessor when fitted.
        tile: elements of a block of whole rows.
        short_row: rows of at most this many elements take ``short_tile`` blocks...
        short_tile: ...(2048 with 4 warps beat 4096 with 8 on rows of 1024, run AH).
        elements_per_thread: elements a thread of a block.
        warps: at most this many warps.
        stages: software-pipelining stages of the loop over row blocks (0: Triton's default);
            two took LayerNorm 16384 x 4096 from 166 to 144 us (run AG).
        max_row: longest row that pairs (at 8192 a row every configuration lost to the
            unpaired kernels, run AG).
        finish_tile: partials x columns a program of the second kernel.
        interpret_blocks: about this many row blocks under the interpreter...
        interpret_programs: ...over at most this many programs, so that tests cover programs
            with several blocks and a partial last block.
    """

    programs_per_sm: int = 2
    fit: bool = True
    max_per_sm: int = 4
    tile: int = 4096
    short_row: int = 1024
    short_tile: int = 2048
    elements_per_thread: int = 16
    warps: int = 8
    stages: int = 2
    max_row: int = 4096
    finish_tile: int = 4096
    interpret_blocks: int = 8
    interpret_programs: int = 3


@dataclasses.dataclass(frozen=True)
class CodegenTuning:
    """Forms of generated code (:mod:`torchfuse.codegen`). Each switch is on by default; off
    gives the plain form, for measurements (instruction counts from ``torchfuse bench sass``,
    device times from runs BJ to BN, NOTES.md).

    Attributes:
        all_true_masks: kernels take ``xfull``/``rfull`` (1 when every block of the first
            stage is full) and or them into their masks, which Triton then folds away (run
            BL: bf16 cross-entropy forward 69.5 -> 58.3 us).
        flush_summed_exp: an fp32 ``exp(u - max(u))`` read only by row sums flushes results
            below 2**-126 to zero (``tf_exp_ftz``: three instructions an element fewer; run BK).
        sink_selects: an op on selects between per-row values is computed on the per-row
            branches and selected once (bitwise the same; 816 -> 720 instructions a thread in
            bf16 cross-entropy's backward row kernel, run BM).
        row_prelude: persistent and inner-outer row kernels load the tiles their reductions
            read, then compute the per-row values that need no reduction, then the rest (720
            -> 632 instructions; run BM).
        batch_row_sums: persistent row sums that do not depend on each other are reduced
            together, up to three at a time (``tf_row_sum2``/``tf_row_sum3``; run AO).
        branch_loads: a select on a condition of indices alone (a concatenation's) computes
            each branch it alone reads only on the lanes that take it, so each input is loaded
            once (:meth:`~torchfuse.codegen.writer.KernelWriter.mask_branches`).
        philox_four: random numbers four per Philox call (``tl.rand4x``) instead of one
            (``tl.rand``, which computes four and keeps one):
            :meth:`~torchfuse.codegen.writer.KernelWriter.random_by_fours` (on an H200, AMP bf16
            dropout + residual + LayerNorm over 65536 x 1024, forward and backward: 0.50 ->
            0.36 ms; NOTES.md, 2026-12-05).
    """

    all_true_masks: bool = True
    flush_summed_exp: bool = True
    sink_selects: bool = True
    row_prelude: bool = True
    batch_row_sums: bool = True
    branch_loads: bool = True
    philox_four: bool = True


@dataclasses.dataclass(frozen=True)
class SegmentTuning:
    """The segmenter (:mod:`torchfuse.segment`).

    Attributes:
        split_kept_max: a reduction group with at most this many kept elements (static)...
        split_reduced_min: ...and at least this many reduced ones (inner) is kept splittable:
            a producer or consumer merging into it would stop it from splitting across the GPU
            (``torchfuse bench norms``, BatchNorm channels-last, NOTES.md).
        split_reduced_min_outer: the same for outer reductions; from 2048 reduced elements a
            ResNet-50 training step became bound by the host's launch rate (run V, NOTES.md).
        cast_batch_min: a graph with at least this many stand-alone casts of its inputs (or of
            values it only returns) runs them as one multi-tensor copy.
        remat_max_ops: longest pointwise chain (ops) a reduction group recomputes instead of
            reading.
    """

    split_kept_max: int = 2048
    split_reduced_min: int = 32768
    split_reduced_min_outer: int = 16384
    cast_batch_min: int = 2
    remat_max_ops: int = 24


@dataclasses.dataclass(frozen=True)
class GraphPassTuning:
    """The FX and ATen graph rewrites (:mod:`torchfuse.passes`).

    Attributes:
        one_hot_picks: cross-entropy's picked log-probability taken from ``x - max``
            (:func:`~torchfuse.passes.cross_entropy.one_hot_picks`; with
            ``Options.cross_entropy_rewrites``).
        log_softmax_sums: its label-smoothing sum taken from ``x - max``
            (:func:`~torchfuse.passes.cross_entropy.log_softmax_sums`).
        picks_max_persistent_row: both rewrite rows of at most this many elements and rows
            longer than ``Options.persistent_max_elements`` (runs BB to BD, NOTES.md:
            persistent rows of 3072 to 8192 lost up to 16%).
        conv_epilogue_devices: device types where ReLU-ended convolutions go to cuDNN's fused
            epilogue (:func:`~torchfuse.passes.aten.conv_relu_epilogues`; runs AW, AX).
        conv_epilogue_dtypes: the dtypes where they do.
        attention_mask_devices: device types where attention masks are made dense in their last
            dimension (:func:`~torchfuse.passes.fx.dense_attention_masks`; PyTorch's CPU
            kernels take any stride).
        channels_last_devices: device types where 2-D half-precision convolutions run
            channels-last (:func:`~torchfuse.freezing.channels_last_convolutions`; cuDNN's fast
            layout on tensor cores).
        conv_bias_epilogue_devices: device types where a frozen graph's convolution biases move
            into the following fusion group (:func:`~torchfuse.freezing.conv_bias_epilogues`).
        cat_select_max_inputs: concatenations of at most this many tensors of one shape become
            fusible selects (:func:`~torchfuse.passes.concat.equal_cats_as_selects`); each input
            is one more select an element evaluates.
        linear_group_devices: device types where ``linear`` calls that read one input become
            one matrix product in training and frozen graphs
            (:func:`~torchfuse.passes.fx.grouped_linears`): each product saved is a library
            call's host time (about 20 us with cuBLAS on an H100's host); on the CPU too, so
            that the tests' models go through the rewrite.
        linear_group_max_members: at most this many calls in one such product.
    """

    one_hot_picks: bool = True
    log_softmax_sums: bool = True
    picks_max_persistent_row: int = 1024
    conv_epilogue_devices: tuple[str, ...] = ("cuda",)
    conv_epilogue_dtypes: tuple[torch.dtype, ...] = (torch.float16, torch.bfloat16)
    attention_mask_devices: tuple[str, ...] = ("cuda",)
    channels_last_devices: tuple[str, ...] = ("cuda",)
    conv_bias_epilogue_devices: tuple[str, ...] = ("cuda",)
    cat_select_max_inputs: int = 4
    linear_group_devices: tuple[str, ...] = ("cuda", "cpu")
    linear_group_max_members: int = 16


@dataclasses.dataclass(frozen=True)
class DecomposeTuning:
    """The decompositions (:mod:`torchfuse.decompose`).

    Attributes:
        nll_by_mask_devices: device types whose ``nll_loss_forward`` over (N, C) rows becomes
            a masked row reduction (fused with its log-softmax). The CPU is left out: its
            kernel raises IndexError for a bad target, which the decomposition cannot.
        mm_pad_min_macs: smallest ``M * N * K`` of a misaligned fp16/bf16 matrix product that
            is padded to multiples of 8 (below it the copies cost what the aligned kernel saves).
        mm_pad_devices: device types whose matrix products are padded (cuBLAS).
    """

    nll_by_mask_devices: tuple[str, ...] = ("cuda",)
    mm_pad_min_macs: int = 1 << 28
    mm_pad_devices: tuple[str, ...] = ("cuda",)


@dataclasses.dataclass(frozen=True)
class RuntimeTuning:
    """The runtime (:mod:`torchfuse.runtime`).

    Attributes:
        progress_delay_seconds: a graph's kernels show a progress bar once generating and
            compiling them has taken this long (seconds).
        interpreter_gpu_helpers: Triton helpers that keep their GPU form under the interpreter
            instead of their host twin (:data:`torchfuse.codegen.helpers.HOST_VARIANTS`): names,
            or prefixes ending in ``*`` (``tf_row_*``). Tests run the GPU forms (a row max in one
            NaN-aware ``tl.reduce``, tuple row sums) on CPU tensors with it; a host twin follows
            PyTorch's CPU kernels or is faster in the interpreter.
        address_checked_calls: with CUDA graphs for training, the first calls of a captured
            forward graph whose parameters and buffers are compared by address with the call
            before; a graph whose parameters move (FSDP2 allocates the unsharded parameters
            again every step) would be recorded again on every call, so it and its backward run
            uncaptured from then on.
        graph_function: from a graph's second call with a set of sizes on, run the call as one
            generated straight-line Python function (:mod:`torchfuse.runtime.graph_function`)
            instead of interpreting its steps one by one; False interprets every call (the
            reference the generated function is tested and measured against).
        pool_output_bytes: with CUDA graphs for training, a replayed forward's user-visible
            outputs of at least this many bytes are returned in the CUDA graph pool, not
            copied out of it, until one is found still held at the next step
            (:mod:`torchfuse.runtime.training_graphs`); smaller ones (a loss, which logging
            keeps) are copied. 0: every user-visible output is copied. The default, 1 MiB,
            keeps losses and per-token statistics copied and leaves logits and activations
            passed across graph breaks in the pool (benchmarks/NOTES.md, "forward outputs left
            in the pool, measured").
        pad_kernel: run the zero pads of 2-D tensors (the aligned matrix products' operands)
            as one Triton kernel each (:mod:`torchfuse.runtime.pad`) instead of ATen's fill and
            strided copy: on an H200 GPT-2's padded fp16 logits gradient, [4096, 50264], takes
            0.26 ms against ATen's 0.60 (benchmarks/NOTES.md, "the pad kernel, measured").
            False leaves every pad to ATen.
        pool_kernels: run 2-D max pooling and its backward (``max_pool2d_with_indices`` and
            its backward, channels-first or channels-last) as Triton kernels with ATen's values
            (:mod:`torchfuse.runtime.pool`) instead of ATen's kernels (benchmarks/NOTES.md,
            "max pooling as kernels"). False leaves them to ATen.
        pool_max_window: the largest pooling window (kernel rows x columns) the max-pool
            kernels take; they unroll its loads (and the backward its candidate windows), so
            Triton's compile time grows with it. Larger windows stay on ATen.
        pool_tile: result elements a max-pool program writes (rows x columns of its tile; a
            power of two), with 4 warps (benchmarks/NOTES.md, "max pooling as kernels").
        pool_xblock: the most columns of a max-pool tile (the result's columns, or its
            channels in channels-last; a power of two): a narrower result gets the next power
            of two above its width, and the tile's rows make up ``pool_tile``.
    """

    progress_delay_seconds: float = 2.0
    interpreter_gpu_helpers: tuple[str, ...] = ()
    address_checked_calls: int = 3
    graph_function: bool = True
    pool_output_bytes: int = 1 << 20
    pad_kernel: bool = True
    pool_kernels: bool = True
    pool_max_window: int = 64
    pool_tile: int = 1024
    pool_xblock: int = 128


@dataclasses.dataclass(frozen=True)
class Tuning:
    """Every tunable constant, by section; see each section's class for its fields.

    Sections: ``pointwise``, ``persistent``, ``outer``, ``looped``, ``split``, ``inner_outer``
    (the schedulers' heuristics and kernel bodies), ``codegen`` (forms of generated code),
    ``segment``, ``graph_passes``, ``decompose``, ``runtime``.
    """

    pointwise: PointwiseTuning = dataclasses.field(default_factory=PointwiseTuning)
    persistent: PersistentTuning = dataclasses.field(default_factory=PersistentTuning)
    outer: OuterTuning = dataclasses.field(default_factory=OuterTuning)
    looped: LoopedTuning = dataclasses.field(default_factory=LoopedTuning)
    split: SplitTuning = dataclasses.field(default_factory=SplitTuning)
    inner_outer: InnerOuterTuning = dataclasses.field(default_factory=InnerOuterTuning)
    codegen: CodegenTuning = dataclasses.field(default_factory=CodegenTuning)
    segment: SegmentTuning = dataclasses.field(default_factory=SegmentTuning)
    graph_passes: GraphPassTuning = dataclasses.field(default_factory=GraphPassTuning)
    decompose: DecomposeTuning = dataclasses.field(default_factory=DecomposeTuning)
    runtime: RuntimeTuning = dataclasses.field(default_factory=RuntimeTuning)

    def replace(self, path: str, value: Any) -> "Tuning":
        """A copy with field ``path`` (``"section.field"``) set to ``value``, converted to the
        field's type (a string is parsed: ``"False"``, ``"4096"``, ``"cuda,cpu"``).

        Raises:
            UnknownTuningField: ``path`` names no section or field (a KeyError whose message
                lists the known ones).
            ValueError: ``value`` cannot be converted to the field's type, or is out of the
                field's range (:func:`is_launch_size`).
        """
        section_name, field_name = _split_path(path)
        section = getattr(self, section_name)
        kind = _field_types(type(section))[field_name]
        converted = _convert(value, kind, path)
        _check_range(path, converted)
        return dataclasses.replace(self, **{section_name: dataclasses.replace(
            section, **{field_name: converted})})

    def changed(self) -> dict[str, Any]:
        """``{"section.field": value}`` for every field that differs from its default."""
        out = {}
        default = Tuning()
        for s in dataclasses.fields(self):
            mine, base = getattr(self, s.name), getattr(default, s.name)
            for f in dataclasses.fields(mine):
                if getattr(mine, f.name) != getattr(base, f.name):
                    out[f"{s.name}.{f.name}"] = getattr(mine, f.name)
        return out

    def describe(self, sections: Iterable[str] = ()) -> str:
        """One ``section.field = value`` line per field of ``sections`` and per field changed
        from its default elsewhere (changed ones marked ``(changed)``)."""
        changed = self.changed()
        lines = []
        for name in sections:
            for f in dataclasses.fields(getattr(self, name)):
                path = f"{name}.{f.name}"
                mark = "  (changed)" if path in changed else ""
                lines.append(f"{path} = {_show(getattr(getattr(self, name), f.name))}{mark}")
        for path, value in changed.items():
            if path.split(".")[0] not in sections:
                lines.append(f"{path} = {_show(value)}  (changed)")
        return "\n".join(lines)


def parse_tuning(text: str | Iterable[str], base: Tuning | None = None) -> Tuning:
    """``base`` (default: ``Tuning()``) with the ``section.field=value`` assignments of
    ``text`` (a comma- or newline-separated string, or an iterable of assignments; a comma
    inside brackets or parentheses belongs to the value) applied in order.

    Raises:
        UnknownTuningField: an assignment names no section or field (a KeyError).
        ValueError: an assignment has no ``=``, or its value does not convert (an int field
            takes integers only: ``2.5`` raises rather than becoming 2).
    """
    tuning = base or Tuning()
    for assignment in _assignments(text):
        path, eq, value = assignment.partition("=")
        if not eq:
            raise ValueError(f"tuning assignment {assignment!r}: expected section.field=value")
        tuning = tuning.replace(path.strip(), value.strip())
    return tuning


def tuning_fields() -> list[str]:
    """Every field's ``section.field`` path, in declaration order."""
    return [f"{s.name}.{f.name}" for s in dataclasses.fields(Tuning)
            for f in dataclasses.fields(_field_types(Tuning)[s.name])]


# ----------------------------------------------------------------------------- conversion

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def _assignments(text: str | Iterable[str]) -> list[str]:
    if not isinstance(text, str):
        return [t.strip() for t in text if t.strip()]
    parts, depth, cur = [], 0, ""
    for ch in text:
        depth += ch in "([" and 1 or (ch in ")]" and -1 or 0)
        if ch in ",\n" and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    parts.append(cur)
    out: list[str] = []
    for p in (p.strip() for p in parts):
        if not p:
            continue
        if "=" not in p and out:  # "section.field=a,b": the rest of a comma-separated tuple
            out[-1] += "," + p
        else:
            out.append(p)
    return out


class UnknownTuningField(KeyError):
    """A tuning path that names no section or field; its message lists the known ones (and,
    unlike a plain KeyError's, prints without quotes)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


def _split_path(path: str) -> tuple[str, str]:
    section_name, _, field_name = path.partition(".")
    sections = _field_types(Tuning)
    if section_name not in sections:
        raise UnknownTuningField(f"unknown tuning section {section_name!r} in {path!r}; known: {', '.join(sections)}")
    fields = _field_types(sections[section_name])
    if field_name not in fields:
        raise UnknownTuningField(f"unknown tuning field {path!r}; {section_name} has: {', '.join(fields)}")
    return section_name, field_name


def tuning_assignments(mapping: dict) -> list[str]:
    """``section.field=value`` assignments from a dict keyed by ``"section.field"`` or nested by
    section (``{"persistent": {"tile_elements": 8192}}``), for :func:`parse_tuning`.

    Raises:
        UnknownTuningField: a key names no section or field.
    """
    out = []
    for key, value in mapping.items():
        if isinstance(value, dict) and "." not in str(key):
            out += [f"{key}.{field}={v}" for field, v in value.items()]
        else:
            out.append(f"{key}={value}")
    return out


#: words of a field name that make it a launch configuration's size: Triton's block shapes
#: (``tl.arange``) and warp counts must be powers of two
_LAUNCH_SIZE_WORDS = {"block", "xblock", "rblock", "tile", "warps"}


def is_launch_size(path: str) -> bool:
    """Whether the int field ``path`` (``section.field``) is a block size, tile or warp count
    (a word of its name is one of ``block``, ``xblock``, ``rblock``, ``tile``, ``warps``),
    which must be a power of two."""
    return bool(_LAUNCH_SIZE_WORDS & set(path.partition(".")[2].split("_")))


def _check_range(path: str, value: Any) -> None:
    """Raise ``ValueError`` for an int below 0 anywhere in ``value``, for a launch size
    (:func:`is_launch_size`) that is not a power of two, and for a rate (a field named
    ``..._per_...``: elements per thread, programs per multiprocessor) below 1: such a value
    would otherwise only show as fusion groups that fall back to ATen, or a compile that fails
    at its first call."""
    items = value if isinstance(value, tuple) else (value,)
    ints = [v for item in items for v in (item if isinstance(item, tuple) else (item,)) if type(v) is int]
    if any(v < 0 for v in ints):
        what = "holds a negative number" if isinstance(value, tuple) else "is negative"
        raise ValueError(f"tuning field {path}: {value!r} {what}")
    if type(value) is int and is_launch_size(path) and (value < 1 or value & (value - 1)):
        raise ValueError(f"tuning field {path}: {value!r} is not a power of two (a block size or warp count)")
    if type(value) is int and value < 1 and "per" in path.partition(".")[2].split("_"):
        raise ValueError(f"tuning field {path}: {value!r} is not positive (a rate the heuristics divide by)")


def _field_types(cls) -> dict[str, Any]:
    hints = typing.get_type_hints(cls, {"torch": torch, **globals()})
    return {f.name: hints[f.name] for f in dataclasses.fields(cls)}


def _convert(value: Any, kind: Any, path: str) -> Any:
    """``value`` as ``kind`` (bool, int, float, str or a tuple of them, dtypes or int
    triples); strings are parsed."""
    def fail(why: str = "") -> ValueError:
        name = _type_name(kind)
        return ValueError(f"tuning field {path}: {value!r} is not {'an' if name[0] in 'aeiou' else 'a'} {name}{why}")

    origin = typing.get_origin(kind)
    if origin is tuple:
        args = typing.get_args(kind)
        if isinstance(value, str):
            text = value.strip()
            if text.startswith(("(", "[")):
                try:
                    value = ast.literal_eval(text)
                except (ValueError, SyntaxError):
                    raise fail() from None
            else:
                value = [v.strip() for v in text.split(",") if v.strip()]
        if not isinstance(value, (list, tuple)):
            raise fail()
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_convert(v, args[0], path) for v in value)
        if len(value) != len(args):
            raise fail()
        return tuple(_convert(v, a, path) for v, a in zip(value, args))
    if kind is torch.dtype:
        if isinstance(value, torch.dtype):
            return value
        got = getattr(torch, str(value).replace("torch.", ""), None)
        if not isinstance(got, torch.dtype):
            raise fail()
        return got
    if kind is bool:
        if isinstance(value, bool):
            return value
        text = str(value).strip().lower()
        if text in _TRUE or text in _FALSE:
            return text in _TRUE
        raise fail()
    if kind is int:
        if isinstance(value, bool):
            raise fail()
        if isinstance(value, int):
            return value
        try:
            parsed = ast.literal_eval(str(value).strip())
        except (ValueError, SyntaxError, TypeError):
            raise fail() from None
        if isinstance(parsed, bool) or not isinstance(parsed, int):  # 2.5 is no int: never cut it to 2
            raise fail()
        return parsed
    if kind is float:
        try:
            return float(value)
        except (ValueError, TypeError):
            raise fail() from None
    if kind is str:
        return str(value)
    raise fail(f" (unsupported type {kind})")


def _type_name(kind: Any) -> str:
    if typing.get_origin(kind) is tuple:
        args = typing.get_args(kind)
        if len(args) == 2 and args[1] is Ellipsis:
            return f"tuple of {_type_name(args[0])}"
        return f"tuple of ({', '.join(_type_name(a) for a in args)})"
    return getattr(kind, "__name__", str(kind))


def _show(value: Any) -> str:
    if isinstance(value, tuple):
        return "(" + ", ".join(_show(v) for v in value) + ("," if len(value) == 1 else "") + ")"
    return str(value) if isinstance(value, torch.dtype) else repr(value)
