"""Completeness of the op registry: every registered op against every rule table (ATen
overloads, type-promotion rule, compute dtypes, Triton emission, reduction combine), the
helpers and ``libdevice`` functions its emissions call, scalar literals, and a test that
exercises it. Nothing here compiles a graph, so these run in about a second.
"""
from __future__ import annotations

import math
import re
from pathlib import Path

import pytest
import torch
from torch._prims_common import ELEMENTWISE_TYPE_PROMOTION_KIND as PROMOTE

import test_ops
import test_reductions
from torchfuse.codegen import helpers, triton as codegen
from torchfuse.codegen.reductions import Reductions, acc_dtype
from torchfuse.ir import ops
from torchfuse.runtime import interpreter_math

KINDS = {"pointwise", "reduction", "layout", "constant", "random"}
#: Ops taken at their operands' own dtypes (no promotion), by design.
UNPROMOTED = {"cast", "clone", "copy"}
#: Registry ops tested outside the generated tables: op -> (test file, test function).
TESTED_ELSEWHERE = {
    "permute": ("test_layouts.py", "test_layout_ops_inside_groups"),
    "expand": ("test_layouts.py", "test_layout_ops_inside_groups"),
    "unsqueeze": ("test_layouts.py", "test_layout_ops_inside_groups"),
    "squeeze": ("test_layouts.py", "test_layout_ops_inside_groups"),
    "reshape": ("test_layouts.py", "test_layout_ops_inside_groups"),
    "alias": ("test_layouts.py", "test_layout_ops_inside_groups"),
    "broadcast_in_dim": ("test_layouts.py", "test_broadcast_in_dim_inside_group"),
    "full": ("test_layouts.py", "test_constants_inside_groups"),
    "full_like": ("test_layouts.py", "test_constants_inside_groups"),
    "scalar_tensor": ("test_layouts.py", "test_constants_inside_groups"),
    "arange": ("test_layouts.py", "test_arange_inside_groups"),
    "rand": ("test_random.py", "rand"),
    "randn": ("test_random.py", "randn"),
    "bernoulli": ("test_random.py", "bernoulli"),
}

POINTWISE = sorted(n for n, d in ops.REGISTRY.items() if d.kind == "pointwise")
REDUCTIONS = sorted(n for n, d in ops.REGISTRY.items() if d.kind == "reduction")


@pytest.mark.parametrize("name", sorted(ops.REGISTRY))
def test_entry_is_complete(name):
    """Kind, dtypes and ATen overloads are well formed, and each overload maps back to it."""
    opdef = ops.REGISTRY[name]
    assert opdef.name == name
    assert opdef.kind in KINDS
    assert opdef.dtypes and opdef.dtypes <= ops.KERNEL_DTYPES, opdef.dtypes
    assert opdef.aten, f"{name} has no ATen overload"
    for overload in opdef.aten:
        assert isinstance(overload, torch._ops.OpOverload), overload
        assert ops.lookup(overload) is opdef, overload
    assert callable(opdef.parse)
    if opdef.domain is not None:
        low, high = opdef.domain
        assert low < high


@pytest.mark.parametrize("name", sorted(ops.REGISTRY))
def test_every_op_has_a_test(name):
    """Adding an op to the registry without a test fails here."""
    if name in POINTWISE:
        assert name in {s.op for s in test_ops.SPECS.values()}, f"add {name} to test_ops.SPECS"
    elif name in REDUCTIONS:
        assert name in {s.op for s in test_reductions.RSPECS.values()}, f"add {name} to test_reductions.RSPECS"
    else:
        assert name in TESTED_ELSEWHERE, f"no test named for {name}"
        path, needle = TESTED_ELSEWHERE[name]
        text = (Path(__file__).parent / path).read_text()
        assert needle in text, f"{path} does not mention {needle}"


def _emit_variants(name: str) -> list[dict]:
    """The attribute combinations the op's parser can produce (each emits differently)."""
    return {
        "div": [{}, *({"rounding_mode": m, **extra} for m in ("trunc", "floor")
                      for extra in ({}, {"divisor": "number"}, {"common_dtype": torch.bfloat16},
                                    {"common_dtype": torch.float16, "divisor": "one_element"}))],
        "add": [{}, {"alpha": 2}], "sub": [{}, {"alpha": 2}],
        "pow": [{}, *({"exponent_value": e} for e in (2.0, 3.0, 0.5, -0.5, -1.0, -2.0, 1.0, 1.7))],
    }.get(name, [{}])


@pytest.mark.parametrize("name", POINTWISE)
def test_pointwise_rules(name):
    """Promotion rule and an emission for every compute dtype and attribute variant; every
    helper and ``libdevice`` function an emission calls exists in the kernel header, in
    Triton's libdevice (GPU) and in its interpreter stand-in (CPU)."""
    opdef = ops.REGISTRY[name]
    if name in UNPROMOTED:
        assert opdef.promotion is None
    else:
        assert callable(opdef.promotion) or isinstance(opdef.promotion, PROMOTE), opdef.promotion
    assert callable(opdef.emit)
    nargs = {"where": 3, "clamp": 3, "fma": 3}.get(name, 2)
    from triton.language.extra import libdevice

    for dtype in sorted(opdef.dtypes, key=str):
        for attrs in _emit_variants(name):
            text = opdef.emit([f"a{i}" for i in range(nargs)], dtype, attrs)
            assert isinstance(text, str) and text, (name, dtype, attrs)
            for fn in re.findall(r"libdevice\.(\w+)", text):
                assert fn in interpreter_math._FUNCTIONS, f"{fn} missing from interpreter_math"
                assert hasattr(libdevice, fn), f"{fn} missing from Triton's libdevice"
            for helper in re.findall(r"\b(tf_\w+)\(", text):
                assert helper in helpers.HELPERS, helper


def test_header_helpers_are_declared():
    """The helpers defined in the kernel headers (the one every kernel holds, and those only
    kernels that call their helpers hold) are exactly the ones the loader wraps, and each name
    that copies an on-demand header is defined (or imported) there."""
    headers = codegen.HEADER + codegen.HEADER_ON_DEMAND + codegen.RANDOM_ON_DEMAND
    defined = re.findall(r"^def (tf_\w+)\(", headers, flags=re.M)
    assert sorted(defined) == sorted(helpers.HELPERS)
    assert headers.count("@triton.jit") == len(defined)
    assert set(helpers.ON_DEMAND) == set(re.findall(r"^def (tf_\w+)\(", codegen.HEADER_ON_DEMAND, flags=re.M))
    random_names = re.findall(r"^def (tf_\w+)\(|^from .* import \w+ as (tf_\w+)$", codegen.RANDOM_ON_DEMAND, flags=re.M)
    assert set(helpers.RANDOM_ON_DEMAND) <= {a or b for a, b in random_names}


@pytest.mark.parametrize("name", REDUCTIONS)
def test_reduction_rules(name):
    """Every reduction has a combine the code generator knows, with an identity per dtype."""
    opdef = ops.REGISTRY[name]
    info = ops.REDUCTIONS[name]
    assert opdef.promotion is None
    assert info.combine in {"sum", "prod", "max", "min", "welford", "argmax", "argmin", "any", "all"}
    assert info.outputs and set(info.outputs) <= {"value", "index", "var", "mean"}
    writer = Reductions()
    for dtype in opdef.dtypes:
        acc = torch.int8 if dtype == torch.bool else acc_dtype(dtype)
        assert writer.identity(info.combine, acc)


def _evaluate_literal(text: str):
    """The value a literal expression denotes (the few shapes ``ops.literal`` produces)."""
    m = re.fullmatch(r"tl\.full\(\[\], (-\d+), tl\.int(\d+)\)\.to\(tl\.(\w+), bitcast=True\)", text)
    if m:  # a bit pattern (only the sign bit set: -0.0)
        bits, width, name = int(m.group(1)), int(m.group(2)), m.group(3)
        as_int = torch.tensor([bits], dtype=getattr(torch, f"int{width}"))
        return as_int.view(getattr(torch, name)).item()
    m = re.fullmatch(r"tl\.full\(\[\], (.+), tl\.\w+\)(\.to\(tl\.\w+\))?", text)
    body = m.group(1) if m else text
    return eval(body, {"float": float})


LITERALS = [
    (1.7, torch.float64, 1.7), (0.1, torch.float32, float(torch.tensor(0.1, dtype=torch.float32))),
    (-0.0, torch.float32, -0.0), (-0.0, torch.float64, -0.0), (-0.0, torch.float16, -0.0),
    (1000, torch.int8, -24), (-1, torch.uint8, 255), (2**40 + 1, torch.int64, 2**40 + 1),
    (2**24 + 1, torch.float32, 2.0**24), (1e300, torch.float32, math.inf), (float("nan"), torch.float16, math.nan),
    (True, torch.float32, 1.0), (2.5, torch.int32, 2), (-2**63, torch.int64, -2**63), (7, torch.bool, 1),
    (65520.0, torch.float16, math.inf), (0.1, torch.bfloat16, float(torch.tensor(0.1).bfloat16())),
    (-0.0, torch.bfloat16, -0.0), (1e-40, torch.float32, float(torch.tensor(1e-40, dtype=torch.float32))),
    (-2.0**-149, torch.float32, -2.0**-149),
]


@pytest.mark.parametrize("value,dtype,expected", LITERALS, ids=[f"{v}-{d}" for v, d, _ in LITERALS])
def test_literal(value, dtype, expected):
    """Scalars convert as PyTorch converts them: from their own 64-bit type, wrapping
    integers, keeping float64 digits and the sign of zero."""
    text = ops.literal(value, dtype)
    got = 1 if dtype == torch.bool and text.startswith("tl.full([], 1,") else _evaluate_literal(text)
    if isinstance(expected, float) and math.isnan(expected):
        assert math.isnan(got)
    else:
        assert got == expected and math.copysign(1, got) == math.copysign(1, expected), (text, expected)
    if dtype == torch.float64:
        assert "tl.float64" in text  # a bare Python float would be an fp32 constant in Triton
    if dtype == torch.float32 and got != 0 and abs(got) < 2.0 ** -126:
        assert "tl.float32" in text  # a bare Python float this small would be an fp64 constant
