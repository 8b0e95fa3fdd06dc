"""Variants: how a benchmark compiles torchfuse with other settings, in one place.

A variant is a list of overrides, each ``NAME=VALUE`` or ``SECTION.FIELD=VALUE``:

* ``NAME=VALUE`` (no dot): a field of :class:`torchfuse.Options`, the value a Python literal
  (``inner_outer=False``, ``conv_epilogues=False``);
* ``SECTION.FIELD=VALUE``: a field of :class:`torchfuse.config.tuning.Tuning`, the constants
  of the heuristics, passes and code writers (``persistent.tile_elements=4096``,
  ``codegen.sink_selects=False``, ``outer.xblock=32``); the value is converted to the field's
  type as :meth:`~torchfuse.config.tuning.Tuning.replace` does.

:func:`options_with` is the single place where a benchmark's variants reach the compiler:
``torchfuse bench norms`` (``--set``, ``--alt``, ``--sweep``), ``sass``, ``conv-epilogue`` and
``host`` go through it. It returns the :class:`torchfuse.Options` to compile with, its
``tuning`` carrying the ``SECTION.FIELD`` overrides; nothing process-wide changes, so variants
compiled one after the other in one process do not see each other's overrides.
"""
from __future__ import annotations

import ast
import dataclasses
from typing import Any, Iterable

#: a parsed override: (``"option"`` or ``"tuning"``, the Options field or the Tuning path, value)
Override = tuple[str, str, Any]


def parse_override(text: str) -> Override:
    """``"persistent.tile_elements=4096"`` -> ``("tuning", "persistent.tile_elements", 4096)``;
    ``"inner_outer=False"`` -> ``("option", "inner_outer", False)``.

    Raises:
        ValueError: no ``=``, an empty name, an Options value that is not a Python literal, an
            Options field that does not exist, a Tuning section or field that does not exist,
            or a value the Tuning field's type does not take.
    """
    from torchfuse import Options
    from torchfuse.config.tuning import Tuning

    target, sep, value_text = text.partition("=")
    target, value_text = target.strip(), value_text.strip()
    if not sep or not target:
        raise ValueError(f"{text!r}: an override is NAME=VALUE or SECTION.FIELD=VALUE")
    if "." not in target:
        if target not in {f.name for f in dataclasses.fields(Options)}:
            raise ValueError(f"{text!r}: torchfuse.Options has no field {target!r}")
        try:
            return "option", target, ast.literal_eval(value_text)
        except (ValueError, SyntaxError):
            raise ValueError(f"{text!r}: the value must be a Python literal (True, 3, 'x')") from None
    try:
        tuning = Tuning().replace(target, value_text)
    except KeyError as e:
        raise ValueError(f"{text!r}: {e.args[0]}") from None
    section, _, field = target.partition(".")
    return "tuning", target, getattr(getattr(tuning, section), field)


def parse_overrides(texts: Iterable[str]) -> list[Override]:
    """:func:`parse_override` of each (comma-free) text. Raises ``ValueError`` as it does."""
    return [parse_override(t) for t in texts]


def options_with(overrides: Iterable[str] = (), **options: Any):
    """The :class:`torchfuse.Options` a variant compiles with: ``options`` and the variant's
    ``NAME=VALUE`` fields, its ``tuning`` (``options["tuning"]`` if given, else the default,
    which ``TORCHFUSE_TUNING`` sets) with the ``SECTION.FIELD=VALUE`` overrides applied in order.

    Raises:
        ValueError: an override does not parse (:func:`parse_override`).
        TypeError: an Options value has the wrong type (:class:`torchfuse.Options`).
    """
    from torchfuse import Options

    fields = dict(options)
    tuned = []
    for kind, name, value in parse_overrides(overrides):
        if kind == "option":
            fields[name] = value
        else:
            tuned.append((name, value))
    result = Options(**fields)
    if tuned:
        tuning = result.tuning
        for path, value in tuned:
            tuning = tuning.replace(path, value)
        result = dataclasses.replace(result, tuning=tuning)
    return result
