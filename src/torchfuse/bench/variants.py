"""Variants: how a benchmark compiles torchfuse with other settings, in one place.

A variant is a list of overrides, each ``NAME=VALUE`` or ``SECTION.NAME=VALUE`` with a Python
literal as the value (``True``, ``3``, ``'x'``):

* ``NAME=VALUE`` (no dot): a field of :class:`torchfuse.Options` (``inner_outer=False``,
  ``conv_epilogues=False``);
* ``SECTION.NAME=VALUE``: a tunable of a heuristic or pass. Today the tunables are constants
  of torchfuse's modules and ``SECTION`` is the module's path below ``torchfuse``
  (``schedulers.reduction.TILE_ELEMENTS=4096``, ``codegen.triton.SINK_SELECTS=False``).

:func:`options_with` is the single place where a benchmark's variants reach the compiler:
``torchfuse bench norms`` (``--set``, ``--alt``, ``--variant``, ``--sweep``), ``sass``,
``conv-epilogue`` and ``host`` go through it. It returns the :class:`torchfuse.Options` to
compile with and, today, sets the module constants named by ``SECTION.NAME`` overrides, as
``--set MODULE.NAME=VALUE`` always did; :func:`restoring_tunables` puts them back when a
variant is done. When the tunables become a typed ``Tuning`` carried in ``Options.tuning``,
only this module changes: :func:`options_with` parses the ``SECTION.NAME`` overrides into the
``Tuning`` it puts into the options (``section.field=value``), sets nothing, and
:func:`restoring_tunables` and :func:`use_gpu_launch_configs` become no-ops to delete.
"""
from __future__ import annotations

import ast
import contextlib
import dataclasses
import importlib
from typing import Any, Iterable, Iterator

#: a parsed override: (section or ``None`` for an Options field, name, value)
Override = tuple[str | None, str, Any]


def parse_override(text: str) -> Override:
    """``"schedulers.reduction.TILE_ELEMENTS=4096"`` -> ``("schedulers.reduction", "TILE_ELEMENTS", 4096)``.

    Raises:
        ValueError: no ``=``, an empty name, a value that is not a Python literal, an
            Options field that does not exist, or a module constant that does not exist.
    """
    target, sep, value_text = text.partition("=")
    target = target.strip()
    if not sep or not target:
        raise ValueError(f"{text!r}: an override is NAME=VALUE or SECTION.NAME=VALUE")
    try:
        value = ast.literal_eval(value_text.strip())
    except (ValueError, SyntaxError):
        raise ValueError(f"{text!r}: the value must be a Python literal (True, 3, 'x')") from None
    section, _, name = target.rpartition(".")
    if not section:
        from torchfuse import Options

        if name not in {f.name for f in dataclasses.fields(Options)}:
            raise ValueError(f"{text!r}: torchfuse.Options has no field {name!r}")
        return None, name, value
    try:
        module = importlib.import_module(f"torchfuse.{section}")
    except ImportError:
        raise ValueError(f"{text!r}: there is no module torchfuse.{section}") from None
    if not hasattr(module, name):
        raise ValueError(f"{text!r}: torchfuse.{section} has no {name}")
    return section, name, value


def parse_overrides(texts: Iterable[str]) -> list[Override]:
    """:func:`parse_override` of each (comma-free) text. Raises ``ValueError`` as it does."""
    return [parse_override(t) for t in texts]


def format_overrides(overrides: Iterable[str]) -> str:
    return " ".join(overrides)


def options_with(overrides: Iterable[str] = (), **options: Any):
    """The :class:`torchfuse.Options` a variant compiles with: ``options`` and the variant's
    ``NAME=VALUE`` fields. Today it also sets the module constants of its ``SECTION.NAME=VALUE``
    overrides, process-wide (wrap the variant in :func:`restoring_tunables` to undo them).

    Raises:
        ValueError: an override does not parse (:func:`parse_override`).
        TypeError: an Options value has the wrong type (:class:`torchfuse.Options`).
    """
    from torchfuse import Options

    fields = dict(options)
    for section, name, value in parse_overrides(overrides):
        if section is None:
            fields[name] = value
        else:
            setattr(importlib.import_module(f"torchfuse.{section}"), name, value)
    return Options(**fields)


@contextlib.contextmanager
def restoring_tunables(overrides: Iterable[str] = ()) -> Iterator[None]:
    """Restore, on exit, the module constants that ``overrides`` name (and that
    :func:`options_with` sets inside the block)."""
    saved = []
    for section, name, _ in parse_overrides(overrides):
        if section is not None:
            module = importlib.import_module(f"torchfuse.{section}")
            saved.append((module, name, getattr(module, name)))
    try:
        yield
    finally:
        for module, name, value in reversed(saved):
            setattr(module, name, value)

