"""The inner-outer reduction (``reduction.inner_outer``, :mod:`torchfuse.schedulers.inner_outer`):
a row reduction and the column sums over the same rows in one kernel, as in LayerNorm's and
RMSNorm's backward (input gradient by rows; weight and bias gradients by columns). Values and gradients are compared with an fp64
reference, against eager's own error."""
from __future__ import annotations

import copy
import logging
import warnings

import pytest
import torch
import torch.nn.functional as F

import torchfuse
import torchfuse.backend as backend
from torchfuse.config import Tuning
from torchfuse.schedulers import GroupTraits, KernelLayout, RuntimeLayout, Target, cdiv, inner_outer, next_power_of_2
from conftest import DEVICE

#: on a GPU: keep the heuristic's grid (no refit to the compiled kernel's occupancy)
NO_FIT = Tuning().replace("inner_outer.fit", False)


def _ln(x, w, b):
    return F.layer_norm(x, x.shape[-1:], w, b)


def _ln_no_bias(x, w, b):
    return F.layer_norm(x, x.shape[-1:], w)


def _rms(x, w, b):
    return F.rms_norm(x, x.shape[-1:], w, eps=1e-6)


def _ln_gelu_residual(x, w, b):
    return F.gelu(F.layer_norm(x * 2 + 1, x.shape[-1:], w, b)) + x


NORMS = {"layer_norm": _ln, "layer_norm_no_bias": _ln_no_bias, "rms_norm": _rms, "ln_gelu_residual": _ln_gelu_residual}
#: (norm, input shape): rows not a multiple of the row block, a row length that is not a power
#: of two, 3-D inputs with a size-1 batch, very short rows
CASES = [("layer_norm", (37, 100)), ("layer_norm", (3, 5, 64)), ("layer_norm_no_bias", (1, 129, 48)),
         ("rms_norm", (200, 7)), ("rms_norm", (16, 1000)), ("ln_gelu_residual", (45, 96))]


def _schedulers(graphs: int = 2) -> set[str]:
    """Schedulers of the last ``graphs`` compiled graphs (a forward and its backward)."""
    return {p.config.scheduler for cg in backend.RECENT[-graphs:] for s in cg.steps if hasattr(s, "plans")
            for p in s.plans.values()}


def _check_gradients(fn, shape, dtype, **options):
    """Compiled values and gradients against fp64, as close as eager's (twice eager's error plus
    one rounding step of ``dtype`` at the reference's magnitude)."""
    torch.manual_seed(0)
    d = shape[-1]
    x = torch.randn(shape, dtype=dtype, device=DEVICE)
    w, b = torch.randn(d, dtype=dtype, device=DEVICE), torch.randn(d, dtype=dtype, device=DEVICE)
    dy = torch.randn(shape, dtype=dtype, device=DEVICE)

    def grads(f, tensors, g):
        ts = [t.detach().clone().requires_grad_() for t in tensors]
        out = f(*ts)
        wrt = [t for t in ts if fn is not _ln_no_bias and fn is not _rms or t is not ts[2]]
        return (out, *torch.autograd.grad(out, wrt, g))

    ref = grads(fn, [x.double(), w.double(), b.double()], dy.double())
    eager = grads(fn, [x, w, b], dy)
    got = grads(torchfuse.compile(fn, dynamic=False, **options), [x, w, b], dy)
    step = torch.finfo(dtype).eps
    for name, g, e, r in zip(("output", "input", "weight", "bias"), got, eager, ref):
        err = (g.double() - r).abs().max().item()
        bound = 2 * (e.double() - r).abs().max().item() + step * r.abs().max().item()
        assert err <= bound, (name, err, bound)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
@pytest.mark.parametrize("norm,shape", CASES, ids=[f"{n}-{'x'.join(map(str, s))}" for n, s in CASES])
def test_norm_backward_runs_as_one_inner_outer_kernel(norm, shape, dtype):
    _check_gradients(NORMS[norm], shape, dtype)
    assert "reduction.inner_outer" in _schedulers()


def test_inner_outer_with_gpu_launch_configurations():
    """The GPU heuristic's configuration (whole rows, 16 elements a thread, two programs per
    multiprocessor) under the interpreter, on a 4-multiprocessor device: 8 programs of 4 warps
    over 51 blocks of 4 rows, the last block partial."""
    _check_gradients(_ln, (203, 300), torch.bfloat16, launch_configs_for_sm_count=4, tuning=NO_FIT)
    configs = [p.config for s in backend.RECENT[-1].steps if hasattr(s, "plans") for p in s.plans.values()]
    (cfg,) = [c for c in configs if c.scheduler == "reduction.inner_outer"]
    assert (cfg.split, cfg.stages[0].XBLOCK, cfg.stages[0].RBLOCK, cfg.stages[0].num_warps) == (8, 4, 512, 4), cfg


def test_inner_outer_off_gives_separate_kernels():
    _check_gradients(_ln, (37, 100), torch.float32, inner_outer=False)
    assert "reduction.inner_outer" not in _schedulers()


def test_dependent_column_sums_are_not_paired():
    """Column sums of a row reduction's result (softmax, then its column sums) depend on the
    row kernel: they stay a kernel of their own."""
    def f(x):
        y = torch.softmax(x, -1)
        return y, (y * x).sum(0)

    x = torch.randn(64, 48, device=DEVICE)
    got = torchfuse.compile(f, dynamic=False, tuning=Tuning())(x)  # the defaults, whatever the environment
    want = f(x)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w)
    assert "reduction.inner_outer" not in _schedulers()


def test_column_sums_read_by_way_of_a_third_group_are_not_paired():
    """The sums of ``x * p`` read ``p`` from a group that also adds ``t``, the column sums of
    the softmax rows of ``x`` (a group of their own): no value of the rows reaches the sums of
    ``x * p``, but the group in between runs as one step, after the rows and before those sums.
    Paired with the rows, the sums waited on their own results ("fusion created a cycle between
    steps") and the graph ran unfused."""
    def f(x, y, z, u, v, w):
        p = u * v + w  # three reads: not recomputed by each reader
        a = z.sum(0) * p  # rows of another length: a group of its own, writing p
        t = (torch.softmax(x, -1) * y).sum(0)
        return (x * p).sum(0), a + t

    torch.manual_seed(0)
    args = [torch.randn(s, device=DEVICE) for s in [(6, 8), (6, 8), (5, 8), (8,), (8,), (8,)]]
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # no fallback to the traced graph
        got = torchfuse.compile(f, dynamic=False, tuning=Tuning())(*args)
    for g, w in zip(got, f(*args)):
        torch.testing.assert_close(g, w)
    assert "reduction.inner_outer" not in _schedulers(1)


def test_chunked_jacobian_backward_compiles():
    """The backward of ``jacrev(softmax(v * w), chunk_size=3)`` has the shape above: the
    softmax, recomputed, is read by one chunk's column sums from a group that also reads the
    column sums of another chunk's rows. It compiles; values and gradients equal eager's."""
    from torch.func import jacrev

    def f(x, w):
        return jacrev(lambda v: F.softmax(v * w, -1), chunk_size=3)(x)

    torch.manual_seed(0)
    x, w, dy = torch.randn(8, device=DEVICE), torch.randn(8, device=DEVICE), torch.randn(8, 8, device=DEVICE)

    def grads(fn):
        xs, ws = x.clone().requires_grad_(), w.clone().requires_grad_()
        out = fn(xs, ws)
        return (out, *torch.autograd.grad(out, [xs, ws], dy))

    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        got = grads(torchfuse.compile(f, dynamic=False, tuning=Tuning()))
    for g, e in zip(got, grads(f)):
        torch.testing.assert_close(g, e)


def _layout(x: int, r: int) -> RuntimeLayout:
    return RuntimeLayout(KernelLayout(1, 1, (), False), (x,), (r,), ((),), x, r, True)


@pytest.mark.parametrize("x", [1, 7, 1000, 16384, 100000])
@pytest.mark.parametrize("r", [2, 100, 768, 4096, 8192])
@pytest.mark.parametrize("interpret", [False, True])
def test_inner_outer_configurations_cover_rows_and_columns(x, r, interpret):
    cfg = inner_outer.SCHEDULER.heuristic(_layout(x, r), GroupTraits(), Tuning(), Target(sm_count=132, interpret=interpret))
    main, finish = cfg.stages
    blocks = cdiv(x, main.XBLOCK)
    assert main.RBLOCK == next_power_of_2(r) and cfg.split == main.grid[0] <= blocks
    assert main.XBLOCK * main.RBLOCK <= (1 << 16 if interpret else Tuning().persistent.tile_elements) \
        or main.XBLOCK == 1
    assert finish.XBLOCK >= cfg.split and finish.grid[0] * finish.RBLOCK >= r
    assert (finish.grid[0] - 1) * finish.RBLOCK < r


def test_resident_programs_follow_cuda_occupancy_rules():
    """Expected values worked by hand from CUDA's rules (registers per warp rounded up to 256,
    65536 a multiprocessor; 2048 threads; 228 KiB of shared memory, 1 KiB reserved a program)."""
    assert inner_outer.resident_programs(128, 0, 8) == 2  # 4096 registers a warp: 16 warps
    assert inner_outer.resident_programs(80, 0, 8) == 3  # 2560 a warp: 25 warps
    assert inner_outer.resident_programs(33, 0, 8) == 6  # 1056 -> 1280 a warp: 51 warps
    assert inner_outer.resident_programs(32, 0, 8) == 8  # 64 warps by registers; threads: 8 programs
    assert inner_outer.resident_programs(32, 100 * 1024, 8) == 2  # 101 KiB a program
    assert inner_outer.resident_programs(255, 0, 16) == 1  # not even one: still one


def test_grid_fitted_to_resident_programs_keeps_values(monkeypatch):
    """The executor's refit of an inner-outer plan to the compiled kernel's occupancy (done on
    a GPU ahead of the first call) changes grid, split argument and workspaces together: with
    a stand-in compiled kernel of 40 registers (1280 a warp: 51 warps, 12 programs of 4 warps
    fit; capped at 4) on 4 multiprocessors, 16 programs, and the next call still gives eager's
    gradients."""
    import types

    fn = torchfuse.compile(_ln, dynamic=False, launch_configs_for_sm_count=4, tuning=NO_FIT)  # no refit before its own
    x = torch.randn(403, 300, device=DEVICE, requires_grad=True)
    w, b = torch.randn(300, device=DEVICE, requires_grad=True), torch.randn(300, device=DEVICE, requires_grad=True)
    dy = torch.randn(403, 300, device=DEVICE)
    torch.autograd.grad(fn(x, w, b), [x, w, b], dy)
    (runner,) = [s for s in backend.RECENT[-1].steps if hasattr(s, "plans") and s.group.outer]
    (plan,) = runner.plans.values()
    assert plan.config.split == 8  # the heuristic's 2 a multiprocessor

    compiled = types.SimpleNamespace(n_regs=40, metadata=types.SimpleNamespace(shared=0),
                                     _init_handles=lambda: None)
    monkeypatch.setattr(plan, "kernel", types.SimpleNamespace(warmup=lambda *a: compiled, **{
        k: getattr(plan.kernel, k) for k in ("launch", "source")}))
    props = types.SimpleNamespace(regs_per_multiprocessor=65536, shared_memory_per_multiprocessor=233472,
                                  max_threads_per_multi_processor=2048)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda d: props)
    runner.sm_count = 4
    runner.fast.clear()
    cfg = runner.fit_inner_outer(plan, [], False)
    blocks = cdiv(403, cfg.stages[0].XBLOCK)
    assert cfg.split == plan.config.split == min(blocks, 16) == plan.scalars[-2]
    assert cfg.stages[1].XBLOCK >= cfg.split
    assert all(ws[1] == (cfg.split * 300,) for ws in plan.workspaces)

    got = torch.autograd.grad(fn(x, w, b), [x, w, b], dy)
    want = torch.autograd.grad(_ln(x, w, b), [x, w, b], dy)
    for g, e in zip(got, want):
        torch.testing.assert_close(g, e, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("shape", [(0, 768), (2, 0, 100)])
def test_column_sums_over_no_rows_are_written(shape):
    """Column sums over zero rows are written (zeros, as eager's), not whatever the output's
    memory held: alone where the paired row sums are empty (those run on ATen), and so is
    RMSNorm's weight gradient on an empty batch (its empty backward graph may differ by
    device). Over two rows the sums run as an inner-outer pair."""
    def f(x):
        return (x * 2).sum(-1), (x * x).sum(0)

    for dtype in (torch.float32, torch.int32):
        x = torch.ones(shape[0], shape[-1], device=DEVICE, dtype=dtype)
        got, want = torchfuse.compile(f, dynamic=False)(x), f(x)
        assert ("reduction.persistent" if shape[0] == 0 else "reduction.inner_outer") in _schedulers(1)
        for g, w in zip(got, want):
            torch.testing.assert_close(g, w, rtol=0, atol=0)

    rms = torch.nn.RMSNorm(shape[-1]).to(DEVICE)
    x = torch.randn(shape, device=DEVICE, requires_grad=True)
    torchfuse.compile(rms, dynamic=False)(x).sum().backward()
    torch.testing.assert_close(rms.weight.grad, torch.zeros_like(rms.weight), rtol=0, atol=0)


def test_unpaired_column_sums_are_logged_with_the_reason(caplog):
    """A column-sum group left unpaired says why under the ``fusion`` log topic: rows too long
    to pair, or a dependency between the two groups."""
    x = torch.randn(5, 5000, device=DEVICE, requires_grad=True)
    w, b = torch.randn(5000, device=DEVICE, requires_grad=True), torch.randn(5000, device=DEVICE, requires_grad=True)
    with caplog.at_level(logging.INFO, logger="torchfuse.fusion"):
        torch.autograd.grad(torchfuse.compile(_ln, dynamic=False)(x, w, b).sum(), [x, w, b])
    assert "(5000 elements) are longer than the 4096 that pair" in caplog.text
    assert "reduction.inner_outer" not in _schedulers()
    caplog.clear()

    def f(x):
        y = torch.softmax(x, -1)
        return y, (y * x).sum(0)

    with caplog.at_level(logging.INFO, logger="torchfuse.fusion"):
        torchfuse.compile(f, dynamic=False, tuning=Tuning())(torch.randn(64, 48, device=DEVICE))
    assert "reads a result of the other" in caplog.text


PAIRS = {
    # row statistics written per row, a full-size row result, and column sums of another input
    "softmax_and_column_sums": (lambda x, y: (x.amax(-1), torch.softmax(x, -1), (x * y).sum(0), y.sum(0)),
                                [(40, 24), (40, 24)]),
    # rows over two dims (the finish kernel unravels two column dims), kept dims two as well
    "two_reduced_two_kept": (lambda x, y: ((x * y).sum((2, 3), keepdim=True) * x, (x - y).sum((0, 1))),
                             [(3, 5, 4, 6), (3, 5, 4, 6)]),
    # a transposed input: rows and columns follow strides, not memory order
    "transposed": (lambda x, y: (torch.log_softmax(x.t(), -1), (x.t() * y).sum(0)), [(24, 33), (33, 24)]),
    # the column side's epilogue: a cast and a scale after the sum
    "column_epilogue": (lambda x, y: (x.var(-1), ((x * y).sum(0) * 0.5).to(torch.float16)), [(19, 40), (19, 40)]),
}


@pytest.mark.parametrize("case", list(PAIRS))
def test_paired_groups_of_other_shapes_match_eager(case):
    """Pairs beyond the normalizations: per-row outputs, several reduced and kept dims, a
    transposed operand and a column epilogue, each against eager (fp32)."""
    fn, shapes = PAIRS[case]
    torch.manual_seed(0)
    args = [torch.randn(s, device=DEVICE) for s in shapes]
    got, want = torchfuse.compile(fn, dynamic=False)(*args), fn(*args)
    assert "reduction.inner_outer" in _schedulers(1)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("norm,shape", [("layer_norm", (37, 100)), ("ln_gelu_residual", (45, 96))])
def test_row_sums_of_layer_norm_backward_in_gpu_form(norm, shape):
    """LayerNorm's backward reduces its two row sums (of ``dy * w`` and ``dy * w * xhat``) as
    one tuple inside the inner-outer kernel; here in the GPU's form (``tf_row_sum2``'s tuple
    reduction) under the interpreter, in place of its host variant
    (``Tuning.runtime.interpreter_gpu_helpers``). Gradients as in :func:`_check_gradients`."""
    _check_gradients(NORMS[norm], shape, torch.float32, tuning="runtime.interpreter_gpu_helpers=tf_row_sum*")
    sources = [p.kernel.source.text for cg in backend.RECENT[-2:] for s in cg.steps if hasattr(s, "plans")
               for p in s.plans.values() if p.kernel is not None and p.config.scheduler == "reduction.inner_outer"]
    assert sources and all("= tf_row_sum2(" in t for t in sources), sources


@pytest.mark.parametrize("norm_first", [True, False], ids=["norm_first", "norm_last"])
def test_both_layer_norms_of_an_encoder_layer_are_paired(norm_first):
    """A transformer encoder layer's backward pairs both LayerNorms with their weight and bias
    gradients, although sibling fusion merged one LayerNorm's weight-gradient sum with the
    other's sums (a common input) and its bias-gradient sum reads the output gradient through
    a value of its own (a detached view). Outputs and every gradient against fp64, as close as
    eager's; no registry op left on ATen."""
    from test_ops import aten_calls

    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(64, 4, 128, dropout=0.0, batch_first=True,
                                             norm_first=norm_first).to(DEVICE)
    x = torch.randn(4, 10, 64, device=DEVICE)
    dy = torch.randn(4, 10, 64, device=DEVICE)

    def run(module, inp, grad):
        inp = inp.detach().clone().requires_grad_()
        out = module(inp)
        params = [p for _, p in sorted(module.named_parameters())]
        return (out, *torch.autograd.grad(out, [inp, *params], grad))

    ref = run(copy.deepcopy(layer).double(), x.double(), dy.double())
    eager = run(layer, x, dy)
    backend.RECENT.clear()  # a bounded record: the graphs compiled from here on
    got = run(torchfuse.compile(layer, dynamic=False, tuning=Tuning()), x, dy)
    graphs = list(backend.RECENT)
    for k, (g, e, r) in enumerate(zip(got, eager, ref)):
        err = (g.double() - r).abs().max().item()
        bound = 2 * (e.double() - r).abs().max().item() + torch.finfo(torch.float32).eps * r.abs().max().item()
        assert err <= bound, (k, err, bound)
    paired = [p for s in graphs[-1].steps if hasattr(s, "plans") for p in s.plans.values()
              if p.config.scheduler == "reduction.inner_outer"]
    assert len(paired) == 2, [p.config.scheduler for s in graphs[-1].steps if hasattr(s, "plans")
                              for p in s.plans.values()]
    assert not aten_calls(graphs) and all(cg.stats["fallbacks"] == 0 for cg in graphs)
