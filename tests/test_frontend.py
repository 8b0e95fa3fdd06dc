"""Frontends: backend registration, options, training through AOTAutograd, mutation and
aliasing semantics, dynamic shapes and kernel reuse, fallbacks."""
from __future__ import annotations

import logging

import pytest
import torch

import torchfuse
import torchfuse.backend as backend
from conftest import DEVICE


def compiled_graphs():
    return list(backend.RECENT)


def last_graph():
    return backend.RECENT[-1]


@pytest.fixture(autouse=True)
def _clear_recent():
    backend.RECENT.clear()
    yield


def test_string_backend_is_registered():
    assert "torchfuse" in torch._dynamo.list_backends()

    def f(x):
        return torch.sigmoid(x) * 3 - x

    x = torch.randn(33, 7, device=DEVICE)
    out = torch.compile(f, backend="torchfuse")(x)
    torch.testing.assert_close(out, f(x))
    assert len(last_graph().segmentation.groups) == 1


def test_options_through_torch_compile(tmp_path):
    def f(x):
        return (x * 2).exp()

    x = torch.randn(10, device=DEVICE)
    out = torch.compile(f, backend="torchfuse", options={"dump_dir": str(tmp_path)})(x)
    torch.testing.assert_close(out, f(x))
    kernels = list(tmp_path.glob("tf_*.py"))
    assert len(kernels) == 1
    text = kernels[0].read_text()
    assert "@triton.jit" in text and "tl.store" in text
    assert any(p.name.endswith(".groups.txt") for p in tmp_path.iterdir())


def test_unknown_option_raises():
    with pytest.raises(TypeError, match="unknown torchfuse option"):
        torchfuse.compile(lambda x: x, not_an_option=1)


@pytest.mark.parametrize("bad, error", [({"max_group_ops": "many"}, TypeError), ({"interpret": "yes"}, TypeError),
                                        ({"compile_threads": 0}, ValueError), ({"cache_dir": 3}, TypeError),
                                        ({"persistent_max_elements": 1.5}, TypeError)])
def test_option_of_the_wrong_type_raises_at_compile(bad, error):
    """A mistyped option fails when compiling is asked for, naming the option, instead of
    making the first call fall back to ATen with a warning."""
    name = next(iter(bad))
    with pytest.raises(error, match=name):
        torchfuse.compile(lambda x: x + 1, **bad)
    # through torch.compile the backend runs at the first call, and TorchDynamo wraps the error
    with pytest.raises(Exception, match=name) as raised:
        torch.compile(lambda x: x + 1, backend="torchfuse", options=bad)(torch.randn(3))
    assert isinstance(getattr(raised.value, "inner_exception", raised.value), error)


def test_mlp_training_matches_eager():
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.LayerNorm(32),
                            torch.nn.Linear(32, 4)).to(DEVICE)
    x = torch.randn(8, 16, device=DEVICE, requires_grad=True)
    ref = m(x).square().mean()
    ref.backward()
    grads_ref = [p.grad.clone() for p in m.parameters()] + [x.grad.clone()]
    m.zero_grad()
    x.grad = None
    out = torchfuse.compile(m)(x).square().mean()
    out.backward()
    torch.testing.assert_close(out, ref)
    for got, want in zip([p.grad for p in m.parameters()] + [x.grad], grads_ref):
        torch.testing.assert_close(got, want)
    from test_ops import assert_all_fused

    names = [g.name for g in compiled_graphs()]
    assert "forward" in names and "backward" in names
    assert_all_fused(compiled_graphs())
    assert all(g.segmentation.groups for g in compiled_graphs())


def test_input_mutation_is_applied():
    def f(x, y):
        x.add_(1)
        y.mul_(2)
        return (x * y).relu()

    a = torch.randn(6, 5, device=DEVICE)
    b = torch.randn(6, 5, device=DEVICE)
    a2, b2 = a.clone(), b.clone()
    out = torchfuse.compile(f)(a, b)
    ref = f(a2, b2)
    torch.testing.assert_close(out, ref)
    torch.testing.assert_close(a, a2)
    torch.testing.assert_close(b, b2)


def test_mutation_of_a_view_and_read_again():
    def f(x):
        v = x[:, 1:]
        v.mul_(3)
        return x.sum(1) + v.exp().sum(1)

    a = torch.randn(4, 6, device=DEVICE)
    a2 = a.clone()
    out = torchfuse.compile(f)(a)
    torch.testing.assert_close(out, f(a2))
    torch.testing.assert_close(a, a2)


def test_outputs_that_alias_inputs_and_each_other():
    def f(x):
        y = x.t()
        z = (x + 1).view(-1)
        return y, z, z[2:5]

    a = torch.randn(3, 4, device=DEVICE)
    y, z, w = torchfuse.compile(f)(a)
    ry, rz, rw = f(a)
    torch.testing.assert_close(y, ry)
    torch.testing.assert_close(z, rz)
    torch.testing.assert_close(w, rw)
    assert y.data_ptr() == a.data_ptr()  # a view of the input, as in eager
    assert w.data_ptr() == z.data_ptr() + 2 * z.element_size()
    z.add_(100)  # the alias relation survives compilation
    torch.testing.assert_close(w, rw + 100)


def test_new_batch_size_reuses_kernels():
    def f(x, w):
        return torch.softmax(x * w, dim=-1) + 1

    g = torchfuse.compile(f)
    w = torch.randn(40, device=DEVICE)
    x = torch.randn(3, 40, device=DEVICE)
    torch.testing.assert_close(g(x, w), f(x, w))
    before = {k.source.key for k in _loaded_kernels()}
    for batch in (5, 9, 17):
        x = torch.randn(batch, 40, device=DEVICE)
        torch.testing.assert_close(g(x, w), f(x, w))
    after = {k.source.key for k in _loaded_kernels()}
    assert after == before, "a new batch size generated new kernels"


def _loaded_kernels():
    from torchfuse.runtime.compile import _loaded

    return list(_loaded.values())


def test_new_dtype_generates_a_new_kernel():
    def f(x):
        return x * 2 + 1

    g = torchfuse.compile(f)
    x = torch.randn(16, device=DEVICE)
    g(x)
    keys1 = {k.source.key for k in _loaded_kernels()}
    out = g(x.to(torch.float64))
    torch.testing.assert_close(out, f(x.to(torch.float64)))
    keys2 = {k.source.key for k in _loaded_kernels()}
    assert len(keys2 - keys1) == 1


def test_dynamic_shapes_match_eager():
    def f(x, y):
        return (x - x.mean(dim=1, keepdim=True)) * y.sum() / x.shape[1]

    g = torchfuse.compile(f, dynamic=True)
    for n, m in [(3, 5), (4, 7), (9, 2)]:
        x = torch.randn(n, m, device=DEVICE)
        y = torch.randn(m, device=DEVICE)
        torch.testing.assert_close(g(x, y), f(x, y))


def test_unsupported_op_runs_through_aten_and_is_logged(caplog):
    def f(x, idx):
        return torch.cumsum(x * 2, 0)[idx].relu()

    x = torch.randn(10, device=DEVICE)
    idx = torch.tensor([1, 3, 5], device=DEVICE)
    with caplog.at_level(logging.INFO, logger="torchfuse"):
        out = torchfuse.compile(f)(x, idx)
    torch.testing.assert_close(out, f(x, idx))
    calls = last_graph().segmentation.calls
    reasons = {str(c.target): c.reason for c in calls}
    assert any("cumsum" in k for k in reasons)
    assert all(r for r in reasons.values())


def test_complex_dtype_falls_back():
    def f(x):
        return (x * 2).abs()

    x = torch.randn(5, dtype=torch.complex64, device=DEVICE)
    torch.testing.assert_close(torchfuse.compile(f)(x), f(x))


def test_eager_errors_keep_their_type():
    def f(x, y):
        return x + y

    with pytest.raises(RuntimeError):
        torchfuse.compile(f)(torch.randn(3, device=DEVICE), torch.randn(4, device=DEVICE))


def test_fuse_false_runs_everything_through_aten():
    def f(x):
        return (x * 2).sin().sum()

    x = torch.randn(12, device=DEVICE)
    out = torchfuse.compile(f, fuse=False)(x)
    torch.testing.assert_close(out, f(x))
    assert not backend.RECENT or not last_graph().segmentation.groups


def test_kernel_dump_files_one_per_kernel(tmp_path):
    def f(x, y):
        a = (x + y).relu()
        return a.sum(0), a * 2

    x = torch.randn(8, 8, device=DEVICE)
    compiled = torchfuse.compile(f, dump_dir=str(tmp_path))
    compiled(x, x.t())
    kernels = sorted(tmp_path.glob("tf_*.py"))
    groups = last_graph().segmentation.groups
    assert len(kernels) == len(groups) >= 1
    # the graph's stages, and from its second call its generated function, which reads as the
    # graph's own one
    stems = [p.name.removesuffix(".ir.txt") for p in tmp_path.glob("*.ir.txt")]
    assert len(stems) == 1 and not list(tmp_path.glob("*.function_*.py"))
    compiled(x, x.t())
    (function,) = tmp_path.glob(f"{stems[0]}.function_1.py")
    assert function.read_text() == next(iter(last_graph().generated_sources.values()))


def test_layouts_that_collapse_alike_share_a_kernel_and_mixed_layouts_get_their_own():
    def f(x, y):
        return x.sin() * 2 + y

    g = torchfuse.compile(f)
    x = torch.randn(2, 3, 4, 5, device=DEVICE)
    g(x, x)
    keys1 = {k.source.key for k in _loaded_kernels()}
    # every operand channels-last: dense in one order, so the same flat loop serves
    xc = x.to(memory_format=torch.channels_last)
    out = g(xc, xc)
    torch.testing.assert_close(out, f(xc, xc))
    assert out.stride() == f(xc, xc).stride(), "outputs keep eager's layout"
    assert {k.source.key for k in _loaded_kernels()} == keys1
    # one operand contiguous, one channels-last: the loops change, so does the kernel
    out = g(x, xc)
    torch.testing.assert_close(out, f(x, xc))
    assert out.stride() == f(x, xc).stride()
    assert {k.source.key for k in _loaded_kernels()} - keys1, "a new stride order must get its own kernel"


def test_new_rank_with_a_non_collapsible_layout_generates_a_new_kernel():
    def f(x, y):
        return torch.relu(x) + y

    g = torchfuse.compile(f, dynamic=True)
    a = torch.randn(4, 6, device=DEVICE)
    g(a, a)
    keys1 = {k.source.key for k in _loaded_kernels()}
    t = torch.randn(4, 6, 8, device=DEVICE)
    u = torch.randn(4, 8, 6, device=DEVICE).transpose(1, 2)
    torch.testing.assert_close(g(t, u), f(t, u))
    assert {k.source.key for k in _loaded_kernels()} - keys1


def test_unused_empty_input_does_not_cause_new_kernels():
    def f(x, unused):
        return (x * 2).sum(-1)

    g = torchfuse.compile(f)
    e = torch.empty(0, device=DEVICE)
    g(torch.randn(3, 8, device=DEVICE), e)
    keys1 = {k.source.key for k in _loaded_kernels()}
    for batch in (5, 7):
        x = torch.randn(batch, 8, device=DEVICE)
        torch.testing.assert_close(g(x, e), f(x, e))
    assert {k.source.key for k in _loaded_kernels()} == keys1


def test_compiling_the_same_function_again_reuses_dynamo_cache(monkeypatch):
    """One backend callable per set of options: re-compiling a function (a loop, a re-run
    notebook cell) hits TorchDynamo's cache instead of recompiling until its limit (8) and
    silently running eager."""
    from torchfuse.runtime.executor import CompiledGraph

    calls = []
    original = CompiledGraph.__call__

    def counting(self, *args, **kwargs):  # every call of a compiled graph, interpreted or generated
        calls.append(self.name)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(CompiledGraph, "__call__", counting)

    def f(x):
        return torch.sigmoid(x) * 3 - x

    x = torch.randn(33, 7, device=DEVICE)
    for _ in range(12):
        torch.testing.assert_close(torchfuse.compile(f, dump_dir=None)(x), f(x))
    assert len(compiled_graphs()) == 1, "every torchfuse.compile call recompiled the function"
    assert len(calls) == 12, "calls after Dynamo's recompile limit ran eager"
    assert torchfuse._backend_for(torchfuse.Options()) is torchfuse._backend_for(torchfuse.Options())
    assert torchfuse._backend_for(torchfuse.Options()) is not torchfuse._backend_for(torchfuse.Options(fuse=False))


def test_cpu_graph_without_interpret_warns_once(monkeypatch):
    """CPU tensors run through ATen unless interpret mode is on; the first such graph of a
    process says so (a UserWarning, once), later ones do not."""
    import warnings

    monkeypatch.setattr(backend, "_warned_cpu", [False])

    def f(x):
        return torch.relu(x) * 2 + 1

    def g(x):
        return (x - 1).exp().sum(-1)

    x = torch.randn(6, 5)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.testing.assert_close(torchfuse.compile(f, interpret=False)(x), f(x))
        torch.testing.assert_close(torchfuse.compile(g, interpret=False)(x), g(x))
        torch.testing.assert_close(torchfuse.compile(f, interpret=True)(x * 2), f(x * 2))
    ours = [w for w in caught if "TORCHFUSE_INTERPRET=1" in str(w.message)]
    assert len(ours) == 1, [str(w.message) for w in caught]
    assert ours[0].category is UserWarning
    message = str(ours[0].message)
    assert "ATen" in message and "interpret=True" in message and "Triton's interpreter" in message
    assert "TRITON_INTERPRET" not in message
    assert last_graph().segmentation.groups, "interpret=True still fuses CPU graphs"


def test_unknown_mode_raises_and_explain_takes_mode():
    """A misspelled mode is an error (it would silently lose CUDA graphs); ``explain`` takes
    ``mode`` like ``torchfuse.compile`` and shows the CUDA-graph state per graph."""
    import torchfuse

    with pytest.raises(ValueError, match="unknown mode"):
        torchfuse.compile(lambda x: x + 1, mode="reduce_overhead")
    with pytest.raises(ValueError, match="unknown mode"):
        torchfuse.explain(lambda x: x + 1, torch.randn(4), mode="fast", verbose=False)
    r = torchfuse.explain(lambda x: (x * 2).sum(), torch.randn(4), mode="reduce-overhead", verbose=False)
    assert r.graphs and all(g.cudagraph for g in r.graphs)


def test_options_made_directly_take_the_environment_defaults(monkeypatch, tmp_path):
    """``torchfuse.Options()`` reads TORCHFUSE_INTERPRET, TORCHFUSE_DUMP_DIR, TORCHFUSE_CACHE_DIR
    and TORCHFUSE_DISABLE_CACHE as the options table documents, like ``Options.from_env``."""
    monkeypatch.setenv("TORCHFUSE_INTERPRET", "1")
    monkeypatch.setenv("TORCHFUSE_DUMP_DIR", str(tmp_path / "dump"))
    monkeypatch.setenv("TORCHFUSE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("TORCHFUSE_DISABLE_CACHE", raising=False)
    o = torchfuse.Options()
    assert o.interpret is True and o.dump_dir == str(tmp_path / "dump") and o.cache_dir == str(tmp_path / "cache")
    assert o == torchfuse.Options.from_env()
    monkeypatch.setenv("TORCHFUSE_INTERPRET", "0")
    monkeypatch.setenv("TORCHFUSE_DISABLE_CACHE", "1")
    monkeypatch.delenv("TORCHFUSE_DUMP_DIR")
    o = torchfuse.Options()
    assert o.interpret is False and o.cache_dir is None and o.dump_dir is None
    assert torchfuse.Options(interpret=True).interpret is True  # explicit values win


@pytest.mark.parametrize("value, expected", [("Yes", True), (" on ", True), ("off", False), ("", False),
                                             ("bogus", None), ("2", None)])
def test_boolean_environment_variables_reject_other_values(monkeypatch, value, expected):
    """TORCHFUSE_INTERPRET and TORCHFUSE_DISABLE_CACHE take 1/true/yes/on and 0/false/no/off;
    another value (a typo) raises, naming the variable, instead of meaning off."""
    for name in ("TORCHFUSE_INTERPRET", "TORCHFUSE_DISABLE_CACHE"):
        monkeypatch.delenv("TORCHFUSE_INTERPRET", raising=False)
        monkeypatch.delenv("TORCHFUSE_DISABLE_CACHE", raising=False)
        monkeypatch.setenv(name, value)
        if expected is None:
            with pytest.raises(ValueError, match=f"{name}="):
                torchfuse.Options()
        elif name == "TORCHFUSE_INTERPRET":
            assert torchfuse.Options().interpret is expected
        else:
            assert (torchfuse.Options().cache_dir is None) is expected


@pytest.mark.parametrize("value, expected", [("132", 132), (" 8 ", 8), ("", 0), ("abc", None), ("1.5", None)])
def test_the_sm_count_environment_variable_rejects_what_is_not_an_integer(monkeypatch, value, expected):
    """TORCHFUSE_LAUNCH_CONFIGS_FOR_SM_COUNT takes an integer (empty: the default, 0); another
    value raises, naming the variable, instead of meaning the default."""
    monkeypatch.setenv("TORCHFUSE_LAUNCH_CONFIGS_FOR_SM_COUNT", value)
    if expected is None:
        with pytest.raises(ValueError, match="TORCHFUSE_LAUNCH_CONFIGS_FOR_SM_COUNT="):
            torchfuse.Options()
    else:
        assert torchfuse.Options().launch_configs_for_sm_count == expected


def test_new_scheduler_for_new_sizes_is_logged_as_recompile(caplog):
    """Rows that outgrow the persistent limit get a looped kernel: the values stay eager's and
    the ``recompile`` topic names the new kernel and its scheduler."""
    f = torchfuse.compile(lambda x: torch.softmax(x, -1), dynamic=True)
    with caplog.at_level(logging.INFO, logger="torchfuse.recompile"):
        for n in (300, 600, 40000):
            x = torch.randn(3, n, device=DEVICE)
            torch.testing.assert_close(f(x), torch.softmax(x, -1))
    kernels = [r.getMessage() for r in caplog.records if "new kernel" in r.getMessage()]
    assert len(kernels) == 1 and "reduction.loop" in kernels[0], kernels
