"""PyTorch's wrappers of a random draw that activation checkpointing recomputes.

Under non-reentrant ``torch.utils.checkpoint``, the backward recomputes the checkpointed region,
and a random op in it (dropout's ``rand_like``) must draw the forward's numbers again.
AOTAutograd's partitioner wraps each such op in a higher-order op of
``torch._prims.rng_prims``: the forward's ``run_and_save_rng_state(op, *args)`` returns
``(generator state, op(*args))`` and the backward's ``run_with_rng_state(state, op, *args)``
draws ``op(*args)`` from that state; on CUDA both are ``graphsafe_run_with_rng_state(op, *args,
rng_state=generator)``. They run through ATen, with PyTorch's generator: the other graph repeats
their numbers only if both draw them the same way. What reads the drawn tensor fuses as usual.

The partitioner makes these FX nodes without ``meta["val"]``; :func:`result_example` gives their
result's. :func:`layout_operand` says which argument the wrapped op reads for its sizes, strides,
dtype and device only (``rand_like``'s ``self``), so the segmenter can let the draw read a
stand-in and run before the group that computes the real operand.
"""
from __future__ import annotations

import operator
from typing import Any

import torch
import torch.fx
from torch._prims import rng_prims

#: the wrappers, each with the position of the wrapped op in its arguments (the op's own
#: arguments follow it)
_OP_POSITION = {
    rng_prims.run_and_save_rng_state: 0,
    rng_prims.run_with_rng_state: 1,
    rng_prims.graphsafe_run_with_rng_state: 0,
}
RNG_STATE_OPS = frozenset(_OP_POSITION)

#: why such a draw runs through ATen (``explain`` lists it with that reason)
RNG_STATE_REASON = ("random draw of a checkpointed region: PyTorch's generator, so that the "
                    "backward's recomputation repeats the forward's numbers")

_aten = torch.ops.aten
#: random ops whose first argument is read for its layout only (``empty_like`` semantics: its
#: sizes, and its strides when they are dense and non-overlapping), never for its values
_LAYOUT_ONLY_FIRST = frozenset([
    _aten.rand_like.default, _aten.randn_like.default, _aten.randint_like.default, _aten.randint_like.low_dtype,
])


def wrapped_op(target: Any, args: tuple) -> tuple[Any, int] | None:
    """``(the wrapped ATen op, index in args of its first argument)`` for a wrapper call,
    ``None`` for any other target."""
    position = _OP_POSITION.get(target)
    if position is None or len(args) <= position:
        return None
    return args[position], position + 1


def layout_operand(target: Any, args: tuple) -> int | None:
    """Index in ``args`` of the argument a wrapper's op reads for its layout only
    (``rand_like``'s ``self``), or ``None``."""
    wrapped = wrapped_op(target, args)
    if wrapped is None or wrapped[0] not in _LAYOUT_ONLY_FIRST or len(args) <= wrapped[1]:
        return None
    return wrapped[1]


def result_example(fx_node: torch.fx.Node) -> Any:
    """A wrapper call's ``meta["val"]``: the wrapped op run on its arguments' fake tensors
    (a fake tensor of the drawn result's shape, strides, dtype and device), paired with the
    state for ``run_and_save_rng_state`` (its ``getitem(.., 0)`` reader's ``meta["val"]``, a
    uint8 tensor; ``None`` without one). ``None`` when the op cannot run on fake tensors: the
    call's result is then an opaque value, which runs as before but fuses with nothing."""
    from torch._guards import detect_fake_mode

    wrapped = wrapped_op(fx_node.target, fx_node.args)
    if wrapped is None:
        return None
    op, first = wrapped
    fake = lambda a: a.meta.get("val") if isinstance(a, torch.fx.Node) else a
    args = torch.fx.node.map_aggregate(fx_node.args[first:], fake)
    kwargs = {k: torch.fx.node.map_aggregate(v, fake) for k, v in fx_node.kwargs.items() if k != "rng_state"}
    try:
        mode = detect_fake_mode(list(args) + list(kwargs.values()))
        if mode is None:
            return None
        with mode:
            out = op(*args, **kwargs)
    except Exception:  # no fake implementation: the result stays without metadata, unfused
        return None
    if fx_node.target is not rng_prims.run_and_save_rng_state:
        return out
    states = [u.meta.get("val") for u in fx_node.users
              if u.target is operator.getitem and u.args[1] == 0]
    return (states[0] if states else None), out
