"""The fusion-definition API: describe a fusion op by op, then run it on real tensors.

::

    from torchfuse.fusion import Fusion

    with Fusion("bias_gelu") as fd:
        x = fd.define_tensor([-1, -1], torch.float16)      # sizes bound at execution
        b = fd.define_tensor([1, -1], torch.float16)       # dim 0 is a broadcast dim
        fd.add_output(fd.ops.gelu(x + b))
    (y,) = fd.execute([x_data, b_data])                    # one kernel; new sizes reuse it

A :class:`Fusion` records IR values and registry nodes (:mod:`torchfuse.ir.graph`) as the ops
are applied, checking each when it is applied (:mod:`torchfuse.fusion.apply`). Executing it
builds the IR graph for the inputs' device, segments it into fusion groups (ideally one) and
runs it with the same runtime, schedulers and kernel cache as ``torch.compile(...,
backend="torchfuse")`` (:mod:`torchfuse.fusion.program`).
"""
from __future__ import annotations

import copy
import threading
import warnings
from typing import Any, Callable, Sequence

import sympy
import torch

from ..backend import resolve_options
from ..ir.graph import Graph, Node, TensorMeta, Value
from ..runtime.warn import user_stacklevel
from .apply import Applier, describe
from .concat import compute_in_stacked_domain
from .errors import DefinitionError, fail
from .inputs import SCALAR_TYPES, Binder, InputSpec, canonical_shapes, declare_scalar, declare_tensor
from .ops import Ops
from .program import Program, SizeOf, build_graph
from .reference import run_reference
from .sizes import SizeTable
from .tensor import FusionScalar, FusionTensor


class Fusion:
    """A fusion definition, and the programs compiled from it (one per device).

    Use it as a context manager (leaving the block finishes the definition) or call
    :meth:`finish`; :meth:`execute` finishes it too.

    Attributes:
        name: used in kernel names and messages.
        options: compiler options (:class:`torchfuse.Options`).
        ops: the op namespace (:class:`torchfuse.fusion.ops.Ops`).
        sizes: the size symbols and their unification (:class:`SizeTable`).
        inputs, specs: the declared inputs' IR values and declarations, in order.
        nodes: the recorded IR nodes, in order.
        outputs: the values marked as outputs, in order.
        autograd_reference: the program as eager's autograd sees it, for a derived backward:
            a function of the declared inputs returning the outputs in order, whose ATen ops
            are undecomposed, so that their derivatives are ATen's formulas
            (``softplus_backward``), not those of the decomposition's parts (whose untaken
            branches give NaN). ``@fused`` sets it to the function's trace without
            decompositions; ``None`` (the default) differentiates the recorded nodes.
        gradient_inputs: per output, the positions of the inputs it passes a gradient to, where
            the function stops some (``detach()``, ``torch.no_grad()``: ``@fused`` sets it from
            that trace; an output with none does not require grad); ``None`` (the default): every
            input an output is computed from.
        stacked: ``(result, select, dim)`` of each ``fd.ops.cat`` (:mod:`.concat`).
        views_of: input position -> the position of the input it is a view of, for inputs
            the caller takes as views of another (``@fused``'s argument slices); a derived
            backward through ``autograd_reference`` gives their gradient to that input.
        backward_refusal: why no backward can be derived (``@fused`` of a function reading
            ``.data``), raised as a :class:`DefinitionError` by a backward call; ``None``: it can.
    """

    def __init__(self, name: str = "fusion", *, options: Any = None, **option_overrides):
        self.name = name
        self.options = resolve_options(options, **option_overrides)
        self.sizes = SizeTable()
        self.inputs: list[Value] = []
        self.specs: list[InputSpec] = []
        self.nodes: list[Node] = []
        self.outputs: list[Value] = []
        self.autograd_reference: Callable | None = None
        self.gradient_inputs: list[set[int]] | None = None
        self.backward_refusal: str | None = None
        self.ops = Ops(self)
        self.applier = Applier(self)
        self.finished = False
        self.shapes: list = []  # canonical declared sizes per input, once finished
        self.bind: Binder | None = None  # checks a call's inputs against them (inputs.Binder), once finished
        self._programs: dict[tuple, Program] = {}
        self._size_values: dict = {}
        self._names: set[str] = set()
        self._count = 0
        self._warned_cpu = False
        #: ``(op, sizes)`` of each reduction with no identity (``amax``, ``argmax``...): the sizes
        #: of its reduced dims, which must not be 0 at execution
        self.reduced_sizes: list[tuple[str, list]] = []
        self._reduced_canonical: list | None = None
        #: ``(merged, stacked, dim)`` of each ``fd.ops.cat``: its result, the select over the
        #: stacked shape it reshapes, and the concatenated dim (:mod:`.concat`)
        self.stacked: list[tuple[Value, Value, int]] = []
        #: input position -> position of the input it is a view of, for inputs a caller takes
        #: as views of another (``@fused``'s slices of an argument); see :class:`FusionOp`
        self.views_of: dict[int, int] = {}

    # ------------------------------------------------------------------ definition
    def __enter__(self) -> "Fusion":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.finish()

    def _name(self, name: str | None, prefix: str) -> str:
        if name is None:
            while f"{prefix}{self._count}" in self._names:
                self._count += 1
            name = f"{prefix}{self._count}"
            self._count += 1
        elif name in self._names:
            raise DefinitionError(f"name {name!r} is used twice in fusion {self.name!r}")
        self._names.add(name)
        return name

    def new_value(self, meta: TensorMeta | None, example: Any = None, name: str | None = None) -> Value:
        return Value(self._name(name, "t"), meta=meta, example=example)

    def check_open(self, op: str) -> None:
        """Raise :class:`DefinitionError` when the fusion is finished (an op on one of its
        values after its ``with`` block, or in another fusion's)."""
        if self.finished:
            fail(op, f"fusion {self.name!r} is finished; define another Fusion to add ops (a value of one "
                     "fusion cannot be used in another: declare it as an input there)")

    def define_tensor(self, shape: Sequence, dtype: torch.dtype = torch.float32, *, contiguity=None,
                      dim_order: Sequence[int] | None = None, name: str | None = None) -> FusionTensor:
        """Declare a tensor input (the next positional input of :meth:`execute`).

        Args:
            shape: one entry per dim: ``-1`` (a size bound at execution), a name such as
                ``"N"`` (a size shared by every dim of that name), ``1`` (a broadcast dim), an
                int > 1 (a static size), or a size from another input's ``.shape``.
            dtype: element type (any dtype kernels load: float64/32/16, bfloat16, ints, bool).
            contiguity: ``None`` (any strides), ``True`` (dense), or one bool per dim (dense
                at that dim, nvFuser's contiguity); checked at execution.
            dim_order: dims from outermost to innermost (``torch.Tensor.dim_order``); default
                row-major.
            name: the input's name in messages (default ``t<k>``).

        Raises:
            DefinitionTypeError: a dtype kernels do not load.
            DefinitionError: a malformed declaration.
        """
        self.check_open("define_tensor")
        name = self._name(name, "t")
        spec, meta = declare_tensor(self.sizes, name, shape, dtype, contiguity, dim_order)
        v = Value(name, meta=meta)
        self.inputs.append(v)
        self.specs.append(spec)
        return FusionTensor(self, v)

    def define_scalar(self, dtype: Any = float, *, name: str | None = None) -> FusionScalar:
        """Declare a number input (``float``, ``int`` or ``bool``), passed to kernels at each
        execution: changing it recompiles nothing."""
        self.check_open("define_scalar")
        name = self._name(name, "c")
        spec = declare_scalar(name, dtype)
        v = Value(name, meta=None, example=SCALAR_TYPES[spec.dtype])
        self.inputs.append(v)
        self.specs.append(spec)
        return FusionScalar(self, v)

    def size_value(self, expr: Any) -> Value:
        """The runtime scalar for a size used as an operand (``x / x.shape[1]``)."""
        key = sympy.sympify(expr)
        if key not in self._size_values:
            out = Value(self._name(None, "n"), meta=None, example=self.sizes.representative(key))
            node = Node(op=None, inputs=[], attrs={}, outputs=[out], target=SizeOf(key), reason="size")
            out.producer = node
            self.nodes.append(node)
            self._size_values[key] = out
        return self._size_values[key]

    def add_output(self, t: FusionTensor) -> None:
        """Mark ``t`` as an output (outputs are returned in the order they are added).

        Raises:
            DefinitionError: ``t`` is not a tensor of this fusion, is an input, or is not
                computed from any input.
        """
        op = "add_output"
        self.check_open(op)
        if not isinstance(t, FusionTensor):
            fail(op, f"output ({describe(t)}) is not a tensor of the fusion", type_error=True)
        if t.fusion is not self:
            fail(op, f"output ({describe(t)}) belongs to another fusion")
        if t.value.producer is None:
            fail(op, f"output ({describe(t)}) is an input, not computed from the inputs")
        if not self._reaches_input(t.value):
            fail(op, f"output ({describe(t)}) is not computed from any input: its sizes and values are "
                     "fixed at definition")
        self.outputs.append(t.value)

    def _reaches_input(self, v: Value) -> bool:
        inputs = set(self.inputs)
        stack, seen = [v], set()
        while stack:
            x = stack.pop()
            if x in inputs:
                return True
            if x in seen or x.producer is None:
                continue
            seen.add(x)
            node = x.producer
            stack += node.input_values() + [a for a in _values((node.args, node.kwargs))]
        return False

    def finish(self) -> "Fusion":
        """End the definition.

        Raises:
            DefinitionError: no output was added.
        """
        if not self.finished:
            if not self.outputs:
                raise DefinitionError(f"fusion {self.name!r} has no outputs; mark them with add_output")
            compute_in_stacked_domain(self)  # a concatenation's readers in its kernel
            self.finished = True
            self.shapes = canonical_shapes(self.specs, self.sizes)
            self.bind = Binder(self.specs, self.shapes)
        return self

    # ------------------------------------------------------------------ running
    def execute(self, inputs: Sequence) -> list[torch.Tensor]:
        """Run the fusion on real inputs (tensors and numbers, in declaration order).

        The first execution on a device builds the program (IR graph, segmentation); the
        first with new sizes plans launches, generating kernels only where the code differs
        (sizes are runtime arguments). CPU tensors run the kernels through Triton's
        interpreter when ``options.interpret`` is set, else op by op through ATen.

        Returns:
            the outputs, in the order they were added.

        Raises:
            TypeError, ValueError: an input does not match its declaration; TypeError also
                for a single tensor in place of the list of inputs.
        """
        self.finish()
        if isinstance(inputs, torch.Tensor):  # iterating it would bind its rows as the inputs
            raise TypeError(f"fusion {self.name!r}: execute takes a list of its {len(self.specs)} inputs, "
                            f"got one tensor (write execute([t]))")
        device, sizes = self.bind(inputs)
        self.check_reduced_sizes(sizes)
        if self.runs_op_by_op(device):
            self.warn_op_by_op()
            return self.reference(inputs)
        return self.program(device)(list(inputs))

    def check_reduced_sizes(self, sizes: dict, where: str = "execute") -> None:
        """Raise eager's error where a reduction with no identity (``amax``, ``amin``,
        ``argmax``, ``argmin``) reduces a dim of size 0 for the sizes ``sizes`` (root size
        symbol -> int, from :func:`~torchfuse.fusion.inputs.bind`).

        Raises:
            IndexError: as eager's reductions raise (a kernel would return -inf or an index).
        """
        if self._reduced_canonical is None:  # (the definition is finished: its sizes are unified)
            self._reduced_canonical = [(op, self.sizes.find(s)) for op, dims in self.reduced_sizes for s in dims]
        for op, size in self._reduced_canonical:
            value = size if isinstance(size, int) else sizes.get(size) if isinstance(size, sympy.Symbol) else \
                size.xreplace(sizes)
            if value == 0:
                raise IndexError(f"{where}: {op}() over a dim of size 0: the reduction has no identity "
                                 f"(fusion {self.name!r})")

    def runs_op_by_op(self, device: torch.device) -> bool:
        """Whether the fusion runs op by op through ATen on ``device`` (CPU tensors without
        ``options.interpret``) rather than as its kernels."""
        return device.type == "cpu" and not self.options.interpret

    def warn_op_by_op(self) -> None:
        """Warn, the first time only, that the fusion runs op by op, at the user's line."""
        if not self._warned_cpu:
            warnings.warn(f"torchfuse: fusion {self.name!r} runs op by op on CPU tensors; set "
                          "TORCHFUSE_INTERPRET=1 (or pass interpret=True) to run its kernels in "
                          "Triton's interpreter", RuntimeWarning, stacklevel=user_stacklevel())
            self._warned_cpu = True

    __call__ = execute

    def reference(self, inputs: Sequence) -> list[torch.Tensor]:
        """The same computation op by op through ATen (eager PyTorch)."""
        return run_reference(self, inputs)

    def program(self, device: torch.device | str, extra_outputs: tuple = ()) -> Program:
        """The program for ``device`` (built on first use), returning the outputs followed by
        ``extra_outputs``."""
        self.finish()
        device = torch.device(device)
        if device.type == "cuda" and device.index is None:
            device = torch.device("cuda", torch.cuda.current_device())  # "cuda" and "cuda:0" are one device
        key = (device.type, device.index, tuple(v.name for v in extra_outputs))
        if key not in self._programs:
            self._programs[key] = Program(self.graph(device, extra_outputs), self.options, self.name)
        return self._programs[key]

    def graph(self, device: torch.device | str | None = None, extra_outputs: tuple = ()) -> Graph:
        """A fresh IR graph of the definition on ``device`` (default: :func:`default_device`)."""
        return build_graph(self, torch.device(device or default_device()), extra_outputs)

    def num_kernels(self, device: torch.device | str | None = None) -> int:
        """How many kernels (fusion groups) the fusion becomes on ``device`` (default:
        :func:`default_device`); anything else in it runs as ATen calls (see :meth:`explain`).
        On CPU without ``interpret`` these are the kernels the interpreter would run:
        :meth:`execute` then runs the fusion op by op."""
        return self.program(device or default_device()).num_kernels

    def explain(self, device: torch.device | str | None = None) -> str:
        """The segmentation on ``device`` (default: :func:`default_device`): each fusion group
        with its ops, and ATen calls with the reason they stayed outside a kernel."""
        return str(self.program(device or default_device()).segmentation)

    def as_op(self, backward: "Fusion | None" = None, name: str | None = None):
        """This fusion as a differentiable PyTorch operator, a single op inside
        ``torch.compile`` (:class:`torchfuse.fusion.autograd.FusionOp`); its backward is
        derived, or ``backward``."""
        from .autograd import FusionOp

        return FusionOp(self, backward, name)

    def __deepcopy__(self, memo: dict) -> "Fusion":
        """A finished fusion is immutable (its programs are caches), so a copy of a model holding
        one shares it; an open definition is copied value by value."""
        if self.finished:
            return self
        new = object.__new__(type(self))
        memo[id(self)] = new
        new.__dict__.update(copy.deepcopy(self.__dict__, memo))
        return new

    def __str__(self) -> str:
        return f"fusion {self.name}\n{self.graph('meta')}"

    def __repr__(self) -> str:
        state = "finished" if self.finished else "open"
        return f"<Fusion {self.name!r}: {len(self.inputs)} inputs, {len(self.nodes)} ops, {state}>"


def _tracing_lock():
    """The lock that :data:`TRACING` is: TorchDynamo's compile lock, an ``RLock`` (a private
    name of ``torch._dynamo.convert_frame``; a lock of this module's own where it is missing)."""
    try:
        from torch._dynamo.convert_frame import compile_lock
    except ImportError:
        compile_lock = None
    return compile_lock if compile_lock is not None else threading.RLock()


#: held around every ``make_fx`` trace of this package (a ``@fused`` function's first call with a
#: signature, a derived backward's first call): ``make_fx`` and FX keep the current tracer and
#: patcher in module globals, so two traces at once in two threads, or one beside TorchDynamo's
#: compile of a model (AOTAutograd traces with ``make_fx``), broke each other (``... is not
#: tracked with proxy``, ``CURRENT_PATCHER is None``). TorchDynamo holds the same lock while it
#: compiles; reentrant, so a trace that compiles or traces again in its thread goes on.
TRACING = _tracing_lock()


def default_device() -> str:
    """The device :meth:`Fusion.num_kernels` and :meth:`Fusion.explain` describe when given
    none: ``"cuda"`` when a CUDA device is available, else ``"cpu"``."""
    return "cuda" if torch.cuda.is_available() else "cpu"


def _values(obj: Any) -> list[Value]:
    if isinstance(obj, Value):
        return [obj]
    if isinstance(obj, (list, tuple)):
        return [v for o in obj for v in _values(o)]
    if isinstance(obj, dict):
        return [v for o in obj.values() for v in _values(o)]
    return []
