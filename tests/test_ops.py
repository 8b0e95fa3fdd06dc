"""Per-op tests generated from the op registry.

Every pointwise op of ``torchfuse.ir.ops.REGISTRY`` (``SPECS`` says how to call it) is run
over the dtypes eager PyTorch accepts for it (see ``input_dtypes``) in one compiled function
holding two independent fusion groups: the op alone, and the op between a producer and a
consumer (``consumer(op(producer(a), producer(b)))``), so that its emission is checked both on
loaded operands and on values held in registers. Results are compared with eager PyTorch on the
same inputs. Where the registry supports the op's compute dtype, the test also asserts that the
op was fused; where it does not, that the op ran through ATen with a reason. Float ops with
autograd are also differentiated (forward and backward graphs both compiled by torchfuse).
These hundreds of cases enter through ``torchfuse_backend`` (``run_traced``) rather than
TorchDynamo, at half the cost; the other files go through ``torchfuse.compile``.

The helpers at the top (``run_compiled``, ``assert_matches``...) are shared by the other test
files of this suite.
"""
from __future__ import annotations

import dataclasses
import zlib
from typing import Callable

import pytest
import torch

import torchfuse
from conftest import DEVICE
from torchfuse import backend
from torchfuse.ir import ops
from torchfuse.ir.graph_ops import FMA

aten = torch.ops.aten

# NumPy's floating-point warnings from kernels run by Triton's interpreter (0/0, overflow to
# inf) are the IEEE results the tests compare; they are not errors
pytestmark = pytest.mark.filterwarnings("ignore:.*encountered in:RuntimeWarning")

F16, BF16, F32, F64 = torch.float16, torch.bfloat16, torch.float32, torch.float64
I8, I16, I32, I64, U8, BOOL = torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8, torch.bool
#: Every dtype the registry can put in a kernel, in a stable order.
DTYPES = (F32, F16, BF16, F64, I8, I16, I32, I64, U8, BOOL)
FLOATS = (F32, F16, BF16, F64)


# ----------------------------------------------------------------------------- shared helpers

def tensor(data, dtype=None) -> torch.Tensor:
    """``torch.tensor`` on the test device (CUDA when present, else CPU and the interpreter)."""
    return torch.tensor(data, dtype=dtype, device=DEVICE)


def dtype_id(dt: torch.dtype) -> str:
    return str(dt).replace("torch.", "")


def run_compiled(fn: Callable, *args, **options):
    """Compile ``fn`` with torchfuse, call it once on ``args``.

    Returns:
        ``(result, graphs)``: what the compiled function returned, and the ``CompiledGraph``
        objects built for it (graphs with nothing to fuse are not recorded and not listed).
    """
    options.setdefault("interpret_integer_division", True)
    before = list(backend.RECENT)
    compiled = torchfuse.compile(fn, dynamic=False, **options)
    result = compiled(*args)
    graphs = [g for g in backend.RECENT if all(g is not b for b in before)]
    return result, graphs


def run_traced(fn: Callable, *args, calls: int = 1, earlier: list | None = None, **options):
    """Like :func:`run_compiled`, without TorchDynamo: ``fn`` is traced to ATen by ``make_fx``
    and handed to the torchfuse backend, which runs AOTAutograd (decomposition, and the joint
    forward-backward graph when ``args`` require grad) and the compiler, as it does for a graph
    Dynamo captured. Half the cost of a Dynamo compile, for the hundreds of registry cases.

    With ``calls`` above 1 the compiled function is called that many times on ``args`` (from
    the second call on, a compiled graph runs its generated function); the result returned is
    the last call's, and the earlier ones are appended to ``earlier``."""
    from torch.fx.experimental.proxy_tensor import make_fx

    options.setdefault("interpret_integer_division", True)
    before = list(backend.RECENT)
    single = isinstance(fn(*[a.detach() for a in args]), torch.Tensor)
    as_tuple = (lambda *a: (fn(*a),)) if single else (lambda *a: tuple(fn(*a)))
    gm = make_fx(as_tuple)(*[a.detach() for a in args])  # the backend takes tuple outputs
    compiled = backend.torchfuse_backend(gm, list(args), options=options)
    for k in range(calls):
        result = compiled(*args)
        result = result[0] if single else tuple(result)
        if k < calls - 1 and earlier is not None:
            earlier.append(result)
    graphs = [g for g in backend.RECENT if all(g is not b for b in before)]
    return result, graphs


def run_graph(fn: Callable, *args, **options):
    """Compile the ATen graph of ``fn`` as traced, without AOTAutograd's decomposition.

    For registry entries whose ATen ops PyTorch's decomposition table rewrites before they
    reach the registry (``aten.all``, ``aten.sum.default``, ``prims.broadcast_in_dim``): the
    graph goes straight to ``compile_graph``. Returns ``(result, graphs)`` as
    :func:`run_compiled`; ``result`` is a tuple.
    """
    from torch.fx.experimental.proxy_tensor import make_fx

    from torchfuse.config import Options

    options.setdefault("interpret_integer_division", True)
    before = list(backend.RECENT)
    gm = make_fx(lambda *a: tuple(fn(*a)), tracing_mode="fake")(*args)
    compiled = backend.compile_graph(gm, list(args), Options.from_env(**options))
    result = tuple(compiled(list(args)))
    return result, [g for g in backend.RECENT if all(g is not b for b in before)]


def schedulers_used(graphs) -> set[str]:
    """The scheduler kinds (``pointwise``, ``reduction.persistent``...) that ran in ``graphs``."""
    return {plan.config.scheduler for cg in graphs for step in cg.steps if hasattr(step, "plans")
            for plan in step.plans.values()}


def fused_ops(graphs) -> list[list[str]]:
    """The registry op names of each fusion group of ``graphs``."""
    return [[n.op for n in g.nodes] for cg in graphs for g in cg.segmentation.groups]


def aten_calls(graphs) -> list:
    """Call nodes of ``graphs`` that run a registry op through ATen (views, and ops with empty
    results, which have nothing to compute, excluded)."""
    from torchfuse.ir.from_fx import ZERO_SIZE_REASON

    return [c for cg in graphs for c in cg.segmentation.calls
            if ops.lookup(c.target) is not None and not c.reason.startswith("view") and c.reason != ZERO_SIZE_REASON]


def assert_all_fused(graphs, *, groups: int | None = None) -> None:
    """No registry op was left on ATen, no group fell back, and (optionally) the group count."""
    assert graphs, "nothing was fused (no compiled graph)"
    left = aten_calls(graphs)
    assert not left, "left on ATen: " + "; ".join(f"{c.target} ({c.reason})" for c in left)
    assert all(cg.stats["fallbacks"] == 0 for cg in graphs)
    if groups is not None:
        assert len(fused_ops(graphs)) == groups, fused_ops(graphs)


def tolerance(dtype: torch.dtype) -> dict:
    """fp32: 1e-5 relative (the suite's target); others: ``assert_close``'s defaults."""
    if dtype == F32:
        return {"rtol": 1e-5, "atol": 1e-6}
    return {}


def assert_matches(actual, expected, *, exact: bool = False, **tol) -> None:
    """``actual`` equals eager's ``expected``: dtype, shape and values; NaN where eager has NaN.

    With ``exact``, floats must be bitwise equal except NaN payloads, so the sign of zero counts.
    Nested tuples and lists are compared element by element.
    """
    if isinstance(expected, (tuple, list)):
        assert isinstance(actual, (tuple, list)) and len(actual) == len(expected)
        for a, e in zip(actual, expected):
            assert_matches(a, e, exact=exact, **tol)
        return
    assert actual.dtype == expected.dtype, (actual.dtype, expected.dtype)
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    if exact or not expected.dtype.is_floating_point:
        if expected.dtype.is_floating_point:
            assert torch.equal(actual.isnan(), expected.isnan()), (actual, expected)
            keep = ~expected.isnan()
            assert torch.equal(actual[keep], expected[keep]), (actual, expected)
            assert torch.equal(actual[keep].signbit(), expected[keep].signbit()), (actual, expected)
        else:
            assert torch.equal(actual, expected), (actual, expected)
        return
    tol = tol or tolerance(expected.dtype)
    torch.testing.assert_close(actual, expected, equal_nan=True, **tol)


# ----------------------------------------------------------------------------- sample inputs

SHAPE = (4, 37)  # not a power of two: the last program is partly masked
FLOAT_SPECIALS = [float("nan"), float("inf"), float("-inf"), -0.0, 0.0, 0.5, -0.5, 1.5, -1.5, 2.5,
                  -2.5, 1.0, -1.0, 1e-30, -3e4, 7e4]


def make_sample(dtype: torch.dtype, seed: int, *, domain=None, nonzero=False, no_min=False,
                specials=True, shape=SHAPE) -> torch.Tensor:
    """A deterministic test tensor of ``dtype``.

    Floats are uniform over ``domain`` (default ``[-4, 4]``), with NaN, infinities, signed
    zeros, halves and values that overflow fp16 in the first row when ``specials``. Integers
    mix small values with values across the dtype's whole range. ``nonzero`` replaces zeros by
    ones (integer divisors); ``no_min`` replaces the dtype's minimum (``INT_MIN // -1``).
    Drawn on the CPU (the same values everywhere), returned on the test device.
    """
    return _draw_sample(dtype, seed, domain, nonzero, no_min, specials, shape).to(DEVICE)


def _draw_sample(dtype, seed, domain, nonzero, no_min, specials, shape) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    if dtype == BOOL:
        return torch.rand(shape, generator=g) < 0.5
    if dtype.is_floating_point:
        lo, hi = domain if domain is not None else (-4.0, 4.0)
        x = torch.rand(shape, generator=g, dtype=F64) * (hi - lo) + lo
        if specials and x.numel() >= len(FLOAT_SPECIALS):
            x.view(-1)[: len(FLOAT_SPECIALS)] = torch.tensor(FLOAT_SPECIALS, dtype=F64)
        x = x.to(dtype)
        if nonzero:
            x = torch.where(x == 0, torch.ones((), dtype=dtype), x)
        return x
    info = torch.iinfo(dtype)
    wide = torch.randint(info.min, info.max, shape, generator=g, dtype=I64)
    small = torch.randint(-9 if info.min < 0 else 0, 10, shape, generator=g)
    x = torch.where(torch.rand(shape, generator=g) < 0.5, small, wide).to(dtype)
    if x.numel() > 3 and info.min < 0:
        x.view(-1)[:3] = torch.tensor([info.max, -1, 0], dtype=dtype)
    if nonzero:
        x = torch.where(x == 0, torch.ones((), dtype=dtype), x)
    if no_min:
        x = torch.where(x == info.min, torch.full((), info.min + 1, dtype=dtype), x)
    return x


# ----------------------------------------------------------------------------- the op table

@dataclasses.dataclass(frozen=True)
class Spec:
    """How a registry op is tested.

    Attributes:
        op: the registry op this exercises.
        fn: the function run eagerly and compiled, over ``arity`` sample tensors.
        arity: number of tensor operands.
        divisor: the last operand must be nonzero and the first free of the integer minimum
            (integer division; eager traps on CPU otherwise).
        condition: the first operand is a bool condition (``where``).
        grad: test the backward for float inputs.
        domain: float sampling range when the op's own domain does not suit (``pow``).
        dtypes: restrict the input dtypes (``None``: every dtype eager accepts).
        scalars: the Python numbers ``fn`` passes as promoted operands (they take part in
            type promotion).
        specials: float samples include NaN, infinities and signed zeros.
    """

    op: str
    fn: Callable
    arity: int = 1
    divisor: bool = False
    condition: bool = False
    grad: bool = True
    domain: tuple | None = None
    dtypes: tuple | None = None
    scalars: tuple = ()
    specials: bool = True


def _cast(x):
    return x.to(F16 if x.dtype == F32 else F32)


def _copy(a, b):
    t = torch.empty_like(a)
    t.copy_(b)
    return t


SPECS: dict[str, Spec] = {
    "abs": Spec("abs", torch.abs), "neg": Spec("neg", torch.neg),
    "reciprocal": Spec("reciprocal", torch.reciprocal), "exp": Spec("exp", torch.exp),
    "exp2": Spec("exp2", torch.exp2), "expm1": Spec("expm1", torch.expm1), "log": Spec("log", torch.log),
    "log2": Spec("log2", torch.log2), "log10": Spec("log10", torch.log10), "log1p": Spec("log1p", torch.log1p),
    "sqrt": Spec("sqrt", torch.sqrt), "rsqrt": Spec("rsqrt", torch.rsqrt), "sin": Spec("sin", torch.sin),
    "cos": Spec("cos", torch.cos), "tan": Spec("tan", torch.tan), "asin": Spec("asin", torch.asin),
    "acos": Spec("acos", torch.acos), "atan": Spec("atan", torch.atan), "sinh": Spec("sinh", torch.sinh),
    "cosh": Spec("cosh", torch.cosh), "tanh": Spec("tanh", torch.tanh), "asinh": Spec("asinh", torch.asinh),
    "acosh": Spec("acosh", torch.acosh), "atanh": Spec("atanh", torch.atanh),
    "sigmoid": Spec("sigmoid", torch.sigmoid), "erf": Spec("erf", torch.erf), "erfc": Spec("erfc", torch.erfc),
    "erfinv": Spec("erfinv", torch.erfinv), "lgamma": Spec("lgamma", torch.lgamma),
    "floor": Spec("floor", torch.floor), "ceil": Spec("ceil", torch.ceil), "trunc": Spec("trunc", torch.trunc),
    "round": Spec("round", torch.round), "sign": Spec("sign", torch.sign), "relu": Spec("relu", torch.relu),
    "isnan": Spec("isnan", torch.isnan, grad=False), "isinf": Spec("isinf", torch.isinf, grad=False),
    "logical_not": Spec("logical_not", torch.logical_not, grad=False),
    "bitwise_not": Spec("bitwise_not", torch.bitwise_not, grad=False),
    "add": Spec("add", torch.add, 2),
    # fp16/bf16 excluded: eager on CPU rounds alpha * b to the tensor dtype before adding (CUDA
    # does not); test_semantics checks that case against an exact reference
    "add_alpha": Spec("add", lambda a, b: torch.add(a, b, alpha=3), 2, dtypes=(F32, F64, I8, I64, U8)),
    "add_scalar": Spec("add", lambda a: a + 3, dtypes=(F32, BF16, I8, U8, BOOL), scalars=(3,)),
    "sub": Spec("sub", torch.sub, 2), "mul": Spec("mul", torch.mul, 2),
    "div": Spec("div", torch.div, 2),
    "div_floor": Spec("div", lambda a, b: torch.div(a, b, rounding_mode="floor"), 2, divisor=True),
    "div_trunc": Spec("div", lambda a, b: torch.div(a, b, rounding_mode="trunc"), 2, divisor=True),
    # prims.div is what decompositions emit; it takes numbers, not bools
    "true_divide": Spec("true_divide", lambda a, b: torch.ops.prims.div(a, b), 2, divisor=True, grad=False,
                        dtypes=DTYPES[:-1]),
    "remainder": Spec("remainder", torch.remainder, 2, divisor=True),
    "fmod": Spec("fmod", torch.fmod, 2, divisor=True),
    "pow": Spec("pow", torch.pow, 2, domain=(0.1, 4)),
    "pow_square": Spec("pow", lambda a: a ** 2, scalars=(2,)),
    # x ** 0.5 is sqrt, as on CUDA; eager on CPU differs for -inf on fp16/bf16 (test_semantics)
    "pow_sqrt": Spec("pow", lambda a: a ** 0.5, domain=(0, 100), scalars=(0.5,), specials=False),
    # 1.75 is exact in fp16 and bf16: eager on CPU rounds the exponent to the tensor dtype
    "pow_general": Spec("pow", lambda a: a ** 1.75, domain=(0.1, 4), scalars=(1.75,)),
    "maximum": Spec("maximum", torch.maximum, 2), "minimum": Spec("minimum", torch.minimum, 2),
    "fmax": Spec("fmax", torch.fmax, 2), "fmin": Spec("fmin", torch.fmin, 2),
    "atan2": Spec("atan2", torch.atan2, 2), "hypot": Spec("hypot", torch.hypot, 2),
    "copysign": Spec("copysign", torch.copysign, 2),
    "eq": Spec("eq", torch.eq, 2, grad=False), "ne": Spec("ne", torch.ne, 2, grad=False),
    "lt": Spec("lt", torch.lt, 2, grad=False), "le": Spec("le", torch.le, 2, grad=False),
    "gt": Spec("gt", torch.gt, 2, grad=False), "ge": Spec("ge", torch.ge, 2, grad=False),
    "logical_and": Spec("logical_and", torch.logical_and, 2, grad=False),
    "logical_or": Spec("logical_or", torch.logical_or, 2, grad=False),
    "logical_xor": Spec("logical_xor", torch.logical_xor, 2, grad=False),
    "bitwise_and": Spec("bitwise_and", torch.bitwise_and, 2, grad=False),
    "bitwise_or": Spec("bitwise_or", torch.bitwise_or, 2, grad=False),
    "bitwise_xor": Spec("bitwise_xor", torch.bitwise_xor, 2, grad=False),
    "where": Spec("where", torch.where, 3, condition=True),
    "clamp": Spec("clamp", torch.clamp, 3),
    "fma": Spec("fma", FMA, 3, grad=False),  # (no autograd formula: decompositions write it)
    "clamp_scalar": Spec("clamp", lambda x: torch.clamp(x, -1, 2), scalars=(-1, 2)),
    "cast": Spec("cast", _cast), "clone": Spec("clone", torch.clone), "copy": Spec("copy", _copy, 2),
}


def _seed(*parts) -> int:
    return zlib.crc32("/".join(map(str, parts)).encode())


def sample_inputs(name: str, dtype: torch.dtype, *, specials=True, shape=SHAPE) -> list[torch.Tensor]:
    spec = SPECS[name]
    specials = specials and spec.specials
    opdef = ops.REGISTRY[spec.op]
    domain = spec.domain or opdef.domain
    xs = []
    for i in range(spec.arity):
        dt = BOOL if spec.condition and i == 0 else dtype
        last = i == spec.arity - 1
        xs.append(make_sample(dt, _seed(name, dtype, i), domain=domain, specials=specials, shape=shape,
                              nonzero=spec.divisor and last, no_min=spec.divisor and i == 0))
    if name == "clamp" and dtype != BOOL:  # bounds that do not cross, mostly
        lo, hi = torch.minimum(xs[1], xs[2]), torch.maximum(xs[1], xs[2])
        xs[1:] = [lo, hi]
    return xs


def _eager_accepts(name: str, dtype: torch.dtype) -> bool:
    spec = SPECS[name]
    if spec.dtypes is not None and dtype not in spec.dtypes:
        return False
    try:
        spec.fn(*sample_inputs(name, dtype, shape=(2,)))
    except (RuntimeError, NotImplementedError, TypeError):
        return False
    return True


def expected_fused(name: str, dtype: torch.dtype) -> bool:
    """Whether the registry claims support for ``name`` on inputs of ``dtype``."""
    spec = SPECS[name]
    opdef = ops.REGISTRY[spec.op]
    samples = sample_inputs(name, dtype, shape=(2,))
    out = spec.fn(*samples)
    if opdef.promotion is None:
        return out.dtype in opdef.dtypes
    attrs = {"rounding_mode": "x"} if name in ("div_floor", "div_trunc") else {}
    operands = list(samples) + list(spec.scalars)
    compute = ops.compute_dtype_for_promotion(opdef, attrs, operands)
    return compute in opdef.dtypes


def input_dtypes(name: str) -> tuple:
    """The dtypes ``name`` is tested on.

    Every kernel dtype, except: int16 (its code paths are int8's and int32's; test_semantics
    covers its promotion), and for float-only ops (integers promote to float32 before the op),
    only int64 and bool among the non-float inputs. Combinations eager rejects are dropped.
    """
    spec = SPECS[name]
    if spec.dtypes is not None:
        candidates = spec.dtypes
    elif ops.REGISTRY[spec.op].dtypes <= set(FLOATS):
        candidates = FLOATS + (I64, BOOL)
    else:
        candidates = tuple(d for d in DTYPES if d != I16)
    return tuple(d for d in candidates if _eager_accepts(name, d))


CASES = [(name, dt) for name in SPECS for dt in input_dtypes(name)]


def _producer(x):
    return x * True if x.dtype == BOOL else x * 1


def _consumer(r):
    if r.dtype == BOOL:
        return r ^ True
    return r + (1.25 if r.dtype.is_floating_point else 3)


def alone_and_chained(spec: Spec) -> Callable:
    """``f(*a, *b) = (op(*a), consumer(op(*producer(b))))``: two independent fusion groups."""

    def f(*args):
        a, b = args[: spec.arity], args[spec.arity:]
        return spec.fn(*a), _consumer(spec.fn(*[_producer(y) for y in b]))

    return f


def groups_of(graph, values) -> list:
    """For each IR value: ``(producing node, runner of the fusion group holding it or None)``."""
    runners = {id(n): step for step in graph.steps if hasattr(step, "group") for n in step.group.nodes}
    return [(v.producer, runners.get(id(v.producer))) for v in values]


def _case_inputs(name: str, dtype: torch.dtype) -> list[torch.Tensor]:
    xs = sample_inputs(name, dtype)
    return xs + [x.clone() for x in xs]


def with_ids(cases) -> list:
    return [pytest.param(name, dt, id=f"{name}-{dtype_id(dt)}") for name, dt in cases]


@pytest.mark.parametrize("name,dtype", with_ids(CASES))
def test_op_forward(name, dtype):
    """The op alone and inside a chain equal eager; it is fused wherever the registry says so."""
    spec = SPECS[name]
    inputs = _case_inputs(name, dtype)
    expected = alone_and_chained(spec)(*inputs)
    actual, graphs = run_traced(alone_and_chained(spec), *inputs)
    assert_matches(actual, expected)
    assert len(graphs) == 1, f"{len(graphs)} compiled graphs"
    graph = graphs[0]
    outputs = list(graph.segmentation.graph.outputs)
    (alone, alone_runner), (chain, chain_runner) = groups_of(graph, outputs)
    if expected_fused(name, dtype):
        assert alone.op == spec.op and alone_runner is not None, f"{spec.op} not fused: {alone!r}"
        assert [n.op for n in alone_runner.group.nodes if ops.REGISTRY[n.op].kind != "layout"] == [spec.op]
        assert chain_runner is not None, f"chain not fused: {chain!r}"
        chain_ops = [n.op for n in chain_runner.group.nodes]
        assert spec.op in chain_ops and len(chain_ops) >= 3, chain_ops
        assert graph.stats["fallbacks"] == 0
    else:
        assert alone.is_call and ops.lookup(alone.target) is ops.REGISTRY[spec.op], repr(alone)
        assert alone.reason and "not in the op registry" not in alone.reason, alone.reason


GRAD_CASES = [name for name, spec in SPECS.items() if spec.grad and _eager_accepts(name, F32)]
GRAD_DTYPES = {"sin": (F32, F16, BF16), "mul": (F32, BF16), "where": (F32, F16), "sigmoid": (F32, BF16)}


@pytest.mark.parametrize("name,dtype", with_ids([(n, d) for n in GRAD_CASES for d in GRAD_DTYPES.get(n, (F32,))]))
def test_op_backward(name, dtype):
    """Gradients of the compiled op equal eager's; forward and backward graphs both fuse."""
    spec = SPECS[name]
    xs = sample_inputs(name, dtype, specials=False)
    diff = [i for i, x in enumerate(xs) if x.dtype.is_floating_point]
    grad_out = make_sample(spec.fn(*xs).dtype, _seed(name, "grad"), specials=False)

    def grads(compile_it):
        leaves = [x.clone().requires_grad_(i in diff) for i, x in enumerate(xs)]
        before = list(backend.RECENT)
        out = run_traced(spec.fn, *leaves)[0] if compile_it else spec.fn(*leaves)
        gs = torch.autograd.grad(out, [leaves[i] for i in diff], grad_out, allow_unused=True)
        gs = [torch.zeros(()) if g is None else g for g in gs]  # copy's destination: no gradient
        return gs, [g for g in backend.RECENT if all(g is not b for b in before)]

    expected, _ = grads(False)
    actual, graphs = grads(True)
    assert_matches(actual, expected)
    names = {cg.name for cg in graphs}
    assert "forward" in names, names
    assert_all_fused(graphs)
