"""Every reduction kernel shape computes the same values: each test steers the registry's
heuristics to one scheduler (persistent, looped, split) through Options and Tuning, on groups
with several reductions, NaNs and ties, and compares with eager."""
from __future__ import annotations

import pytest
import torch

import torchfuse
import torchfuse.backend as backend
from torchfuse.config import Tuning
from torchfuse import schedulers
from torchfuse.schedulers import GroupTraits, LaunchConfig, Target, cdiv, looped, persistent, pointwise, single
from conftest import DEVICE

#: the launch configurations of an H200 (132 multiprocessors), also under the interpreter
H200 = {"launch_configs_for_sm_count": 132}
T = Tuning()


def forcing(kind: str) -> dict:
    """Options under which the registry's own heuristics pick the ``kind`` scheduler for the
    7 x 50 inputs of :data:`CASES` (rows of 50, or columns of 7), with several programs and,
    looped, several steps a row."""
    if kind == "persistent":  # reduced extents up to 64 in registers, tiles of 128 elements
        return {"persistent_max_elements": 64, "tuning": "persistent.interpret_tile=128"}
    if kind == "loop":  # longer than the persistent limit: 16 elements a step
        return {"persistent_max_elements": 4, "tuning": "looped.interpret_rblock=16"}
    # split: the GPU's heuristic (fewer kept elements than multiprocessors) from 32 reduced elements
    return {"launch_configs_for_sm_count": 132, "tuning": "split.min_r=32"}


CASES = {
    "softmax": (lambda x: torch.softmax(x, -1), False),
    "layer_norm": (lambda x: torch.nn.functional.layer_norm(x, (x.shape[-1],)), False),
    "stats": (lambda x: (torch.var_mean(x, -1), x.amax(-1), x.argmin(-1), x.sum(-1), (x > 0).any(-1)), True),
    "column_stats": (lambda x: (x.sum(0), torch.var_mean(x, 0, correction=0), x.max(0)), True),
}


# softmax and LayerNorm reduce twice in a row (the second reduction reads the first): they
# never split, so "split" pairs only with the single-level cases
PAIRS = [(k, c) for k in ("persistent", "loop", "split") for c in CASES
         if k != "split" or CASES[c][1]]


@pytest.mark.parametrize("kind, case", PAIRS)
def test_scheduler_shapes_match_eager(kind, case):
    fn, splittable = CASES[case]
    x = torch.randn(7, 50, device=DEVICE)
    x[2, 5] = float("nan")
    x[4, :] = 1.5  # ties everywhere in one row
    out = torchfuse.compile(fn, **forcing(kind))(x)
    torch.testing.assert_close(out, fn(x), equal_nan=True)
    used = {next(iter(s.plans.values())).config.scheduler
            for s in backend.RECENT[-1].steps if hasattr(s, "plans") and s.plans}
    assert used == {f"reduction.{kind}"}


def _layout(x: int, r: int, inner: bool):
    """A stand-in for a call's loop layout: what the reduction heuristics read."""
    from types import SimpleNamespace

    return SimpleNamespace(xnumel=x, rnumel=r, r_inner=inner, layout=SimpleNamespace(n_x=1, n_r=1))


#: the reduction schedulers in the registry's order, without and with the split one
UNSPLIT = [persistent.SCHEDULER, looped.SCHEDULER]
SPLITTABLE = [schedulers.split.SCHEDULER] + UNSPLIT


def reduction_config(rt, persistent_max: int, sm_count: int, splittable: bool = False, writes_rows: bool = False,
                     tile_inputs: int = 2) -> LaunchConfig:
    """The configuration the registry picks for a reduction group on a GPU of ``sm_count``
    multiprocessors."""
    return schedulers.choose(SPLITTABLE if splittable else UNSPLIT, rt, GroupTraits(writes_rows, tile_inputs), T,
                             Target(sm_count=sm_count, persistent_max=persistent_max))


@pytest.mark.parametrize("x, r", [(72, 784), (120, 784), (240, 196), (960, 49), (1280, 1)])
def test_narrow_outer_reductions_fill_the_gpu(x, r):
    """An outer reduction that cannot split and has few columns (a squeeze-excitation mean of a
    channels-last image at batch 1) gets narrower tiles and so more programs: at least as many
    as the GPU has multiprocessors, or tiles of the narrowest width."""
    sm = 132
    cfg = reduction_config(_layout(x, r, inner=False), 1 << 14, sm_count=sm)
    st = cfg.stages[0]
    assert st.grid[0] == cdiv(x, st.XBLOCK)
    assert st.grid[0] >= sm or st.XBLOCK == T.outer.min_xblock, cfg
    covered = st.RBLOCK if cfg.scheduler == "reduction.persistent" else r
    assert covered >= r and st.XBLOCK * st.RBLOCK <= 2 * T.persistent.tile_elements, cfg
    # wide outer reductions keep the wide tile
    wide = reduction_config(_layout(128 * sm, 64, inner=False), 1 << 14, sm_count=sm)
    assert wide.stages[0].XBLOCK == T.outer.xblock


@pytest.mark.parametrize("writes_rows", [False, True])
@pytest.mark.parametrize("r, rows, warps", [(768, 1, 1), (1024, 1, 1), (2048, 2, 4), (4096, 1, 4), (256, 16, 4)])
def test_rows_of_about_1024_run_one_warp_a_row(r, rows, warps, writes_rows):
    """Persistent inner reductions over rows that pad to ``persistent.one_warp_row`` elements
    run one row a program on one warp (reductions within a warp), or ``writing_rows_xblock``
    rows on as many warps when the kernel writes whole rows; shorter and longer rows keep the
    tile of ``tile_elements`` elements at ``elements_per_thread`` a thread."""
    if writes_rows and r in (768, 1024):
        rows = warps = T.persistent.writing_rows_xblock
    cfg = reduction_config(_layout(32768, r, inner=True), 1 << 14, sm_count=132, writes_rows=writes_rows)
    st = cfg.stages[0]
    assert cfg.scheduler == "reduction.persistent", cfg
    assert (st.XBLOCK, st.num_warps) == (rows, warps), cfg
    assert st.grid[0] == cdiv(32768, rows)
    # the reason counts in English: "1 row x 1024, 1 warp", "2 rows x 1024, 2 warps"
    assert f"{rows} row{'s' if rows > 1 else ''} x" in cfg.reason and \
        f"{warps} warp{'s' if warps > 1 else ''}" in cfg.reason and "1 warps" not in cfg.reason, cfg.reason
    one = reduction_config(_layout(1, r, inner=True), 1 << 14, sm_count=132, writes_rows=writes_rows)
    assert one.stages[0].XBLOCK == 1 and one.stages[0].grid[0] == 1, one  # a single row: no empty half


@pytest.mark.parametrize("writing_rows", [1, 2])
def test_rows_of_1024_that_write_whole_rows_run_writing_rows_xblock_a_program(writing_rows):
    """Under the GPU's launch configurations, a bf16 softmax over rows of 1000 (it writes whole
    rows of 16-bit elements) runs ``persistent.writing_rows_xblock`` rows a program on as many
    warps (1, and 2, the earlier choice); an fp32 softmax and a bf16 row sum (per-row results
    only) 1 row on 1 warp. All give eager's values, including an odd number of rows (with 2, the
    second row of the last program is masked)."""
    tuning = T.replace("persistent.writing_rows_xblock", writing_rows)
    x = torch.randn(37, 1000, device=DEVICE)
    softmax = lambda t: torch.softmax(t, -1)  # noqa: E731
    for f, rows in ((lambda t: softmax(t.bfloat16()), writing_rows), (softmax, 1),
                    (lambda t: t.bfloat16().sum(-1), 1)):
        torch._dynamo.reset()
        got = torchfuse.compile(f, dynamic=False, tuning=tuning, **H200)(x)
        torch.testing.assert_close(got, f(x))
        configs = [p.config for s in backend.RECENT[-1].steps if hasattr(s, "plans") for p in s.plans.values()]
        assert [(c.XBLOCK, c.stages[0].num_warps) for c in configs] == [(rows, rows)], configs


def test_narrow_outer_tiles_match_eager():
    """The narrow tiles the GPU heuristic picks for a channels-last mean over H*W (hard-swish
    written out as well, so the group cannot split) give eager's values when run."""

    def f(x):
        y = torch.nn.functional.hardswish(x)
        return y, y.mean((2, 3), keepdim=True)

    x = torch.randn(1, 120, 28, 28, device=DEVICE).to(memory_format=torch.channels_last)
    got = torchfuse.compile(f, dynamic=False, **H200)(x)
    torch.testing.assert_close(got, f(x))
    configs = [p.config for s in backend.RECENT[-1].steps if hasattr(s, "plans") for p in s.plans.values()]
    # 120 columns narrow to the narrowest tile: 60 programs of 2 columns x 1024 rows
    assert [(c.scheduler, c.XBLOCK, c.RBLOCK) for c in configs] == [("reduction.persistent", 2, 1024)], configs


def _sweep(run: str) -> list[dict]:
    """The cases of a committed sweep of batch-1 kernels' launch configurations: the rows of
    run ``run`` of ``torchfuse bench sweep-launch small`` in benchmarks/results/rows.jsonl."""
    import pathlib

    from torchfuse.bench.launch_sweeps import small_sweep_cases
    from torchfuse.bench.rows import load_rows

    path = pathlib.Path(__file__).parents[1] / "benchmarks" / "results" / "rows.jsonl"
    return small_sweep_cases(load_rows(path, run=run, suite="sweep-launch"))


def _measured(case: dict, xb: int, rb: int, w: int) -> float:
    """Device microseconds of one candidate in a committed sweep (both formats: with and
    without the RBLOCK column)."""
    for row in case["candidates"]:
        kind, *cfg, us = row
        if kind == "runtime" and tuple(cfg) in ((xb, w), (xb, rb, w)):
            return us
    raise KeyError((case["case"], xb, rb, w))


@pytest.mark.parametrize("case", _sweep("AC"), ids=lambda c: c["case"])
def test_small_pointwise_choice_is_near_the_measured_best(case):
    """On the H200's 132 multiprocessors, the pointwise heuristic's launch configuration for
    each batch-1 kernel of the committed sweep is within 10% of the fastest candidate measured
    there (the large-tensor configuration, 1024 x 2 warps, took up to twice as long)."""
    from types import SimpleNamespace

    cfg = pointwise.SCHEDULER.heuristic(SimpleNamespace(xnumel=case["xnumel"]), GroupTraits(), T, Target(sm_count=132))
    st = cfg.stages[0]
    best = min(us for kind, *_, us in case["candidates"] if kind == "runtime")
    assert _measured(case, st.XBLOCK, 1, st.num_warps) <= 1.10 * best, (cfg, best)


@pytest.mark.parametrize("case", [c for c in _sweep("AD") if c["scheduler"] != "pointwise"],
                         ids=lambda c: c["case"])
def test_small_outer_reduction_choice_is_near_the_measured_best(case):
    """The same for the squeeze-excitation means (outer persistent reductions) of the sweep."""
    cfg = reduction_config(_layout(case["xnumel"], case["rnumel"], inner=False), 1 << 14, sm_count=132)
    st = cfg.stages[0]
    best = min(us for kind, *_, us in case["candidates"] if kind == "runtime")
    assert _measured(case, st.XBLOCK, st.RBLOCK, st.num_warps) <= 1.10 * best, (cfg, best)


@pytest.mark.parametrize("n", [1, 7, 100, 1000, 47040, 200704, 752640, 1053696, 1 << 21, (1 << 27) + 3])
@pytest.mark.parametrize("sm", [0, 108, 132])
def test_pointwise_configuration_covers_the_tensor(n, sm):
    """Every launch covers each element exactly once with power-of-two blocks and at most one
    warp per 32 elements."""
    from types import SimpleNamespace

    st = pointwise.SCHEDULER.heuristic(SimpleNamespace(xnumel=n), GroupTraits(), T, Target(sm_count=sm)).stages[0]
    assert st.XBLOCK & (st.XBLOCK - 1) == 0
    assert st.grid[0] * st.XBLOCK >= n > (st.grid[0] - 1) * st.XBLOCK
    assert 1 <= st.num_warps <= max(1, st.XBLOCK // 32)


def test_small_pointwise_blocks_match_eager():
    """The GPU's small-tensor blocks (256 elements a program here) give eager's values for a
    channels-last bias + hard-swish and a squeeze-excitation gate when run."""

    def f(x, b, s):
        y = torch.nn.functional.hardswish(x + b)
        return y, y * torch.nn.functional.hardsigmoid(s)

    cl = torch.channels_last
    x = torch.randn(1, 40, 9, 9, device=DEVICE).to(memory_format=cl)
    b, s = torch.randn(1, 40, 1, 1, device=DEVICE), torch.randn(1, 40, 1, 1, device=DEVICE)
    got = torchfuse.compile(f, dynamic=False, **H200)(x, b, s)
    torch.testing.assert_close(got, f(x, b, s))
    configs = [p.config for st in backend.RECENT[-1].steps if hasattr(st, "plans") for p in st.plans.values()]
    assert [(c.scheduler, c.XBLOCK, c.num_warps) for c in configs] == [("pointwise", 256, 8)], configs


def test_looped_outer_reductions_keep_16_byte_rows():
    """A narrow outer reduction too long to stay in registers streams its rows: its tile keeps
    8 columns (16 bytes of fp16 a row) however few programs that gives."""
    cfg = reduction_config(_layout(100, 1 << 20, inner=False), 1 << 14, sm_count=132)
    assert cfg.scheduler == "reduction.loop" and cfg.stages[0].XBLOCK == T.outer.min_xblock_loop, cfg


GPU_CONFIG_CASES = {
    "squeeze-excitation": (lambda x: x * torch.sigmoid(torch.nn.functional.hardswish(x).mean((2, 3), keepdim=True)),
                           (2, 24, 9, 9), True),
    "layer_norm": (lambda x: torch.nn.functional.layer_norm(x, (x.shape[-1],)), (37, 300), False),
    "softmax": (lambda x: torch.softmax(x * 0.5, -1), (37, 300), False),
    "column_sum": (lambda x: (x * x).sum(0), (3000, 5), False),
    "gelu_bias": (lambda x: torch.nn.functional.gelu(x + 1.0), (131, 777), False),
}


@pytest.mark.parametrize("case", list(GPU_CONFIG_CASES))
def test_gpu_launch_configurations_match_eager(case):
    """Every kernel launched with the configuration the GPU heuristics pick for an H200 (132
    multiprocessors: many programs, masked tails, narrow tiles) gives eager's values and
    gradients under the interpreter. ``--gpu-launch-configs 132`` does this for any test."""
    fn, shape, channels_last = GPU_CONFIG_CASES[case]
    x = torch.randn(*shape, device=DEVICE)
    if channels_last:
        x = x.to(memory_format=torch.channels_last)
    xs, xr = x.clone().requires_grad_(), x.clone().requires_grad_()
    got, want = torchfuse.compile(fn, dynamic=False, **H200)(xs), fn(xr)
    torch.testing.assert_close(got, want)
    dy = torch.randn_like(want)
    torch.testing.assert_close(torch.autograd.grad(got, xs, dy)[0], torch.autograd.grad(want, xr, dy)[0])
    blocks = [st.XBLOCK for s in backend.RECENT[-1].steps if hasattr(s, "plans") for p in s.plans.values()
              for st in p.config.stages]
    assert blocks and max(blocks) <= 2048, blocks  # GPU-sized blocks, not the interpreter's


def test_split_column_reductions_of_one_tensor_take_longer_steps():
    """A split column reduction takes ``split.outer_rblock_one_input`` rows a step when its
    group reads one tensor along the reduced dims (BatchNorm's forward statistics),
    ``split.outer_rblock`` when it reads more (its backward's sums). Checked on the configurations the heuristic picks
    and on those the executor chose for channels-last BatchNorm under a GPU's launch
    configurations, whose values match eager's."""
    sm = 132
    for inputs, rows in ((1, T.split.outer_rblock_one_input), (2, T.split.outer_rblock)):
        cfg = reduction_config(_layout(256, 200704, inner=False), 1 << 14, sm_count=sm, splittable=True,
                               tile_inputs=inputs)
        assert cfg.scheduler == "reduction.split" and cfg.stages[0].RBLOCK == rows, cfg
    assert T.split.outer_rblock_one_input != T.split.outer_rblock

    torch.manual_seed(0)
    x = torch.randn(32, 64, 32, 32, device=DEVICE).to(memory_format=torch.channels_last).requires_grad_(True)
    w, b = torch.randn(64, device=DEVICE, requires_grad=True), torch.randn(64, device=DEVICE, requires_grad=True)
    rm, rv = torch.zeros(64, device=DEVICE), torch.ones(64, device=DEVICE)

    def f(x, w, b, rm, rv):
        y = torch.nn.functional.batch_norm(x, rm, rv, w, b, training=True)
        return (y, *torch.autograd.grad((y * y).sum(), (x, w, b)))

    from test_ops import run_compiled

    got, graphs = run_compiled(f, x, w, b, rm.clone(), rv.clone(), launch_configs_for_sm_count=sm)
    eager = f(x, w, b, rm.clone(), rv.clone())
    exact = f(*(t.detach().double().requires_grad_(t.requires_grad) for t in (x, w, b)), rm.double(), rv.double())
    for g_, e_, x_ in zip(got, eager, exact):  # as close to fp64 as eager fp32 is
        assert (g_.double() - x_).abs().max() <= 2 * (e_.double() - x_).abs().max() + 1e-6
    steps = {p.config.stages[0].RBLOCK for g in graphs for s in g.steps if hasattr(s, "plans")
             for p in s.plans.values() if p.kernel is not None and p.config.scheduler == "reduction.split"
             and p.config.stages[0].XBLOCK > 1}  # column splits (the loss's full sum splits too)
    assert steps == {T.split.outer_rblock_one_input, T.split.outer_rblock}, steps
