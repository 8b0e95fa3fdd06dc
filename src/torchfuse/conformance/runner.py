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

Values are compared with eager at the dtype's tolerance. Where they differ beyond it, the
program also runs in eager on the leaves converted to float64, and a value still passes when
it is no farther from that result than eager's value is, plus the tolerance: eager on a CPU
rounds some fp16/bf16 intermediates that PyTorch's CUDA kernels, which torchfuse follows, keep
in fp32 (``alpha * b`` in ``add``, the shifted logits of ``log_softmax``).

The program enters torchfuse the cheap way first: ``make_fx`` traces it to ATen with the real
inputs and :func:`torchfuse.backend.torchfuse_backend` runs AOTAutograd and the compiler on
that graph, as it does for a graph TorchDynamo captured. Programs ``make_fx`` or AOTAutograd
cannot trace whole (data-dependent output shapes, ``.item()``) go through ``torch.compile``
with the torchfuse backend instead, graph breaks and all; so does a program whose values
differ on make_fx's graph, and the mismatch counts only when it shows there too (make_fx traces
below autograd, which is not always the graph TorchDynamo gives), and a mismatch that ``torch.compile(backend="aot_eager")``, without
torchfuse, shows as well is ``skipped`` as PyTorch's own (complex ``linalg.pinv`` under any
dispatch mode, pytorch/pytorch#198118). Samples on which eager raises are
run through ``torch.compile`` as well, which must raise the same exception type (unless
TorchDynamo with its ``eager`` backend, without torchfuse, raises the same other type or does
not raise either: then the sample is ``skipped``).
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
from .compare import compare, compare_with_reference, same_exception  # noqa: F401  (the runner's comparisons)

#: The reason of an error input that does not apply (eager does not raise on it).
EAGER_DOES_NOT_RAISE = "eager does not raise"

#: Reasons of call nodes that are not work left on ATen.
_NOT_WORK = ("view (no data moves)", "tuple element", "module constant")


class SampleTimeout(BaseException):
    """A sample ran past its time limit (a ``BaseException`` so no compiler fallback catches it)."""


@dataclasses.dataclass
class SampleOutcome:
    """What one sample did.

    Attributes:
        status: ``pass`` (values match and a fusion group ran), ``aten`` (values match,
            everything ran through ATen), ``raises`` (eager raised, and torchfuse raised the
            same exception type), ``fail`` (mismatch, or an exception eager did not raise),
            or ``skipped`` (no verdict: timeout, or the program cannot be captured at all).
        reason: a one-line explanation (the mismatch, the exception, the ATen reasons).
        aten_reasons: ``"target: reason"`` of every call node left on ATen.
        backward: whether gradients were compared.
        seconds: wall time of the sample.
        by_reference: the values differ from eager beyond the tolerance, but no farther from
            the float64 result than eager's (:func:`compare_with_reference`).
    """

    status: str
    reason: str = ""
    aten_reasons: list[str] = dataclasses.field(default_factory=list)
    backward: bool = False
    seconds: float = 0.0
    by_reference: bool = False


# ----------------------------------------------------------------------------- inputs


def _copy_tensor(t: torch.Tensor, requires_grad: bool) -> torch.Tensor:
    """A copy with its own storage and exactly ``t``'s sizes, strides and storage offset
    (so non-contiguous, expanded and offset inputs stay what the sample made them); a sparse
    or otherwise non-strided tensor, which has no storage to copy, is cloned."""
    if t.layout != torch.strided:
        out = t.detach().clone()
        return out.requires_grad_(True) if requires_grad else out
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
        # the copies require grad where the leaves do: composite ops pick their graph by it
        # (embedding_bag records ``_embedding_bag_forward_only``, which has no derivative,
        # when no input requires grad), and that graph is then run on the leaves
        traced = [_copy_tensor(a, a.requires_grad) if isinstance(a, torch.Tensor) else a for a in args]
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


def _grad_outputs(outputs: Sequence[torch.Tensor], seed: int,
                  dtypes: Sequence[torch.dtype] | None = None) -> list[torch.Tensor]:
    """Random output gradients, drawn in ``dtypes`` (default: the outputs' own) and then
    converted to the outputs' dtypes (the float64 reference reuses the real run's values)."""
    g = torch.Generator().manual_seed(seed)
    dtypes = [o.dtype for o in outputs] if dtypes is None else dtypes
    return [torch.randn(o.shape, generator=g, dtype=torch.float64).to(dt).to(o.dtype).to(o.device)
            if not dt.is_complex else
            torch.randn(o.shape, generator=g, dtype=torch.complex128).to(dt).to(o.dtype).to(o.device)
            for o, dt in zip(outputs, dtypes)]


def _forward_and_grads(run: Callable, leaves: list[torch.Tensor], grad: bool, seed: int,
                       cotangent_dtypes: Sequence[torch.dtype] | None = None):
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
    if cotangent_dtypes is not None and len(cotangent_dtypes) != len(outs):
        raise ValueError("the float64 program has other differentiable outputs")
    grads = torch.autograd.grad(outs, inputs, _grad_outputs(outs, seed, cotangent_dtypes), allow_unused=True)
    return out, [torch.zeros(()) if g is None else g for g in grads]


def _differentiable_outputs(out: Any) -> list[torch.Tensor]:
    return [o for o in pytree.tree_leaves(out)
            if isinstance(o, torch.Tensor) and o.requires_grad and _differentiable(o)]


_WIDE = {torch.float16: torch.float64, torch.bfloat16: torch.float64, torch.float32: torch.float64,
         torch.complex32: torch.complex128, torch.complex64: torch.complex128}


def reference64(program: Program, fn: Callable, expected: Any, grad: bool, seed: int):
    """``(outputs, grads)`` of eager on the sample's leaves converted to float64 (complex128),
    with the real run's output gradients; ``None`` when no leaf is narrower, or when the
    program does not run that way (an op that insists on its operands' dtypes)."""
    if not any(t.dtype in _WIDE for t in program.leaves):
        return None
    leaves = []
    for t in program.copies(grad):
        wide = _WIDE.get(t.dtype)
        if wide is not None:
            with torch.no_grad():
                w = t.detach().to(wide)
            t = w.requires_grad_(t.requires_grad)
        leaves.append(t)
    dtypes = [o.dtype for o in _differentiable_outputs(expected)] if grad else None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return _forward_and_grads(lambda ls: fn(*ls), leaves, grad, seed, dtypes)
    except SampleTimeout:
        raise
    except Exception:
        return None


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
        messages = [str(w.message) for w in caught if str(w.message).startswith("torchfuse:")]
        # a graph AOTAutograd rejects (a data-dependent output shape, a sparse layout) runs
        # eagerly, by design (torchfuse.backend's warning)
        eager = [m for m in messages if "AOTAutograd rejected this graph" in m]
        failures = [m for m in messages if "could not" in m and m not in eager]
        if failures and outcome.status in ("pass", "aten"):
            outcome = SampleOutcome("fail", failures[0].splitlines()[0][:300], outcome.aten_reasons, grad)
        elif eager and outcome.status == "pass" and not outcome.aten_reasons:
            outcome = SampleOutcome("aten", eager[0].splitlines()[0][len("torchfuse: "):][:300], [], grad)
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
    reference: list = []  # [(outputs, grads)] of the float64 program, computed on a mismatch

    def exact() -> tuple[Any, Any] | None:
        if not reference:
            reference.append(reference64(program, fn, expected, grad and expected_grads is not None, seed))
        return reference[0]

    def judge(actual: Any, actual_grads: Any) -> tuple[str | None, bool]:
        """``(problem, by_reference)`` of one compiled run's outputs and gradients."""
        by_reference = False
        problem = compare(actual, expected, rtol, atol)
        if problem is not None and not _structural(problem) and exact() is not None:
            if compare_with_reference(actual, expected, exact()[0], rtol, atol) is None:
                problem, by_reference = None, True
        if problem is None and grad and expected_grads is not None:
            if actual_grads is None:
                return "no gradients", by_reference
            problem = compare(actual_grads, expected_grads, rtol, atol)
            if (problem is not None and not _structural(problem) and exact() is not None
                    and exact()[1] is not None
                    and compare_with_reference(actual_grads, expected_grads, exact()[1], rtol, atol) is None):
                problem, by_reference = None, True
            problem = None if problem is None else "gradient " + problem
        return problem, by_reference

    problem, by_reference = judge(actual, actual_grads)
    if problem is not None and via == "make_fx":
        # make_fx traces below autograd, which is not always the graph TorchDynamo gives: a
        # mismatch counts only when torch.compile, a user's path, shows it too
        retry = Capture()
        try:
            again = _forward_and_grads(lambda ls: run_dynamo(fn, ls, options), program.copies(grad), grad, seed)
        except SampleTimeout:
            raise
        except Exception:
            pass
        else:
            second, second_by_reference = judge(*again)
            if second is None:
                problem, by_reference, capture, via = None, second_by_reference, retry, "torch.compile"
    reasons = capture.aten_reasons()
    if problem is not None:
        # torch.compile without torchfuse (AOTAutograd's own eager backend) differing too is
        # PyTorch's bug, not torchfuse's: every graph runs under a dispatch mode there
        try:
            alone = _forward_and_grads(lambda ls: _aot_eager(fn, ls), program.copies(grad), grad, seed)
        except SampleTimeout:
            raise
        except Exception:
            alone = None
        if alone is not None and judge(*alone)[0] is not None:
            return SampleOutcome("skipped", f"torch.compile with backend='aot_eager' (no torchfuse) differs from "
                                            f"eager too: {problem}", reasons, grad)
        return SampleOutcome("fail", problem, reasons, grad)
    if capture.fused():
        note = "; differs from eager, no farther than eager from float64" if by_reference else ""
        return SampleOutcome("pass", f"fused (via {via}){note}", reasons, grad, by_reference=by_reference)
    if not reasons and via == "torch.compile":
        reasons = ["ran outside torchfuse's graphs (TorchDynamo graph break)"]
    shown = "; ".join(reasons[:3]) + (f"; and {len(reasons) - 3} more" if len(reasons) > 3 else "")
    return SampleOutcome("aten", shown or "nothing to compute (views only)", reasons, grad)


def _structural(problem: str) -> bool:
    """A mismatch of structure, dtype or shape (no float64 reference can excuse it)."""
    return "Tensor-likes are not close" not in problem and "Scalars are not close" not in problem


def _check_raises(fn: Callable, leaves: list, options: Options, error: type) -> SampleOutcome:
    """Through ``torch.compile`` with torchfuse, ``fn`` must raise eager's ``error``. Where it
    does not, and TorchDynamo with its ``eager`` backend (no torchfuse) does the same, the
    sample says nothing about torchfuse: ``skipped``."""
    spare = [_copy_tensor(t, False) if isinstance(t, torch.Tensor) else t for t in leaves]
    capture = Capture()
    try:
        run_dynamo(fn, leaves, options)
    except SampleTimeout:
        raise
    except Exception as e:
        if same_exception(e, error):
            return SampleOutcome("raises", f"raises {error.__name__} as eager", capture.aten_reasons())
        alone = _dynamo_alone(fn, spare)
        if alone is not None and type(alone) is type(e):
            return SampleOutcome("skipped", f"TorchDynamo alone raises {type(e).__name__} where eager raises "
                                 f"{error.__name__}")
        return SampleOutcome("fail", f"raised {type(e).__name__} where eager raises {error.__name__}: "
                             f"{_first_line(e)}", capture.aten_reasons())
    if _dynamo_alone(fn, spare) is None:
        return SampleOutcome("skipped", f"TorchDynamo alone does not raise eager's {error.__name__} either")
    return SampleOutcome("fail", f"did not raise eager's {error.__name__}", capture.aten_reasons())


def _aot_eager(fn: Callable, leaves: list) -> Any:
    """``fn`` on ``leaves`` through ``torch.compile(backend="aot_eager")``: TorchDynamo and
    AOTAutograd running the traced graph eagerly, without torchfuse."""
    import torch._dynamo

    torch._dynamo.reset()
    return torch.compile(fn, backend="aot_eager", dynamic=False)(*leaves)


def _dynamo_alone(fn: Callable, leaves: list) -> BaseException | None:
    """The exception ``torch.compile(fn, backend="eager")`` raises on ``leaves``, or ``None``."""
    import torch._dynamo

    torch._dynamo.reset()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.compile(fn, backend="eager", dynamic=False)(*leaves)
    except SampleTimeout:
        raise
    except Exception as e:
        return e
    return None


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
                return SampleOutcome("skipped", EAGER_DOES_NOT_RAISE)
            outcome = _check_raises(program.call, program.copies(False)[: len(program.leaves)], options,
                                    eager_error)
    except SampleTimeout as e:
        outcome = SampleOutcome("skipped", f"timeout ({e})")
    outcome.seconds = time.perf_counter() - t0
    return outcome
