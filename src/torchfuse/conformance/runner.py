"""Running one OpInfo sample through eager PyTorch and through torchfuse, and comparing.

Takes an OpInfo, one of its ``SampleInput`` objects, a dtype and the tolerance for it;
returns a :class:`SampleOutcome`.

Each sample runs as one program holding two independent parts, so that one compile checks
the op both alone and fused with neighbours::

    program(a..., b...) = (op(a...), consumer(op(producer(b0), b1...)))

``producer`` and ``consumer`` multiply by one (``x * 1``; ``& True`` for bool): exact in
every dtype, so the reference is eager's value of the same program, and they give the
segmenter pointwise neighbours to fuse the op with (the op then reads a value computed in
registers, and its result is consumed in registers). Where the OpInfo supports gradients for
the dtype, the tensors the sample marks ``requires_grad`` are leaves, and the gradients of
every floating-point output (against fixed random output gradients) are compared too.

The program enters torchfuse the cheap way first: ``make_fx`` traces it to ATen with the real
inputs and :func:`torchfuse.backend.torchfuse_backend` runs AOTAutograd and the compiler on
that graph, as it does for a graph TorchDynamo captured. Programs ``make_fx`` or AOTAutograd
cannot trace whole (data-dependent output shapes, ``.item()``) go through ``torch.compile``
with the torchfuse backend instead, graph breaks and all. Samples on which eager raises are
run through ``torch.compile`` as well, which must raise the same exception type.
"""
from __future__ import annotations

import contextlib
import dataclasses
import signal
import threading
import time
import warnings
from typing import Any, Callable, Sequence

import torch
import torch.utils._pytree as pytree

from .. import backend
from ..config import Options

#: Reasons of call nodes that are not work left on ATen.
_NOT_WORK = ("view (no data moves)", "tuple element", "module constant")


class SampleTimeout(BaseException):
    """A sample ran past its time limit (a ``BaseException`` so no compiler fallback catches it)."""


@dataclasses.dataclass
class SampleOutcome:
    """What one sample did.

    Attributes:
        status: ``pass`` (values match and a fusion group ran), ``fallback`` (values match,
            everything ran through ATen), ``raises`` (eager raised, and torchfuse raised the
            same exception type), ``fail`` (mismatch, or an exception eager did not raise),
            or ``skipped`` (no verdict: timeout, or the program cannot be captured at all).
        reason: a one-line explanation (the mismatch, the exception, the ATen reasons).
        aten_reasons: ``"target: reason"`` of every call node left on ATen (fallback).
        backward: whether gradients were compared.
        seconds: wall time of the sample.
    """

    status: str
    reason: str = ""
    aten_reasons: list[str] = dataclasses.field(default_factory=list)
    backward: bool = False
    seconds: float = 0.0


# ----------------------------------------------------------------------------- inputs


def _copy_tensor(t: torch.Tensor, requires_grad: bool) -> torch.Tensor:
    """A copy with its own storage and exactly ``t``'s sizes, strides and storage offset
    (so non-contiguous, expanded and offset inputs stay what the sample made them)."""
    with torch.no_grad():
        storage = t.detach().untyped_storage().clone()
        out = torch.empty(0, dtype=t.dtype, device=t.device)
        out.set_(storage, t.storage_offset(), t.size(), t.stride())
    if requires_grad:
        out.requires_grad_(True)
    return out


class Program:
    """A sample as a function of its tensor leaves (the OpInfo's positional tensors, lists of
    tensors and keyword tensors, flattened).

    Attributes:
        leaves: the sample's tensors, in pytree order.
        call: ``call(*tensors)`` runs the op on the sample with ``tensors`` as its leaves.
    """

    def __init__(self, op: Callable, sample: Any):
        flat, self.spec = pytree.tree_flatten((sample.input, list(sample.args), dict(sample.kwargs)))
        self.tensor_at = [i for i, x in enumerate(flat) if isinstance(x, torch.Tensor)]
        self.flat = flat
        self.leaves = [flat[i] for i in self.tensor_at]
        self.op = op

    def call(self, *tensors):
        flat = list(self.flat)
        for i, t in zip(self.tensor_at, tensors):
            flat[i] = t
        inp, args, kwargs = pytree.tree_unflatten(flat, self.spec)
        return self.op(inp, *args, **kwargs)

    def copies(self, grad: bool) -> list[torch.Tensor]:
        """Fresh copies of the leaves for both parts of :func:`combined` (twice as many)."""
        one = [_copy_tensor(t, grad and t.requires_grad and _differentiable(t)) for t in self.leaves]
        two = [_copy_tensor(t, grad and t.requires_grad and _differentiable(t)) for t in self.leaves]
        return one + two


def _differentiable(t: torch.Tensor) -> bool:
    return t.dtype.is_floating_point or t.dtype.is_complex


def _times_one(x: Any) -> Any:
    if not isinstance(x, torch.Tensor) or x.layout != torch.strided:
        return x
    if x.dtype == torch.bool:
        return x & True
    return x * 1


def combined(program: Program) -> Callable:
    """``f(a..., b...) = (op(a...), consumer(op(producer(b0), b1...)))``; see the module doc."""
    n = len(program.leaves)

    def f(*ts):
        a, b = ts[:n], list(ts[n:])
        if b:
            b[0] = _times_one(b[0])
        alone = program.call(*a)
        chained = pytree.tree_map(_times_one, program.call(*b))
        return (alone, chained)

    return f


# ----------------------------------------------------------------------------- running


@contextlib.contextmanager
def time_limit(seconds: float | None):
    """Raise :class:`SampleTimeout` in the main thread after ``seconds`` (no limit elsewhere)."""
    if not seconds or threading.current_thread() is not threading.main_thread():
        yield
        return

    def on_alarm(signum, frame):
        raise SampleTimeout(f"over {seconds:g} s")

    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def _as_tuple(fn: Callable) -> Callable:
    return lambda *a: tuple(pytree.tree_leaves(fn(*a)))


class Capture:
    """The compiled graphs, unfused graphs and torchfuse warnings of one compiled run."""

    def __init__(self):
        self.recent_before = list(backend.RECENT)
        self.unfused_before = list(backend.UNFUSED)
        self.warnings: list[str] = []

    def graphs(self) -> list:
        return [g for g in backend.RECENT if all(g is not b for b in self.recent_before)]

    def unfused(self) -> list:
        return [g for g in backend.UNFUSED if all(g is not b for b in self.unfused_before)]

    def fused(self) -> bool:
        """Whether a fusion group ran that holds more than the program's ``* 1`` neighbours."""
        return any(any(not _is_neighbour(n) for n in group.nodes)
                   for g in self.graphs() for group in g.segmentation.groups)

    def aten_reasons(self) -> list[str]:
        segs = [g.segmentation for g in self.graphs()] + [u["segmentation"] for u in self.unfused()
                                                           if u["segmentation"] is not None]
        out = []
        for seg in segs:
            for c in seg.calls:
                if c.reason not in _NOT_WORK:
                    text = f"{_target_name(c.target)}: {c.reason}"
                    if text not in out:
                        out.append(text)
        for u in self.unfused():
            if u["error"]:
                out.append(f"graph not compiled: {u['error']}")
        return out


def _is_neighbour(node: Any) -> bool:
    """``x * 1`` or ``x & True`` (the producer and consumer :func:`combined` adds), or a
    layout op: nodes that do not show the op under test was fused."""
    from ..ir.ops import REGISTRY

    if REGISTRY[node.op].kind == "layout":
        return True
    scalars = [x for x in node.inputs if not hasattr(x, "meta")]
    return (node.op, scalars) in (("mul", [1]), ("bitwise_and", [True]))


def _target_name(target: Any) -> str:
    return str(getattr(target, "__name__", None) if not hasattr(target, "_schema") else target)


def run_compiled(fn: Callable, args: list, options: Options) -> tuple[Any, bool]:
    """Run ``fn`` on ``args`` through torchfuse: ``make_fx`` + the backend, else
    ``torch.compile``. Returns ``(result, via_dynamo)``."""
    from torch.fx.experimental.proxy_tensor import make_fx

    shape: list = []  # the output's pytree spec and its non-tensor leaves, seen while tracing

    def tensors_only(*a):
        flat, spec = pytree.tree_flatten(fn(*a))
        shape[:] = [spec, flat]
        return tuple(x for x in flat if isinstance(x, torch.Tensor))

    try:
        traced = [_copy_tensor(a, False) if isinstance(a, torch.Tensor) else a for a in args]
        gm = make_fx(tensors_only)(*traced)
        compiled = backend.torchfuse_backend(gm, list(args), options=options)
    except SampleTimeout:
        raise
    except Exception:
        return run_dynamo(fn, args, options), True
    tensors = iter(compiled(*args))
    spec, template = shape
    flat = [next(tensors) if isinstance(x, torch.Tensor) else x for x in template]
    return pytree.tree_unflatten(flat, spec), False


def run_dynamo(fn: Callable, args: list, options: Options) -> Any:
    """Run ``fn`` through ``torch.compile`` with the torchfuse backend (no recompiles kept)."""
    import torch._dynamo

    torch._dynamo.reset()
    compiled = torch.compile(fn, backend=lambda gm, ex: backend.torchfuse_backend(gm, ex, options=options),
                             dynamic=False)
    return compiled(*args)


def same_exception(raised: BaseException, expected: type) -> bool:
    """``raised`` is ``expected`` or wraps it (TorchDynamo wraps eager errors raised while
    tracing in ``TorchRuntimeError``, whose cause is the eager exception)."""
    seen = 0
    e: BaseException | None = raised
    while e is not None and seen < 4:
        if isinstance(e, expected):
            return True
        e = e.__cause__
        seen += 1
    return False


def compare(actual: Any, expected: Any, rtol: float, atol: float) -> str | None:
    """``None`` when ``actual`` matches ``expected`` (same structure, dtypes and shapes; values
    within tolerance, NaN where eager has NaN); else a one-line description.

    Each tensor is compared at the larger of ``(rtol, atol)`` and ``assert_close``'s default
    for its own dtype (an int8 sample's softmax in float64 is compared as float64)."""
    from .catalog import default_tolerance

    a_flat, a_spec = pytree.tree_flatten(actual)
    e_flat, e_spec = pytree.tree_flatten(expected)
    if len(a_flat) != len(e_flat):
        return f"{len(a_flat)} outputs, eager has {len(e_flat)}"
    for i, (a, e) in enumerate(zip(a_flat, e_flat)):
        if isinstance(e, torch.Tensor):
            if not isinstance(a, torch.Tensor):
                return f"output {i} is {type(a).__name__}, eager has a tensor"
            if a.dtype != e.dtype:
                return f"output {i} has dtype {a.dtype}, eager {e.dtype}"
            if a.shape != e.shape:
                return f"output {i} has shape {tuple(a.shape)}, eager {tuple(e.shape)}"
            if e.layout != torch.strided or e.is_quantized:
                continue
            own_rtol, own_atol = default_tolerance(e.dtype)
            try:
                torch.testing.assert_close(a.detach(), e.detach(), rtol=max(rtol, own_rtol),
                                           atol=max(atol, own_atol), equal_nan=True,
                                           check_device=True, check_stride=False)
            except AssertionError as err:
                lines = [ln.strip() for ln in str(err).splitlines() if ln.strip()]
                return f"output {i}: " + "; ".join(lines[:3])
        elif isinstance(e, float) and isinstance(a, float) and e != e and a != a:
            continue
        elif a != e:
            return f"output {i} is {a!r}, eager {e!r}"
    return None


def _grad_outputs(outputs: Sequence[torch.Tensor], seed: int) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(o.shape, generator=g, dtype=torch.float64).to(o.dtype).to(o.device)
            if not o.dtype.is_complex else
            torch.randn(o.shape, generator=g, dtype=torch.complex128).to(o.dtype).to(o.device) for o in outputs]


def _forward_and_grads(run: Callable, leaves: list[torch.Tensor], grad: bool, seed: int):
    """``(outputs, grads)``: ``run(leaves)``, and the gradients of its differentiable outputs
    with respect to the leaves that require grad (``None`` without ``grad``)."""
    out = run(leaves)
    if not grad:
        return out, None
    inputs = [t for t in leaves if t.requires_grad]
    outs = [o for o in pytree.tree_leaves(out)
            if isinstance(o, torch.Tensor) and o.requires_grad and _differentiable(o)]
    if not inputs or not outs:
        return out, None
    grads = torch.autograd.grad(outs, inputs, _grad_outputs(outs, seed), allow_unused=True)
    return out, [torch.zeros(()) if g is None else g for g in grads]


def run_sample(op: Callable, sample: Any, options: Options, rtol: float, atol: float, *, backward: bool,
               seed: int = 0, seconds: float | None = None) -> SampleOutcome:
    """Run ``sample`` of ``op`` in eager and through torchfuse and compare (module doc).

    Args:
        op: the OpInfo's ``op`` (a callable taking the sample's input, args and kwargs).
        sample: a ``SampleInput``.
        options: torchfuse options.
        rtol, atol: the tolerance for floating-point results.
        backward: compare gradients too, for the tensors the sample marks ``requires_grad``.
        seed: seeds the random output gradients.
        seconds: time limit (main thread only); past it the sample is ``skipped``.
    """
    t0 = time.perf_counter()
    program = Program(op, sample)
    fn = combined(program)
    grad = backward and any(t.requires_grad and _differentiable(t) for t in program.leaves)
    try:
        with time_limit(seconds), warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            outcome = _run(program, fn, options, rtol, atol, grad, seed)
        failures = [str(w.message) for w in caught if str(w.message).startswith("torchfuse:")
                    and "could not" in str(w.message)]
        if failures and outcome.status in ("pass", "fallback"):
            outcome = SampleOutcome("fail", failures[0].splitlines()[0][:300], outcome.aten_reasons, grad)
    except SampleTimeout as e:
        outcome = SampleOutcome("skipped", f"timeout ({e})")
    outcome.seconds = time.perf_counter() - t0
    return outcome


def _run(program: Program, fn: Callable, options: Options, rtol: float, atol: float, grad: bool,
         seed: int) -> SampleOutcome:
    eager_leaves = program.copies(grad)
    try:
        expected, expected_grads = _forward_and_grads(lambda ls: fn(*ls), eager_leaves, grad, seed)
    except SampleTimeout:
        raise
    except Exception as e:
        if grad:  # the op's backward is not implemented for this sample: compare the forward only
            try:
                fn(*program.copies(False))
            except Exception:
                pass
            else:
                return _run(program, fn, options, rtol, atol, False, seed)
        return _check_raises(fn, program.copies(False), options, type(e))
    capture = Capture()
    leaves = program.copies(grad)
    via = "make_fx"
    try:
        def run(ls):
            nonlocal via
            out, dynamo = run_compiled(fn, ls, options)
            via = "torch.compile" if dynamo else via
            return out

        actual, actual_grads = _forward_and_grads(run, leaves, grad, seed)
    except SampleTimeout:
        raise
    except Exception as e:
        return SampleOutcome("fail", f"raised {type(e).__name__}: {_first_line(e)} (eager did not)",
                             capture.aten_reasons(), grad)
    problem = compare(actual, expected, rtol, atol)
    if problem is None and grad and expected_grads is not None:
        if actual_grads is None:
            problem = "no gradients"
        else:
            problem = compare(actual_grads, expected_grads, rtol, atol)
            problem = None if problem is None else "gradient " + problem
    reasons = capture.aten_reasons()
    if problem is not None:
        return SampleOutcome("fail", problem, reasons, grad)
    if capture.fused():
        return SampleOutcome("pass", f"fused (via {via})", reasons, grad)
    if not reasons and via == "torch.compile":
        reasons = ["ran outside torchfuse's graphs (TorchDynamo graph break)"]
    return SampleOutcome("fallback", "; ".join(reasons[:3]) or "nothing to compute (views only)", reasons, grad)


def _check_raises(fn: Callable, leaves: list, options: Options, error: type) -> SampleOutcome:
    capture = Capture()
    try:
        run_dynamo(fn, leaves, options)
    except SampleTimeout:
        raise
    except Exception as e:
        if same_exception(e, error):
            return SampleOutcome("raises", f"raises {error.__name__} as eager", capture.aten_reasons())
        return SampleOutcome("fail", f"raised {type(e).__name__} where eager raises {error.__name__}: "
                             f"{_first_line(e)}", capture.aten_reasons())
    return SampleOutcome("fail", f"did not raise eager's {error.__name__}", capture.aten_reasons())


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return (text[0] if text else "")[:240]


def run_error_input(op: Callable, error_input: Any, options: Options, seconds: float | None = None) -> SampleOutcome:
    """An OpInfo ``ErrorInput``: eager raises its ``error_type``; torchfuse must raise it too.

    Returns ``skipped`` when eager itself does not raise (the error input does not apply)."""
    program = Program(op, error_input.sample_input)
    t0 = time.perf_counter()
    try:
        with time_limit(seconds), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                program.call(*program.copies(False)[: len(program.leaves)])
            except Exception as e:
                eager_error = type(e)
            else:
                return SampleOutcome("skipped", "eager does not raise")
            outcome = _check_raises(program.call, program.copies(False)[: len(program.leaves)], options,
                                    eager_error)
    except SampleTimeout as e:
        outcome = SampleOutcome("skipped", f"timeout ({e})")
    outcome.seconds = time.perf_counter() - t0
    return outcome
