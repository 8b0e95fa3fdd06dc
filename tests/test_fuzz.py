"""Differential fuzzing: random fusible programs, torchfuse against eager, forward and backward.

A hypothesis strategy (:func:`programs`) writes small programs, chains and DAGs over the
registry's op kinds: pointwise (unary, binary with broadcasting and type promotion, ``where``,
comparisons), reductions (``sum``, ``mean``, ``var``, ``amax``, ``argmax``, ``any``; with and
without ``keepdim``), pairs of a row reduction and column sums of one tensor (both returned:
the inner-outer kernel), layout ops (permute, transpose, unsqueeze, squeeze, expand, narrowing
and strided slices, reshape), and dtype conversions. Inputs take every kernel dtype, shapes
with sizes 0 and 1, and contiguous, transposed, channels-last, strided, offset (misaligned)
and expanded layouts, some with NaN, infinities, -0.0 and subnormals among their values.

Each program is Python source (:meth:`Program.source`), so a failing example, once
hypothesis has shrunk it, prints as a test to paste into ``test_fuzz_regressions.py``.

Ops whose result jumps with its input (``floor``, ``round``, ``sign``, comparisons,
``argmax``, casts to integers or bool) only take values computed exactly (by ops every
correct implementation rounds alike: add, sub, mul, neg, abs, max, min, casts, layout), so
that an ulp of difference in ``sin`` cannot flip a comparison and report a false mismatch.

CI runs a fixed number of examples, derandomized (the same programs every run). A longer run
(see the README's "Correctness checks") explores more programs::

    python -m pytest tests/test_fuzz.py --fuzz-examples 2000              # same seed, more programs
    python -m pytest tests/test_fuzz.py --fuzz-examples 2000 --fuzz-seed 7  # other programs
"""
from __future__ import annotations

import dataclasses
import math
from typing import Callable

import pytest
import torch
from hypothesis import HealthCheck, assume, given, note, seed, settings
from hypothesis import strategies as st

from conftest import DEVICE
from test_ops import run_traced

pytestmark = pytest.mark.filterwarnings("ignore:.*encountered in:RuntimeWarning")

F16, BF16, F32, F64 = torch.float16, torch.bfloat16, torch.float32, torch.float64
I8, I16, I32, I64, U8, BOOL = torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8, torch.bool
DTYPES = (F32, F16, BF16, F64, I8, I16, I32, I64, U8, BOOL)
LAYOUTS = ("contiguous", "transposed", "channels_last", "strided", "offset", "expanded")
SPECIALS = (float("nan"), float("inf"), float("-inf"), -0.0, 0.0, 1e-40, -3e-39, 6e4, -6e4, 1e30)


# ----------------------------------------------------------------------------- inputs

def make_input(shape: tuple, dtype: torch.dtype, layout: str = "contiguous", *, seed: int = 0,
               specials: bool = False, grad: bool = False) -> torch.Tensor:
    """A deterministic input of ``shape`` and ``dtype`` laid out as ``layout``.

    Layouts: ``contiguous``; ``transposed`` (all dims reversed in memory); ``channels_last``
    (rank 4; transposed otherwise); ``strided`` (every other element of the last dim);
    ``offset`` (contiguous strides, storage offset 1: misaligned for vector loads);
    ``expanded`` (the first dim longer than 1 has stride 0). Floats are uniform in [-2, 2]
    (with NaN, infinities, -0.0, subnormals and values that overflow fp16 when ``specials``);
    integers are small, bool is random. Drawn on the CPU, moved to the test device.
    """
    g = torch.Generator().manual_seed(seed)
    numel = math.prod(shape)

    def values(n: int) -> torch.Tensor:
        if dtype == BOOL:
            return torch.rand(n, generator=g) < 0.5
        if dtype.is_floating_point:
            x = torch.rand(n, generator=g, dtype=F64) * 4 - 2
            if specials and n:
                picks = torch.randint(0, len(SPECIALS), (n,), generator=g)
                use = torch.rand(n, generator=g) < 0.3
                x = torch.where(use, torch.tensor(SPECIALS, dtype=F64)[picks], x)
            return x.to(dtype)
        lo, hi = (0, 40) if dtype == U8 else (-20, 21)
        return torch.randint(lo, hi, (n,), generator=g).to(dtype)

    rank = len(shape)
    if layout == "transposed" and rank >= 2:
        t = values(numel).reshape(shape[::-1]).permute(*range(rank - 1, -1, -1))
    elif layout == "channels_last" and rank == 4:
        t = values(numel).reshape(shape).contiguous(memory_format=torch.channels_last)
    elif layout == "channels_last" and rank >= 2:
        t = values(numel).reshape(shape[::-1]).permute(*range(rank - 1, -1, -1))
    elif layout == "strided" and rank >= 1:
        wide = shape[:-1] + (shape[-1] * 2,)
        t = values(math.prod(wide)).reshape(wide)[..., ::2]
    elif layout == "offset":
        flat = values(numel + 1)
        t = flat[1:].reshape(shape) if numel else flat[1:1].reshape(shape)
    elif layout == "expanded" and any(s > 1 for s in shape):
        d = next(i for i, s in enumerate(shape) if s > 1)
        small = shape[:d] + (1,) + shape[d + 1:]
        t = values(math.prod(small)).reshape(small).expand(shape)
    else:
        t = values(numel).reshape(shape)
    t = _to_device(t)
    if grad:
        t.requires_grad_(True)
    return t


def _to_device(t: torch.Tensor) -> torch.Tensor:
    """``t`` on the test device with its strides and storage offset kept."""
    if DEVICE == "cpu":
        return t
    storage = t.untyped_storage()
    moved = torch.empty(0, dtype=t.dtype, device=DEVICE)
    dense = torch.empty(storage.nbytes() // t.element_size(), dtype=t.dtype)
    dense.untyped_storage().copy_(storage)
    return moved.set_(dense.to(DEVICE).untyped_storage(), t.storage_offset(), t.shape, t.stride())


# ----------------------------------------------------------------------------- programs

@dataclasses.dataclass(frozen=True)
class InputSpec:
    shape: tuple
    dtype: torch.dtype
    layout: str
    seed: int
    specials: bool
    grad: bool

    def source(self) -> str:
        return (f"make_input({self.shape!r}, torch.{str(self.dtype)[6:]}, {self.layout!r}, seed={self.seed}, "
                f"specials={self.specials}, grad={self.grad})")

    def make(self) -> torch.Tensor:
        return make_input(self.shape, self.dtype, self.layout, seed=self.seed, specials=self.specials,
                          grad=self.grad)


@dataclasses.dataclass(frozen=True)
class Program:
    """A straight-line program: ``lines`` assign ``v0, v1, ...``; ``outputs`` name values."""

    inputs: tuple[InputSpec, ...]
    lines: tuple[str, ...]
    outputs: tuple[str, ...]

    def source(self) -> str:
        args = ", ".join(f"x{i}" for i in range(len(self.inputs)))
        body = "\n".join(f"    {ln}" for ln in self.lines) or "    pass"
        return f"def program({args}):\n{body}\n    return ({', '.join(self.outputs)},)\n"

    def function(self) -> Callable:
        env = {"torch": torch}
        exec(self.source(), env)
        return env["program"]

    def test_source(self) -> str:
        """The program as a regression test for ``test_fuzz_regressions.py``."""
        ins = ",\n              ".join(s.source() for s in self.inputs)
        body = "\n".join("    " + ln for ln in self.source().splitlines())
        return f"def test_regression():\n{body}\n    check_program(program, [{ins}])\n"


@dataclasses.dataclass
class _Val:
    name: str
    meta: torch.Tensor  # a meta tensor with the value's shape and dtype
    exact: bool  # computed by ops that every correct implementation rounds alike
    finite: bool  # no NaN or infinity, magnitude below 2**20 (safe to cast to any integer)


def _is_float(v: _Val) -> bool:
    return v.meta.dtype.is_floating_point


UNARY = {
    # name: (template, applies to, exact-preserving, needs an exact operand)
    "neg": ("-{0}", lambda v: v.meta.dtype != BOOL, True, False),
    "abs": ("{0}.abs()", lambda v: v.meta.dtype != BOOL, True, False),
    "relu": ("torch.relu({0})", lambda v: v.meta.dtype != BOOL, True, False),
    "sin": ("torch.sin({0})", lambda v: True, False, False),
    "tanh": ("torch.tanh({0})", lambda v: True, False, False),
    "sigmoid": ("torch.sigmoid({0})", lambda v: True, False, False),
    "exp": ("torch.exp({0})", lambda v: v.finite, False, False),
    "sqrt": ("{0}.abs().sqrt()", lambda v: v.meta.dtype != BOOL, False, False),
    "log1p": ("torch.log1p({0}.abs())", lambda v: v.meta.dtype != BOOL, False, False),
    "floor": ("torch.floor({0})", lambda v: v.meta.dtype != BOOL, True, True),
    "round": ("torch.round({0})", lambda v: v.meta.dtype != BOOL, True, True),
    "sign": ("torch.sign({0})", lambda v: True, True, True),
    "isnan": ("torch.isnan({0})", lambda v: True, True, True),
    "logical_not": ("torch.logical_not({0})", lambda v: True, True, True),
    "bitwise_not": ("~{0}", lambda v: not _is_float(v), True, False),
    "square": ("{0} * {0}", lambda v: v.finite, True, False),
}
BINARY = {
    "add": ("{0} + {1}", True, False),
    "sub": ("{0} - {1}", True, False),
    "mul": ("{0} * {1}", True, False),
    "div": ("{0} / {1}", False, False),
    "maximum": ("torch.maximum({0}, {1})", True, False),
    "minimum": ("torch.minimum({0}, {1})", True, False),
    "where": ("torch.where({0} > {1}, {0}, {1})", True, True),
    "lt": ("{0} < {1}", True, True),
    "eq": ("{0} == {1}", True, True),
}
REDUCTIONS = {
    # name: (template, float only, exact for floats, needs nonempty reduced dims, one dim only, needs exact)
    "sum": ("{0}.sum(dim={d}, keepdim={k})", False, False, False, False, False),
    "mean": ("{0}.mean(dim={d}, keepdim={k})", True, False, False, False, False),
    "var": ("{0}.var(dim={d}, keepdim={k})", True, False, False, False, False),
    "amax": ("{0}.amax(dim={d}, keepdim={k})", False, True, True, False, False),
    "argmax": ("{0}.argmax(dim={d}, keepdim={k})", False, True, True, True, True),
    "any": ("{0}.any(dim={d}, keepdim={k})", False, True, False, False, True),
}
#: row reductions of the "pair" kind (each with column sums of the same tensor)
PAIR_ROWS = ("torch.softmax({0}, -1)", "{0}.var(-1)", "({0} - {0}.mean(-1, keepdim=True)) * 3",
             "{0}.sum(-1)")

#: reductions whose result is broadcast back over their input (softmax, normalizations):
#: name -> (template, exact for exact inputs)
NORMALIZE = {
    "center_max": ("({0} - {0}.amax(dim={d}, keepdim=True))", True),
    "fraction": ("({0} / {0}.sum(dim={d}, keepdim=True))", False),
    "standardize": ("(({0} - {0}.mean(dim={d}, keepdim=True)) * torch.rsqrt({0}.var(dim={d}, keepdim=True, "
                    "correction=0) + 1e-5))", False),
    "softmax": ("torch.softmax({0}, dim={d})", False),
    "log_softmax": ("torch.log_softmax({0}, dim={d})", False),
}
CAST_TARGETS = (F32, F16, BF16, F64, I32, I64, I8, BOOL)


def _meta_eval(expr: str, env: dict) -> torch.Tensor | None:
    try:
        out = eval(expr, {"torch": torch}, {k: v.meta for k, v in env.items()})
    except Exception:
        return None
    return out if isinstance(out, torch.Tensor) else None


@st.composite
def input_specs(draw, n: int) -> tuple[InputSpec, ...]:
    rank = draw(st.sampled_from((2, 3, 1, 4, 2, 3, 0)))
    sizes = st.sampled_from((1, 2, 3, 5, 7)) if draw(st.integers(0, 9)) else st.sampled_from((0, 1, 3))
    base = tuple(draw(sizes) for _ in range(rank))
    specials = draw(st.integers(0, 4)) == 0
    grad = draw(st.integers(0, 2)) == 0
    specs = []
    for i in range(n):
        shape = list(base)
        for d in range(rank):  # broadcast some dims
            if draw(st.integers(0, 5)) == 0:
                shape[d] = 1
        drop = draw(st.integers(0, rank)) if draw(st.integers(0, 4)) == 0 else 0
        shape = tuple(shape[drop:])
        dtype = draw(st.sampled_from(DTYPES))
        layout = draw(st.sampled_from(LAYOUTS))
        specs.append(InputSpec(shape, dtype, layout, seed=draw(st.integers(0, 999)), specials=specials,
                               grad=grad and dtype in (F32, F64)))
    return tuple(specs)


@st.composite
def programs(draw, max_steps: int = 7) -> Program:
    """A random program over 1-3 inputs (see the module doc)."""
    specs = draw(input_specs(draw(st.integers(1, 3))))
    vals: list[_Val] = []
    for i, s in enumerate(specs):
        meta = torch.empty_strided(s.shape, [1] * len(s.shape), dtype=s.dtype, device="meta")
        vals.append(_Val(f"x{i}", meta, exact=True, finite=not s.specials))
    lines: list[str] = []
    forced: list[str] = []  # results every program returns (both halves of a "pair")

    def append(expr: str, exact: bool, finite: bool) -> str | None:
        """Add ``name = expr`` when eager's meta evaluation accepts it; returns the name."""
        meta = _meta_eval(expr, {v.name: v for v in vals})
        if meta is None:
            return None
        name = f"v{len(lines)}"
        lines.append(f"{name} = {expr}")
        vals.append(_Val(name, meta, exact, finite))
        return name

    for _ in range(draw(st.integers(2, max_steps))):
        kind = draw(st.sampled_from(("unary", "binary", "binary", "reduction", "layout", "cast", "normalize",
                                     "pair")))
        a = draw(st.sampled_from(vals))
        expr, exact, finite = None, a.exact, a.finite
        if kind == "pair" and a.meta.dim() >= 2 and _is_float(a):
            # a row reduction and column sums of the same tensor, both returned: the segmenter
            # can run them as one inner-outer kernel
            rank = a.meta.dim()
            row = draw(st.sampled_from(PAIR_ROWS)).format(a.name)
            cols = tuple(range(rank - 1))
            col = f"({a.name} * {draw(st.sampled_from(('2', a.name)))}).sum({cols})"
            for e in (row, col):
                name = append(e, False, False)
                if name is None:
                    break
                forced.append(name)
            continue
        if kind == "unary":
            name = draw(st.sampled_from(sorted(UNARY)))
            template, applies, keeps, needs_exact = UNARY[name]
            if applies(a) and (a.exact or not needs_exact):
                expr = template.format(a.name)
                exact = a.exact and (keeps or not _is_float(a))
                finite = a.finite and name not in ("exp", "square")
        elif kind == "binary":
            name = draw(st.sampled_from(sorted(BINARY)))
            template, keeps, needs_exact = BINARY[name]
            b = draw(st.sampled_from(vals))
            if draw(st.integers(0, 4)) == 0:
                b = _Val(repr(draw(st.sampled_from((2, -1, 0.5, 3.25, True)))), torch.empty((), device="meta"),
                         True, True)
            if (a.exact and b.exact) or not needs_exact:
                if name == "sub" and BOOL in (a.meta.dtype, b.meta.dtype):
                    name, template = "add", BINARY["add"][0]
                if template is not None:
                    expr = template.format(a.name, b.name)
                    out_float = torch.result_type(a.meta, b.meta).is_floating_point if b.name[0] in "xv" else True
                    exact = a.exact and b.exact and (keeps or not out_float)
                    finite = a.finite and b.finite and name not in ("mul", "div")
        elif kind == "reduction" and a.meta.dim() > 0:
            name = draw(st.sampled_from(sorted(REDUCTIONS)))
            template, float_only, exact_float, nonempty, one_dim, needs_exact = REDUCTIONS[name]
            rank = a.meta.dim()
            if one_dim:
                dims = (draw(st.integers(0, rank - 1)),)
            else:
                dims = tuple(sorted(set(draw(st.lists(st.integers(0, rank - 1), min_size=1, max_size=rank)))))
            reduced = math.prod(a.meta.shape[d] for d in dims)
            ok = (not float_only or _is_float(a)) and (a.exact or not needs_exact)
            ok = ok and not (nonempty and (reduced == 0 or a.meta.numel() == 0))
            ok = ok and not (name in ("amax", "argmax") and a.meta.dtype == BOOL)
            if ok:
                d = dims[0] if one_dim else dims
                expr = template.format(a.name, d=d, k=draw(st.booleans()))
                exact = a.exact and (exact_float or not _is_float(a))
                finite = a.finite and name not in ("sum", "var", "mean")
        elif kind == "normalize" and a.meta.dim() > 0 and _is_float(a):
            name = draw(st.sampled_from(sorted(NORMALIZE)))
            template, keeps = NORMALIZE[name]
            d = draw(st.integers(-1, a.meta.dim() - 1))
            if name != "center_max" or a.meta.shape[d] > 0:
                expr = template.format(a.name, d=d)
                exact = a.exact and keeps
                finite = False
        elif kind == "layout" and a.meta.dim() > 0:
            rank = a.meta.dim()
            shape = tuple(a.meta.shape)
            choice = draw(st.sampled_from(("permute", "transpose", "unsqueeze", "squeeze", "expand", "narrow",
                                           "step", "reshape")))
            if choice == "permute":
                perm = draw(st.permutations(range(rank)))
                expr = f"{a.name}.permute({', '.join(map(str, perm))})"
            elif choice == "transpose":
                expr = f"{a.name}.transpose({draw(st.integers(0, rank - 1))}, {draw(st.integers(0, rank - 1))})"
            elif choice == "unsqueeze":
                expr = f"{a.name}.unsqueeze({draw(st.integers(0, rank))})"
            elif choice == "squeeze":
                expr = f"{a.name}.squeeze({draw(st.integers(0, rank - 1))})"
            elif choice == "expand" and 1 in shape:
                d = shape.index(1)
                expr = f"{a.name}.expand({', '.join(str(3 if i == d else -1) for i in range(rank))})"
            elif choice in ("narrow", "step"):
                d = draw(st.integers(0, rank - 1))
                if shape[d] > 1:
                    idx = [":"] * d + (["1:"] if choice == "narrow" else ["::2"])
                    expr = f"{a.name}[{', '.join(idx)}]"
            elif choice == "reshape":
                expr = f"{a.name}.reshape(-1)" if draw(st.booleans()) or rank < 2 else f"{a.name}.flatten(0, 1)"
        elif kind == "cast":
            target = draw(st.sampled_from(CAST_TARGETS))
            # float -> integer is undefined for NaN and out-of-range values: only exact finite
            # values, to integers wide enough for them (or to bool, which is ``x != 0``)
            float_to_int = _is_float(a) and not target.is_floating_point
            if not float_to_int or (a.exact and a.finite and target in (I32, I64, BOOL)):
                expr = f"{a.name}.to(torch.{str(target)[6:]})"
                if target.is_floating_point and not _is_float(a):
                    exact = True  # small integers convert exactly
        if expr is not None:
            append(expr, exact, finite)
    computed = [v.name for v in vals if v.name.startswith("v")]
    assume(computed)
    extra = draw(st.lists(st.sampled_from(computed), max_size=2, unique=True))
    outputs = tuple(dict.fromkeys([computed[-1]] + forced + extra))
    return Program(specs, tuple(lines), outputs)


# ----------------------------------------------------------------------------- checking

TOLERANCE = {F16: dict(rtol=2e-3, atol=2e-3), BF16: dict(rtol=2e-2, atol=2e-2), F32: dict(rtol=1e-4, atol=1e-5),
             F64: dict(rtol=1e-9, atol=1e-12)}


#: Float dtypes from the least to the most precise.
_PRECISION = (BF16, F16, F32, F64)


def _loosest(dtypes) -> torch.dtype:
    return min((d for d in dtypes if d in _PRECISION), key=_PRECISION.index, default=F64)


def program_dtypes(program: Callable, inputs: list[torch.Tensor]) -> set:
    """Float dtypes a value of ``program`` may pass through: its inputs', those it casts to
    (named in its code), and the default float dtype when an input is boolean or integer (a
    float op such as ``exp`` promotes it there). A float64 output computed by ``exp`` in
    float32 carries float32's error (different correct ``exp`` implementations differ by an
    ulp), so outputs are compared with the tolerance of the least precise of these and their
    own dtype."""
    named = {getattr(torch, n) for n in program.__code__.co_names if n in ("float16", "bfloat16", "float32")}
    promoted = {torch.get_default_dtype()} if any(not t.dtype.is_floating_point for t in inputs) else set()
    return named | promoted | {t.dtype for t in inputs if t.dtype.is_floating_point}


def assert_same(actual, expected, what: str, through: set = frozenset(), reference=None) -> None:
    """Same dtypes and shapes; floats close (NaN where eager has NaN), the rest equal.
    ``through``: float dtypes the values were computed in (see :func:`program_dtypes`).

    ``reference``: a callable giving the values of the same program on float64 copies of the
    float inputs. Where a float value is not close to eager's, it still passes when it is no
    farther from that float64 value than eager's is, plus the tolerance: eager itself can be
    far from exact (``x - x.mean()`` of equal values, scaled by ``rsqrt(var + eps)``, is
    eager's rounding error of the mean times 316), and a compiler may be closer."""
    assert len(actual) == len(expected), what
    for i, (a, e) in enumerate(zip(actual, expected)):
        assert a.dtype == e.dtype, f"{what} {i}: dtype {a.dtype}, eager {e.dtype}"
        assert a.shape == e.shape, f"{what} {i}: shape {tuple(a.shape)}, eager {tuple(e.shape)}"
        if e.dtype.is_floating_point:
            tol = TOLERANCE[_loosest({e.dtype} | set(through))]
            try:
                torch.testing.assert_close(a.detach(), e.detach(), equal_nan=True,
                                           msg=lambda m: f"{what} {i}: {m}", **tol)
            except AssertionError:
                exact = reference() if reference is not None else None
                if exact is None or not _nearer_exact(a, e, exact[i], **tol):
                    raise
        else:
            assert torch.equal(a, e), f"{what} {i}: {a} != eager {e}"


def _nearer_exact(actual: torch.Tensor, expected: torch.Tensor, exact: torch.Tensor, rtol: float, atol: float) -> bool:
    """Each element of ``actual`` is close to eager's, or no farther from the float64 value
    than eager's plus the tolerance (equal infinities count as exact)."""
    if exact is None or exact.shape != actual.shape:
        return False
    a, e, r = (t.detach().to(F64).cpu() for t in (actual, expected, exact))
    near_eager = torch.isclose(a, e, rtol=rtol, atol=atol, equal_nan=True)
    near_exact = ((a - r).abs() <= (e - r).abs() + atol + rtol * r.abs()) | (a == r)
    return bool((near_eager | near_exact).all())


def _fresh(inputs: list[torch.Tensor]) -> list[torch.Tensor]:
    out = []
    for t in inputs:
        storage = t.detach().untyped_storage().clone()
        c = torch.empty(0, dtype=t.dtype, device=t.device).set_(storage, t.storage_offset(), t.shape, t.stride())
        out.append(c.requires_grad_(t.requires_grad))
    return out


def check_program(program: Callable, inputs: list[torch.Tensor]) -> None:
    """``program`` compiled by torchfuse equals eager on ``inputs``: every output, and the
    gradients of its floating-point outputs with respect to the inputs that require grad."""
    eager_in, fused_in = _fresh(inputs), _fresh(inputs)
    expected = program(*eager_in)
    actual, _ = run_traced(program, *fused_in)
    through = program_dtypes(program, inputs)
    leaves = [i for i, t in enumerate(inputs) if t.requires_grad]
    diff = [k for k, e in enumerate(expected) if e.requires_grad and e.dtype.is_floating_point]
    g = torch.Generator().manual_seed(0)
    grads_out = [torch.randn(expected[k].shape, generator=g, dtype=F64).to(expected[k].dtype).to(DEVICE)
                 for k in diff]
    exact: list = []  # the float64 program's outputs and gradients, made on the first mismatch

    def reference(part: int):
        def get():
            if not exact:
                exact.append(_float64_run(program, inputs, leaves, diff, grads_out))
            return exact[0][part]
        return get

    assert_same(actual, expected, "output", through, reference(0))
    if not leaves or not diff:
        return
    want = torch.autograd.grad([expected[k] for k in diff], [eager_in[i] for i in leaves], grads_out,
                               allow_unused=True)
    got = torch.autograd.grad([actual[k] for k in diff], [fused_in[i] for i in leaves], grads_out,
                              allow_unused=True)
    zero = lambda gs, ins: [torch.zeros_like(ins[i]) if x is None else x for x, i in zip(gs, leaves)]
    assert_same(zero(got, fused_in), zero(want, eager_in), "gradient", through, reference(1))


def _float64_run(program: Callable, inputs: list[torch.Tensor], leaves: list[int], diff: list[int],
                 grads_out: list[torch.Tensor]):
    """``(outputs, gradients)`` of ``program`` on float64 copies of its float inputs, with
    float64 as the default dtype (the same output gradients, widened); ``(None, None)`` when
    it does not run that way."""
    wide = []
    for t in _fresh(inputs):
        if t.dtype.is_floating_point:
            t = t.detach().to(F64).requires_grad_(t.requires_grad)
        wide.append(t)
    default = torch.get_default_dtype()
    torch.set_default_dtype(F64)  # floats made from integers or bools (sin of a comparison) too
    try:
        outs = program(*wide)
        grads = [None] * len(leaves)
        if leaves and diff:
            grads = torch.autograd.grad([outs[k] for k in diff], [wide[i] for i in leaves],
                                        [go.to(F64) for go in grads_out], allow_unused=True)
            grads = [torch.zeros_like(wide[i]) if x is None else x for x, i in zip(grads, leaves)]
        return list(outs), list(grads)
    except (RuntimeError, TypeError, IndexError, ValueError, NotImplementedError):
        return None, None
    finally:
        torch.set_default_dtype(default)


def _run(program: Program) -> None:
    note(program.test_source())  # printed with the shrunk failing example
    inputs = [s.make() for s in program.inputs]
    fn = program.function()
    try:
        fn(*_fresh(inputs))
    except (RuntimeError, TypeError, IndexError, ValueError, NotImplementedError):
        assume(False)  # the generator made a program eager rejects (a dtype an op refuses)
    check_program(fn, inputs)


def test_fuzz_programs(pytestconfig):
    """Random programs compiled by torchfuse equal eager (forward and backward)."""
    examples = pytestconfig.getoption("fuzz_examples")
    run = settings(max_examples=examples, deadline=None, database=None, print_blob=True,
                   derandomize=pytestconfig.getoption("fuzz_seed") is None,
                   suppress_health_check=list(HealthCheck))(given(programs())(_run))
    if pytestconfig.getoption("fuzz_seed") is not None:
        run = seed(pytestconfig.getoption("fuzz_seed"))(run)
    run()


def test_generated_programs_cover_the_grammar():
    """Over the first thousand programs (generation only, no compilation; the sequence
    depends on the hypothesis version) the strategy reaches every op family, every layout
    and dtype, size-0 dims and gradients (so a bounded CI run is not exercising a corner)."""
    seen: list[Program] = []

    @settings(max_examples=1000, database=None, derandomize=True, deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(programs())
    def collect(p):
        seen.append(p)

    collect()
    text = "\n".join(ln for p in seen for ln in p.lines)
    for fragment in ["torch.sin(", "torch.softmax(", "keepdim=True))", " / ", "torch.where(", " < ", ".sum(", ".mean(", ".var(", ".amax(", ".argmax(",
                     ".any(", ".permute(", ".transpose(", ".unsqueeze(", ".squeeze(", ".expand(", "::2", "1:]",
                     ".reshape(", ".to(torch.int32)", ".to(torch.bfloat16)", "torch.floor(", "~"]:
        assert fragment in text, fragment
    inputs = [s for p in seen for s in p.inputs]
    assert {s.layout for s in inputs} == set(LAYOUTS)
    assert {s.dtype for s in inputs} == set(DTYPES)
    assert any(s.layout == "channels_last" and len(s.shape) == 4 for s in inputs)
    assert any(0 in s.shape for s in inputs) and any(s.specials for s in inputs)
    assert any(s.grad for s in inputs)
    assert any(len(p.lines) >= 4 and len(p.inputs) >= 2 for p in seen)
