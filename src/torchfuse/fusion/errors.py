"""Errors raised while a fusion is defined.

Every check of the definition API runs when an op is applied, not when the fusion is launched,
and raises one of these. Messages start with the op's name and name the offending operand
(``add: operand 'other' (b: float32[1, s1]) ...``).
"""
from __future__ import annotations


class DefinitionError(ValueError):
    """An op cannot be applied to these operands: ranks, sizes or arguments do not fit, or an
    output is not computed from the fusion's inputs."""


class DefinitionTypeError(DefinitionError, TypeError):
    """An operand has a dtype (or is a kind of value) that the op does not take."""


def fail(op: str, message: str, type_error: bool = False) -> None:
    """Raise the definition error ``"<op>: <message>"``.

    Raises:
        DefinitionTypeError: when ``type_error``.
        DefinitionError: otherwise.
    """
    cls = DefinitionTypeError if type_error else DefinitionError
    raise cls(f"{op}: {message}")
