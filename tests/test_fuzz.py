"""Differential fuzzing: random fusible programs, torchfuse against eager, forward and backward.

A hypothesis strategy (:func:`programs`) writes small programs, chains and DAGs over the
registry's op kinds: pointwise (unary, binary with broadcasting and type promotion, ``where``,
comparisons), reductions (``sum``, ``mean``, ``var``, ``amax``, ``argmax``, ``any``; with and
without ``keepdim``), pairs of a row reduction and column sums of one tensor (both returned:
the inner-outer kernel), layout ops (permute, transpose, unsqueeze, squeeze, expand, narrowing
and strided slices, reshape), dtype conversions, zero pads and max pooling. Inputs take every
kernel dtype, shapes with sizes 0 and 1, and contiguous, transposed, channels-last, strided,
offset (misaligned) and expanded layouts, some with NaN, infinities, -0.0 and subnormals among
their values.

Each program is Python source (:meth:`Program.source`), so a failing example, once
hypothesis has shrunk it, prints as a test to paste into ``test_fuzz_regressions.py``.

Ops whose result jumps with its input (``floor``, ``round``, ``sign``, comparisons,
``argmax``, casts to integers or bool, division with a rounding mode, ``%``) only take values
computed exactly (by ops every correct implementation rounds alike: add, sub, mul, neg, abs,
max, min, casts, layout), so that an ulp of difference in ``sin`` cannot flip a comparison and
report a false mismatch.

The classes of programs where PyTorch's kernels have rules of their own are drawn on purpose:
Python numbers on either side of every binary op (values fp16/bf16 cannot hold, -0.0,
integers that wrap in int8) in every dtype, with ``alpha``; division with rounding modes,
``%``, ``fmod``, ``**``; negative and out-of-range indices of the indexing decompositions
(``_unsafe_masked_index``, ``slice_scatter``, ``select_scatter``, ``narrow``, ``x[idx]``, and a
number written into a row or slice of a copy, ``t[..., i] = 3``);
constants and one-element values read by several outputs (and twice by one op); and in-place
updates of inputs that need no gradient (buffers), in training graphs when another input
requires grad, whose final values and version counters are compared too. Outputs computed by
ops whose signed zeros are defined alike on every device and path are compared bit for bit
(the sign of zero counts), and where a NaN's sign is defined (inputs hold NaNs of both
signs; only sign operations and selections carry them) its sign bit counts too.

A second test (:func:`test_fuzz_programs_at_two_sizes`) compiles each program through
TorchDynamo with dynamic sizes and calls it at two sets of sizes or layouts, each twice (the
second call of a size runs the graph's generated function for it), under options that move a
reduction between schedulers as its size changes: the kernels, launch plans and views made
for one size must serve the other.

CI runs a fixed number of examples, derandomized (the same programs every run). A longer run
(see the README's "Correctness checks") explores more programs::

    python -m pytest tests/test_fuzz.py --fuzz-examples 2000              # same seed, more programs
    python -m pytest tests/test_fuzz.py --fuzz-examples 2000 --fuzz-seed 7  # other programs
"""
from __future__ import annotations

import dataclasses
import math
import re
from typing import Callable

import pytest
import torch
from hypothesis import HealthCheck, assume, given, note, seed, settings
from hypothesis import strategies as st

from conftest import DEVICE
from test_ops import run_compiled, run_traced

pytestmark = pytest.mark.filterwarnings("ignore:.*encountered in:RuntimeWarning")

F16, BF16, F32, F64 = torch.float16, torch.bfloat16, torch.float32, torch.float64
I8, I16, I32, I64, U8, BOOL = torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8, torch.bool
DTYPES = (F32, F16, BF16, F64, I8, I16, I32, I64, U8, BOOL)
LAYOUTS = ("contiguous", "transposed", "channels_last", "strided", "offset", "expanded")
SPECIALS = (float("nan"), -float("nan"), float("inf"), float("-inf"), -0.0, 0.0, 1e-40, -3e-39, 6e4, -6e4, 1e30)
_INT_OF = {2: torch.int16, 4: torch.int32, 8: torch.int64}


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
            return _with_nan_signs(x, x.to(dtype))
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


def _with_nan_signs(wide: torch.Tensor, narrow: torch.Tensor) -> torch.Tensor:
    """``narrow`` (``wide`` converted) with each NaN given ``wide``'s sign bit: PyTorch's CPU
    conversions give every NaN one sign (0xFFFF in bf16)."""
    if not bool(wide.isnan().any()):
        return narrow
    bits = _INT_OF[narrow.element_size()]
    sign = torch.tensor(1, dtype=bits) << (8 * narrow.element_size() - 1)
    raw = narrow.view(bits)
    signed = torch.where(wide.signbit(), raw | sign, raw & ~sign)
    return torch.where(wide.isnan(), signed, raw).view(narrow.dtype)


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
    """A straight-line program: ``lines`` assign ``v0, v1, ...`` (or update an input in
    place); ``outputs`` name values. ``bitwise`` and ``nan_signs``: indices of the outputs
    compared bit for bit (signed zeros), and of those whose NaN signs are compared too."""

    inputs: tuple[InputSpec, ...]
    lines: tuple[str, ...]
    outputs: tuple[str, ...]
    bitwise: tuple[int, ...] = ()
    nan_signs: tuple[int, ...] = ()

    @property
    def mutates(self) -> bool:
        """Whether a line updates an input in place (``x0.add_(...)``)."""
        return any(not ln.startswith("v") for ln in self.lines)

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
        flags = f", bitwise={self.bitwise}, nan_signs={self.nan_signs}" if self.bitwise else ""
        flags += ", mutates=True" if self.mutates else ""
        return f"def test_regression():\n{body}\n    check_program(program, [{ins}]{flags})\n"


@dataclasses.dataclass
class _Val:
    name: str
    meta: torch.Tensor  # a meta tensor with the value's shape and dtype
    exact: bool  # computed by ops that every correct implementation rounds alike
    finite: bool  # no NaN or infinity, magnitude below 2**20 (safe to cast to any integer)
    signs: bool = False  # exact, and its zeros' signs are defined alike on every device and path
    nan_signs: bool = False  # its NaNs' signs are defined (inputs, sign operations, selections)
    #: a mean subtracted along one of its dims: its sums there are 0 in exact arithmetic and
    #: rounding noise in any dtype, so a quotient by them is meaningless (no order of
    #: summation is the right one, and in float64 no reference is more exact than eager)
    centred: bool = False


def unary_keeps_exact(keeps: bool, operand: torch.dtype, result: torch.dtype | None) -> bool:
    """Whether a unary op gives an exactly computed result from an exactly computed operand of
    dtype ``operand``: ops that keep exactness (``abs``, ``neg``) do; others only on integers
    with an integer result (``exp`` promotes integers to a float, rounded); ``result`` is
    ``None`` when unknown."""
    return keeps or (not operand.is_floating_point and result is not None and not result.is_floating_point)


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
    # name: (template, exact-preserving, needs exact operands)
    "add": ("{0} + {1}", True, False),
    "sub": ("{0} - {1}", True, False),
    "mul": ("{0} * {1}", True, False),
    "div": ("{0} / {1}", False, False),
    "maximum": ("torch.maximum({0}, {1})", True, False),
    "minimum": ("torch.minimum({0}, {1})", True, False),
    "where": ("torch.where({0} > {1}, {0}, {1})", True, True),
    "lt": ("{0} < {1}", True, True),
    "eq": ("{0} == {1}", True, True),
    "ge": ("{0} >= {1}", True, True),
    "ne": ("{0} != {1}", True, True),
    "remainder": ("{0} % {1}", True, True),
    "fmod": ("torch.fmod({0}, {1})", True, True),
    "floordiv": ("{0} // {1}", True, True),
    "div_trunc": ("torch.div({0}, {1}, rounding_mode='trunc')", True, True),
    "div_floor": ("torch.div({0}, {1}, rounding_mode='floor')", True, True),
    "pow": ("{0} ** {1}", False, False),
    "copysign": ("torch.copysign({0}, {1})", True, False),
    # alpha: one fused multiply-add in PyTorch's kernels, except the CPU's scalar loop for
    # fp16/bf16 (a short row's last elements), which rounds alpha * b first: compared at a tolerance
    "add_alpha": ("torch.add({0}, {1}, alpha={alpha})", False, False),
    "sub_alpha": ("torch.sub({0}, {1}, alpha={alpha})", False, False),
    "bitand": ("{0} & {1}", True, False),
    "bitxor": ("{0} ^ {1}", True, False),
    "clamp_min": ("{0}.clamp(min={1})", True, False),
}
#: binary ops whose zeros' signs are IEEE's or PyTorch's on every device and code path (not
#: maximum/minimum/clamp: eager's CPU vector and scalar loops order signed zeros apart)
SIGN_BINARY = {"add", "sub", "mul", "where", "remainder", "fmod", "floordiv", "div_trunc", "div_floor", "copysign",
               "bitand", "bitxor"}
#: integer division of which a zero divisor makes eager raise on CPU and return anything on a
#: GPU: with integer results these take a nonzero number as divisor, never a tensor
DIVISIONS = {"remainder", "fmod", "floordiv", "div_trunc", "div_floor"}
#: Python numbers the binary ops take, on either side: values fp16/bf16 cannot hold (0.1, 1.7,
#: 2.7), below fp16's normal range (1e-5), signed zeros, integers that wrap in int8 (1000)
NUMBERS = (2, -1, 0.5, 3.25, True, 0.1, 1.7, -2.3, 1e-5, -0.0, 0.0, 2.7, 1000, -7, 3)
#: unary ops whose zeros' signs are defined alike everywhere
SIGN_UNARY = {"neg", "abs", "relu", "floor", "round", "square"}


def _nan_sign_unary(name: str, dtype: torch.dtype) -> bool:
    """Whether unary ``name`` gives a NaN a defined sign from its operand's: negation flips it
    on CPU tensors (except bf16 in the CPU's scalar loop, a short row's last elements, which
    converts through fp32), and makes the device's NaN on a GPU; ``abs`` clears it, except
    fp64 on a GPU, where eager keeps the operand's NaN."""
    if name == "neg":
        return not (DEVICE == "cpu" and dtype == BF16)
    if name == "abs":
        return not (DEVICE == "cuda" and dtype == F64)
    return False


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


def _number(draw) -> _Val:
    """A Python number operand (exact, finite, and defined to the sign of its zero)."""
    return _Val(repr(draw(st.sampled_from(NUMBERS))), torch.empty((), device="meta"), True, True, True, True)


def _indexing(draw, a: _Val) -> tuple[str, bool] | None:
    """An indexing expression over dim 0 or the last dim of ``a`` with negative and, where
    eager defines them (masked out, clamped, sliced), out-of-range indices; ``(expr, copies)``
    where ``copies`` says the result's elements are ``a``'s (or a number) bit for bit."""
    shape = tuple(a.meta.shape)
    if not shape or shape[0] == 0:
        return None
    n, rank, dev = shape[0], len(shape), f"{a.name}.device"
    choice = draw(st.sampled_from(("getitem", "masked", "slice_scatter", "select_scatter", "narrow", "setitem")))
    if choice == "getitem":  # in range: an index out of range is a device-side assert on a GPU
        idx = draw(st.lists(st.integers(-n, n - 1), min_size=1, max_size=4))
        return f"{a.name}[torch.tensor({idx}, device={dev})]", True
    if choice == "masked":
        k = draw(st.integers(1, 4))
        idx = draw(st.lists(st.integers(-2 * n - 1, 2 * n), min_size=k, max_size=k))
        mask = draw(st.lists(st.booleans(), min_size=k, max_size=k))
        fill = draw(st.sampled_from(NUMBERS))
        mask_shape = (k,) + (1,) * (rank - 1)
        return (f"torch.ops.aten._unsafe_masked_index({a.name}, torch.tensor({mask}, device={dev}).reshape"
                f"({mask_shape}), [torch.tensor({idx}, device={dev})], {fill!r})"), True
    d = draw(st.sampled_from((0, rank - 1)))
    size = shape[d]
    if size == 0:
        return None
    lead = "" if d == 0 else "..., "
    if choice == "slice_scatter":
        start = draw(st.sampled_from((None, *range(-size - 2, size + 2))))
        end = draw(st.sampled_from((None, *range(-size - 2, size + 2))))
        step = draw(st.integers(1, 3))
        part = f"{a.name}[{lead}{start}:{end}:{step}]"
        return f"torch.slice_scatter({a.name}, torch.flip({part}, [{d}]), {d}, {start}, {end}, {step})", True
    if choice == "select_scatter":
        i, j = draw(st.integers(-size, size - 1)), draw(st.integers(-size, size - 1))
        return f"torch.select_scatter({a.name}, {a.name}.select({d}, {j}), {d}, {i})", True
    if choice == "setitem":  # a number written into a copy's row or slice (T5's shifted labels):
        # TorchDynamo traces a copy of a lifted 0-dim constant into a view of the copy
        i = draw(st.integers(-size, size - 1))
        part = draw(st.sampled_from((f"{i}", f"{i}:", f":{i}", "::2")))
        number = draw(st.sampled_from(NUMBERS))
        return f"(t := {a.name}.clone()).__setitem__(({lead}{part},), {number!r}) or t", True
    start = draw(st.integers(-size, size - 1))
    length = draw(st.integers(0, size - start % size))
    return f"{a.name}.narrow({d}, {start}, {length})", True


@st.composite
def programs(draw, max_steps: int = 7) -> Program:
    """A random program over 1-3 inputs (see the module doc)."""
    specs = draw(input_specs(draw(st.integers(1, 3))))
    vals: list[_Val] = []
    for i, s in enumerate(specs):
        meta = torch.empty_strided(s.shape, [1] * len(s.shape), dtype=s.dtype, device="meta")
        vals.append(_Val(f"x{i}", meta, exact=True, finite=not s.specials, signs=True, nan_signs=True))
    lines: list[str] = []
    forced: list[str] = []  # results every program returns (both halves of a "pair", shared readers)
    counter = [0]

    def append(expr: str, exact: bool, finite: bool, signs: bool = False, nan_signs: bool = False,
               centred: bool = False) -> str | None:
        """Add ``name = expr`` when eager's meta evaluation accepts it; returns the name."""
        meta = _meta_eval(expr, {v.name: v for v in vals})
        if meta is None:
            return None
        name = f"v{counter[0]}"
        counter[0] += 1
        lines.append(f"{name} = {expr}")
        float_out = meta.dtype.is_floating_point
        vals.append(_Val(name, meta, exact, finite, signs and exact and float_out, nan_signs and float_out, centred))
        return name

    for _ in range(draw(st.integers(2, max_steps))):
        kind = draw(st.sampled_from(("unary", "binary", "binary", "number", "reduction", "layout", "cast", "normalize",
                                     "pair", "index", "shared", "mutate", "pad")))
        a = draw(st.sampled_from(vals))
        expr, exact, finite = None, a.exact, a.finite
        centred = False
        signs, nan_signs = False, False
        if kind == "pair" and a.meta.dim() >= 2 and _is_float(a):
            # a row reduction and column sums of the same tensor, both returned: the segmenter
            # can run them as one inner-outer kernel
            rank = a.meta.dim()
            row = draw(st.sampled_from(PAIR_ROWS)).format(a.name)
            cols = tuple(range(rank - 1))
            col = f"({a.name} * {draw(st.sampled_from(('2', a.name)))}).sum({cols})"
            for e in (row, col):
                name = append(e, False, False, centred=".mean(-1" in e)
                if name is None:
                    break
                forced.append(name)
            continue
        if kind == "shared":
            # a constant or a one-element value read by several results, twice by one of them
            num = draw(st.sampled_from(NUMBERS))
            source = draw(st.sampled_from((f"torch.zeros_like({a.name})", f"torch.full_like({a.name}, {num!r})",
                                           f"torch.tensor({num!r}, device={a.name}.device)", f"{a.name}.sum()")))
            summed = source.endswith(".sum()")
            c = append(source, not summed or not _is_float(a), not summed, not summed, not summed)
            if c is None:
                continue
            shared = vals[-1]
            for template in draw(st.lists(st.sampled_from(("{0} + {1}", "{1} - {0}", "{0} * {1}", "{0} + {0}")),
                                          min_size=2, max_size=3)):
                b = draw(st.sampled_from(vals))
                name = append(template.format(c, b.name), shared.exact and b.exact, False,
                              shared.signs and b.signs)
                if name is not None:
                    forced.append(name)
            continue
        if kind == "pad" and a.meta.dim() in (3, 4) and _is_float(a) and draw(st.booleans()):
            # half the pads of 3-D and 4-D floats are max poolings (torchfuse's pool kernels
            # on 4-D tensors); maxima and their indices are exact, ties and -0.0 included
            args = draw(st.sampled_from(("2", "3, 2, 1", "3, 1, 1", "(2, 3), (1, 2), (1, 0)", "3, 2, 0, 1, True")))
            name = append(f"torch.nn.functional.max_pool2d({a.name}, {args})", a.exact, a.finite, a.signs,
                          a.nan_signs)
            if name is not None:
                forced.append(name)
            continue
        if kind == "pad" and a.meta.dim() >= 1:
            # two pads of one tensor whose fills may differ only in their bits (0.0 and -0.0)
            widths = draw(st.sampled_from(("(1, 0)", "(0, 2)", "(1, 1)", "(-1, 1)")))
            fill = draw(st.sampled_from(NUMBERS))
            for value in (fill, -fill if isinstance(fill, float) else fill):
                name = append(f"torch.nn.functional.pad({a.name}, {widths}, value={value!r})", a.exact,
                              a.finite, a.signs, a.nan_signs)
                if name is not None:
                    forced.append(name)
            continue
        if kind == "mutate":
            # an in-place update of an input that needs no gradient (a buffer); later reads see it
            cands = [v for v, sp in zip(vals, specs) if not sp.grad and sp.layout != "expanded"]
            if not cands:
                continue
            x = draw(st.sampled_from(cands))
            op = draw(st.sampled_from(("add_", "sub_", "mul_", "copy_", "neg_", "clamp_")))
            src = draw(st.sampled_from(vals)) if draw(st.integers(0, 2)) else _number(draw)
            if op == "copy_" and (src.name[0] not in "xv" or src.meta.dtype != x.meta.dtype):
                continue
            target = x.name
            if x.meta.dim() >= 1 and not draw(st.integers(0, 2)):  # a part of the input, through a view
                shape = x.meta.shape
                views = [f"{x.name}[..., ::2]", f"{x.name}.unsqueeze(0)"] + [f"{x.name}[1:]", f"{x.name}[0]"] * (shape[0] > 1)
                views += [f"{x.name}.t()"] * (x.meta.dim() == 2)
                target = draw(st.sampled_from(views))
            if (target != x.name or src.name != x.name) \
                    and src.meta.untyped_storage()._cdata == x.meta.untyped_storage()._cdata:
                # an operand that is the written tensor seen through another view: eager reads
                # elements the update already wrote, in its loop's order (undefined; raised
                # for dense tensors, computed for gapped ones, where the overlap check gives up)
                continue
            call = {"neg_": f"{target}.neg_()", "clamp_": f"{target}.clamp_(min={src.name})"}.get(
                op, f"{target}.{op}({src.name})")
            if _meta_eval(call, {v.name: v for v in vals}) is None:
                continue
            lines.append(call)
            keeps = op != "mul_" or not _is_float(x)
            for v in vals:  # conservatively: every value may alias the input (views)
                v.exact = v.exact and src.exact and keeps
                v.finite = v.finite and src.finite and op != "mul_"
                v.signs = v.signs and src.signs and op != "clamp_"
                v.nan_signs = v.nan_signs and op in ("copy_",) and src.nan_signs
            continue
        if kind == "unary":
            name = draw(st.sampled_from(sorted(UNARY)))
            template, applies, keeps, needs_exact = UNARY[name]
            if applies(a) and (a.exact or not needs_exact):
                expr = template.format(a.name)
                out = _meta_eval(expr, {v.name: v for v in vals})
                exact = a.exact and unary_keeps_exact(keeps, a.meta.dtype, None if out is None else out.dtype)
                finite = a.finite and name not in ("exp", "square")
                signs = a.signs and name in SIGN_UNARY
                nan_signs = a.nan_signs and _nan_sign_unary(name, a.meta.dtype)
        elif kind in ("binary", "number"):
            name = draw(st.sampled_from(sorted(BINARY)))
            template, keeps, needs_exact = BINARY[name]
            b = draw(st.sampled_from(vals))
            if kind == "number":
                b = _number(draw)
            if (a.exact and b.exact) or not needs_exact:
                if name == "sub" and BOOL in (a.meta.dtype, b.meta.dtype):
                    name, template = "add", BINARY["add"][0]
                first, second = a, b
                if kind == "number" and draw(st.booleans()):  # the number first: 2.5 - x, 2 ** x
                    first, second = b, a
                alpha = draw(st.sampled_from(NUMBERS))
                expr = template.format(first.name, second.name, alpha=repr(alpha))
                meta = _meta_eval(expr, {v.name: v for v in vals})
                if "alpha=" in template and DEVICE == "cpu" and meta is not None and meta.dtype in (F16, BF16):
                    # CPU eager's vector loop (which torchfuse follows) rounds alpha to the dtype and
                    # contracts alpha * b + a, its scalar loop (the short rows drawn here) does neither:
                    # a power of two makes both exact (tests/test_number_semantics.py covers the rest)
                    expr = template.format(first.name, second.name, alpha=repr(draw(st.sampled_from((2, -1, 0.5)))))
                if name in DIVISIONS and meta is not None and not meta.dtype.is_floating_point \
                        and second.name[0] in "xv":
                    expr = None  # an integer tensor divisor may hold zeros
                if name == "pow" and second.meta.dtype == BOOL and any(sp.grad for sp in specs):
                    # eager's backward of x ** flags raises (it subtracts one from the bool
                    # exponent); PyTorch's decomposition of pow, which torchfuse traces, converts
                    # the exponent first and has a gradient
                    expr = None
                out_float = meta is None or meta.dtype.is_floating_point
                exact = a.exact and b.exact and (keeps or not out_float)
                finite = a.finite and b.finite and name not in ("mul", "div", "pow", "add_alpha", "sub_alpha") \
                    and name not in DIVISIONS
                signs = a.signs and b.signs and name in SIGN_BINARY and (name != "copysign" or second.nan_signs)
                nan_signs = name == "where" and a.nan_signs and b.nan_signs
        elif kind == "index":
            got = _indexing(draw, a)
            if got is not None:
                expr, copies = got
                signs, nan_signs = a.signs and copies, a.nan_signs and copies
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
            if name == "fraction" and a.centred:
                pass  # a quotient by rounding noise (see _Val.centred)
            elif name != "center_max" or a.meta.shape[d] > 0:
                expr = template.format(a.name, d=d)
                exact = a.exact and keeps
                finite = False
                centred = name == "standardize"
        elif kind == "layout" and a.meta.dim() > 0:
            rank = a.meta.dim()
            shape = tuple(a.meta.shape)
            signs, nan_signs = a.signs, a.nan_signs
            choice = draw(st.sampled_from(("permute", "transpose", "unsqueeze", "squeeze", "expand", "narrow",
                                           "step", "reshape", "cat", "stack")))
            if choice in ("cat", "stack"):
                # tensors of one shape and dtype joined (a split projection's gradients, stacked
                # or concatenated: the concatenation becomes fusible selects)
                same = [v for v in vals if tuple(v.meta.shape) == shape and v.meta.dtype == a.meta.dtype]
                parts = [a] + [draw(st.sampled_from(same)) for _ in range(draw(st.integers(1, 4)))]
                d = draw(st.integers(-rank, rank - 1 if choice == "cat" else rank))
                expr = f"torch.{choice}([{', '.join(p.name for p in parts)}], {d})"
                exact, finite = all(p.exact for p in parts), all(p.finite for p in parts)
                signs, nan_signs = all(p.signs for p in parts), all(p.nan_signs for p in parts)
            elif choice == "permute":
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
                signs = a.signs or not _is_float(a)
                nan_signs = a.nan_signs and target == a.meta.dtype
        if expr is not None:
            append(expr, exact, finite, signs, nan_signs, centred)
    computed = [v for v in vals if v.name.startswith("v")]
    assume(computed)
    extra = draw(st.lists(st.sampled_from([v.name for v in computed]), max_size=2, unique=True))
    outputs = tuple(dict.fromkeys([computed[-1].name] + forced + extra))
    by_name = {v.name: v for v in vals}
    bitwise = tuple(i for i, o in enumerate(outputs) if by_name[o].signs)
    nan_signs = tuple(i for i in bitwise if by_name[outputs[i]].nan_signs)
    return Program(specs, tuple(lines), outputs, bitwise, nan_signs)


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
    than eager's plus the tolerance (equal infinities count as exact; where eager has NaN and
    the float64 value is a number, within the tolerance of that number), or eager's own value
    is meaningless: off from the float64 value by at least half that value's magnitude, or NaN
    where it is a number or a number where it is NaN. That is the result of a cancellation
    that the dtype cannot compute (a sum of mean-centred values divides another, and the order
    of the summation's roundings decides the quotient's sign and size, even whether it is
    infinite, and so whether its gradient is NaN; eager's quotients there were 1e8 times too
    small), where any value is one that some summation order gives."""
    if exact is None or exact.shape != actual.shape:
        return False
    a, e, r = (t.detach().to(F64).cpu() for t in (actual, expected, exact))
    near_eager = torch.isclose(a, e, rtol=rtol, atol=atol, equal_nan=True)
    eager_error = torch.where(e.isnan() & ~r.isnan(), 0.0, (e - r).abs())
    near_exact = ((a - r).abs() <= eager_error + atol + rtol * r.abs()) | (a == r)
    off = (e - r).abs()
    meaningless = (e.isnan() != r.isnan()) | (~e.isnan() & ~r.isnan() & (off >= 0.5 * r.abs()) & (off > atol))
    return bool((near_eager | near_exact | meaningless).all())


def _fresh(inputs: list[torch.Tensor]) -> list[torch.Tensor]:
    out = []
    for t in inputs:
        storage = t.detach().untyped_storage().clone()
        c = torch.empty(0, dtype=t.dtype, device=t.device).set_(storage, t.storage_offset(), t.shape, t.stride())
        out.append(c.requires_grad_(t.requires_grad))
    return out


def assert_same_bits(actual: torch.Tensor, expected: torch.Tensor, what: str, nan_signs: bool,
                     reference=None) -> None:
    """Bitwise equal but for NaNs (NaN where eager has NaN), signed zeros included; with
    ``nan_signs`` a NaN's sign bit too.

    ``reference``: a callable giving the same output of the program run in float64 (``None``
    when it could not run). Where eager is NaN and the float64 value is not, or the other way
    round, eager is wrong there (CPU eager's vectorized ``fmod`` divides, and a subnormal
    divisor overflows the quotient): the element must be NaN exactly where the float64 value is,
    its value having been checked against that value by :func:`assert_same`."""
    a, e = actual.detach().cpu().contiguous(), expected.detach().cpu().contiguous()
    nan = e.isnan()
    eager_wrong = torch.zeros_like(nan)
    if not torch.equal(a.isnan(), nan) and reference is not None:
        r = reference()
        if r is not None and r.dtype.is_floating_point:
            r = r.detach().cpu().contiguous()
            eager_wrong = nan != r.isnan()
            assert torch.equal(a.isnan()[eager_wrong], r.isnan()[eager_wrong]), \
                f"{what}: NaN where eager and the float64 program disagree, unlike the float64 program"
    assert torch.equal(a.isnan()[~eager_wrong], nan[~eager_wrong]), \
        f"{what}: NaN where eager has none, or none where eager has one"
    bits = _INT_OF[a.element_size()]
    same = (a.view(bits) == e.view(bits)) | eager_wrong
    if nan_signs:
        same |= nan & (a.signbit() == e.signbit())
    else:
        same |= nan
    assert bool(same.all()), (f"{what}: bits differ at {(~same).nonzero().reshape(-1).tolist()[:8]} "
                              f"(got {a[~same][:4].tolist()}, eager {e[~same][:4].tolist()})")


def _float64_reference(program: Callable, inputs: list[torch.Tensor], leaves: list[int] = (), diff: list[int] = (),
                       grads_out: list[torch.Tensor] = ()) -> Callable:
    """``reference(part)``: a function giving part ``part`` (0 outputs, 1 gradients, 2 inputs
    after the call) of :func:`_float64_run`'s float64 run of ``program``, made once, on the first
    mismatch that asks for it."""
    exact: list = []

    def reference(part: int):
        def get():
            if not exact:
                exact.append(_float64_run(program, inputs, list(leaves), list(diff), list(grads_out)))
            return exact[0][part]
        return get

    return reference


def check_program(program: Callable, inputs: list[torch.Tensor], bitwise: tuple = (), nan_signs: tuple = (),
                  mutates: bool = False, first_sizes: list[torch.Tensor] | None = None,
                  options: dict | None = None) -> None:
    """``program`` compiled by torchfuse equals eager on ``inputs``: every output, and the
    gradients of its floating-point outputs with respect to the inputs that require grad; a
    program that updates no input is called twice (the first call interprets each compiled
    graph step by step, the second runs its generated function), and the outputs and
    gradients of both calls are compared.

    ``bitwise``, ``nan_signs``: indices of outputs compared bit for bit (signed zeros), and
    NaN signs too (:func:`assert_same_bits`). ``mutates``: the program updates inputs in place;
    it then enters through TorchDynamo (``make_fx`` would run it while tracing), and every
    input's final value and whether its version counter rose are compared with eager's.

    ``first_sizes``: inputs of other sizes (those of ``inputs`` but for the sizes TorchDynamo
    specializes, 0 and 1) or layouts. The program is then compiled through TorchDynamo with symbolic
    sizes and called on them twice (the second call runs the graph's generated function for
    those sizes), then on ``inputs`` twice (once for a program that updates inputs; the last
    call, whose gradients are checked, runs another generated function for the new sizes),
    every output and updated input compared with eager's: the
    kernels generated and launch plans made for a size symbol serve other values. ``options``:
    torchfuse's options for that compile."""
    eager_in, fused_in = _fresh(inputs), _fresh(inputs)
    versions = [t._version for t in fused_in]
    expected = program(*eager_in)
    first: list = []
    if first_sizes is not None:
        import torchfuse

        compiled = torchfuse.compile(program, dynamic=True, interpret_integer_division=True, **(options or {}))
        eager_first = _fresh(first_sizes)
        at_first = program(*eager_first)
        through_first, reference_first = program_dtypes(program, first_sizes), _float64_reference(program, first_sizes)
        for _ in range(2):
            fused_first = _fresh(first_sizes)
            assert_same(tuple(compiled(*fused_first)), at_first, "output at the first sizes", through_first,
                        reference_first(0))
            if mutates:
                assert_same(fused_first, eager_first, "input after the call at the first sizes", through_first,
                            reference_first(2))
        if not mutates:
            first.append(tuple(compiled(*fused_in)))
        actual = tuple(compiled(*fused_in))
    elif mutates:
        actual, _ = run_compiled(program, *fused_in)
        actual = tuple(actual)
    else:  # called twice: the second call runs each compiled graph's generated function
        actual, _ = run_traced(program, *fused_in, calls=2, earlier=first)
    through = program_dtypes(program, inputs)
    leaves = [i for i, t in enumerate(inputs) if t.requires_grad]
    diff = [k for k, e in enumerate(expected) if e.requires_grad and e.dtype.is_floating_point]
    g = torch.Generator().manual_seed(0)
    grads_out = [torch.randn(expected[k].shape, generator=g, dtype=F64).to(expected[k].dtype).to(DEVICE)
                 for k in diff]
    reference = _float64_reference(program, inputs, leaves, diff, grads_out)
    for earlier in first:
        assert_same(earlier, expected, "output of the first call", through, reference(0))
    assert_same(actual, expected, "output", through, reference(0))
    for k in bitwise:
        exact_k = lambda k=k: (reference(0)() or [None] * (k + 1))[k]  # noqa: E731
        assert_same_bits(actual[k], expected[k], f"output {k}", k in nan_signs, exact_k)
    if mutates:
        assert_same(fused_in, eager_in, "input after the call", through, reference(2))
        for k, (f, e, v) in enumerate(zip(fused_in, eager_in, versions)):
            assert (f._version > v) == (e._version > v), f"input {k}: version counter {v} -> {f._version}, " \
                                                         f"eager's -> {e._version}"
    if not leaves or not diff:
        return
    try:
        want = torch.autograd.grad([expected[k] for k in diff], [eager_in[i] for i in leaves], grads_out,
                                   allow_unused=True)
    except RuntimeError:  # no gradient in eager (floor_divide has no derivative; a saved input was
        # updated in place since): torchfuse's backward must raise too, through TorchDynamo (the
        # user's path: make_fx's graph of ``x ** flags`` converts the bool exponent to float first)
        again = _fresh(inputs)
        out, _ = run_compiled(program, *again) if not mutates else (actual, None)
        with pytest.raises(RuntimeError):
            torch.autograd.grad([out[k] for k in diff], [(fused_in if mutates else again)[i] for i in leaves],
                                grads_out, allow_unused=True)
        return
    zero = lambda gs, ins: [torch.zeros_like(ins[i]) if x is None else x for x, i in zip(gs, leaves)]
    # the first call's backward first (its graph interpreted), then the second's (generated)
    for outs, what in [(o, "gradient of the first call") for o in first] + [(actual, "gradient")]:
        try:
            got = torch.autograd.grad([outs[k] for k in diff], [fused_in[i] for i in leaves], grads_out,
                                      allow_unused=True)
        except RuntimeError:
            if not _aot_eager_backward_raises(program, inputs, diff, leaves, grads_out):
                raise
            return  # PyTorch's own (see _aot_eager_backward_raises)
        assert_same(zero(got, fused_in), zero(want, eager_in), what, through, reference(1))


def _aot_eager_backward_raises(program: Callable, inputs: list[torch.Tensor], diff: list[int], leaves: list[int],
                               grads_out: list[torch.Tensor]) -> bool:
    """Whether ``torch.compile(backend="aot_eager")`` (AOTAutograd without torchfuse) also fails
    to differentiate ``program``, a failure of PyTorch's that torchfuse inherits: an input
    without gradient updated in place by one that requires grad (``x1.mul_(x0)``) is saved for
    the backward by the min-cut partitioner, then written by AOTAutograd's copy back, and the
    backward reports it as modified in place; ``_unsafe_masked_index`` of an empty tensor,
    whose meta function gives another shape than its kernel (``[1, 1, 0]`` against eager's
    ``[1, 0, 0]``), so AOTAutograd cannot fit the tangent to the shape it expects."""
    import torch._dynamo

    ins = _fresh(inputs)
    torch._dynamo.reset()
    out = torch.compile(program, backend="aot_eager", dynamic=False)(*ins)
    try:
        torch.autograd.grad([out[k] for k in diff], [ins[i] for i in leaves], grads_out, allow_unused=True)
    except RuntimeError:
        return True
    return False


def _float64_run(program: Callable, inputs: list[torch.Tensor], leaves: list[int], diff: list[int],
                 grads_out: list[torch.Tensor]):
    """``(outputs, gradients, inputs after the call)`` of ``program`` on float64 copies of its
    float inputs, with float64 as the default dtype (the same output gradients, widened);
    ``(None, None, None)`` when it does not run that way."""
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
        return list(outs), list(grads), [t.detach() for t in wide]
    except (RuntimeError, TypeError, IndexError, ValueError, NotImplementedError):
        return None, None, None
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
    check_program(fn, inputs, program.bitwise, program.nan_signs, program.mutates)


def _grown(specs: tuple[InputSpec, ...]) -> list[InputSpec]:
    """The same inputs with every size of 2 and over one larger: equal sizes stay equal, so
    broadcasting still holds, and parities flip; sizes 0 and 1 (which TorchDynamo
    specializes) stay."""
    return [dataclasses.replace(s, shape=tuple(d + 1 if d >= 2 else d for d in s.shape)) for s in specs]


def _relaid(specs: list[InputSpec]) -> list[InputSpec]:
    """The same inputs, each in the next layout of :data:`LAYOUTS` (contiguous -> transposed,
    channels-last -> strided, expanded -> contiguous, ...), but none newly expanded: an input
    the program writes to must not be (TorchDynamo refuses ``x.copy_(x)`` into one, which
    eager runs)."""
    def next_layout(layout: str) -> str:
        following = LAYOUTS[(LAYOUTS.index(layout) + 1) % len(LAYOUTS)]
        return "contiguous" if following == "expanded" else following

    return [dataclasses.replace(s, layout=next_layout(s.layout)) for s in specs]


#: how the second call's inputs differ from the first's: larger sizes, other layouts, or both
CHANGES = {"sizes": _grown, "layouts": _relaid, "sizes and layouts": lambda specs: _relaid(_grown(specs))}


#: the compile options of the two-size programs: reductions kept in registers only up to 4
#: elements, and split into partial sums from 4 (8 under a GPU's launch configurations)
#: reduced elements, so that a reduction's scheduler can change between the two sizes
TWO_SIZE_OPTIONS = ({}, {"persistent_max_elements": 4}, {"tuning": "split.interpret_min_r=4,split.min_r=8"},
                    {"persistent_max_elements": 4, "tuning": "split.interpret_min_r=4,split.min_r=8"})


def _run_at_two_sizes(program: Program, options: dict, change: str) -> None:
    note(program.test_source())
    note(f"options {options}, second inputs: other {change}")
    first = [s.make() for s in program.inputs]
    inputs = [s.make() for s in CHANGES[change](list(program.inputs))]
    assume(any(a.shape != b.shape or a.stride() != b.stride() or a.storage_offset() != b.storage_offset()
               for a, b in zip(first, inputs)))
    fn = program.function()
    try:
        fn(*_fresh(first))
        fn(*_fresh(inputs))
    except (RuntimeError, TypeError, IndexError, ValueError, NotImplementedError):
        assume(False)  # a size written into the program (a reshape, an expand) that fits only the first sizes
    check_program(fn, inputs, program.bitwise, program.nan_signs, program.mutates, first_sizes=first,
                  options=options)


def test_fuzz_programs_at_two_sizes(pytestconfig):
    """Random programs compiled by torchfuse with symbolic sizes, called at two sets of sizes
    (or of layouts, or both), equal eager at both (forward and backward at the second): the
    kernels and launch plans made for the first serve the second, or are made again where
    the layouts differ. Most are compiled with options under which a reduction's scheduler
    changes between the two sizes (:data:`TWO_SIZE_OPTIONS`)."""
    _fuzz(pytestconfig, max(1, pytestconfig.getoption("fuzz_examples") // 4), _run_at_two_sizes,
          programs(), st.sampled_from(TWO_SIZE_OPTIONS), st.sampled_from(sorted(CHANGES)))


def test_fuzz_programs(pytestconfig):
    """Random programs compiled by torchfuse equal eager (forward and backward)."""
    _fuzz(pytestconfig, pytestconfig.getoption("fuzz_examples"), _run, programs())


def _fuzz(pytestconfig, examples: int, check: Callable, *strategies) -> None:
    """Run ``check`` on ``examples`` draws of ``strategies``: derandomized (CI's fixed
    programs), or from ``--fuzz-seed``."""
    run = settings(max_examples=examples, deadline=None, database=None, print_blob=True,
                   derandomize=pytestconfig.getoption("fuzz_seed") is None,
                   suppress_health_check=list(HealthCheck))(given(*strategies)(check))
    if pytestconfig.getoption("fuzz_seed") is not None:
        run = seed(pytestconfig.getoption("fuzz_seed"))(run)
    run()


def test_generated_programs_cover_the_grammar():
    """Over the first 2500 programs (generation only, no compilation; the sequence
    depends on the hypothesis version) the strategy reaches every op family, every layout
    and dtype, size-0 dims and gradients (so a bounded CI run is not exercising a corner)."""
    seen: list[Program] = []

    @settings(max_examples=2500, database=None, derandomize=True, deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(programs())
    def collect(p):
        seen.append(p)

    collect()
    text = "\n".join(ln for p in seen for ln in p.lines)
    for fragment in ["torch.sin(", "torch.softmax(", "keepdim=True))", " / ", "torch.where(", " < ", ".sum(", ".mean(", ".var(", ".amax(", ".argmax(",
                     ".any(", ".permute(", ".transpose(", ".unsqueeze(", ".squeeze(", ".expand(", "::2", "1:]",
                     ".reshape(", ".to(torch.int32)", ".to(torch.bfloat16)", "torch.floor(", "~",
                     " % ", "torch.fmod(", " // ", "rounding_mode='trunc'", "rounding_mode='floor'", " ** ",
                     "torch.copysign(", "alpha=", "-0.0", "1000", "_unsafe_masked_index(", "slice_scatter(",
                     "select_scatter(", ".narrow(", "torch.zeros_like(", "torch.full_like(", ".add_(", ".copy_(",
                     "value=-0.0)", ").__setitem__((", "torch.cat([", "torch.stack([", "max_pool2d("]:
        assert fragment in text, fragment
    # a number first (2.5 - x), indices below zero, one value read by several returned results
    assert re.search(r"= -?[0-9.]+ [-+*/%]", text) and re.search(r"tensor\(\[[^]]*-\d", text)
    shared = [p for p in seen if any(ln.startswith("v") and "zeros_like" in ln for ln in p.lines) and len(p.outputs) >= 3]
    assert shared
    assert any(p.bitwise for p in seen) and any(p.nan_signs for p in seen)
    assert any(p.mutates and any(s.grad for s in p.inputs) for p in seen)  # a buffer updated in a training graph
    # a part of an input updated through a view
    assert re.search(r"(\]|\.t\(\)|\.unsqueeze\(0\))\.(add_|sub_|mul_|copy_|neg_|clamp_)\(", text)
    dtypes_with_numbers = {s.dtype for p in seen for s in p.inputs
                           if any(re.search(r"[-+*/%] -?[0-9.]+\b|-?[0-9.]+ [-+*/%]", ln) for ln in p.lines)}
    assert {F16, BF16, I8, I32} <= dtypes_with_numbers
    inputs = [s for p in seen for s in p.inputs]
    assert {s.layout for s in inputs} == set(LAYOUTS)
    assert {s.dtype for s in inputs} == set(DTYPES)
    assert any(s.layout == "channels_last" and len(s.shape) == 4 for s in inputs)
    assert any(0 in s.shape for s in inputs) and any(s.specials for s in inputs)
    assert any(s.grad for s in inputs)
    assert any(len(p.lines) >= 4 and len(p.inputs) >= 2 for p in seen)
