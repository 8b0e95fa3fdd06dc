"""``torchfuse explain``: explain a named model from the command line.

Usage::

    torchfuse explain MODEL [--size 8x128] [--dtype fp32|fp16|bf16] [--train] [--device cuda|cpu]
                            [--quick] [--measure] [--calls N] [--mode reduce-overhead]
                            [--option NAME=VALUE ...] [--set SECTION.FIELD=VALUE ...] [--tuning] [-o PREFIX]

``MODEL`` is one of

* ``hf:NAME``: a HuggingFace model of the benchmark's HF suite with random weights, by model
  type or by the checkpoint its default configuration matches (``hf:bert``, ``hf:bert-base``,
  ``hf:gpt2``, ``hf:t5-small`` ...); ``--size BATCHxSEQUENCE`` (encoder-decoders
  ``BATCHxSOURCExTARGET``), default ``1x128``;
* ``timm:NAME`` or ``torchvision:NAME``: an image classifier with random weights;
  ``--size BATCH`` or ``BATCHxPIXELS`` (square images), default batch 1 at the model's
  resolution;
* ``path/to/file.py:function``: ``function()`` returns ``(model_or_fn, inputs)``, where
  ``inputs`` is a tuple of positional arguments or a dict of keyword arguments.

The models are the benchmark's (:mod:`torchfuse.bench.suites`), built by its builders, and the
step is the benchmark's: inference runs the forward under ``torch.no_grad()`` with the model
in eval mode (a file's model too) and model and inputs cast to ``--dtype``; ``--train`` runs forward, loss and backward (under
``torch.autocast`` for fp16 and bf16). ``--quick`` takes the benchmark's tiny configurations
(seconds on a CPU). ``--calls N`` calls the step N times with the same inputs (Python's
``more_inputs``): from the second call on, each graph runs as its generated function. On a
CPU, explain turns interpret mode on to show the plan, and says so first. Writes ``PREFIX.txt`` (the summary, also printed), ``PREFIX.html`` (the report) and
``PREFIX.json`` (the result, for ``torchfuse report``); ``PREFIX`` defaults to
``explain-<model>`` (``explain-<model>-train`` with ``--train``). ``--set`` changes a field of :class:`~torchfuse.config.tuning.Tuning`
(the heuristics' and code writers' constants) for this compile; ``--tuning`` adds to the
summary the tuning each kernel was built with (the fields of the sections its scheduler and
the code writer read, and any other changed field). Exit status 2 for a model, option or
tuning field that cannot be used.
"""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import importlib.util
import linecache
import os
import re
import sys
import warnings
from pathlib import Path
from typing import Any

import torch

from ..config import Options

#: ``--dtype`` -> (bench mode for inference, bench mode for training)
_MODES = {"fp32": ("infer-fp32", "train-fp32"), "fp16": ("infer-fp16", "train-amp-fp16"),
          "bf16": ("infer-bf16", "train-amp-bf16")}


class SpecError(ValueError):
    """A model name, size or option the command cannot use (exit status 2)."""


def parse_size(text: str) -> tuple[int, ...]:
    """``"8x128"`` -> ``(8, 128)``.

    Raises:
        SpecError: not positive integers joined by ``x``.
    """
    try:
        size = tuple(int(p) for p in text.lower().split("x"))
    except ValueError:
        raise SpecError(f"--size takes positive integers joined by 'x', e.g. 8x128 (got {text!r})") from None
    if not size or min(size) < 1:
        raise SpecError(f"--size takes positive integers joined by 'x', e.g. 8x128 (got {text!r})")
    return size


#: spellings of a boolean option's value on the command line besides true/false
_BOOL_WORDS = {"1": True, "0": False, "yes": True, "no": False, "on": True, "off": False}
#: the names of :class:`~torchfuse.config.Options`' boolean and integer fields
_BOOL_OPTIONS = frozenset(f.name for f in dataclasses.fields(Options) if str(f.type) == "bool")
_INT_OPTIONS = frozenset(f.name for f in dataclasses.fields(Options) if str(f.type) == "int")


def parse_option(text: str) -> tuple[str, Any]:
    """``"max_group_ops=64"`` -> ``("max_group_ops", 64)``; ``true``/``false`` become bools (as
    do ``1``/``0``, ``yes``/``no`` and ``on``/``off`` for a boolean option, which the
    environment variables take), integers ints, ``none`` None, anything else stays a string
    (``Options`` checks the types).

    Raises:
        SpecError: no ``=``, or a boolean or integer option given another word.
    """
    name, sep, value = text.partition("=")
    if not sep or not name.strip():
        raise SpecError(f"--option takes NAME=VALUE (got {text!r})")
    v = value.strip()
    if v.lower() in ("true", "false"):
        return name.strip(), v.lower() == "true"
    if name.strip() in _BOOL_OPTIONS and v.lower() in _BOOL_WORDS:
        return name.strip(), _BOOL_WORDS[v.lower()]
    if v.lower() == "none":
        return name.strip(), None
    if re.fullmatch(r"-?\d+", v):
        return name.strip(), int(v)
    # every value on the command line is text: say what this option takes, not "got str"
    if name.strip() in _BOOL_OPTIONS:
        raise SpecError(f"--option {text}: {name.strip()} takes true or false (or 1/0, yes/no, on/off)")
    if name.strip() in _INT_OPTIONS:
        raise SpecError(f"--option {text}: {name.strip()} takes an integer")
    return name.strip(), v


def hf_model(name: str) -> str:
    """The HF suite's model for ``name``: a model type (``bert``) or the checkpoint its default
    configuration matches (``bert-base``)."""
    from ..bench.suites import hf

    if name in hf.MODELS:
        return name
    for key, checkpoint in hf.SIZE_NAMES.items():
        if name == checkpoint:
            return key
    known = ", ".join(f"{k} ({v})" for k, v in hf.SIZE_NAMES.items())
    raise SpecError(f"hf:{name} is not one of the HF suite's models: {known}")


def workload_step(spec: str, size: tuple[int, ...] | None, mode_name: str, device: str, quick: bool):
    """``(callable, example inputs, size text)`` for a ``hf:`` / ``timm:`` / ``torchvision:``
    model: the benchmark's workload and step (``LossStep`` or ``ForwardStep``) for ``mode_name``."""
    from ..bench.modes import MODES
    from ..bench.steps import PreparedBackend
    from ..bench.suites import hf, vision
    from ..bench.workload import BuildContext

    library, _, name = spec.partition(":")
    mode = MODES[mode_name]
    ctx = BuildContext(device=device, mode=mode, quick=quick)
    if library == "hf":
        if importlib.util.find_spec("transformers") is None:
            raise SpecError(f"{spec} needs HuggingFace transformers: pip install transformers "
                            "(or torchfuse's \"bench\" extra)")
        model = hf_model(name)
        seq2seq = hf.MODELS[model][1] == "seq2seq-lm"
        if size is None:
            size = (hf.QUICK_SIZES_SEQ2SEQ if seq2seq else hf.QUICK_SIZES)[0] if quick else \
                ((1, 128, 128) if seq2seq else (1, 128))
        if len(size) != (3 if seq2seq else 2):
            raise SpecError(f"hf:{name} takes --size " + ("BATCHxSOURCExTARGET" if seq2seq else "BATCHxSEQUENCE"))
        workload = hf.build(model, size, ctx)
        shown = "x".join(map(str, size)) + (" (batch x source x target)" if seq2seq else " (batch x sequence)")
    else:
        if size is not None and len(size) > 2:
            raise SpecError(f"{spec} takes --size BATCH or BATCHxPIXELS")
        batch = size[0] if size else (vision.QUICK_BATCH if quick else 1)
        kwargs = {}
        if quick:  # the benchmark's narrowed version of this model, when it has one
            kwargs = next((kw for lib, real, kw in vision.QUICK_MODELS.values() if (lib, real) == (library, name)), {})
        try:
            pixels = size[1] if size and len(size) == 2 else None
            workload = vision.build(library, name, kwargs, batch, ctx, pixels=pixels)
        except vision.Unavailable as e:
            raise SpecError(str(e)) from None
        shown = f"batch {batch}, images " + "x".join(map(str, workload.info["input"]))
    prepared = PreparedBackend(workload, mode, device)
    return prepared.fn, (prepared.inputs, prepared.targets), shown


class _Call(torch.nn.Module):
    """``model(*args)`` or ``model(**kwargs)``, under ``torch.autocast`` when training in half
    precision: what explain compiles for a ``file.py:function`` model. ``origin`` is the user's
    ``function``, which :func:`name_user_file` puts in place of this module's lines."""

    def __init__(self, model: Any, keywords: bool, amp_dtype: torch.dtype | None, device_type: str,
                 origin: Any = None):
        super().__init__()
        self.model = model
        self.keywords = keywords
        self.amp_dtype = amp_dtype
        self.device_type = device_type
        self.origin = origin

    def forward(self, *args):
        with torch.autocast(self.device_type, dtype=self.amp_dtype) if self.amp_dtype else contextlib.nullcontext():
            return self.model(**args[0]) if self.keywords else self.model(*args)


def file_step(spec: str, mode_name: str, device: str):
    """``(callable, example inputs)`` for ``path/to/file.py:function``."""
    from ..bench.modes import MODES
    from ..bench.workload import cast_floating

    path, _, function = spec.rpartition(":")
    if not Path(path).is_file():
        raise SpecError(f"{path}: no such file (MODEL is hf:NAME, timm:NAME, torchvision:NAME or file.py:function)")
    # registered under its name, as an import would: TorchDynamo (torch 2.11) imports a traced
    # function's module by name to read its globals
    name = Path(path).stem
    if name in sys.modules and getattr(sys.modules[name], "__file__", None) != str(Path(path).resolve()):
        name = f"torchfuse_file_{name}_{abs(hash(str(Path(path).resolve())))}"
    module_spec = importlib.util.spec_from_file_location(name, Path(path).resolve())
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[name] = module
    # the file's folder first on the import path, as ``python file.py`` puts it, so that the
    # file can import the modules beside it
    folder = str(Path(path).resolve().parent)
    sys.path.insert(0, folder)
    try:
        module_spec.loader.exec_module(module)
    finally:
        if folder in sys.path:
            sys.path.remove(folder)
    if not callable(getattr(module, function, None)):
        raise SpecError(f"{path} has no function {function!r}")
    origin = getattr(module, function)
    made = origin()
    if not (isinstance(made, tuple) and len(made) == 2):
        raise SpecError(f"{spec}() must return (model_or_fn, inputs); got {type(made).__name__}")
    model, inputs = made
    mode = MODES[mode_name]
    move = lambda t: t.to(device) if isinstance(t, torch.Tensor) else t  # noqa: E731
    inputs = torch.utils._pytree.tree_map(move, inputs)
    if isinstance(model, torch.nn.Module):
        model = model.to(device)
        if not mode.training:  # inference in eval mode, as the benchmark's models run it
            model.eval()
    if not mode.training and mode.dtype != torch.float32:
        inputs = cast_floating(inputs, mode.dtype)
        if isinstance(model, torch.nn.Module):
            model = model.to(mode.dtype)
    keywords = isinstance(inputs, dict)
    args = (inputs,) if keywords else tuple(inputs) if isinstance(inputs, (tuple, list)) else (inputs,)
    amp = mode.dtype if mode.training and mode.amp else None
    return _Call(model, keywords, amp, torch.device(device).type, origin), args


def name_user_file(result, origin: Any) -> None:
    """Put the user's ``origin`` function (its file, ``def`` line and name) in place of every
    source location in ``result`` that names this module's :class:`_Call`: ops that ran inside
    PyTorch's own modules (a ``Sequential`` of them, say) have no frame of the user's in
    TorchDynamo's stack traces, so the wrapper's call was the innermost frame recorded."""
    code = getattr(origin, "__code__", None)
    if code is None:
        return
    own = Path(__file__).resolve()
    locations = [c.location for c in result.captures]
    for b in result.graph_breaks:
        locations += [b.location, *b.stack]
    for g in result.graphs:
        locations += [c.location for c in g.aten_calls] + [loc for grp in g.groups for loc in grp.locations]
    for loc in locations:
        if loc is not None and loc.file and Path(loc.file).resolve() == own:
            loc.file, loc.line, loc.function = code.co_filename, code.co_firstlineno, code.co_name
            loc.code = linecache.getline(code.co_filename, code.co_firstlineno).strip()
    for grp in (grp for g in result.graphs for grp in g.groups):  # still without repeats
        grp.locations = list({(loc.file, loc.line, loc.module): loc for loc in grp.locations}.values())


def check_options(options: dict, mode: str | None) -> None:
    """Raise :class:`SpecError` for an unknown option, a value of the wrong type or an unknown
    mode, before any model is built."""
    from .. import backend
    from ..config.tuning import UnknownTuningField

    try:
        backend.mode_overrides(mode)
        backend.resolve_options(None, **options)
    except (TypeError, ValueError, UnknownTuningField) as e:
        raise SpecError(str(e)) from None


def _slug(spec: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", spec.replace(".py:", "-")).strip("-") or "model"


def _tuning_with(base, assignments: list[str]):
    """The :class:`~torchfuse.config.tuning.Tuning` of ``--option tuning=...`` (or the
    default) with the ``--set`` assignments applied.

    Raises:
        SpecError: an assignment names no field or its value does not convert.
    """
    from ..config import Options
    from ..config.tuning import Tuning, parse_tuning

    try:
        start = parse_tuning(base) if isinstance(base, str) else (base if isinstance(base, Tuning) else Options().tuning)
        return parse_tuning(assignments, start)
    except (KeyError, ValueError) as e:
        raise SpecError(f"--set: {e.args[0] if e.args else e}") from None


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="torchfuse explain", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="MODEL: hf:NAME (hf:bert-base, hf:gpt2 ...), timm:NAME (timm:resnet50), "
                                       "torchvision:NAME (torchvision:resnet18), or path/to/file.py:function")
    p.add_argument("model", help="what to explain (see below)")
    p.add_argument("--size", type=str, default=None, help="hf: BATCHxSEQUENCE; vision: BATCH or BATCHxPIXELS")
    p.add_argument("--dtype", choices=sorted(_MODES), default="fp32",
                   help="inference: cast model and inputs; --train: autocast for fp16/bf16 (default fp32)")
    p.add_argument("--train", action="store_true",
                   help="forward, loss and backward (default: inference); the loss: hf: the model's own (from token "
                        "labels), timm:/torchvision: cross-entropy on random labels, file.py:function: the sum of "
                        "its outputs")
    p.add_argument("--device", choices=("cuda", "cpu"), default="cuda" if torch.cuda.is_available() else "cpu",
                   help="where to run (default: cuda when present, else cpu; on cpu the kernels run in Triton's interpreter)")
    p.add_argument("--quick", action="store_true", help="the benchmark's tiny configurations (seconds on a CPU)")
    p.add_argument("--measure", action="store_true", help="time each kernel against a device copy (GPU only)")
    p.add_argument("--calls", type=int, default=1, metavar="N",
                   help="call the step N times with the same inputs (default 1); from the second call on each "
                        "graph runs its generated function, which the summary then says, and whose Python text "
                        "--option dump_dir=DIR writes (Python: more_inputs)")
    p.add_argument("--mode", default=None, help="a torch.compile mode, e.g. reduce-overhead")
    p.add_argument("--option", action="append", default=[], metavar="NAME=VALUE",
                   help="a torchfuse option (repeatable), e.g. --option freeze=true")
    p.add_argument("--tuning", action="store_true",
                   help="also print the tuning each kernel was built with (the Tuning fields its scheduler and the "
                        "code writer read, then every field changed from its default, marked (changed))")
    p.add_argument("--set", action="append", default=[], metavar="SECTION.FIELD=VALUE",
                   help="compile with this Tuning field changed (repeatable), e.g. --set persistent.tile_elements=2048")
    p.add_argument("-o", "--output", default=None,
                   help="PREFIX for PREFIX.txt, PREFIX.html and PREFIX.json (default explain-<model>, "
                        "explain-<model>-train with --train); a directory (an existing one, or ending in "
                        "'/') gets those default names inside it")
    return p


def main(argv: list[str] | None = None) -> int:
    from .explain import explain

    args = parser().parse_args(argv)
    try:
        size = parse_size(args.size) if args.size else None
        options = dict(parse_option(o) for o in args.option)
        if args.set:
            options["tuning"] = _tuning_with(options.get("tuning"), args.set)
        check_options(options, args.mode)
        if args.device == "cuda" and not torch.cuda.is_available():
            raise SpecError("--device cuda: this machine has no usable CUDA device (use --device cpu)")
        if args.calls < 1:
            raise SpecError(f"--calls {args.calls}: the step is called at least once")
        mode_name = _MODES[args.dtype][1 if args.train else 0]
        if args.model.split(":", 1)[0] in ("hf", "timm", "torchvision"):
            fn, inputs, shown = workload_step(args.model, size, mode_name, args.device, args.quick)
        elif ".py:" in args.model:
            if size is not None:
                raise SpecError("--size applies to hf:, timm: and torchvision: models; "
                                "file.py:function makes its own inputs")
            fn, inputs = file_step(args.model, mode_name, args.device)
            shown = "the function's inputs"
        else:
            raise SpecError(f"cannot read MODEL {args.model!r}: use hf:NAME, timm:NAME, torchvision:NAME or "
                            "path/to/file.py:function")
    except SpecError as e:
        print(f"torchfuse explain: {e}", file=sys.stderr)
        return 2
    # a training run and an inference run of one model do not overwrite each other's files
    name = f"explain-{_slug(args.model)}" + ("-train" if args.train else "")
    prefix = args.output or name
    if prefix.endswith(("/", os.sep)) or Path(prefix).is_dir():  # a directory: the default name in it
        prefix = str(Path(prefix) / name)
    Path(prefix).parent.mkdir(parents=True, exist_ok=True)
    # torchfuse's own warnings are in the summary printed below: not also on stderr
    with contextlib.nullcontext() if args.train else torch.no_grad(), warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="torchfuse")
        result = explain(fn, *inputs, more_inputs=[tuple(inputs)] * (args.calls - 1), backward=args.train,
                         measure=args.measure, mode=args.mode, verbose=False, **options)
    if isinstance(fn, _Call):
        name_user_file(result, fn.origin)
    result.environment["program"] = (f"{args.model} ({shown}{', quick configuration' if args.quick else ''}), "
                                     f"{'training step' if args.train else 'inference'}, {args.dtype}")
    text = result.summary(tuning=args.tuning)
    print(text)
    Path(prefix + ".txt").write_text(text + "\n", encoding="utf-8")
    result.write_html(prefix + ".html")
    result.save(prefix + ".json")
    print(f"\nwrote {prefix}.txt, {prefix}.html and {prefix}.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
