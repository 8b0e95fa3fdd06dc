"""The runtime's host-side shortcuts: view ops replayed as reinterpretations of their input
(``ViewCall``), and allocation through the C++ entry points. Values, sizes, strides and
offsets are compared with eager's on every call, including calls whose input layout differs
from the recorded one."""
from __future__ import annotations

import pytest
import torch

import torchfuse
from torchfuse import backend
from torchfuse.runtime.compile import StaticBinary, TritonBinary, static_binary
from torchfuse.runtime.executor import VIEW_OPS, ViewCall

from test_ops import DEVICE


def _views(x, w):
    # matmul inputs and outputs reshaped, transposed, sliced: ATen view calls between groups
    h = (x.view(4, 8, 16).permute(1, 0, 2).reshape(8, 64) @ w).t()
    s = h[1:5, ::2].unsqueeze(0).expand(3, 4, 4)
    return torch.relu(s) + 1, h.select(1, 2), h.transpose(0, 1)[2:]


def _same(a: torch.Tensor, b: torch.Tensor) -> None:
    torch.testing.assert_close(a, b)
    assert a.shape == b.shape and a.stride() == b.stride()


def test_view_calls_replay_with_eager_values_and_layouts():
    torch.manual_seed(0)
    w = torch.randn(64, 6, device=DEVICE)
    compiled = torchfuse.compile(_views, dynamic=False)
    for _ in range(3):  # the first call records, the next ones reinterpret
        x = torch.randn(32, 16, device=DEVICE)
        for a, b in zip(compiled(x, w), _views(x, w)):
            _same(a, b)
    g = backend.RECENT[-1]
    views = [r for r in g.runners if isinstance(r, ViewCall)]
    assert views, "the matmul's reshapes and transposes should run as ViewCall"
    assert any(v.view is not None for v in views)
    # h[1:5, ::2] (two slices) and h.transpose(0, 1)[2:] (a transpose and a slice): one step each
    assert g.view_chains_merged == 2 and sum(len(v.ops) == 2 for v in views) == 2


def test_merged_view_chain_follows_a_changed_input_layout():
    """A chain recorded for one input layout is rebuilt through its ops for another."""
    call = ViewCall(torch.ops.aten.permute.default, 0, [[1, 0, 2]], 1)
    call.absorb(ViewCall(torch.ops.aten.slice.Tensor, 1, [2, 1, 3], 2))
    call.absorb(ViewCall(torch.ops.aten.unsqueeze.default, 2, [0], 3))
    base = torch.arange(2 * 3 * 4.0).view(2, 3, 4)
    for x in (base, base, base.transpose(1, 2).contiguous().transpose(1, 2), base[:, 1:], base[:, 1:]):
        env = [x, None, None, None]
        call(env)
        want = x.permute(1, 0, 2)[:, :, 1:3].unsqueeze(0)
        assert env[1] is None and env[2] is None
        _same(env[3], want)
        assert env[3].storage_offset() == want.storage_offset()


def test_view_call_follows_a_changed_input_layout():
    """A recorded view is reused only for the input strides it was recorded with; an input
    with other strides (a transposed graph input) goes through the op again."""
    op = torch.ops.aten.permute.default
    call = ViewCall(op, 0, [[1, 0, 2]], 1)
    base = torch.arange(2 * 3 * 4.0).view(2, 3, 4)
    for x in (base, base[:, 1:], base.transpose(0, 1).contiguous().transpose(0, 1), base, base[:, :, ::2]):
        env = [x, None]
        call(env)
        _same(env[1], x.permute(1, 0, 2))
        assert env[1].data_ptr() == x.permute(1, 0, 2).data_ptr()
    # with an offset: the increment is relative to the input's own storage offset
    sl = torch.ops.aten.slice.Tensor
    call = ViewCall(sl, 0, [1, 1, 3], 1)
    for x in (base, base[1:], base[1:]):
        env = [x, None]
        call(env)
        _same(env[1], x[:, 1:3])
        assert env[1].storage_offset() == x[:, 1:3].storage_offset()


def test_view_call_keeps_autograd_views_for_inputs_that_require_grad():
    call = ViewCall(torch.ops.aten.t.default, 0, [], 1)
    x = torch.randn(3, 5)
    call([x, None])  # records
    y = torch.randn(3, 5, requires_grad=True)
    env = [y, None]
    call(env)
    env[1].sum().backward()
    torch.testing.assert_close(y.grad, torch.ones(3, 5))


def test_view_of_a_zero_tensor_runs_its_op():
    """Forward-mode AD's zero gradients are ``aten._efficientzerotensor`` results, which have
    no storage to read; ``jacfwd``'s backward transposes one for a matrix product. Comparing
    the view's storage address with its input's raised, and the backward graph ran on ATen
    from its first call; the view's op now runs on every call (nothing is recorded) and the
    gradients match eager's."""
    import warnings

    from torch.func import jacfwd

    call = ViewCall(torch.ops.aten.permute.default, 0, [[1, 0]], 1)
    for _ in range(2):
        env = [torch.ops.aten._efficientzerotensor.default([5, 6]), None]
        call(env)
        assert env[1]._is_zerotensor() and env[1].shape == (6, 5) and call.view is None

    def f(x, w):
        return jacfwd(lambda v: torch.nn.functional.linear(v, w).tanh())(x)

    torch.manual_seed(0)
    x, w = torch.randn(6, device=DEVICE), torch.randn(5, 6, device=DEVICE)

    def grads(fn):
        args = [x.clone().requires_grad_(), w.clone().requires_grad_()]
        fn(*args).sum().backward()
        return [a.grad for a in args]

    compiled = torchfuse.compile(f, dynamic=False)
    for _ in range(2):
        with warnings.catch_warnings():
            warnings.simplefilter("error", RuntimeWarning)  # no graph run on ATen after a failure
            got = grads(compiled)
        for a, b in zip(got, grads(f)):
            torch.testing.assert_close(a, b)


def test_every_listed_view_op_returns_an_alias():
    """The set's premise, checked on the ops themselves: each result shares its input's
    storage."""
    x = torch.randn(4, 6)
    args = {"view": [[6, 4]], "_unsafe_view": [[24]], "permute": [[1, 0]], "t": [], "transpose": [0, 1],
            "expand": [[2, 4, 6]], "squeeze": [], "unsqueeze": [0], "slice": [1, 1, 4], "select": [0, 2],
            "alias": [], "diagonal": [], "detach": []}
    for op in VIEW_OPS:
        name = op._schema.name.split("::")[1]
        a = args[name] if op._overloadname != "dims" else [[0]]
        if name == "squeeze" and op._overloadname == "dim":
            a = [0]
        r = op(x, *a)
        assert r.untyped_storage().data_ptr() == x.untyped_storage().data_ptr(), op


def test_returned_view_of_an_intermediate_can_be_modified_in_place():
    """A linear layer's 3-D output is a view of its matrix product. Eager lets the caller
    modify it in place; so must the compiled graph (first call and replays), with eager's
    gradients afterwards."""
    torch.manual_seed(0)
    lin = torch.nn.Linear(20, 37, bias=False).to(DEVICE)

    def f(x):
        logits = lin(x)
        return logits, torch.nn.functional.cross_entropy(logits[:, :-1].reshape(-1, 37), torch.arange(9, device=DEVICE) % 37)

    compiled = torchfuse.compile(f, dynamic=False)
    for _ in range(3):
        x = torch.randn(3, 4, 20, device=DEVICE, requires_grad=True)
        got, want = compiled(x), f(x)
        for g, w in zip(got, want):
            torch.testing.assert_close(g, w)
        got[0].mul_(2)  # eager allows this
        want[0].mul_(2)
        gx = torch.autograd.grad(got[0].sum() + got[1], x)[0]
        wx = torch.autograd.grad(want[0].sum() + want[1], x)[0]
        torch.testing.assert_close(gx, wx)


def _pointwise_two_outputs(x, y, z):
    return (x * y + z).relu(), (x - z).sum(1)


def _split_sum(x):
    return (x * 2).sum()


def _dropout_residual(x, y):
    return torch.nn.functional.dropout(x, 0.3, training=True) + y


@pytest.mark.parametrize("kind", ["triton", "static"])
def test_generated_launch_passes_the_general_paths_arguments(monkeypatch, kind):
    """The generated per-group launch function (``runtime.launch.build_launcher``) hands the
    compiled binaries exactly the arguments the general direct path does (pointers, launch
    scalars, seed, grid, block sizes, stream), for a multi-output group, a split reduction with
    its workspaces and a dropout group, with and without the profiler recording; and it declines
    (returns False, launches nothing) when an input's layout differs from the plan's. The
    launchers (Triton's, and PyTorch's C++ launcher, which takes the parameters that are not
    constexprs: here every one but the first and the block sizes) are replaced by a recorder,
    so this runs on any device."""
    import torchfuse.runtime.executor as ex
    from torchfuse.runtime import launch

    monkeypatch.setattr(launch, "raw_stream", lambda index: 12345)
    cases = [(_pointwise_two_outputs, [torch.randn(64, 32, device=DEVICE) for _ in range(3)]),
             (_split_sum, [torch.randn(16384, device=DEVICE)]),
             (_dropout_residual, [torch.randn(64, 32, device=DEVICE) for _ in range(2)])]
    for fn, inputs in cases:
        torchfuse.compile(fn, dynamic=False)(*inputs)
        g = backend.RECENT[-1]
        runner = next(r for r in g.runners if isinstance(r, ex.GroupRunner) and r.plans)
        assert max(runner.in_slots) < g.n_inputs, "the test needs a group that reads graph inputs only"
        plan = runner.plans[()]
        if fn is _split_sum:
            assert plan.workspaces and len(plan.config.stages) == 2, plan.config.scheduler
        if fn is _dropout_residual:
            assert runner.random
            seeds = torch.tensor([987654, 0], device=DEVICE)
            runner.seed = (seeds[:1], seeds.data_ptr())  # as CompiledGraph sets it for each call
        # fixed allocations, so that both paths pass the same pointers
        def fixed(specs):
            made = [torch.empty_strided(sh, st, dtype=dt, device=DEVICE) for _, sh, st, dt in specs]
            return [(lambda sh, st, dt, t=t: t, sh, st, dt) for t, (_, sh, st, dt) in zip(made, specs)]
        plan.allocs, plan.workspaces = fixed(plan.allocs), fixed(plan.workspaces)
        calls = []
        record = lambda *args: calls.append(args)
        env = [None] * g.n_slots
        env[: g.n_inputs] = inputs
        tensors = [env[runner.in_slots[i]] for i in runner.tensor_in]
        spec = tuple(tensors[i].data_ptr() & 15 == 0 for i in runner.checked)
        n_params = len(plan.kernel.source.params)
        binary = (TritonBinary(record, "function", "metadata") if kind == "triton" else
                  StaticBinary(record, 77, 4, 0, "O" * (n_params + 1), tuple(range(1, n_params)), (None, None)))
        direct = [(binary, st.grid[0], st.grid[1] if len(st.grid) > 1 else 1, st.XBLOCK, st.RBLOCK)
                  for st in plan.config.stages]
        plan.direct = {spec: direct}
        runner.fast.clear()
        runner(env, (), {})
        general = list(calls)
        assert len(general) == len(plan.config.stages)
        fast = runner._fast_launcher(plan, spec, direct)
        calls.clear()
        assert fast(env) is True
        assert calls == general
        calls.clear()  # a caller that knows the layouts (the graph function): no checks, the same launch
        assert fast(env, True) is True
        assert calls == general
        assert all(env[s] is a(sh, st, dt) for s, (a, sh, st, dt) in zip(runner.out_slots, plan.allocs))
        # declines another layout of a checked input
        calls.clear()
        if fn is _pointwise_two_outputs:
            other = list(env)
            other[runner.in_slots[0]] = torch.randn(32, 64, device=DEVICE).t()
            assert fast(other) is False and not calls
        # while the profiler records: the same launches, inside a range named after the kernel
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
            assert fast(env) is True
        assert calls == general
        assert plan.kernel.source.name in {e.name for e in prof.events()}


class _Compiled:
    """The parts of Triton's ``CompiledKernel`` :func:`static_binary` reads."""

    def __init__(self, signature, constants, meta, names=("in0", "out0", "n", "one", "XBLOCK", "RBLOCK")):
        fn = type("Fn", (), {"arg_names": list(names)})()
        self.src = type("Src", (), {"fn": fn, "signature": signature, "constants": constants})()
        self.metadata = type("Meta", (), {"num_warps": 4, "shared": 0, "num_ctas": 1, **meta})()
        self.shared = 0
        self.function = 1234


def test_static_binary_takes_the_parameters_that_are_not_constexprs():
    """PyTorch's C++ launcher gets one type character per parameter that is not a constexpr,
    in order, then a null pointer per scratch buffer the kernel declares (as Triton's launcher
    passes them); keys by name (Triton 3.3 and later) and by position alike. Kernels that need
    what that launcher does not do keep Triton's."""
    launcher = getattr(getattr(torch._C, "_StaticCudaLauncher", None), "_launch_kernel", None)
    if launcher is None:
        pytest.skip("this PyTorch has no C++ launcher for Triton kernels")
    named = {"in0": "*fp16", "out0": "*fp32", "n": "i32", "one": "constexpr", "XBLOCK": "constexpr",
             "RBLOCK": "constexpr"}
    scratch = {"global_scratch_size": 0, "profile_scratch_size": 0}
    b = static_binary(_Compiled(named, {(3,): 1, (4,): 1024, (5,): 1}, scratch))
    assert (b.types, b.keep, b.tail, b.function, b.num_warps) == ("OOiOO", (0, 1, 2), (None, None), 1234, 4)
    positional = {0: "*bf16", 1: "*fp32", 2: "i64", 3: "fp32", 4: "i32", 5: "i32"}
    b = static_binary(_Compiled(positional, {"XBLOCK": 1024, "RBLOCK": 1}, {}))
    assert (b.types, b.keep, b.tail) == ("OOlf", (0, 1, 2, 3), ())
    assert static_binary(_Compiled(named, {}, {"global_scratch_size": 64})) is None
    assert static_binary(_Compiled(named, {}, {"launch_pdl": True})) is None
    assert static_binary(_Compiled({**named, "n": "tensordesc<fp16[64, 64]>"}, {}, {})) is None
    # the arguments it passes: the kept parameters, then the scratch pointers
    calls = []
    b = StaticBinary(lambda *a: calls.append(a), 1234, 4, 0, "OOiOO", (0, 1, 2), (None, None))
    b(3, 1, 99, [10, 20, 30, 1, 1024, 1])
    ns: dict = {"stream": 99}
    exec(f"def go():\n    {b.source(0, 3, 1, ['10', '20', '30', '1', '1024', '1'], ns)}", ns)
    ns["go"]()
    assert calls == [(1234, 3, 1, 1, 4, 0, "OOiOO", (10, 20, 30, None, None), 99)] * 2


def test_kernels_for_the_cpp_launcher_are_loaded_by_pytorchs_loader(monkeypatch):
    """A kernel that PyTorch's C++ launcher will launch is loaded by PyTorch's loader from the
    cubin in Triton's cache, once per kernel and device, so that Triton's C launcher for its
    argument signature is never built; one asking for more shared memory or registers than a
    block has, or whose cubin will not load, is left to Triton's loading (which reports it)."""
    import types

    from torchfuse.runtime import compile as compile_mod

    loads, launches = [], []

    class Launcher:
        @staticmethod
        def _load_kernel(path, name, shared, device):
            loads.append((path, name, shared, device))
            if path.endswith("gone.cubin"):
                raise RuntimeError("no such file")
            return (11, 22, 255 if name == "regs" else 40, 0)  # module, function, registers a thread, spills

        @staticmethod
        def _launch_kernel(*args):
            launches.append(args)

    monkeypatch.setattr(torch._C, "_StaticCudaLauncher", Launcher, raising=False)
    monkeypatch.setattr(compile_mod, "_cubins", {})
    props = types.SimpleNamespace(shared_memory_per_block=48 * 1024, shared_memory_per_block_optin=227 * 1024,
                                  regs_per_multiprocessor=65536)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda d: props)
    named = {"in0": "*fp16", "out0": "*fp32", "n": "i32", "one": "constexpr", "XBLOCK": "constexpr",
             "RBLOCK": "constexpr"}

    def unloaded(name="k", shared=0, num_warps=4):
        c = _Compiled(named, {(3,): 1, (4,): 1024, (5,): 1}, {"num_warps": num_warps, "shared": shared})
        c.function, c.shared, c.hash, c.name = None, shared, f"hash-{name}", name
        c.metadata_group = {f"{name}.json": f"/cache/{name}.json", f"{name}.cubin": f"/cache/{name}.cubin"}
        c.handles = 0

        def init_handles():
            c.handles += 1
            c.function = 99
        c._init_handles = init_handles
        return c

    c = unloaded()
    assert static_binary(c) is None  # no device: only a kernel Triton loaded is taken
    b = static_binary(c, 0)
    assert (b.function, b.types, b.keep) == (22, "OOi", (0, 1, 2))
    assert static_binary(c, 0).function == 22 and loads == [("/cache/k.cubin", "k", 0, 0)]  # loaded once
    assert c.handles == 0
    assert compile_mod.registers_of(c, 0) == 40
    b(3, 1, 7, [10, 20, 30, 1, 1024, 1])
    assert launches == [(22, 3, 1, 1, 4, 0, "OOi", (10, 20, 30), 7)]
    # on another device it is loaded again
    assert static_binary(c, 1).function == 22 and loads[-1][3] == 1

    # more shared memory than a block may have, too many registers, a cubin that does not load:
    # Triton's own loading and launcher
    for c in (unloaded("big", shared=228 * 1024), unloaded("regs", num_warps=16), unloaded("gone")):
        assert static_binary(c, 0) is None
        c.run, c.packed_metadata = "triton-run", "packed"
        binary = compile_mod.binary_of(c, 0)
        assert isinstance(binary, TritonBinary) and binary.function == 99


def test_matrix_products_call_their_python_binding_only_with_tensor_arguments():
    """A compiled graph's ``mm`` and ``addmm`` called with tensors go through the Python binding
    (the same overload, less host time); with a keyword or a scalar argument they keep the
    overload's own entry point; in both cases the values are eager's."""
    from torchfuse.ir.graph import Node, Value
    from torchfuse.runtime.calls import BOUND, call_runner, entry_point

    aten = torch.ops.aten
    a, b, bias = (Value(name) for name in ("a", "b", "bias"))

    def call(target, args, kwargs, outputs=()):
        return Node(None, [], {}, list(outputs), target=target, args=tuple(args), kwargs=kwargs)

    assert entry_point(aten.mm.default, call(aten.mm.default, [a, b], {})) is BOUND[aten.mm.default]
    assert entry_point(aten.addmm.default, call(aten.addmm.default, [bias, a, b], {"beta": 0.5})) \
        is aten.addmm.default._op
    assert entry_point(aten.add.Tensor, call(aten.add.Tensor, [a, b], {})) is aten.add.Tensor._op

    x, w, c = torch.randn(8, 16), torch.randn(16, 4), torch.randn(4)
    for target, args, kwargs, expected in [
            (aten.mm.default, [a, b], {}, x @ w),
            (aten.addmm.default, [bias, a, b], {}, torch.addmm(c, x, w)),
            (aten.addmm.default, [bias, a, b], {"beta": 0.5}, torch.addmm(c, x, w, beta=0.5))]:
        out = Value("out")
        node = call(target, args, kwargs, [out])
        slots = {a: 0, b: 1, bias: 2, out: 3}
        env = [x, w, c, None]
        call_runner(node, slots)(env)
        torch.testing.assert_close(env[3], expected, rtol=0, atol=0)


def test_two_threads_calling_one_compiled_model_fall_back_nowhere():
    """Two threads calling one compiled model at once: every call gives eager's values and no
    fusion group falls back to ATen. (Under Triton's interpreter, whose launches share
    process-wide state, two at once failed and turned a group off for good.)"""
    import threading
    import warnings

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.LayerNorm(16)).to(DEVICE)
    compiled = torchfuse.compile(model)
    x = torch.randn(8, 16, device=DEVICE)
    with torch.no_grad():
        want = model(x)
        compiled(x), compiled(x)  # compiled, and the generated function made, in one thread
        errors = []

        def calls():
            for _ in range(40):
                if not torch.allclose(compiled(x), want, rtol=1e-5, atol=1e-5):
                    errors.append("values")

        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            threads = [threading.Thread(target=calls) for _ in range(2)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
    assert not errors
    assert not [w for w in caught if "runs through ATen" in str(w.message)], [str(w.message) for w in caught]
