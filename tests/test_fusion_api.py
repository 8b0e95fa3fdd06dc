"""The fusion-definition API (torchfuse.fusion): definition-time errors, execution against
eager for the op namespace across dtypes, kernel reuse for new sizes, autograd (derived and
given backward), the fusion as one op inside torch.compile, and the ``@fused`` decorator."""
from __future__ import annotations

import math
import re
import warnings

import pytest
import torch
import torch.nn.functional as F

import torchfuse
from conftest import DEVICE
from torchfuse.fusion import DefinitionError, DefinitionTypeError, Fusion, fused
from torchfuse.ir import ops as registry

pytestmark = pytest.mark.filterwarnings("ignore:.*encountered in:RuntimeWarning")

F16, BF16, F32, F64, I32, BOOL = torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.int32, torch.bool


def sample(shape, dtype, low=-3.0, high=3.0, nonzero=False):
    g = torch.Generator().manual_seed(hash((tuple(shape), str(dtype), low)) % 2**31)
    if dtype == BOOL:
        return torch.rand(shape, generator=g) > 0.5
    x = torch.rand(shape, generator=g, dtype=F64) * (high - low) + low
    if not dtype.is_floating_point:
        x = x.round()
        if nonzero:
            x = torch.where(x == 0, torch.ones_like(x), x)
    return x.to(dtype).to(DEVICE)


# ----------------------------------------------------------------------------- definition errors

def _two(fd, a=(-1, -1), b=(-1, -1), da=F32, db=F32):
    return fd.define_tensor(list(a), da, name="x"), fd.define_tensor(list(b), db, name="y")


ERRORS = [
    # (what, definition, exception type, fragments the message must hold)
    ("rank", lambda fd: fd.ops.add(*_two(fd, b=(-1,))), DefinitionError, ["add:", "'other'", "y", "rank 1", "rank 2"]),
    ("static sizes", lambda fd: fd.ops.mul(*_two(fd, a=(4, -1), b=(5, -1))), DefinitionError,
     ["mul:", "'other'", "y", "cannot broadcast", "4", "5"]),
    ("named sizes", lambda fd: fd.ops.sub(*_two(fd, a=("N", -1), b=("M", -1))), DefinitionError,
     ["sub:", "'other'", "named size N", "named size M"]),
    ("broadcast_in_dim size", lambda fd: fd.ops.broadcast_in_dim(fd.define_tensor([5], name="x"), [3, 4], [1]),
     DefinitionError, ["broadcast_in_dim:", "operand 'a'", "x", "4"]),
    ("broadcast_in_dim dims", lambda fd: fd.ops.broadcast_in_dim(fd.define_tensor([-1, -1], name="x"), [3, 4], [1]),
     DefinitionError, ["broadcast_in_dim:", "operand 'a'", "rank 2"]),
    ("bitwise on floats", lambda fd: fd.ops.bitwise_and(*_two(fd)), DefinitionTypeError,
     ["bitwise_and:", "'self'", "x: float32", "float32"]),
    ("bool subtraction", lambda fd: fd.ops.sub(*_two(fd, da=BOOL, db=BOOL)), DefinitionTypeError,
     ["sub:", "'self'", "x: bool"]),
    ("float condition", lambda fd: fd.ops.where(fd.define_tensor([-1], name="c"), 1.0, 0.0), DefinitionTypeError,
     ["where:", "'condition'", "c: float32"]),
    ("integer variance", lambda fd: fd.ops.var_mean(fd.define_tensor([-1], I32, name="i")), DefinitionTypeError,
     ["var_mean:", "'self'", "i: int32"]),
    ("integer random", lambda fd: fd.ops.rand_like(fd.define_tensor([-1], I32, name="i")), DefinitionTypeError,
     ["rand_like:", "int32"]),
    ("reduction dim", lambda fd: fd.ops.sum(fd.define_tensor([-1, -1], name="x"), 2), DefinitionError,
     ["sum:", "dim 2", "'self'", "x"]),
    ("squeeze", lambda fd: fd.ops.squeeze(fd.define_tensor([-1, 1], name="x"), 0), DefinitionError,
     ["squeeze:", "'self'", "x", "not 1"]),
    ("reshape", lambda fd: fd.ops.reshape(fd.define_tensor([-1, 4], name="x"), [3, -1]), DefinitionError,
     ["reshape:", "'self'", "x"]),
    ("torch tensor operand", lambda fd: fd.ops.exp(torch.ones(3)), DefinitionTypeError,
     ["exp:", "'self'", "torch.Tensor", "define_tensor"]),
    ("complex input", lambda fd: fd.define_tensor([-1], torch.complex64, name="z"), DefinitionTypeError,
     ["define_tensor:", "'z'", "complex64"]),
    ("output is an input", lambda fd: fd.add_output(fd.define_tensor([-1], name="x")), DefinitionError,
     ["add_output:", "x", "is an input"]),
    ("output from no input", lambda fd: fd.add_output(fd.ops.full([4], 1.0)), DefinitionError,
     ["add_output:", "not computed from any input"]),
    ("operand of another fusion", lambda fd: fd.ops.add(fd.define_tensor([-1], name="x"),
                                                        Fusion("other").define_tensor([-1], name="z")),
     DefinitionError, ["add:", "'other'", "z", "another fusion"]),
]


@pytest.mark.parametrize("what,define,error,fragments", ERRORS, ids=[e[0] for e in ERRORS])
def test_definition_errors_name_op_and_operand(what, define, error, fragments):
    with pytest.raises(error) as info:
        define(Fusion("errors"))
    for fragment in fragments:
        assert fragment in str(info.value), (fragment, str(info.value))


def test_finished_fusion_and_missing_outputs():
    fd = Fusion("empty")
    fd.define_tensor([-1], name="x")
    with pytest.raises(DefinitionError, match="no outputs"):
        fd.finish()
    with Fusion("done") as fd:
        x = fd.define_tensor([-1], name="x")
        fd.add_output(x * 2)
    with pytest.raises(DefinitionError, match="exp: fusion 'done' is finished"):
        fd.ops.exp(x)
    with Fusion("next") as nxt:  # a finished fusion's value in another one: declare an input
        y = nxt.define_tensor([-1], name="y")
        with pytest.raises(DefinitionError, match="'done' is finished.*declare it as an input there"):
            nxt.add_output(x + y)
        nxt.add_output(y + 1)


# ----------------------------------------------------------------------------- execution vs eager

def _pointwise_names(nargs: int) -> list[str]:
    from torchfuse.fusion.ops import FROM_REGISTRY

    return [name for name, n in FROM_REGISTRY.items() if n == nargs]


@pytest.mark.parametrize("dtype", [F32, F16, I32, BOOL], ids=str)
def test_pointwise_namespace_matches_eager(dtype):
    """Every pointwise op of the namespace generated from the registry that takes ``dtype``, all in
    one fusion (one kernel), against the same ATen op in eager PyTorch."""
    shape = (5, 37)
    applied, skipped = [], []
    with Fusion(f"pointwise_{dtype}", interpret_integer_division=True) as fd:
        inputs = {}

        def operand(domain, k, nonzero=False):
            key = (domain, k, nonzero)
            if key not in inputs:
                inputs[key] = (fd.define_tensor(["N", "C"], dtype, name=f"in{len(inputs)}"),
                               sample(shape, dtype, *(domain or (-3.0, 3.0)), nonzero=nonzero))
            return inputs[key]

        for nargs in (1, 2, 3):
            for name in _pointwise_names(nargs):
                opdef = registry.REGISTRY[name]
                nonzero = opdef.integer_division or name == "pow"
                args = [operand(opdef.domain, k, nonzero and k == 1) for k in range(nargs)]
                try:
                    out = getattr(fd.ops, name)(*[a[0] for a in args])
                except DefinitionTypeError:
                    skipped.append(name)
                    continue
                fd.add_output(out)
                applied.append((name, opdef.aten[0], [a[1] for a in args]))
    data = [t for _, t in inputs.values()]
    results = fd.execute(data)
    assert fd.num_kernels(DEVICE) == 1, fd.explain(DEVICE)
    assert len(applied) >= {F32: 60, F16: 55, I32: 35, BOOL: 15}[dtype], (applied, skipped)
    tol = {F16: dict(atol=2e-3, rtol=2e-3)}.get(dtype, dict(atol=1e-5, rtol=2e-5))
    for (name, overload, args), got in zip(applied, results):
        want = overload(*args)
        torch.testing.assert_close(got, want, equal_nan=True, **tol, msg=lambda m: f"{name}: {m}")


def test_reductions_match_eager():
    x_data = sample((6, 33, 5), F32)
    with Fusion("reductions") as fd:
        x = fd.define_tensor([-1, -1, -1], F32, name="x")
        outs = [fd.ops.sum(x, 1), fd.ops.mean(x, 1, keepdim=True), fd.ops.amax(x, 1), fd.ops.amin(x, 1),
                fd.ops.var(x, 1, correction=0), *fd.ops.var_mean(x, 1), fd.ops.argmax(x, 1), fd.ops.argmin(x, 1),
                fd.ops.any(x > 2.5, 1), fd.ops.all(x > -2.9, 1), fd.ops.prod(x, 1)]
        for o in outs:
            fd.add_output(o)
    got = fd.execute([x_data])
    want = [x_data.sum(1), x_data.mean(1, keepdim=True), x_data.amax(1), x_data.amin(1), x_data.var(1, correction=0),
            *torch.var_mean(x_data, 1), x_data.argmax(1), x_data.argmin(1), (x_data > 2.5).any(1),
            (x_data > -2.9).all(1), x_data.prod(1)]
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-5)
    assert fd.num_kernels(DEVICE) == 1, fd.explain(DEVICE)


@pytest.mark.parametrize("dtype", [F32, BF16], ids=str)
def test_layout_casts_constants_and_sizes(dtype):
    x_data, b_data = sample((4, 7), dtype), sample((7,), dtype)
    with Fusion("layout") as fd:
        x = fd.define_tensor(["N", "C"], dtype, name="x")
        b = fd.define_tensor(["C"], dtype, name="b")
        bb = fd.ops.broadcast_in_dim(b, x.shape, [1])
        y = fd.ops.cast(x, F32) * 2 - fd.ops.cast(bb, F32)
        t = fd.ops.transpose(y, 0, 1)
        u = fd.ops.unsqueeze(fd.ops.sum(y, 1), 1)
        fd.add_output(fd.ops.where(y > 0, y, fd.ops.full_like(y, -1.0)))
        fd.add_output(fd.ops.permute(t * 3, [1, 0]))
        fd.add_output(fd.ops.squeeze(u, 1) / x.shape[1])               # a size as a runtime scalar
        fd.add_output(fd.ops.clamp(fd.ops.expand(fd.ops.reshape(b, [1, -1]), [x.shape[0], -1]), -0.5, 0.5))
        fd.add_output(fd.ops.cast(2.0 - y, dtype))                      # a number first: a 0-dim constant
    y = x_data.float() * 2 - b_data.float()
    want = [torch.where(y > 0, y, -1.0), y * 3, y.sum(1) / 7, b_data.reshape(1, -1).expand(4, -1).clamp(-0.5, 0.5),
            (2.0 - y).to(dtype)]
    for got, w in zip(fd.execute([x_data, b_data]), want):
        torch.testing.assert_close(got, w)


def test_new_sizes_reuse_the_kernel():
    with Fusion("softmax") as fd:
        x = fd.define_tensor([-1, -1], F32, name="x")
        fd.add_output(fd.ops.softmax(x, 1))
    program = fd.program(DEVICE)
    keys = []
    for shape in [(8, 40), (3, 17), (11, 64)]:
        x_data = sample(shape, F32)
        torch.testing.assert_close(fd.execute([x_data])[0], torch.softmax(x_data, 1))
        keys.append(program.kernel_keys())
    assert keys[0] == keys[1] == keys[2] and len(keys[0]) == 1
    assert program.compiled.stats["kernels_compiled"] <= 1
    assert program.compiled.stats["kernels_cached"] >= 2 or program.compiled.stats["kernels_compiled"] == 0


def test_execute_checks_inputs():
    with Fusion("checked") as fd:
        x = fd.define_tensor(["N", -1], F32, contiguity=True, name="x")
        y = fd.define_tensor(["N", 1], F32, name="y")
        fd.add_output(x + y)
    good = [sample((3, 4), F32), sample((3, 1), F32)]
    torch.testing.assert_close(fd.execute(good)[0], good[0] + good[1])
    cases = [([good[0].double(), good[1]], TypeError, "dtype"),
             ([good[0], sample((4, 1), F32)], ValueError, "size N"),
             ([good[0], sample((3, 2), F32)], ValueError, "broadcast"),
             ([sample((4, 3), F32).t(), good[1]], ValueError, "stride"),
             ([good[0]], TypeError, "takes 2 inputs"),
             (good[0], TypeError, "takes a list of its 2 inputs, got one tensor")]  # not its rows
    for inputs, error, fragment in cases:
        with pytest.raises(error, match=fragment):
            fd.execute(inputs)


def test_execute_checks_each_signature_once_and_every_failing_call():
    """A call whose inputs have the types, dtypes, devices, shapes (and, where a layout is
    declared, strides) of a call that passed is not checked again; a call that fails raises
    every time, and one that differs only in a declared layout's strides is checked."""
    with Fusion("checked_once") as fd:
        x = fd.define_tensor(["N", -1], F32, contiguity=True, name="x")
        y = fd.define_tensor(["N", 1], F32, name="y")
        fd.add_output(x + y)
    good = [sample((3, 4), F32), sample((3, 1), F32)]
    for _ in range(3):
        torch.testing.assert_close(fd.execute(good)[0], good[0] + good[1])
    assert len(fd.bind.memo) == 1
    for _ in range(2):
        with pytest.raises(ValueError, match="size N"):
            fd.execute([good[0], sample((4, 1), F32)])
        with pytest.raises(ValueError, match="stride"):
            fd.execute([sample((4, 3), F32).t(), good[1]])  # (3, 4) as the good call, another layout
    assert len(fd.bind.memo) == 1
    fd.execute([sample((5, 2), F32), sample((5, 1), F32)])
    assert len(fd.bind.memo) == 2


def test_runtime_scalar_changes_without_recompiling():
    with Fusion("scaled") as fd:
        x = fd.define_tensor([-1], F32, name="x")
        s = fd.define_scalar(float, name="s")
        fd.add_output(fd.ops.mul(x, s) + 1.0)
    x_data = sample((50,), F32)
    for s in (0.5, -2.25):
        torch.testing.assert_close(fd.execute([x_data, s])[0], x_data * s + 1.0)
    assert len(fd.program(DEVICE).kernel_keys()) == 1


def test_scalars_and_comparisons_keep_eagers_signs_and_types():
    """A declared scalar minus a tensor is ``s - x`` (``+0.0`` where they are equal, not
    ``-(x - s)``'s ``-0.0``); ``==`` and ``!=`` of fusion tensors are elementwise comparisons
    (Python's identity test made ``a * (a == b)`` zeros); an int scalar given a float, or a
    bool scalar given an int, raises ``TypeError`` instead of being truncated."""
    with Fusion("signs") as fd:
        x = fd.define_tensor([-1], F32, name="x")
        y = fd.define_tensor([-1], F32, name="y")
        s = fd.define_scalar(float, name="s")
        k = fd.define_scalar(int, name="k")
        fd.add_output(s - x)
        fd.add_output(x * (x == y) + (x != y))
        fd.add_output(x * k)
    a, b = torch.tensor([1.0, 2.0, 3.0], device=DEVICE), torch.tensor([1.0, 0.0, 3.0], device=DEVICE)
    diff, eq, scaled = fd.execute([a, b, 1.0, 3])
    want = 1.0 - a
    assert torch.equal(diff, want) and torch.equal(diff.signbit(), want.signbit())
    torch.testing.assert_close(eq, a * (a == b) + (a != b), rtol=0, atol=0)
    torch.testing.assert_close(scaled, a * 3, rtol=0, atol=0)
    with pytest.raises(TypeError, match="int scalar, got float 2.5"):
        fd.execute([a, b, 1.0, 2.5])
    with Fusion("flag") as fd:
        x = fd.define_tensor([-1], F32, name="x")
        fd.add_output(x * fd.define_scalar(bool, name="on"))
    with pytest.raises(TypeError, match="bool scalar, got int"):
        fd.execute([a, 1])


@pytest.mark.parametrize("dtype", [F32, F16, I32], ids=str)
def test_floor_division_and_remainder_operators_are_torchs(dtype):
    """``//`` and ``%`` of fusion tensors, numbers on either side, are ``torch``'s: floor
    division (``div(rounding_mode="floor")``) and ``remainder``, the divisor's sign kept (they
    raised ``TypeError``)."""
    with Fusion("floor_mod", interpret_integer_division=True) as fd:
        x = fd.define_tensor([-1], dtype, name="x")
        y = fd.define_tensor([-1], dtype, name="y")
        fd.add_output(x // y)
        fd.add_output(x % y)
        fd.add_output(x // 3)
        fd.add_output(7 % y)
        fd.add_output(-5 // y)
    a = sample([64], dtype, -20, 20)
    b = sample([64], dtype, -6, 6, nonzero=True)
    if dtype.is_floating_point:
        b = torch.where(b.abs() < 0.5, torch.ones_like(b), b)
    for got, want in zip(fd.execute([a, b]), [a // b, a % b, a // 3, 7 % b, -5 // b]):
        assert got.dtype == want.dtype
        torch.testing.assert_close(got, want, rtol=0, atol=0, equal_nan=True)


@pytest.mark.parametrize("dtype", [F32, F16, BF16, I32], ids=str)
def test_operators_with_a_number_first_are_torchs(dtype):
    """A number on the left of a fusion tensor's operator gives ``torch``'s value: ``3 / t`` is
    ``reciprocal(t) * 3`` as ``Tensor.__rtruediv__`` (a division rounded fp16/bf16 quotients
    differently), ``&``, ``|`` and ``^`` take the number first (they raised ``TypeError``); in
    ``@fused``, ``2 ** x`` and ``3 % x`` (``aten.pow.Scalar``, ``aten.remainder.Scalar_Tensor``,
    refused as outside the op registry) fuse as in a definition, ``2 ** x``'s gradient eager's.
    On CUDA, fp32 powers are libdevice's, an ulp from eager's in some elements (docs/semantics.md)."""
    from torchfuse.fusion import fused

    pow_ulps = dict(rtol=2.5e-7, atol=0) if DEVICE == "cuda" and dtype == F32 else dict(rtol=0, atol=0)
    x = sample([96], dtype, -4, 4, nonzero=True)
    if dtype.is_floating_point:
        x = torch.where(x.abs() < 0.25, torch.ones_like(x), x)
    exact = dict(rtol=0, atol=0)
    cases = [(lambda t: 3 / t, exact), (lambda t: 3 % t, exact), (lambda t: 2.5 % t, exact)]
    if dtype.is_floating_point:
        cases += [(lambda t: 2 ** t, pow_ulps), (lambda t: 1.5 ** t * t, pow_ulps)]
    else:
        cases += [(lambda t: 3 & t, exact), (lambda t: 5 | t, exact), (lambda t: 6 ^ t, exact)]
    for fn, tolerance in cases:
        with Fusion("number_first", interpret_integer_division=True) as fd:
            fd.add_output(fn(fd.define_tensor([-1], dtype, name="x")))
        (got,) = fd.execute([x])
        want = fn(x)
        assert got.dtype == want.dtype
        torch.testing.assert_close(got, want, equal_nan=True, **tolerance)
    if not dtype.is_floating_point:
        return
    for fn, tolerance in ((lambda t: 2 ** t, pow_ulps), (lambda t: 3 % t, exact), (lambda t: 1.5 ** t * t, pow_ulps)):
        got = fused(fn)(x)
        torch.testing.assert_close(got, fn(x), equal_nan=True, **tolerance)
    xg, xe = x.clone().requires_grad_(), x.clone().requires_grad_()
    (fused(lambda t: 2 ** t)(xg) * 1).sum().backward()
    (2 ** xe).sum().backward()
    torch.testing.assert_close(xg.grad, xe.grad, **pow_ulps)


@pytest.mark.parametrize("reduction", ["amax", "amin", "argmax", "argmin"])
def test_a_reduction_with_no_identity_over_an_empty_dim_raises_as_eager(reduction):
    """``amax``/``amin``/``argmax``/``argmin`` over a dim of size 0 raise ``IndexError`` as
    eager does, from a definition (a kernel returned -inf or an index) and from ``@fused``
    (which runs a call with an empty tensor as written: eager's own error), and still run for
    the sizes before and after."""
    call = {"amax": lambda t: t.amax(1), "amin": lambda t: t.amin(1), "argmax": lambda t: t.argmax(1),
            "argmin": lambda t: t.argmin(1)}[reduction]
    with Fusion(reduction) as fd:
        t = fd.define_tensor([-1, -1], F32, name="t")
        fd.add_output(getattr(fd.ops, reduction)(t, 1) * 1)
    traced = fused(lambda t: call(t) * 1)
    full, empty = sample((3, 4), F32), torch.ones(3, 0, device=DEVICE)
    with pytest.raises(IndexError):
        call(empty)
    for run in (lambda t: fd.execute([t])[0], traced):
        torch.testing.assert_close(run(full), call(full) * 1)
        with pytest.raises(IndexError, match="size 0" if run is not traced else "non-zero size"):
            run(empty)
        torch.testing.assert_close(run(full), call(full) * 1)


def test_as_op_backward_tells_a_negative_zero_scalar_apart():
    """The derived backward of ``a / s`` for ``s = -0.0`` is ``-inf``, not the ``+inf`` of a
    backward derived for ``s = 0.0`` (the two are equal as Python numbers)."""
    with Fusion("scaled_div") as fd:
        a = fd.define_tensor([-1], F32, name="a")
        fd.add_output(a / fd.define_scalar(float, name="s"))
    op = fd.as_op()
    for s in (0.0, -0.0, 0.0):
        x = torch.ones(2, device=DEVICE, requires_grad=True)
        op(x, s).sum().backward()
        xe = torch.ones(2, device=DEVICE, requires_grad=True)
        (xe / s).sum().backward()
        assert torch.equal(x.grad, xe.grad), (s, x.grad, xe.grad)


def test_reshape_that_merges_dims_splits_the_fusion_and_says_so():
    with Fusion("merge") as fd:
        x = fd.define_tensor([-1, -1], F32, name="x")
        y = fd.ops.reshape(fd.ops.exp(x), [-1])
        fd.add_output(fd.ops.sum(y * 2, 0))
    x_data = sample((4, 6), F32)
    torch.testing.assert_close(fd.execute([x_data])[0], (x_data.exp().reshape(-1) * 2).sum())
    assert fd.num_kernels(DEVICE) == 2
    assert "reshape" in fd.explain(DEVICE)


@pytest.mark.parametrize("dtype", [F32, torch.bfloat16])
def test_fd_ops_silu_computes_as_the_compilers_silu(dtype):
    """``fd.ops.silu`` is ``x / (1 + exp(-x))`` rounded once, PyTorch's kernels' formula and the
    compiler's ``aten.silu``: a hand-written fusion's SiLU equals ``F.silu`` under ``@fused``
    bit for bit (``x * sigmoid(x)`` is an ulp away in about 40% of fp32 elements)."""
    with Fusion("silu", interpret=DEVICE == "cpu") as fd:
        x = fd.define_tensor([-1], dtype, name="x")
        fd.add_output(fd.ops.silu(x))
    x_data = (torch.randn(4096) * 4).to(dtype).to(DEVICE)
    traced = torchfuse.fusion.fused(F.silu, interpret=DEVICE == "cpu")
    assert torch.equal(fd.execute([x_data])[0], traced(x_data))
    if DEVICE == "cuda":  # the device's exp is eager's
        assert torch.equal(fd.execute([x_data])[0], F.silu(x_data))


def test_cpu_without_interpreter_runs_op_by_op():
    with Fusion("eager", interpret=False) as fd:
        x = fd.define_tensor([-1], F32, name="x")
        fd.add_output(fd.ops.silu(x))
    x_data = torch.randn(9)
    with pytest.warns(RuntimeWarning, match="op by op") as caught:
        got = fd.execute([x_data])[0]
    torch.testing.assert_close(got, F.silu(x_data))
    message = str(caught[0].message)
    assert "TORCHFUSE_INTERPRET=1" in message and "TRITON_INTERPRET" not in message  # the one switch needed


def test_num_kernels_and_explain_default_to_cpu_without_cuda(monkeypatch):
    """Without a CUDA device, the default device is the CPU (not "cuda", which would need a
    driver)."""
    from torchfuse.fusion.definition import default_device

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert default_device() == "cuda"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert default_device() == "cpu"
    with Fusion("bias_relu") as fd:
        x = fd.define_tensor([-1, -1], F32, name="x")
        b = fd.define_tensor([1, -1], F32, name="b")
        fd.add_output(fd.ops.relu(x + b))
    assert fd.num_kernels() == 1
    assert "relu" in fd.explain()
    assert [k[0] for k in fd._programs] == ["cpu"]
    x_data, b_data = torch.randn(8, 32), torch.randn(1, 32)
    torch.testing.assert_close(fd.execute([x_data, b_data])[0], torch.relu(x_data + b_data))
    op = fd.as_op()
    assert op.num_kernels() == (1, None)
    torch.testing.assert_close(op(x_data, b_data), torch.relu(x_data + b_data))


# ----------------------------------------------------------------------------- autograd

def _layer_norm_fusion(dtype=F32, p=0.0):
    with Fusion("layer_norm") as fd:
        x = fd.define_tensor(["N", "H"], dtype, name="x")
        w = fd.define_tensor(["H"], dtype, name="w")
        b = fd.define_tensor(["H"], dtype, name="b")
        y = fd.ops.dropout(x, p)[0] if p else x
        out, mean, rstd = fd.ops.layer_norm(y, w, b)
        fd.add_output(out)
        fd.add_output(mean)
    return fd


def _leaves(*shapes, dtype=F32):
    return [sample(s, dtype).requires_grad_() for s in shapes]


def test_derived_backward_matches_eager():
    op = _layer_norm_fusion().as_op()
    for n, h in [(6, 24), (9, 40)]:
        x, w, b = _leaves((n, h), (h,), (h,))
        out, mean = op(x, w, b)
        g, gm = torch.randn_like(out), torch.randn_like(mean)
        grads = torch.autograd.grad([out, mean], [x, w, b], [g, gm])
        ref = F.layer_norm(x, (h,), w, b)
        ref_mean = x.mean(1, keepdim=True)
        torch.testing.assert_close(out, ref)
        torch.testing.assert_close(mean, ref_mean)
        for got, want in zip(grads, torch.autograd.grad([ref, ref_mean], [x, w, b], [g, gm])):
            torch.testing.assert_close(got, want)
    fwd, bwd = op.num_kernels(DEVICE)
    assert fwd == 1 and 1 <= bwd <= 4



def test_a_derived_backward_computes_only_the_gradients_asked_for():
    """The derived backward differentiates the inputs whose gradients autograd asks for
    (``ctx.needs_input_grad``) alone: a LayerNorm whose weight and bias are frozen runs no
    column sums for them; each pattern of inputs asked for is derived once, and its values
    are eager's."""
    op = _layer_norm_fusion().as_op()
    n, h = 6, 24
    x, w, b = sample((n, h), F32), sample((h,), F32), sample((h,), F32)
    g, gm = sample((n, h), F32), sample((n, 1), F32)
    for wanted in ([x], [x, w], [b], [x, w, b], [x]):
        for t in (x, w, b):
            t.requires_grad_(any(t is u for u in wanted))
        outs, refs = op(x, w, b), (F.layer_norm(x, (h,), w, b), x.mean(1, keepdim=True))
        k = 2 if x.requires_grad else 1  # the mean of x alone
        grads = torch.autograd.grad(outs[:k], wanted, [g, gm][:k])
        for got, want in zip(grads, torch.autograd.grad(refs[:k], wanted, [g, gm][:k])):
            torch.testing.assert_close(got, want)
    kernels = {key[2]: program.num_kernels for key, program in op._derived.items()}
    assert set(kernels) == {(True, False, False), (True, True, False), (False, False, True), (True, True, True)}
    assert kernels[(True, False, False)] < kernels[(True, True, True)], kernels
    assert kernels[(False, False, True)] < kernels[(True, True, True)], kernels


#: functions whose decompositions take a branch by value (``where``): differentiating the
#: parts gives the untaken branch's NaN (``exp(1e30) * 0``) where eager's formula gives a number
BRANCHING = {
    "softplus": lambda x: F.softplus(x) * 2,
    "elu": lambda x: F.elu(x) + 1,
    "selu": lambda x: torch.selu(x),
    "mish": lambda x: F.mish(x),
    "sinc": lambda x: torch.sinc(x),
    "xlogy": lambda x: torch.xlogy(x, x + 2),
    "logit_eps": lambda x: torch.logit(x, eps=1e-6),
    "hardswish": lambda x: F.hardswish(x),
}


@pytest.mark.parametrize("name", list(BRANCHING))
def test_a_fused_functions_gradient_is_eagers_at_the_edges_of_its_branches(name):
    """A ``@fused`` function's derived backward differentiates the function as eager's
    autograd does (ATen's derivative formulas), not the decomposition the kernel runs: at
    1e30, -20 or 0 each gradient is eager's, never NaN where eager's is a number."""
    fn = BRANCHING[name]
    f = fused(fn, interpret=DEVICE == "cpu")
    edges = [100.0, 1e30, -20.0, 0.0, -0.0, 1e-30, 0.5, 1.0, -3.0, 3.0, float("inf"), 2.0]
    for values in (edges, edges[3:] + [0.25]):
        x = torch.tensor(values, device=DEVICE, requires_grad=True)
        (got,) = torch.autograd.grad(f(x).sum(), x)
        (want,) = torch.autograd.grad(fn(x).sum(), x)
        torch.testing.assert_close(got, want, equal_nan=True, rtol=1e-5, atol=1e-6)


def _scaled_without_gradient(x, y):
    with torch.no_grad():
        s = y.abs().amax() + 1
    return x + (torch.round(x / s) * s - x).detach()


@pytest.mark.parametrize("name,fn", [
    ("unread", lambda x, y: x * 2),
    ("compared", lambda x, y: x * (y > 0)),
    ("integer_cast", lambda x, y: x + y.to(torch.int32)),
    ("floor", lambda x, y: x + y.floor()),  # a path: eager's gradient is zeros, not None
    ("straight_through", lambda x, y: x + (torch.round(x / y.abs()) * y - x).detach()),
    ("no_grad", _scaled_without_gradient),
])
def test_a_fused_functions_input_without_a_path_to_its_outputs_gets_no_gradient(name, fn):
    """As eager's autograd: an input the outputs do not depend on through floating-point values
    gets ``None`` (``.grad`` stays unset, so an optimizer skips it), not a zero tensor; nor do
    values computed under ``torch.no_grad()`` or through ``detach()``, whose gradients are
    eager's (a straight-through estimator's identity: the derived backward differentiated
    through the detached rounding, all zeros)."""
    f = fused(fn, interpret=DEVICE == "cpu")
    leaves = [torch.randn(3, 5, device=DEVICE, requires_grad=True) for _ in range(2)]
    got = torch.autograd.grad(f(*leaves).sum(), leaves, allow_unused=True)
    want = torch.autograd.grad(fn(*leaves).sum(), leaves, allow_unused=True)
    for g, w in zip(got, want):
        assert (g is None) == (w is None), (got, want)
        if w is not None:
            torch.testing.assert_close(g, w)
    f(*leaves).sum().backward()
    assert (leaves[1].grad is None) == (want[1] is None)
    first_without_grad = fused(fn, interpret=DEVICE == "cpu")  # traced under no_grad: the same gradients
    with torch.no_grad():
        first_without_grad(*leaves)
    got = torch.autograd.grad(first_without_grad(*leaves).sum(), leaves, allow_unused=True)
    for g, w in zip(got, want):
        assert (g is None) == (w is None), (got, want)
        if w is not None:
            torch.testing.assert_close(g, w)



def _two_outputs(x, b):
    return x * 2, x + b


@pytest.mark.parametrize("compiled", [False, True])
def test_an_input_only_an_unread_output_depends_on_gets_no_gradient(compiled):
    """As eager's autograd: where the loss reads one output, an input that only another
    output depends on gets ``None`` (``allow_unused``; without it, eager's error), not
    zeros, so that AdamW skips it (a zero gradient would still decay it and move its
    moments): three steps leave the parameters as eager's. Compiled, the reference is the
    plain function compiled by AOTAutograd alone (``aot_eager``), whose compiled backward
    gives that input zeros."""
    f = fused(_two_outputs, interpret=DEVICE == "cpu")
    x, b = sample((3, 5), F32).requires_grad_(), sample((5,), F32).requires_grad_()
    got = torch.autograd.grad(f(x, b)[0].sum(), [x, b], allow_unused=True)
    assert got[1] is None and torch.equal(got[0], torch.autograd.grad(_two_outputs(x, b)[0].sum(), x)[0])
    with pytest.raises(RuntimeError, match="not have been used in the graph"):
        torch.autograd.grad(f(x, b)[0].sum(), [x, b])
    params = {name: [t.detach().clone().requires_grad_() for t in (x, b)] for name in ("fused", "reference")}
    fns = {"fused": torch.compile(f, backend="torchfuse") if compiled else f,
           "reference": torch.compile(_two_outputs, backend="aot_eager") if compiled else _two_outputs}
    for name, (px, pb) in params.items():
        opt = torch.optim.AdamW([px, pb], lr=0.1, weight_decay=0.5)
        for _ in range(3):
            opt.zero_grad()
            fns[name](px, pb)[0].square().sum().backward()
            opt.step()
    assert (params["fused"][1].grad is None) == (params["reference"][1].grad is None) == (not compiled)
    for got_t, want_t in zip(params["fused"], params["reference"]):
        torch.testing.assert_close(got_t, want_t)

def _detached_and_not(x, w):
    return (x * w).detach(), x + w


def _under_no_grad(x, w):
    with torch.no_grad():
        return x * w


@pytest.mark.parametrize("fn", [_detached_and_not, _under_no_grad])
def test_a_fused_functions_detached_outputs_do_not_require_grad(fn):
    """An output computed through ``detach()`` or under ``torch.no_grad()`` alone does not
    require grad, as eager's, so a backward from it raises eager's error (it had a ``grad_fn``
    and gave zero gradients); the other outputs' gradients are eager's."""
    f = fused(fn, interpret=DEVICE == "cpu")
    x = torch.randn(3, 4, device=DEVICE, requires_grad=True)
    w = torch.randn(4, device=DEVICE, requires_grad=True)
    want, got = fn(x, w), f(x, w)
    want, got = (want, got) if isinstance(want, tuple) else ((want,), (got,))
    for g, e in zip(got, want):
        torch.testing.assert_close(g, e)
        assert g.requires_grad == e.requires_grad
    with pytest.raises(RuntimeError, match="does not require grad"):
        got[0].sum().backward()
    if len(got) > 1:
        grads = torch.autograd.grad(got[1].sum(), [x, w])
        for g, e in zip(grads, torch.autograd.grad(want[1].sum(), [x, w])):
            torch.testing.assert_close(g, e)


def _under_inference_mode(x, y):
    with torch.inference_mode():
        s = y.abs() + 1
    return x + s


def _random_straight_through(x, y):
    return x + (torch.nn.functional.dropout(x, 0.5).round() * y - x).detach()


def _random_beside_its_detach(x, y):
    r = torch.rand_like(x)
    return r.detach() * x + r * y


@pytest.mark.parametrize("name,fn", [
    ("data", lambda x, y: x + (x.round() - x).data * y),
    ("inference_mode", _under_inference_mode),
    ("random_detach", _random_straight_through),
    ("random_beside_its_detach", _random_beside_its_detach),  # its forward raised (one tensor saved twice)
])
def test_a_fused_function_whose_backward_cannot_be_eagers_runs_forward_and_refuses_it(name, fn):
    """What a trace cannot hold of autograd's view (``.data``, a ``torch.inference_mode()`` block,
    which leave no mark or a constant; ``detach()`` beside random numbers, whose backward
    differentiates the recorded ops): the forward runs, and a backward raises, naming what to
    write instead, rather than return another gradient than eager's (they differentiated
    through them)."""
    f = fused(fn, interpret=DEVICE == "cpu")
    x, y = (torch.randn(3, 4, device=DEVICE, requires_grad=True) for _ in range(2))
    out = f(x, y)
    if not name.startswith("random"):
        torch.testing.assert_close(out, fn(x, y))
    with pytest.raises(DefinitionError, match=r"detach\(\)|no_grad\(\)|as_op\(backward="):
        out.sum().backward()


@pytest.mark.parametrize("mask_is_output", [True, False])
def test_derived_backward_reuses_the_dropout_mask(mask_is_output):
    p = 0.3
    with Fusion("dropout_scale") as fd:
        x = fd.define_tensor([-1, -1], F32, name="x")
        w = fd.define_tensor([1, -1], F32, name="w")
        y, keep = fd.ops.dropout(x, p)
        fd.add_output(y * w)
        if mask_is_output:
            fd.add_output(keep)
    op = fd.as_op()
    assert [v.meta.dtype for v in op.saved] == [BOOL]           # the mask, not the random numbers
    assert len(op.extras) == (0 if mask_is_output else 1)
    x_data, w_data = _leaves((16, 32), (1, 32))
    result = op(x_data, w_data)
    out = result[0] if mask_is_output else result
    keep = result[1] if mask_is_output else out != 0
    g = torch.randn_like(out)
    gx, gw = torch.autograd.grad(out, [x_data, w_data], g)
    torch.testing.assert_close(gx, torch.where(keep, g * w_data / (1 - p), 0.0))
    torch.testing.assert_close(gw, torch.where(keep, g * x_data / (1 - p), 0.0).sum(0, keepdim=True))
    rate = keep.float().mean().item()
    assert abs(rate - (1 - p)) < 5 * math.sqrt(p * (1 - p) / keep.numel())


def test_given_backward_fusion():
    with Fusion("square") as fwd:
        x = fwd.define_tensor([-1], F32, name="x")
        fwd.add_output(x * x)
    with Fusion("square_backward") as bwd:
        x = bwd.define_tensor([-1], F32, name="x")
        bwd.define_tensor([-1], F32, name="y")          # the forward output (unused here)
        g = bwd.define_tensor([-1], F32, name="g")
        bwd.add_output(g * 2 * x)
    op = fwd.as_op(backward=bwd)
    (x_data,) = _leaves((20,))
    (grad,) = torch.autograd.grad(op(x_data).sum(), [x_data])
    torch.testing.assert_close(grad, 2 * x_data)
    with Fusion("wrong") as wrong:
        wrong.add_output(wrong.define_tensor([-1], F32, name="g") * 1)
    with pytest.raises(DefinitionError, match="takes 1 inputs"):
        fwd.as_op(backward=wrong)


@pytest.mark.parametrize("kind", ["rank", "fixed size", "size 1 for a varying size"])
def test_a_given_backward_whose_gradient_cannot_have_the_inputs_shape_is_refused(kind):
    """The gradient of an input ``[-1, 4]`` is refused at ``as_op`` when it has another rank, a
    fixed size other than 4, or a fixed size where the input's varies (a ``keepdim`` sum left
    in), instead of failing inside autograd at the first backward."""
    with Fusion("scale") as fwd:
        x = fwd.define_tensor([-1, 4], F32, name="x")
        fwd.add_output(x * 2)
    with Fusion("scale_backward") as bwd:
        bwd.define_tensor([-1, 4], F32, name="x")
        bwd.define_tensor([-1, 4], F32, name="y")
        g = bwd.define_tensor([-1, 4], F32, name="g")
        if kind == "rank":
            bwd.add_output(bwd.ops.sum(g, dims=[1]) * 2)
        elif kind == "fixed size":
            bwd.add_output(bwd.ops.sum(g, dims=[1], keepdim=True) * 2)
        else:
            bwd.add_output(bwd.ops.sum(g, dims=[0], keepdim=True) * 2)
    match = {"rank": "rank 1; the gradient of input 'x' has the input's rank (2)",
             "fixed size": "size 1 in dim 1; the gradient of input 'x' has the input's size there (4)",
             "size 1 for a varying size": "size 1 in dim 0; the gradient of input 'x' has the input's size there "
                                          "(a size that varies)"}
    with pytest.raises(DefinitionError, match=re.escape(match[kind])):
        fwd.as_op(backward=bwd)


def test_fusion_op_inside_torch_compile():
    op = _layer_norm_fusion().as_op()

    def model(x, w, b):
        out, mean = op(x.relu(), w, b)
        return (out * 2).sum() + mean.sum()

    compiled = torch.compile(model, backend="aot_eager", fullgraph=True, dynamic=True)
    for n in (5, 8):
        x, w, b = _leaves((n, 16), (16,), (16,))
        loss = compiled(x, w, b)
        grads = torch.autograd.grad(loss, [x, w, b])
        want = model(x, w, b)
        torch.testing.assert_close(loss, want)
        for got, ref in zip(grads, torch.autograd.grad(want, [x, w, b])):
            torch.testing.assert_close(got, ref)


# ----------------------------------------------------------------------------- decorator

def test_fused_decorator_traces_once_per_signature():
    @fused
    def bias_gelu_ln(x, b, w, eps: float):
        h = F.gelu(x + b)
        return F.layer_norm(h, (h.shape[-1],), w, None, eps), h

    args = [sample((6, 20), F32), sample((20,), F32), sample((20,), F32)]
    for n in (6, 9):
        args[0] = sample((n, 20), F32)
        out, h = bias_gelu_ln(*args, 1e-5)
        ref_h = F.gelu(args[0] + args[1])
        torch.testing.assert_close(h, ref_h)
        torch.testing.assert_close(out, F.layer_norm(ref_h, (20,), args[2], None, 1e-5))
    assert len(bias_gelu_ln.fusions) == 1
    (traces,) = bias_gelu_ln.fusions.values()
    assert len(traces) == 1 and not traces[0].guards  # no decision on sizes: nothing to check per call
    assert bias_gelu_ln.fusion_for(*args, 1e-5).num_kernels(DEVICE) == 1
    x, b, w = [a.clone().requires_grad_() for a in args]
    out, _ = bias_gelu_ln(x, b, w, 1e-5)
    grads = torch.autograd.grad(out.sum(), [x, b, w])
    ref = F.layer_norm(F.gelu(x + b), (20,), w, None, 1e-5)
    for got, want in zip(grads, torch.autograd.grad(ref.sum(), [x, b, w])):
        torch.testing.assert_close(got, want)


@pytest.mark.parametrize("grad", [False, True])
def test_fused_decorator_first_called_inside_compile(grad):
    """A ``@fused`` function whose first call is inside a compiled function: the values and
    gradients are eager's on that call and on later compiled calls (the same and a new size),
    nothing falls back to ATen, and the function still runs as one fusion when called directly
    afterwards (tracing it, or its runtime, under TorchDynamo used to fail, and the failure
    stuck)."""
    @fused
    def bias_gelu(x, b):
        return F.gelu(x + b) * torch.sigmoid(x)

    def f(x, b):
        return bias_gelu(x, b) * 2

    x, b = sample((6, 20), F32), sample((20,), F32)
    compiled = torchfuse.compile(f)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # no group may fall back to ATen
        for n in (6, 6, 9):  # the first call runs outside the graph, later ones as its op
            x = sample((n, 20), F32)
            xs, bs = x.clone().requires_grad_(grad), b.clone().requires_grad_(grad)
            got = compiled(xs, bs)
            want_x, want_b = x.clone().requires_grad_(grad), b.clone().requires_grad_(grad)
            want = F.gelu(want_x + want_b) * torch.sigmoid(want_x) * 2
            torch.testing.assert_close(got, want)
            if grad:
                for g, r in zip(torch.autograd.grad(got.sum(), [xs, bs]),
                                torch.autograd.grad(want.sum(), [want_x, want_b])):
                    torch.testing.assert_close(g, r)
        again = bias_gelu(x, b)
    torch.testing.assert_close(again, F.gelu(x + b) * torch.sigmoid(x))
    assert bias_gelu.fusion_for(x, b).num_kernels(DEVICE) == 1


def test_fused_decorator_reports_what_cannot_be_fused():
    @fused
    def projection(x, w):
        return torch.relu(x @ w)

    with pytest.raises(DefinitionError, match="mm.*cannot be fused"):
        projection(sample((4, 5), F32), sample((5, 3), F32))


def test_python_branches_on_sizes_are_traced_again_where_they_go_the_other_way():
    """``@fused`` over a function that branches on a size: the trace's condition (a shape
    guard) is checked on every call of its signature, and sizes that take the other branch get
    a trace of their own, not the first one's kernel (values against eager, gradients too)."""
    from torchfuse.fusion import fused

    @fused(interpret=DEVICE == "cpu")
    def branchy(x, y):
        if x.shape[-1] > 5:
            return x * 2 + y
        return x * 3 - y

    for n in (4, 6, 5, 9, 2, 6):
        x, y = sample((3, n), F32), sample((3, n), F32)
        torch.testing.assert_close(branchy(x, y), x * 2 + y if n > 5 else x * 3 - y)
    (traces,) = branchy.fusions.values()
    assert len(traces) == 2 and all(len(t.guards) == 1 for t in traces)
    x = sample((3, 7), F32).requires_grad_()
    (g,) = torch.autograd.grad(branchy(x, x.detach()).sum(), [x])
    torch.testing.assert_close(g, torch.full_like(x, 2.0))
    x = sample((3, 4), F32).requires_grad_()
    (g,) = torch.autograd.grad(branchy(x, x.detach()).sum(), [x])
    torch.testing.assert_close(g, torch.full_like(x, 3.0))

    @fused(interpret=DEVICE == "cpu")
    def number_first(s, x):  # the guarded size is the second argument's
        return x * s if x.shape[0] > 3 else x - s

    for n in (2, 5, 3, 7):
        x = sample((n, 4), F32)
        torch.testing.assert_close(number_first(1.5, x), x * 1.5 if n > 3 else x - 1.5)

    @fused(interpret=DEVICE == "cpu")
    def pinned(x):  # a condition that fixes a size to one value: that trace serves that size only
        return x + 1 if x.shape[1] == 4 else x - 1

    for n in (5, 4, 6, 4, 3):
        x = sample((3, n), F32)
        torch.testing.assert_close(pinned(x), x + 1 if n == 4 else x - 1)
    # under torch.compile, which trace serves a call is decided on sizes: it runs outside the
    # graph, with the right branch
    compiled = torchfuse.compile(lambda x: pinned(x) * 2, interpret=DEVICE == "cpu")
    for n in (4, 6):
        x = sample((3, n), F32)
        torch.testing.assert_close(compiled(x), (x + 1 if n == 4 else x - 1) * 2)


def test_a_derived_backward_that_falls_back_to_aten_reads_its_sizes(monkeypatch):
    """A fused op's derived backward whose group cannot be planned runs through ATen: its
    ``expand`` reads sizes that only the kernel read before (their slots never filled), which
    the fallback now evaluates from the sizes of the call (it raised for a ``[None, None]``
    size list)."""
    from torchfuse.runtime.group import GroupRunner

    @fused(interpret=DEVICE == "cpu")
    def softmax_t(x, t: float):
        return torch.softmax(x / t, dim=-1)

    x = sample((5, 9), F32).requires_grad_()
    y = softmax_t(x, 0.7)
    torch.testing.assert_close(y, torch.softmax(x / 0.7, -1))
    g = sample((5, 9), F32)

    def unplannable(self, *args, **kwargs):
        raise ValueError("stand-in for a group that cannot be compiled")

    monkeypatch.setattr(GroupRunner, "plan_for", unplannable)
    with pytest.warns(RuntimeWarning, match="runs through ATen"):
        (gx,) = torch.autograd.grad(y, x, g)
    xe = x.detach().clone().requires_grad_()
    (want,) = torch.autograd.grad(torch.softmax(xe / 0.7, -1), xe, g)
    torch.testing.assert_close(gx, want)


@pytest.mark.parametrize("constant", [torch.randn(4), torch.tensor(2.5)], ids=["vector", "0-dim"])
def test_a_captured_tensor_is_reported_when_tracing(constant):
    """A function that reads a tensor it does not take (a global) cannot be traced into a
    fusion: a DefinitionError that says so and what to do (it was make_fx's internal
    assertion about fake tensors)."""
    c = constant.to(DEVICE)

    @fused(interpret=DEVICE == "cpu")
    def scaled(x):
        return x * c

    with pytest.raises(DefinitionError, match="reads a tensor it does not take as an argument"):
        scaled(sample((3, 4), F32))


def test_a_function_called_once_outside_compiles_without_a_graph_break():
    """After one plain call (no gradients), the traced function's op is registered, so that a
    compiled caller with the same signature needs no graph break (``fullgraph=True`` raised);
    values against eager."""
    @fused(interpret=DEVICE == "cpu")
    def bias_gelu_residual(h, b, r):
        return F.gelu(h + b) + r

    x, b = sample((4, 8), F32), sample((8,), F32)
    bias_gelu_residual(x, b, x)
    compiled = torchfuse.compile(lambda x, b: bias_gelu_residual(x * 2, b, x).sum(), fullgraph=True,
                                 interpret=DEVICE == "cpu")
    torch.testing.assert_close(compiled(x, b), (F.gelu(x * 2 + b) + x).sum())


def test_a_first_call_under_fullgraph_raises_saying_to_call_it_outside_first():
    """A signature first met inside a ``fullgraph=True`` caller cannot run outside the graph:
    TorchDynamo's error named a ``torch.compiler.disable`` the user never wrote ("Remove the
    torch.compiler.disable call"); it says why and what to do. After one call outside, the
    same caller compiles, with eager's values."""
    @fused(interpret=DEVICE == "cpu")
    def shifted_relu(x, y):
        return (x * y + 1).relu()

    x = sample((4, 8), F32)
    torch._dynamo.reset()
    compiled = torchfuse.compile(lambda x: shifted_relu(x, x * 2) * 2, fullgraph=True, interpret=DEVICE == "cpu")
    with pytest.raises(Exception, match="call the function once outside torch.compile"):
        compiled(x)
    shifted_relu(x, x * 2)
    torch._dynamo.reset()
    torch.testing.assert_close(compiled(x), (x * (x * 2) + 1).relu() * 2, rtol=0, atol=0)


def test_a_function_taking_python_numbers_compiles_without_a_graph_break():
    """Python numbers among the arguments (a float, an int, a bool) are part of the trace's
    signature; finding it under TorchDynamo needs no graph break (torch 2.11's TorchDynamo
    broke the graph at the signature's type names; ``fullgraph=True`` raised)."""
    @fused(interpret=DEVICE == "cpu")
    def scaled(x, s, k, flip):
        return (-x if flip else x) * s + k

    x = sample((4, 8), F32)
    scaled(x, 2.0, 3, True)
    compiled = torchfuse.compile(lambda x: scaled(x * 2, 2.0, 3, True).sum(), fullgraph=True,
                                 interpret=DEVICE == "cpu")
    torch.testing.assert_close(compiled(x), (-(x * 2) * 2.0 + 3).sum())


def test_signed_zeros_and_nan_arguments_find_their_own_traces():
    """A Python float argument is part of the trace's key with its sign and NaN-ness: ``0.0 ==
    -0.0`` made a call with -0.0 reuse the trace made for 0.0 (``1 / (x * s)`` gave +inf for
    -inf), and a NaN, unequal to itself, never found its trace (traced again on every call);
    inside tuples as well. Values against eager."""
    def reciprocal(x, s):
        return 1.0 / (x * s)

    def reciprocal_of_first(x, t):
        return 1.0 / (x * t[0])

    f = fused(reciprocal, interpret=DEVICE == "cpu")
    g = fused(reciprocal_of_first, interpret=DEVICE == "cpu")
    x = torch.tensor([1.0, -2.0, 3.0], device=DEVICE)
    for s in (0.0, -0.0, 0.0, float("nan"), float("nan"), -0.0):
        torch.testing.assert_close(f(x, s), reciprocal(x, s), equal_nan=True)
        torch.testing.assert_close(g(x, (s,)), reciprocal_of_first(x, (s,)), equal_nan=True)
    assert len(f.fusions) == 3 and len(g.fusions) == 3  # 0.0, -0.0, nan


def test_numpy_scalar_arguments_are_keyed_as_the_numbers_pytorch_reads():
    """NumPy's scalars are not Python numbers (but ``np.float64``): they were keyed by equality,
    so ``np.float32(2.0)`` found the trace of ``np.int64(2)`` (an int32 result where eager's is
    fp32) and ``np.float32(-0.0)`` that of ``0.0`` (the wrong infinities). Keyed now as the
    int, float or complex PyTorch reads them as, with a float's sign. Values and dtypes against
    eager."""
    np = pytest.importorskip("numpy")

    def scale(x, a):
        return x * a

    def reciprocal(x, a):
        return 1.0 / (x * a)

    f, g = fused(scale, interpret=DEVICE == "cpu"), fused(reciprocal, interpret=DEVICE == "cpu")
    xi = torch.arange(4, dtype=torch.int32, device=DEVICE)
    xf = torch.tensor([1.0, -2.0], device=DEVICE)
    for a in (np.int64(2), np.float32(2.0), np.int64(2), np.float16(2.0)):
        out, want = f(xi, a), scale(xi, a)
        assert out.dtype == want.dtype and torch.equal(out, want), (a, out, want)
    for a in (np.float32(0.0), np.float32(-0.0)):
        torch.testing.assert_close(g(xf, a), reciprocal(xf, a))


def test_a_closure_number_read_in_a_lambda_or_a_comprehension_is_keyed():
    """A closure variable read only by nested code (a lambda, a list comprehension) was not
    watched: its first value stayed baked into the trace. Values against eager after the
    variable changes."""
    scale = 2.0

    @fused(interpret=DEVICE == "cpu")
    def in_lambda(x):
        return (lambda t: t * scale)(x)

    @fused(interpret=DEVICE == "cpu")
    def in_comprehension(x, y):
        return sum([t * scale for t in (x, y)])

    x = sample((4, 8), F32)
    for value in (2.0, 3.0):
        scale = value
        torch.testing.assert_close(in_lambda(x), x * value)
        torch.testing.assert_close(in_comprehension(x, x), x * value + x * value)


def test_an_empty_tensor_runs_the_function_as_written():
    """A trace assumes every size it does not key is at least 2, so a call with a size-0 dim
    reused a trace whose Python took the other branch of ``if x.shape[0] == 0`` (0 where eager
    gives 5), and a first call with one raised ``DefinitionError``. Such a call runs the
    function as written, in plain calls and inside a compiled caller."""
    @fused(interpret=DEVICE == "cpu")
    def g(x):
        if x.shape[0] == 0:
            return x.sum(0) + 5
        return x.sum(0) * 2

    empty = torch.ones(0, 4, device=DEVICE)
    torch.testing.assert_close(g(empty), torch.full((4,), 5.0, device=DEVICE))
    x = sample((3, 4), F32)
    torch.testing.assert_close(g(x), x.sum(0) * 2)
    torch.testing.assert_close(g(empty), torch.full((4,), 5.0, device=DEVICE))
    compiled = torchfuse.compile(lambda x: g(x) + 1, interpret=DEVICE == "cpu")
    torch.testing.assert_close(compiled(empty), torch.full((4,), 6.0, device=DEVICE))


def test_a_trace_serves_only_inputs_laid_out_as_its_own():
    """A trace's decompositions decide on its inputs' strides (``reshape`` of a contiguous
    tensor is a view, of a transposed one a copy): a trace from a contiguous input was reused
    for a transposed one and raised. Keyed by layout now: dense tensors by their dims' order
    (one trace for every size), others by their strides. Values against eager."""
    @fused(interpret=DEVICE == "cpu")
    def flat2(x):
        return x.reshape(-1) * 2

    a = sample((6, 10), F32)
    b = sample((4, 6), F32)
    for x in (a, a.t(), a, b.t(), a[:, ::2], b[::2], a.t()):
        torch.testing.assert_close(flat2(x), x.reshape(-1) * 2)
    # contiguous, transposed, and the two sliced layouts
    assert sum(len(t) for t in flat2.fusions.values()) == 4


def test_a_fused_call_in_a_dynamic_compiled_function_compiles_once_for_new_sizes():
    """The trace key read sizes and strides as ints, which TorchDynamo turns into guards on
    their values: a compiled caller with dynamic sizes recompiled for every batch size and,
    past the recompilation limit, ran eagerly. Sizes are compared now, never converted: one
    compiled frame serves ten sizes. Values against eager."""
    from torch._dynamo.utils import counters

    @fused(interpret=DEVICE == "cpu")
    def bias_gelu(x, b):
        return F.gelu(x + b)

    b = sample((16,), F32)
    bias_gelu(sample((4, 16), F32), b)  # traced outside, so the compiled caller holds its op
    step = torchfuse.compile(lambda x, b: bias_gelu(x, b).sum(-1), dynamic=True, interpret=DEVICE == "cpu")
    before = counters["frames"]["ok"]
    for n in range(3, 13):
        x = sample((n, 16), F32)
        torch.testing.assert_close(step(x, b), F.gelu(x + b).sum(-1))
    assert counters["frames"]["ok"] - before == 1


SCALE = 2.0


def test_a_changed_global_or_closure_number_is_traced_again():
    """A Python number the function reads from its module or its closure is baked into the
    trace as a constant; a trace made with another value is not reused (it was: ``x * SCALE``
    kept the first value), in plain calls and inside a compiled caller (``fullgraph=True``),
    as TorchDynamo guards on what it reads. Values against eager."""
    global SCALE

    def make(k):
        @fused(interpret=DEVICE == "cpu")
        def shifted(x):
            return x * SCALE + k
        return shifted

    x = sample((4, 8), F32)
    shifted = make(1.0)
    SCALE = 2.0
    torch.testing.assert_close(shifted(x), x * 2.0 + 1.0)
    compiled = torchfuse.compile(lambda x: shifted(x).sum(), fullgraph=True, interpret=DEVICE == "cpu")
    torch.testing.assert_close(compiled(x), (x * 2.0 + 1.0).sum())
    try:
        SCALE = 3.0
        torch.testing.assert_close(shifted(x), x * 3.0 + 1.0)
        torch.testing.assert_close(compiled(x), (x * 3.0 + 1.0).sum())
        torch.testing.assert_close(make(5.0)(x), x * 3.0 + 5.0)
    finally:
        SCALE = 2.0


SCHEDULE = {"lr": 0.1}


class _Config:
    lrate = 0.1


CONFIG = _Config()


def _current_lr():
    return SCHEDULE["lr"]


def test_numbers_read_through_helpers_items_and_attributes_are_keyed():
    """Numbers a function reads through a helper function of the user's (``current_lr()``), a
    dict item (``sched["lr"]``) or an attribute (``cfg.lrate``) are part of the trace's key as
    globals are: a learning rate changed by a schedule is used by the next call (the first
    value was baked in). Plain calls and a compiled caller, values against eager."""
    @fused(interpret=DEVICE == "cpu")
    def by_helper(p, g):
        return p - _current_lr() * g

    @fused(interpret=DEVICE == "cpu")
    def by_item(p, g):
        return p - SCHEDULE["lr"] * g

    @fused(interpret=DEVICE == "cpu")
    def by_attribute(p, g):
        return p - CONFIG.lrate * g

    p, g = sample((4, 8), F32), sample((4, 8), F32)
    fns = (by_helper, by_item, by_attribute)
    compiled = torchfuse.compile(lambda p, g: by_item(p, g).sum(), fullgraph=True, interpret=DEVICE == "cpu")
    try:
        for lr in (0.1, 0.5, 0.01):
            SCHEDULE["lr"], CONFIG.lrate = lr, lr
            for f in fns:
                torch.testing.assert_close(f(p, g), p - lr * g)
            torch.testing.assert_close(compiled(p, g), (p - lr * g).sum())
    finally:
        SCHEDULE["lr"], CONFIG.lrate = 0.1, 0.1


DTYPE_OUT, DIMS_OUT, GELU_FORM = torch.float16, (1, 0), "tanh"


def test_values_read_through_arguments_closure_helpers_and_non_number_globals_are_keyed():
    """What a trace bakes in is part of its key wherever the function reads it: an attribute of
    a non-tensor argument (``c.lr``, a method's ``self.alpha``), a number a helper reached
    through a closure variable reads, and globals that are not numbers (a dtype, a shape
    tuple, a string option). Each was kept at its first value; values against eager, and a
    new size still reuses the trace."""
    global DTYPE_OUT, DIMS_OUT, GELU_FORM

    class Cfg:
        lr = 0.5

    class Scaled:
        alpha = 1.5

        @fused(interpret=DEVICE == "cpu")
        def scale(self, x):
            return x * self.alpha

    @fused(interpret=DEVICE == "cpu")
    def by_argument(x, c):
        return x * c.lr

    def make():
        s = 2.0

        def helper(x):
            return x * s

        @fused(interpret=DEVICE == "cpu")
        def by_closure_helper(x):
            return helper(x) + 1

        def set_s(v):
            nonlocal s
            s = v
        return by_closure_helper, set_s

    @fused(interpret=DEVICE == "cpu")
    def by_globals(x):
        return F.gelu((x * 2).to(DTYPE_OUT), approximate=GELU_FORM).permute(DIMS_OUT) + 1

    x = sample((4, 4), F32)
    cfg, module = Cfg(), Scaled()
    by_closure_helper, set_s = make()
    try:
        for step, v in enumerate((0.5, 0.25, 4.0)):
            cfg.lr, module.alpha = v, v
            set_s(v)
            DTYPE_OUT, DIMS_OUT, GELU_FORM = ((torch.float16, (1, 0), "tanh"), (torch.float64, (0, 1), "none"),
                                              (torch.float32, (1, 0), "tanh"))[step]
            torch.testing.assert_close(by_argument(x, cfg), x * v)
            torch.testing.assert_close(Scaled.scale(module, x), x * v)
            torch.testing.assert_close(by_closure_helper(x), x * v + 1)
            x = sample((4, 6), F32)
            got, want = by_globals(x), F.gelu((x * 2).to(DTYPE_OUT), approximate=GELU_FORM).permute(DIMS_OUT) + 1
            assert got.dtype == want.dtype and got.shape == want.shape
            torch.testing.assert_close(got, want)
        count = sum(len(t) for t in by_argument.fusions.values())
        torch.testing.assert_close(by_argument(sample((6, 4), F32), cfg), sample((6, 4), F32) * 4.0)
        assert sum(len(t) for t in by_argument.fusions.values()) == count  # the size is not keyed
    finally:
        DTYPE_OUT, DIMS_OUT, GELU_FORM = torch.float16, (1, 0), "tanh"


def test_arguments_by_keyword():
    """A ``@fused`` function takes its arguments by keyword too, as Python would bind them
    (it raised TypeError); a keyword-only parameter is refused with the reason, at the
    definition."""
    @fused(interpret=DEVICE == "cpu")
    def scaled_gelu(x, b, scale=2.0):
        return F.gelu(x + b) * scale

    x, b = sample((4, 8), F32), sample((8,), F32)
    torch.testing.assert_close(scaled_gelu(x, b=b, scale=3.0), F.gelu(x + b) * 3.0)
    torch.testing.assert_close(scaled_gelu(b=b, x=x), F.gelu(x + b) * 2.0)

    @fused(interpret=DEVICE == "cpu")
    def shifted(x, b=None, scale=2.0, shift=0.5):
        y = x * scale + shift
        return torch.tanh(y if b is None else y + b)

    # a keyword past a defaulted parameter: the default fills the gap
    torch.testing.assert_close(shifted(x, scale=3.0), torch.tanh(x * 3.0 + 0.5))
    torch.testing.assert_close(shifted(x, b=b, shift=1.0), torch.tanh(x * 2.0 + 1.0 + b))

    with pytest.raises(TypeError, match=r"keyword-only arguments \(scale\)"):
        @fused(interpret=DEVICE == "cpu")
        def keyword_only(x, *, scale=2.0):  # (refused where it is defined: a call without it used the default)
            return x * scale
    with pytest.raises(TypeError, match=r"keyword-only arguments \(\*\*options\)"):
        @fused(interpret=DEVICE == "cpu")
        def any_keywords(x, **options):
            return x * 2


def test_explain_lists_a_fused_function_inside_a_compiled_graph_as_the_users_kernel_at_the_users_line():
    """A ``@fused`` function called inside a compiled function (after one call outside it)
    appears in explain as the user's fused op, forward and backward, located at the line that
    called it, not as an op torchfuse cannot fuse or a line of the fusion API."""
    import inspect

    @fused
    def scaled_tanh(x, s):
        return torch.tanh(x) * s

    w = torch.randn(6, 6, device=DEVICE, requires_grad=True)
    x = torch.randn(3, 6, device=DEVICE)
    scaled_tanh(x, 2.0)
    line = inspect.currentframe().f_lineno + 3

    def f(x):
        return scaled_tanh(x @ w, 2.0).sum()

    result = torchfuse.explain(f, x, backward=True, verbose=False)
    mine = [c for c in result.aten_calls if "scaled_tanh" in c.op]
    assert sorted(c.op.rsplit(".", 1)[0].endswith("_backward") for c in mine) == [False, True], [c.op for c in mine]
    assert all(c.category == "fusion" for c in mine)
    assert all(c.location is not None and c.location.line == line and c.location.file == __file__ for c in mine), \
        [(c.op, c.location, c.node) for c in mine]
    text = result.summary()
    assert "[your fused op (torchfuse.fusion): its own kernel, not ATen]" in text
    # counted apart from ATen's calls, in the headline and each graph's line
    assert f"{len(result.aten_work)} op(s) on ATen, 2 on torchfuse's own kernels" in text
    assert "scaled_tanh" not in " ".join(c.op for c in result.aten_work)
    assert text.count("1 on torchfuse's own kernel") == 2 and "  on torchfuse's own kernels (outside fusion groups):" in text


@pytest.mark.parametrize("grad", [True, False], ids=["input-requires-grad", "no-grad"])
def test_a_fused_function_run_op_by_op_on_cpu_warns_at_the_users_line_and_explain_says_so(grad):
    """Without ``interpret``, a ``@fused`` function on CPU tensors runs op by op through ATen:
    with an input that requires grad (its differentiable op) as without (the fusion itself),
    it warns once, at the user's line, and explain lists it as run through ATen, not as its
    own kernel; values and gradients are eager's."""
    import inspect
    import warnings

    @fused(interpret=False)
    def scaled_tanh(x, s):
        return torch.tanh(x) * s

    w = torch.randn(6, 6, requires_grad=True)
    x = torch.randn(3, 6)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        line = inspect.currentframe().f_lineno + 1
        y = scaled_tanh(x @ w if grad else x @ w.detach(), 2.0)
        scaled_tanh(x @ w if grad else x @ w.detach(), 2.0)  # once only
    ours = [m for m in caught if "runs op by op" in str(m.message)]
    assert len(ours) == 1 and ours[0].filename == __file__ and ours[0].lineno == line, \
        [(m.filename, m.lineno, str(m.message)) for m in caught]
    if not grad:
        torch.testing.assert_close(y, torch.tanh(x @ w.detach()) * 2.0)
        return
    y.sum().backward()
    wg = w.detach().clone().requires_grad_(True)
    (torch.tanh(x @ wg) * 2.0).sum().backward()
    torch.testing.assert_close(y, torch.tanh(x @ w) * 2.0)
    torch.testing.assert_close(w.grad, wg.grad)

    def f(x):
        return scaled_tanh(x @ w, 2.0).sum()

    result = torchfuse.explain(f, x, backward=True, verbose=False)
    mine = [c for c in result.aten_calls if "scaled_tanh" in c.op]
    assert len(mine) == 2 and all(c.category == "fusion_aten" for c in mine), [(c.op, c.category) for c in mine]
    text = result.summary()
    assert "its own kernel" not in text
    assert "run op by op through ATen: CPU tensors without interpret=True]" in text


def test_a_derived_backward_dividing_by_a_size_of_zero_gives_eagers_nan():
    """``var_mean`` with ``correction=1`` over a dim of size 1: the derived backward's traced
    size arithmetic divides by ``N - 1 = 0``, which eager's backward does in IEEE arithmetic
    (a NaN gradient); the call runs the backward eagerly and returns eager's NaNs, and sizes
    that divide by more than zero still get eager's gradient."""
    with Fusion("vm", interpret=DEVICE == "cpu") as fd:
        a = fd.define_tensor([-1, -1], torch.float32)
        v, m = fd.ops.var_mean(a, dims=[1], correction=1)
        fd.add_output(v)
        fd.add_output(m)
    op = fd.as_op()
    for cols in (1, 5):
        x = torch.randn(3, cols, device=DEVICE)
        ours, theirs = x.clone().requires_grad_(True), x.clone().requires_grad_(True)
        v, m = op(ours)
        ve, me = torch.var_mean(theirs, 1, correction=1)
        (g,) = torch.autograd.grad((v + m).sum(), ours)
        (ge,) = torch.autograd.grad((ve + me).sum(), theirs)
        torch.testing.assert_close(g, ge, equal_nan=True)
        assert torch.equal(g.isnan(), ge.isnan()) and (cols > 1 or bool(ge.isnan().all()))


def test_a_fused_function_returning_its_argument_unchanged_is_refused_by_the_arguments_name():
    """A fusion's outputs are values it computes: returning an argument as it is is refused at
    the trace, naming the argument (a copy is accepted)."""
    @fused(interpret=DEVICE == "cpu")
    def passes_through(x, bias):
        return x * 2, bias

    with pytest.raises(DefinitionError, match="returns its argument 'bias' unchanged"):
        passes_through(torch.randn(3, device=DEVICE), torch.randn(3, device=DEVICE))

    @fused(interpret=DEVICE == "cpu")
    def copies(x, bias):
        return x * 2, bias.clone()

    x, bias = torch.randn(3, device=DEVICE), torch.randn(3, device=DEVICE)
    doubled, copied = copies(x, bias)
    torch.testing.assert_close(doubled, x * 2)
    assert torch.equal(copied, bias) and copied.data_ptr() != bias.data_ptr()


def test_inputs_that_do_not_match_the_declarations_are_refused_naming_what_the_user_called():
    """Wrong count, dtype, rank or declared size raise before anything runs, from
    ``execute`` as ``execute: ...`` and from the fusion as an op as ``fused op 'name': ...``."""
    with Fusion("scaled", interpret=DEVICE == "cpu") as fd:
        x = fd.define_tensor([-1, 4], torch.float32, name="x")
        fd.add_output(x * 2)
    op = fd.as_op()
    ok = torch.randn(3, 4, device=DEVICE)
    cases = [
        ([ok, ok], TypeError, "the fusion takes 1 inputs (x), got 2"),
        ([ok.double()], TypeError, "input 'x' has dtype torch.float64, declared torch.float32"),
        ([ok[0]], ValueError, "input 'x' has rank 1, declared 2"),
        ([torch.randn(3, 5, device=DEVICE)], ValueError, "input 'x' dim 1 has size 5; declared static size 4"),
    ]
    for k, (inputs, error, message) in enumerate(cases):
        with pytest.raises(error, match=r"^execute: " + re.escape(message)):
            fd.execute(inputs)
        if k:  # (a wrong count is refused by the op's schema, in PyTorch's words)
            with pytest.raises(error, match=r"^fused op 'scaled': " + re.escape(message)):
                op(*[t.clone().requires_grad_(True) for t in inputs])
    torch.testing.assert_close(op(ok), ok * 2)


@pytest.mark.parametrize("forward_interprets", [True, False])
def test_explain_labels_a_given_backward_by_the_options_of_the_fusion_that_runs_it(forward_interprets):
    """A fused op with a given backward of other options: each of the two ops is listed as
    its own kernel or as run op by op by the fusion that runs it (on CPU tensors, its
    ``interpret`` option), not by the forward's."""
    with Fusion("square", interpret=forward_interprets) as fwd:
        x = fwd.define_tensor([-1], torch.float32, name="x")
        fwd.add_output(x * x)
    with Fusion("square_backward", interpret=not forward_interprets) as bwd:
        x = bwd.define_tensor([-1], torch.float32, name="x")
        bwd.define_tensor([-1], torch.float32, name="y")
        g = bwd.define_tensor([-1], torch.float32, name="g")
        bwd.add_output(g * 2 * x)
    op = fwd.as_op(backward=bwd)

    def f(x):
        return op(x).sum()

    result = torchfuse.explain(f, torch.randn(20, requires_grad=True), backward=True, verbose=False)
    kinds = {c.op.rsplit(".", 1)[0].endswith("_backward"): c.category for c in result.aten_calls if "square" in c.op}
    runs_as_kernels = {True: "fusion", False: "fusion_aten"}
    assert kinds == {False: runs_as_kernels[forward_interprets], True: runs_as_kernels[not forward_interprets]}


def test_a_fused_function_may_divide_by_its_inputs_numel():
    """``x.numel()`` in a ``@fused`` function is the product of the input's sizes (symbolic
    when the sizes are): a mean written by hand matches eager's at two sizes of one trace,
    forward and backward."""
    @fused
    def mean_all(x, y):
        return x.sum() / x.numel() + (y * y).sum() / y.numel()

    for rows in (4, 7):
        g = torch.Generator().manual_seed(rows)
        x = torch.randn(rows, 5, generator=g).to(DEVICE).requires_grad_()
        y = torch.randn(3, rows, generator=g).to(DEVICE).requires_grad_()
        got = mean_all(x, y)
        want = x.detach().sum() / x.numel() + (y.detach() ** 2).sum() / y.numel()
        torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-7)
        gx, gy = torch.autograd.grad(got, (x, y))
        torch.testing.assert_close(gx, torch.full_like(x, 1 / x.numel()))
        torch.testing.assert_close(gy, 2 * y.detach() / y.numel())


def test_fma_has_a_gradient():
    """``fd.ops.fma`` in an op made with ``as_op``: forward bit for bit as ``addcmul`` (one
    rounding), gradients ``grad * b``, ``grad * a`` and ``grad``, as eager's ``addcmul``'s."""
    with Fusion("fma_grad") as fd:
        x = fd.define_tensor([-1, -1], F32, name="x")
        y = fd.define_tensor([-1, -1], F32, name="y")
        z = fd.define_tensor([-1, -1], F32, name="z")
        fd.add_output(fd.ops.fma(x, y, z))
    op = fd.as_op()
    data = [sample((4, 8), F32).requires_grad_() for _ in range(3)]
    out = op(*data)
    torch.testing.assert_close(out, torch.addcmul(data[2], data[0], data[1]), rtol=0, atol=0)
    got = torch.autograd.grad(out.sum(), data)
    want = torch.autograd.grad(torch.addcmul(data[2], data[0], data[1]).sum(), data)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w)


def test_a_view_to_fixed_sizes_is_refused_with_the_reason():
    """``x.view(2, -1)`` inside ``@fused`` cannot be checked on the stand-in sizes the definition
    infers shapes with (a prime per size); the error says so instead of naming a size the
    caller never passed as the only reason."""
    @fused(interpret=DEVICE == "cpu")
    def halves(x):
        return x.view(2, -1) * 2

    with pytest.raises(DefinitionError, match="stand-in prime for each size.*reshape outside the fusion"):
        halves(sample((4, 6), F32))


def test_an_op_outside_the_registry_is_refused_at_the_first_call():
    """``torch.linspace`` runs as ATen's kernel (its decomposition computed from unconverted
    numbers, off eager's), which a fusion cannot hold: a ``@fused`` function calling it is
    refused with ``DefinitionError`` naming the op; passing the tensor as an argument fuses
    the rest, with eager's values."""
    @fused(interpret=DEVICE == "cpu")
    def positions(x):
        return x + torch.linspace(0.1, 0.9, x.shape[-1], device=x.device)

    @fused(interpret=DEVICE == "cpu")
    def shifted(x, p):
        return x + p

    x = sample((3, 10), F32)
    with pytest.raises(DefinitionError, match="linspace"):
        positions(x)
    p = torch.linspace(0.1, 0.9, 10, device=DEVICE)
    assert torch.equal(shifted(x, p), x + p)
    # the others the README names (slices of values computed other than elementwise,
    # concatenations of unequal shapes: argument slices, their elementwise values' slices and
    # equal concatenations fuse, tests/test_fusion_slices.py), and integer powers
    for fn, op in [(lambda x: x.softmax(1)[:, 1:4], "slice"), (lambda x: torch.cat([x, x[:, :3]], 1) * 2, "cat"),
                   (lambda x: (x - x.amax(1, keepdim=True)).chunk(2, 1)[0], "split"),
                   (lambda x: x.cumsum(1) * 2, "cumsum")]:
        with pytest.raises(DefinitionError, match=op):
            fused(fn, interpret=DEVICE == "cpu")(x)
    with pytest.raises(DefinitionTypeError, match="pow"):
        fused(lambda i: i ** 2, interpret=DEVICE == "cpu")(torch.arange(4, device=DEVICE))
    with pytest.raises(DefinitionError, match="rshift"):
        fused(lambda i: (i >> 1) + 1, interpret=DEVICE == "cpu")(torch.arange(4, device=DEVICE))
    with pytest.raises(DefinitionError, match="argmax"):
        fused(lambda x: x.argmax() + 1, interpret=DEVICE == "cpu")(x)
    for fn in (lambda t: True - t, lambda t: t - True):  # eager: NotImplementedError
        with pytest.raises(DefinitionError, match="bool operand"):
            with Fusion("bool_sub") as fd:
                fd.add_output(fn(fd.define_tensor([-1])))
    with pytest.raises(DefinitionError, match="writes into a view"):
        fused(lambda x: (x * 2).permute(1, 0).add_(1) * 1, interpret=DEVICE == "cpu")(x)


@pytest.mark.parametrize("dtype", [torch.uint8, torch.int8, torch.int16])
def test_a_number_divided_by_a_small_integer_tensor_is_not_wrapped_to_its_dtype(dtype):
    """``fd.ops.div(-3, t)`` and ``fd.ops.atan2(-3, t)`` of a uint8/int8/int16 tensor compute in
    float, as eager's ``torch.div(-3, t)``: the number is not converted to the tensor's dtype
    first (-3 wrapped to uint8's 253, 300 to int8's 44)."""
    x = torch.tensor([1, 2, 9, 100], dtype=dtype, device=DEVICE)
    with Fusion("number_over_tensor") as fd:
        t = fd.define_tensor([-1], dtype)
        fd.add_output(fd.ops.div(-3, t))
        fd.add_output(fd.ops.div(300, t))
        fd.add_output(fd.ops.atan2(-3, t))
    got = fd.execute([x])
    want = [torch.div(-3, x), torch.div(300, x), torch.atan2(torch.tensor(-3.0, device=DEVICE), x)]
    # atan2 on CUDA is libdevice's, an ulp from eager's in some elements (docs/semantics.md)
    ulps = [0, 0, 2.5e-7 if DEVICE == "cuda" else 0]
    for g, w, rtol in zip(got, want, ulps):
        assert g.dtype == w.dtype
        torch.testing.assert_close(g, w, rtol=rtol, atol=0)


def test_a_fused_function_may_update_its_intermediates_in_place():
    """``y.add_(1)``, ``relu(inplace=True)``, chained in-place ops and ``F.rms_norm`` (whose
    PyTorch implementation adds its epsilon in place) hold as their out-of-place ops, forward
    and backward as eager's; an in-place write into an argument is refused naming it."""
    @fused(interpret=DEVICE == "cpu")
    def updates(x):
        y = x * 2
        before = y + 1
        y.add_(1).mul_(3)
        return F.relu(y - 4, inplace=True), before, y

    @fused(interpret=DEVICE == "cpu")
    def rms(x, w):
        return F.rms_norm(x, (16,), w, eps=1e-6)

    @fused(interpret=DEVICE == "cpu")
    def writes_argument(x):
        x.mul_(2)
        return x + 1

    x = sample((4, 16), F32).requires_grad_()
    got = updates(x)
    want = updates.fn(x)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, rtol=0, atol=0)
    gs = [torch.ones_like(w) for w in want]
    for g, w in zip(torch.autograd.grad(got, x, gs), torch.autograd.grad(want, x, gs)):
        torch.testing.assert_close(g, w, rtol=0, atol=0)
    w = sample((16,), F32)
    torch.testing.assert_close(rms(x.detach(), w), F.rms_norm(x.detach(), (16,), w, eps=1e-6), rtol=2e-6, atol=1e-6)
    with pytest.raises(DefinitionError, match="writes into the function's argument 'x'"):
        writes_argument(sample((4, 16), F32))


def test_reductions_over_dim_0_of_a_0_dim_tensor_are_eagers():
    """PyTorch takes dim 0 and -1 of a 0-dim tensor, reducing nothing: ``x.sum(-1)``,
    ``softmax``, ``std``, ``argmax(0)`` of a 0-dim tensor, in ``@fused`` and in ``fd.ops``,
    give eager's values (they used to fail in segmentation with an ``IndexError``)."""
    x = torch.tensor(3.0, device=DEVICE)

    @fused(interpret=DEVICE == "cpu")
    def reduce(x):
        return x.sum(-1), x.softmax(-1), x.std(0), x.amax(0, keepdim=True), x.argmax(0)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # std's degrees of freedom
        for g, w in zip(reduce(x), reduce.fn(x)):
            assert g.dtype == w.dtype and g.shape == w.shape
            torch.testing.assert_close(g, w, rtol=0, atol=0, equal_nan=True)
    for reduction, want in [(lambda fd, a: fd.ops.mean(a, -1), x.mean(-1)),
                            (lambda fd, a: fd.ops.argmin(a, 0), x.argmin(0)),
                            (lambda fd, a: fd.ops.prod(a, 0), x.prod(0))]:
        with Fusion("reduce_0_dim") as fd:
            fd.add_output(reduction(fd, fd.define_tensor([], F32)))
        (got,) = fd.execute([x])
        assert got.dtype == want.dtype and got.shape == want.shape
        torch.testing.assert_close(got, want, rtol=0, atol=0)


def test_fused_functions_traced_in_two_threads_at_once_match_eager():
    """Two threads whose first calls of a ``@fused`` function (two signatures) trace at the
    same time: each trace runs to its end before the other starts, and both match eager.
    (Traces that overlapped, the second one started while the first was inside the function
    and ended after it, broke each other inside ``make_fx``: ``... is not tracked with
    proxy`` or ``CURRENT_PATCHER is None``.)"""
    import threading

    inside = {torch.float32: threading.Event(), torch.float64: threading.Event()}
    returned = threading.Event()

    def body(x, w):
        if x.dtype == torch.float32 and not inside[torch.float32].is_set():
            inside[torch.float32].set()
            inside[torch.float64].wait(2)  # the other trace starts now, unless it must wait
        elif x.dtype == torch.float64 and not inside[torch.float64].is_set():
            inside[torch.float64].set()
            returned.wait(2)  # and ends after this one's, unless they do not overlap
        return torch.tanh(x * w).sum(-1) + x.mean(-1)

    f = fused(body)
    inputs = {dt: (torch.randn(5, 8, device=DEVICE, dtype=dt), torch.randn(8, device=DEVICE, dtype=dt))
              for dt in inside}
    results = {}

    def call(dt):
        try:
            results[dt] = f(*inputs[dt])
        except Exception as e:  # noqa: BLE001 - reported by the assertion below
            results[dt] = e
        if dt == torch.float32:
            returned.set()

    first = threading.Thread(target=call, args=(torch.float32,))
    second = threading.Thread(target=call, args=(torch.float64,))
    first.start()
    assert inside[torch.float32].wait(60)
    second.start()
    first.join(60)
    second.join(60)
    assert not first.is_alive() and not second.is_alive()
    for dt, (x, w) in inputs.items():
        assert isinstance(results[dt], torch.Tensor), results[dt]
        torch.testing.assert_close(results[dt], body(x, w))


# ----------------------------------------------------------------------------- copies and pickling

@fused
def _scaled_silu(x, w):
    return F.silu(x) * w


def test_a_model_holding_fusions_is_copied_and_its_fused_function_pickled():
    """copy.deepcopy of a module holding a @fused function and a fusion op (an EMA copy) shares
    them, as functions are shared; a module-level @fused function pickles by name (multiprocessing
    sends it so); an open definition copies into an independent one."""
    import copy
    import pickle

    with Fusion("copied_relu") as fd:
        a = fd.define_tensor([-1, -1], F32)
        fd.add_output(fd.ops.relu(a))

    class Holder(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(sample([8], F32))
            self.act, self.relu = _scaled_silu, fd.as_op()

        def forward(self, x):
            return self.relu(self.act(x, self.w))

    x = sample([4, 8], F32)
    model = Holder()
    model(x)
    ema = copy.deepcopy(model)
    assert ema.act is model.act and ema.relu is model.relu and ema.w is not model.w
    with torch.no_grad():
        ema.w.mul_(0.5)
    torch.testing.assert_close(ema(x), torch.relu(F.silu(x) * ema.w), rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(model(x), torch.relu(F.silu(x) * model.w), rtol=1e-6, atol=1e-6)
    assert copy.copy(_scaled_silu) is _scaled_silu and pickle.loads(pickle.dumps(_scaled_silu)) is _scaled_silu
    assert copy.deepcopy(fd) is fd

    with Fusion("open") as open_fd:
        b = open_fd.define_tensor([-1], F32)
        copied = copy.deepcopy(open_fd)
        open_fd.add_output(b + 1)
    assert copied is not open_fd and not copied.finished and not copied.outputs
