"""Options: the one place where torchfuse reads its settings.

Every stage receives an :class:`Options` object; no other module reads ``os.environ``.
Environment variables give defaults, keyword arguments to :func:`torchfuse.compile`
override them.

Environment variables
---------------------
``TORCHFUSE_INTERPRET=1``
    Run generated Triton kernels on CPU tensors through Triton's interpreter.
``TORCHFUSE_DUMP_DIR=path``
    Write each stage's text (captured graph, fusion groups, kernels, launch
    configurations) under ``path``, one file per graph or kernel.
``TORCHFUSE_CACHE_DIR=path``
    Where the persistent kernel cache lives (default: the user cache directory,
    ``$XDG_CACHE_HOME/torchfuse`` or ``~/.cache/torchfuse``).
``TORCHFUSE_DISABLE_CACHE=1``
    Do not read or write the persistent cache.
``TORCHFUSE_LOGS=fusion,schedule,cache,recompile``
    Turn on INFO logging of those topics under the ``torchfuse`` logger.
``TORCHFUSE_TUNING=section.field=value,...``
    The default of ``Options.tuning``: :class:`~torchfuse.config.tuning.Tuning` with those
    fields changed (see :func:`~torchfuse.config.tuning.parse_tuning`).
``TORCHFUSE_LAUNCH_CONFIGS_FOR_SM_COUNT=N``
    The default of ``Options.launch_configs_for_sm_count``.
"""
from __future__ import annotations

import dataclasses
import os
from pathlib import Path

from .tuning import Tuning, UnknownTuningField, parse_tuning, tuning_assignments

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"", "0", "false", "no", "off"}


def _env_flag(name: str) -> bool:
    """A boolean environment variable: 1/true/yes/on or 0/false/no/off (any case), unset off.

    Raises:
        ValueError: another value (a typo would otherwise silently mean off).
    """
    value = os.environ.get(name, "").strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ValueError(f"{name}={os.environ[name]!r}: expected 1/true/yes/on or 0/false/no/off")


def _env_tuning() -> Tuning:
    """``Tuning`` with ``TORCHFUSE_TUNING``'s assignments (:func:`parse_tuning`).

    Raises:
        UnknownTuningField, ValueError: as :func:`parse_tuning`, the message led by the
            variable and its value (the error surfaces at a first compile, far from where the
            variable was set).
    """
    text = os.environ.get("TORCHFUSE_TUNING", "").strip()
    if not text:
        return Tuning()
    try:
        return parse_tuning(text)
    except UnknownTuningField as e:
        raise UnknownTuningField(f"TORCHFUSE_TUNING={text!r}: {e}") from None
    except ValueError as e:
        raise ValueError(f"TORCHFUSE_TUNING={text!r}: {e}") from None


def _env_int(name: str, default: int = 0) -> int:
    """An integer environment variable; ``default`` when unset or empty.

    Raises:
        ValueError: a value that is not an integer (a typo would otherwise silently mean the
            default).
    """
    value = os.environ.get(name, "").strip()
    if not value:
        return default
    try:
        return int(value)
    except ValueError:
        raise ValueError(f"{name}={os.environ[name]!r}: expected an integer") from None


def default_cache_dir() -> Path:
    """The persistent cache directory: ``$TORCHFUSE_CACHE_DIR``, else the user cache dir."""
    if os.environ.get("TORCHFUSE_CACHE_DIR"):
        return Path(os.environ["TORCHFUSE_CACHE_DIR"]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "torchfuse"


LOG_TOPICS = ("fusion", "schedule", "cache", "recompile")


def log_topics_from_env() -> frozenset[str]:
    """The topics named in ``TORCHFUSE_LOGS`` (comma separated; ``all`` for every topic)."""
    raw = os.environ.get("TORCHFUSE_LOGS", "")
    topics = {t.strip() for t in raw.split(",") if t.strip()}
    if "all" in topics:
        topics = set(LOG_TOPICS)
    unknown = sorted(topics - set(LOG_TOPICS))
    if unknown:
        import warnings

        warnings.warn(f"TORCHFUSE_LOGS: unknown topic(s) {', '.join(unknown)}; known: {', '.join(LOG_TOPICS)}, all",
                      UserWarning, stacklevel=2)
    return frozenset(topics & set(LOG_TOPICS))


def configure_logging(topics: frozenset[str] | None = None) -> None:
    """Send INFO records of the chosen topics (loggers ``torchfuse.<topic>``) to stderr.

    Topics: ``fusion`` (what was fused, what stayed on ATen and why), ``schedule`` (launch
    configurations), ``cache`` (kernel cache hits and misses), ``recompile`` (new kernels or
    plans for new sizes and layouts). A chosen topic's records, its warnings included, go to
    its own stderr handler only (not also to the application's root handlers, which would
    print them twice). The ``torchfuse`` logger's level is WARNING unless the application
    set one, so that an application logging at INFO or DEBUG does not receive the unchosen
    topics (as the ``torch`` logger does); an application that wants them through its own
    handlers sets ``logging.getLogger("torchfuse").setLevel(logging.INFO)`` and leaves
    ``TORCHFUSE_LOGS`` unset.
    """
    import logging

    package = logging.getLogger("torchfuse")
    if package.level == logging.NOTSET:
        package.setLevel(logging.WARNING)
    topics = log_topics_from_env() if topics is None else topics
    for topic in topics:
        logger = logging.getLogger(f"torchfuse.{topic}")
        logger.setLevel(logging.INFO)
        logger.propagate = False
        if not any(getattr(h, "_torchfuse", False) for h in logger.handlers):
            handler = logging.StreamHandler()
            handler.setFormatter(logging.Formatter(f"[torchfuse.{topic}] %(message)s"))
            handler._torchfuse = True
            logger.addHandler(handler)


@dataclasses.dataclass(frozen=True)
class Options:
    """Compiler options, passed unchanged through every stage.

    Attributes:
        interpret: run generated kernels through Triton's interpreter on CPU tensors. Without
            it, graphs on CPU tensors run eagerly (decomposed ATen), unfused. Default:
            ``TORCHFUSE_INTERPRET``.
        fuse: build fusion groups at all; ``False`` runs every op through ATen (a baseline).
        dump_dir: where to write each stage's text, or ``None``. Default: ``TORCHFUSE_DUMP_DIR``.
        cache_dir: persistent kernel cache location, or ``None`` to run without one. Default:
            ``TORCHFUSE_CACHE_DIR``, else the user cache dir; ``None`` when
            ``TORCHFUSE_DISABLE_CACHE`` is set. (The three environment defaults are read when
            an ``Options`` is made, by ``Options()`` as by :meth:`from_env`.)
        compile_threads: worker threads used to compile one graph's kernels in parallel.
        max_group_ops: largest number of IR ops in one fusion group (bounds compile time and
            register pressure of generated kernels).
        persistent_max_elements: largest reduction extent (elements) that the reduction
            scheduler keeps entirely in registers (one read of the input per row).
        exact_rounding: round every intermediate value to the dtype eager would store it in,
            so fused fp16/bf16 chains equal eager's per-op rounding (PyTorch semantics), and
            forbid contracting a multiply and an add into one fused multiply-add (eager runs them
            as separate kernels, each rounding). ``False`` keeps fp32 intermediates and allows
            contraction (slightly more accurate, not eager's values).
        cudagraphs: capture compiled graphs into CUDA graphs and replay them
            (``mode="reduce-overhead"``): inference graphs once per input signature
            (:mod:`torchfuse.runtime.cudagraphs`), training graphs (forward and backward) through
            PyTorch's CUDA graph trees, sharing one memory pool
            (:mod:`torchfuse.runtime.training_graphs`). A graph that cannot be captured runs
            as usual and ``explain`` says why.
        cudagraph_max_graphs: CUDA graphs kept per compiled inference graph (least recently
            used go).
        cudagraph_copy_outputs: keep a replay's outputs safe from later replays: for
            inference graphs every output is copied; for training graphs the forward's
            user-visible outputs under ``Tuning.runtime.pool_output_bytes`` are copied (one
            multi-tensor copy per dtype) and larger ones are returned in the pool and checked
            at the next step (one still held makes the graphs run uncaptured while it is, and
            is copied from then on). Without it the pool's tensors are returned: an
            inference replay that would overwrite one still in use raises, and a later
            step's replay overwrites a training output that was kept (the CUDA graph trees'
            rule in replay mode: clone what you keep).
            Gradients are never copied: a ``.grad`` still in the pool moves out before the
            next forward replays (:mod:`torchfuse.runtime.training_graphs`).
        freeze: treat parameters and buffers of inference graphs (compiled with gradients
            off) as constants: eval-mode BatchNorms fold into the convolutions before them,
            convolution biases on CUDA join the next fusion group, half-precision 2-D
            convolutions on CUDA run channels-last, and what depends on
            weights alone runs again only when a weight changes (its version counter); see
            :mod:`torchfuse.freezing`. Off by default, like ``torch.compile``'s freezing.
        channels_last_training: run the 2-D half-precision convolutions of training graphs
            (gradients enabled; fp16/bf16 weights or autocast) on CUDA channels-last, cuDNN's
            fast layout on tensor cores: the graph converts each convolution's input and weight,
            the normalizations and activations between convolutions then run channels-last, and
            the gradients flow back through the conversions. Inductor's layout optimization
            does the same for training graphs. On by default.
        channels_last_inference: the same for inference graphs that are not frozen and run
            under CUDA graphs (``cudagraphs``, ``mode="reduce-overhead"``): the weights are
            converted in every replay (one copy per convolution weight, inside the graph),
            which ``freeze`` would hoist. ResNet-50 at batch 1 in fp16 on an H200 ran 0.686 ms
            channels-first and 0.418 ms frozen channels-last, where the per-call weight copies
            are a few microseconds each. On by default.
        inner_outer: run a row-reduction group (LayerNorm's or RMSNorm's input gradient) and a
            column-sum group over the same rows and columns (their weight and bias gradients)
            that share an input as one kernel, which reads each row once, reduces it, and adds
            it into per-program column partials, then a small kernel that sums the partials
            (``reduction.inner_outer``; see :func:`torchfuse.segment.pair_inner_outer`). On by
            default.
        conv_epilogues: in inference graphs, run each ReLU whose input is one ungrouped 2-D
            convolution plus per-channel biases (and at most one residual tensor of the output's
            shape, dtype and strides) as one cuDNN call with a fused epilogue
            (``cudnn_convolution_relu``/``cudnn_convolution_add_relu``), fp16 and bf16 on CUDA;
            see :func:`torchfuse.passes.aten.conv_relu_epilogues`. On by default.
        cross_entropy_rewrites: take cross-entropy's picked log-probability and its
            label-smoothing sum from ``x - max`` per row (one reduction step fewer; the
            smoothing sum rounded once rather than per element), on rows of at most 1024
            classes and rows longer than ``persistent_max_elements``; see
            :func:`torchfuse.passes.cross_entropy.one_hot_picks` and
            :func:`torchfuse.passes.cross_entropy.log_softmax_sums`. On by default.
        interpret_integer_division: fuse integer division and remainder on CPU tensors too.
            Off by default because eager raises ZeroDivisionError there and a kernel cannot;
            tests turn it on to exercise those kernels under the interpreter.
        tuning: the constants of the heuristics, passes and code writers
            (:class:`~torchfuse.config.tuning.Tuning`); also given as a string of
            ``section.field=value`` assignments, or a dict keyed by ``"section.field"`` or
            nested by section (``{"persistent": {"tile_elements": 8192}}``). Default: ``Tuning()`` with
            ``TORCHFUSE_TUNING``'s assignments.
        launch_configs_for_sm_count: plan every kernel's launch configuration as for a GPU of
            this many multiprocessors (132: an H200), also under the interpreter, where it
            replaces the interpreter's largest blocks by a GPU's (many programs, masked tails,
            narrow tiles): what tests use to run the GPU's configurations on CPU tensors
            (``pytest --gpu-launch-configs 132``). 0 (the default): the device's own count, and
            the interpreter's blocks under the interpreter. Default:
            ``TORCHFUSE_LAUNCH_CONFIGS_FOR_SM_COUNT``.
        progress: while a graph's kernels are generated and compiled, show a progress bar on
            stderr (kernels generated and compiled, of how many, per graph) once that has taken
            longer than two seconds; never when stderr is not a terminal. See
            :mod:`torchfuse.runtime.progress`. On by default.
    """

    interpret: bool = dataclasses.field(default_factory=lambda: _env_flag("TORCHFUSE_INTERPRET"))
    fuse: bool = True
    dump_dir: str | None = dataclasses.field(default_factory=lambda: os.environ.get("TORCHFUSE_DUMP_DIR") or None)
    cache_dir: str | None = dataclasses.field(
        default_factory=lambda: None if _env_flag("TORCHFUSE_DISABLE_CACHE") else str(default_cache_dir()))
    compile_threads: int = 8
    max_group_ops: int = 256
    persistent_max_elements: int = 8192
    exact_rounding: bool = True
    interpret_integer_division: bool = False
    cudagraphs: bool = False
    freeze: bool = False
    channels_last_training: bool = True
    channels_last_inference: bool = True
    inner_outer: bool = True
    conv_epilogues: bool = True
    cross_entropy_rewrites: bool = True
    cudagraph_max_graphs: int = 8
    cudagraph_copy_outputs: bool = True
    progress: bool = True
    tuning: Tuning = dataclasses.field(default_factory=_env_tuning)
    launch_configs_for_sm_count: int = dataclasses.field(
        default_factory=lambda: _env_int("TORCHFUSE_LAUNCH_CONFIGS_FOR_SM_COUNT"))

    def __post_init__(self) -> None:
        """Check each option's type (and that counts are positive) when the options are made,
        so a mistyped value raises instead of making the first call fall back to ATen:
        ``torchfuse.compile`` raises at once; ``torch.compile(..., backend="torchfuse",
        options=...)`` builds the options when TorchDynamo first calls the backend, so there
        the error comes at the first call, wrapped by TorchDynamo (``BackendCompilerFailed``).

        Raises:
            TypeError: a value of the wrong type (a flag that is not a bool, a count that is not
                an int, a directory that is not a string or path, a tuning that is not a
                ``Tuning``, string or dict).
            ValueError: a count below 1 (``launch_configs_for_sm_count``: below 0).
            KeyError: a tuning assignment names no tuning field.
        """
        if isinstance(self.tuning, str):
            object.__setattr__(self, "tuning", parse_tuning(self.tuning))
        elif isinstance(self.tuning, dict):
            object.__setattr__(self, "tuning", parse_tuning(tuning_assignments(self.tuning)))
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            kind = str(f.type)
            if kind == "Tuning":
                if not isinstance(value, Tuning):
                    raise TypeError(f"torchfuse option {f.name}={value!r}: expected Tuning, got {type(value).__name__}")
                continue
            if kind == "bool":
                ok = isinstance(value, bool)
            elif kind == "int":
                ok = isinstance(value, int) and not isinstance(value, bool)
            else:  # directories: "str | None"
                ok = value is None or isinstance(value, (str, os.PathLike))
            if not ok:
                raise TypeError(f"torchfuse option {f.name}={value!r}: expected {kind}, got {type(value).__name__}")
            least = 0 if f.name == "launch_configs_for_sm_count" else 1
            if kind == "int" and value < least:
                raise ValueError(f"torchfuse option {f.name}={value!r}: must be at least {least}")

    @staticmethod
    def from_env(**overrides) -> "Options":
        """Defaults from the environment, then ``overrides`` (names of the attributes).

        Raises:
            TypeError: an override names no option.
        """
        names = {f.name for f in dataclasses.fields(Options)}
        unknown = set(overrides) - names
        if unknown:
            raise TypeError(f"unknown torchfuse option(s): {sorted(unknown)}; known: {sorted(names)}")
        return Options(**overrides)
