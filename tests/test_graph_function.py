"""The generated straight-line function of a compiled graph (``runtime.graph_function``):
from the second call with a set of sizes on, it runs the graph instead of the interpreted
loop. Its values, output layouts and aliasing are compared with the interpreted loop's
(``Tuning`` ``runtime.graph_function=False``) and with eager's, for ATen calls, views of
inputs and intermediates, a failed group, random groups and symbolic sizes."""
from __future__ import annotations

import warnings

import pytest
import torch

import torchfuse
from torchfuse import backend
from torchfuse.runtime import executor
from torchfuse.runtime.compile import TritonBinary
from torchfuse.runtime.group import GroupRunner

from conftest import DEVICE

INTERPRETED = "runtime.graph_function=False"


def _layout(t):
    if not isinstance(t, torch.Tensor):
        return t
    return (tuple(t.shape), t.stride(), t.storage_offset(), t.dtype, t._base is None, t.requires_grad)


def _aliasing(outs, inputs) -> list:
    """Which outputs share storage with which (other outputs, inputs), by position."""
    every = list(outs) + list(inputs)
    ptrs = [t.untyped_storage().data_ptr() if isinstance(t, torch.Tensor) else None for t in every]
    return [[j for j, q in enumerate(ptrs) if q is not None and q == p and j != i] for i, p in enumerate(ptrs[:len(outs)])]


def _compare(got, want, inputs, exact_layout=True):
    assert len(got) == len(want)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w)
        if exact_layout:
            assert _layout(g)[:4] == _layout(w)[:4]
    assert _aliasing(got, inputs) == _aliasing(want, inputs)


def _views_and_calls(x, w):
    h = x.view(4, 8, 16).permute(1, 0, 2).reshape(8, 64) @ w  # views of an input, a matrix product
    s = torch.relu(h) + 1  # a fusion group
    vals, idx = torch.sort(s, dim=1)  # an ATen call with two results
    r = torch.nn.functional.pad(s, (1, 2), value=0.5)  # an ATen call with constant arguments
    return s, h.t(), x.view(-1)[:5], vals, idx, s[2:].unsqueeze(0), r.sum(0), s


def _graph(calls: int, fn, args_of, **options):
    compiled = torchfuse.compile(fn, dynamic=False, **options)
    outs = []
    for k in range(calls):
        args = args_of(k)
        outs.append((compiled(*args), args))
    return backend.RECENT[-1], outs


def test_generated_function_matches_the_interpreted_loop_and_eager():
    """Values, layouts, autograd bases and aliasing of outputs (an output returned twice, a view
    of an input, views of intermediates) on the calls after the first."""
    torch.manual_seed(0)
    w = torch.randn(64, 6, device=DEVICE)
    xs = [torch.randn(32, 16, device=DEVICE) for _ in range(4)]
    g, gen = _graph(4, _views_and_calls, lambda k: (xs[k], w))
    _, loop = _graph(4, _views_and_calls, lambda k: (xs[k], w), tuning=INTERPRETED)
    assert list(g.generated) == [()] and g.generated[()] and "generated" in g.stats["graph_function"]
    source = g.generated_sources[()]
    assert "_RT(env[0]" in source  # the input's view replayed inline
    # the ATen calls (mm, sort, pad) as direct calls of their entry points, none through its closure
    assert source.count("= F") >= 3 and "B" not in {line.strip()[:1] for line in source.splitlines()}, source
    for (got, args), (ref, _) in zip(gen, loop):
        want = _views_and_calls(*args)
        _compare(got, want, args)
        _compare(got, ref, args)
        assert [_layout(t) for t in got] == [_layout(t) for t in ref]
        assert got[0] is got[-1]  # one tensor returned twice, as eager's
    got = gen[-1][0]
    got[1].mul_(2)  # a returned view of an intermediate can be written in place, as eager's
    got[5].add_(1)


def test_generated_view_replay_keeps_the_guard():
    """An input with other strides, or one that requires grad, goes through the view ops, as the
    interpreted loop does."""
    torch.manual_seed(0)
    w = torch.randn(64, 6, device=DEVICE)
    x = torch.randn(32, 16, device=DEVICE)
    g, _ = _graph(3, _views_and_calls, lambda k: (x, w))
    assert g.generated.get(())
    other = torch.randn(16, 32, device=DEVICE).t()  # same sizes, other strides
    for inputs in ([other.contiguous(), w], [x.clone().requires_grad_(), w]):
        with torch.no_grad():
            got = g(list(inputs))
            g.graph_function = False
            ref = g(list(inputs))
            g.graph_function = True
        # the graph's own outputs (AOTAutograd rebuilds those that alias inputs): the loop's
        assert len(got) == len(ref) and all(torch.equal(a, b) for a, b in zip(got, ref))
        assert [_layout(t) for t in got] == [_layout(t) for t in ref]
        assert _aliasing(got, inputs) == _aliasing(ref, inputs)
        torch.testing.assert_close(got[0], _views_and_calls(*inputs)[0])
    # a transposed input: the input view (x.view) is not possible, the ops raise as eager's
    with pytest.raises(RuntimeError):
        g([other, w])


def test_training_graphs_match_eager_gradients():
    """Forward and backward graphs through their generated functions: eager's loss and grads."""
    torch.manual_seed(0)
    lin = torch.nn.Linear(16, 24).to(DEVICE)

    def f(x):
        h = lin(x).view(2, 4, 24).transpose(1, 2)
        return torch.nn.functional.layer_norm(torch.nn.functional.gelu(h), (4,)).sum()

    compiled = torchfuse.compile(f, dynamic=False)
    for _ in range(3):
        x = torch.randn(8, 16, device=DEVICE, requires_grad=True)
        got = compiled(x)
        gx, gw = torch.autograd.grad(got, (x, lin.weight))
        want = f(x)
        wx, ww = torch.autograd.grad(want, (x, lin.weight))
        # the kernels' reductions add in another order than eager's (on CUDA the weight
        # gradient's cancelling terms then differ by up to 2e-5); the generated function's
        # values equal the loop's exactly (test above)
        torch.testing.assert_close(got, want)
        torch.testing.assert_close(gx, wx, rtol=1e-4, atol=1e-4)
        torch.testing.assert_close(gw, ww, rtol=1e-4, atol=1e-4)
    graphs = backend.RECENT[-2:]
    assert [g.name for g in graphs] == ["forward", "backward"] and all(g.generated.get(()) for g in graphs)


def _dropout(x, y, w):
    a = torch.nn.functional.dropout(x, 0.5, training=True) + y
    return a, torch.nn.functional.dropout(a @ w, 0.3, training=True) * 2  # two random groups


def test_random_groups_draw_new_seeds_each_call():
    """Each call of the generated function draws its seeds from the generator, as the loop does:
    the same numbers as the interpreted loop under the same seed, new numbers on every call."""
    x, y = torch.ones(64, 32, device=DEVICE), torch.full((64, 32), 3.0, device=DEVICE)
    w = torch.eye(32, device=DEVICE)
    runs = {}
    for tuning in (None, INTERPRETED):
        torch.manual_seed(1)
        g, outs = _graph(4, _dropout, lambda k: (x, y, w), **({"tuning": tuning} if tuning else {}))
        runs[tuning] = [o for o, _ in outs]
        if tuning is None:
            assert g.generated.get(()) and len(g.random_runners) == 2
            assert all(r.seed is None for r in g.random_runners)  # the seeds die with the call
    for got, ref in zip(runs[None], runs[INTERPRETED]):
        assert all(torch.equal(a, b) for a, b in zip(got, ref))
        kept = got[0] == 5  # 1 / (1 - 0.5) + 3 where kept, 3 where dropped
        assert torch.all(kept | (got[0] == 3)) and 0.3 < kept.float().mean() < 0.7
        kept = got[1] != 0
        torch.testing.assert_close(got[1][kept], (got[0] * 2 / 0.7)[kept])
        assert 0.5 < kept.float().mean() < 0.9
    masks = [o[0] == 5 for o in runs[None]] + [o[1] != 0 for o in runs[None]]
    assert all(not torch.equal(a, b) for i, a in enumerate(masks) for b in masks[i + 1:])


def test_a_failed_group_runs_through_aten_in_the_generated_function(monkeypatch):
    """A group that could not be planned runs its ops through ATen; a group that fails after the
    function was generated (its bound launch function is stale) drops the generated functions,
    and the next calls still give eager's values."""
    original = GroupRunner.make_plan
    failed = []

    def make_plan(self, *args, **kwargs):
        if not failed:
            failed.append(self.group.name)
            raise ValueError("planted planning failure")
        return original(self, *args, **kwargs)

    monkeypatch.setattr(GroupRunner, "make_plan", make_plan)
    torch.manual_seed(0)
    w = torch.randn(64, 6, device=DEVICE)
    with warnings.catch_warnings(record=True) as records:
        warnings.simplefilter("always")
        g, outs = _graph(3, _views_and_calls, lambda k: (torch.randn(32, 16, device=DEVICE), w))
    assert any(failed[0] in str(r.message) for r in records)
    assert g.stats["fallbacks"] == 1 and g.generated.get(())
    for got, args in outs:
        _compare(got, _views_and_calls(*args), args)
    runner = next(r for r in g.runners if isinstance(r, GroupRunner) and r.failed is None and r.plans)
    with pytest.warns(RuntimeWarning, match="planted later failure"):
        runner.fail(RuntimeError("planted later failure"))
    assert not g.generated  # built again on the next call, without the failed group's launch function
    x = torch.randn(32, 16, device=DEVICE)
    got = g([x, w])
    assert g.generated.get(())
    g.graph_function = False
    ref = g([x, w])
    assert len(got) == len(ref) and all(torch.equal(a, b) for a, b in zip(got, ref))
    torch.testing.assert_close(got[0], _views_and_calls(x, w)[0])


def test_symbolic_sizes_get_one_function_per_size_signature():
    def f(x, y):  # views of a group's output (symbolic sizes) and of a matrix product's (static)
        return (x * y).relu().view(-1), (x.t() @ y).softmax(-1), (x.t() @ y).t()

    compiled = torchfuse.compile(f, dynamic=True)
    for n in (8, 12, 8, 12, 8, 12):
        x, y = torch.randn(n, 5, device=DEVICE), torch.randn(n, 5, device=DEVICE)
        got = compiled(x, y)
        _compare(got, f(x, y), [x, y])
    g = backend.RECENT[-1]
    assert g.symbols and len([k for k, run in g.generated.items() if run]) == 2


def test_off_by_tuning_interprets_every_call():
    torch.manual_seed(0)
    w = torch.randn(64, 6, device=DEVICE)
    g, outs = _graph(3, _views_and_calls, lambda k: (torch.randn(32, 16, device=DEVICE), w), tuning=INTERPRETED)
    assert not g.generated and "graph_function=False" in g.stats["graph_function"]
    for got, args in outs:
        _compare(got, _views_and_calls(*args), args)


def test_a_step_that_cannot_be_generated_leaves_the_loop(monkeypatch):
    """When writing the function fails, every call with those sizes is interpreted."""
    def refuse(*args, **kwargs):
        raise NotImplementedError("planted")

    monkeypatch.setattr(executor, "build_graph_function", refuse)
    torch.manual_seed(0)
    w = torch.randn(64, 6, device=DEVICE)
    g, outs = _graph(3, _views_and_calls, lambda k: (torch.randn(32, 16, device=DEVICE), w))
    assert g.generated == {(): False} and "NotImplementedError: planted" in g.stats["graph_function"]
    for got, args in outs:
        _compare(got, _views_and_calls(*args), args)


def test_groups_launch_through_their_launch_functions():
    """With compiled binaries (here a recorder standing in for them), the generated function
    calls each group's generated launch function directly; the launches, in order, are the
    interpreted loop's."""
    torch.manual_seed(0)
    w = torch.randn(64, 6, device=DEVICE)
    x = torch.randn(32, 16, device=DEVICE)
    g, _ = _graph(2, _views_and_calls, lambda k: (x, w))
    launched = []
    for runner in g.runners:
        if not isinstance(runner, GroupRunner) or not runner.plans:
            continue
        plan = runner.plans[()]
        plan.device_index = -1  # no device: stream 0
        record = lambda *args, name=runner.group.name: launched.append((name, args[:3]))  # noqa: E731
        direct = [(TritonBinary(record, None, None), 1, 1, st.XBLOCK, st.RBLOCK) for st in plan.config.stages]
        spec = (True,) * len(runner.checked)
        plan.direct = {spec: direct}
        runner.fast[()] = runner._fast_launcher(plan, spec, direct)
    g._drop_generated()
    runs = {}
    for generated in (True, False):
        g.graph_function = generated
        launched.clear()
        g([x, w])
        runs[generated] = list(launched)
    assert runs[True] and runs[True] == runs[False]
    source = g.generated_sources[()]
    assert source.count("= L") == len({name for name, _ in runs[True]})


def test_explain_says_how_later_calls_run(tmp_path):
    """``explain`` reports, per graph, whether its later calls run the generated function, and
    the report keeps it through JSON."""
    x = torch.randn(8, 16, device=DEVICE)
    fn = lambda x: (x.t() @ x).softmax(-1) * 2  # noqa: E731
    result = torchfuse.explain(fn, x, more_inputs=[(x,)], verbose=False)
    assert result.graphs[0].graph_function == "one generated straight-line function per set of sizes (1 so far)"
    assert "generated function: one generated straight-line function per set of sizes (1 so far)" in result.summary()
    loaded = type(result).load(result.save(str(tmp_path / "r.json")))
    assert loaded.graphs[0].graph_function == result.graphs[0].graph_function
    once = torchfuse.explain(fn, x, verbose=False, tuning=INTERPRETED)
    assert "interpreted" in once.graphs[0].graph_function


def _group_view_chain(x, w):
    s = torch.relu(x) * 2  # a fusion group, whose output...
    v = s.view(8, 4, 16).transpose(0, 1)  # ...is viewed (a chain of two views)...
    h = v.reshape(4, 128) @ w  # ...read by a matrix product (ATen)
    return h, v.sum(0)


@pytest.mark.parametrize("launch_function_runs", [True, False])
def test_views_of_group_outputs_trust_the_launch_function_only_when_it_ran(launch_function_runs):
    """A view of a group's output skips its layout checks when the group's launch function
    ran (which allocates the planned layout), and checks them when it declined and the
    general path ran: values against eager either way. Launch functions stand in here (the
    interpreter compiles no binaries): one that runs the group's general path and reports
    success, one that declines."""
    torch.manual_seed(0)
    w = torch.randn(128, 6, device=DEVICE)
    xs = [torch.randn(32, 16, device=DEVICE) for _ in range(3)]
    g, _ = _graph(1, _group_view_chain, lambda k: (xs[0], w))

    def standing_in(runner):
        def fast(env, trusted=False, stream=None):
            if not launch_function_runs:
                return False
            saved, runner.fast = runner.fast, {}
            try:
                runner(env, (), {})
            finally:
                runner.fast = saved
            return True
        return fast

    for runner in g.runners:
        if isinstance(runner, GroupRunner) and runner.plans:
            runner.fast[()] = standing_in(runner)
    g._drop_generated()
    for x in xs:
        got = g([x, w])
        want = _group_view_chain(x, w)
        _compare(got, want, [x, w])
        assert got[0]._base is None  # the matrix product's result, returned without a view check
    source = g.generated_sources[()]
    flagged = [line for line in source.splitlines() if line.strip().startswith("if f") and " or (" in line]
    assert len(flagged) >= 1, source  # the view of the group's output trusts its flag


def test_views_of_matrix_products_recorded_by_autograd_when_grad_mode_is_on():
    """Called directly with grad mode on and an input that requires grad (AOTAutograd never
    does so), a matrix product's result requires grad: its view is then made by the view ops,
    as in the interpreted loop, not reinterpreted outside autograd."""
    torch.manual_seed(0)
    w = torch.randn(64, 6, device=DEVICE)
    x = torch.randn(32, 16, device=DEVICE)
    g, _ = _graph(3, _views_and_calls, lambda k: (x, w))
    assert "_ng or (" in g.generated_sources[()]
    wg = w.clone().requires_grad_()
    got = g([x, wg])
    g.graph_function = False
    ref = g([x, wg])
    g.graph_function = True
    assert [_layout(t) for t in got] == [_layout(t) for t in ref]
    assert got[1].requires_grad and got[1].grad_fn is not None  # h.t(), h = x... @ w
    got[1].sum().backward()
    we = w.clone().requires_grad_()
    _views_and_calls(x, we)[1].sum().backward()  # eager's gradient through the same view
    torch.testing.assert_close(wg.grad, we.grad)
