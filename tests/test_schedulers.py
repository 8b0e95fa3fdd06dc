"""Every reduction kernel shape computes the same values: each test forces one scheduler
(persistent, persistent over a grid-stride loop of rows, looped, split) on groups with several
reductions, NaNs and ties, and compares with eager."""
from __future__ import annotations

import pytest
import torch

import torchfuse
import torchfuse.backend as backend
from torchfuse.schedulers import LaunchConfig, Stage, cdiv, next_power_of_2, reduction, single
from conftest import DEVICE


def force(kind: str):
    def heuristic(rt, persistent_max, interpret, sm_count=0, splittable=False):
        x, r = max(rt.xnumel, 1), rt.rnumel
        if kind == "persistent":
            rb = next_power_of_2(max(r, 1))
            return single("reduction.persistent", cdiv(x, 2), 2, rb, 4, "forced")
        if kind == "persistent_rows":
            rb = next_power_of_2(max(r, 1))
            return single("reduction.persistent_rows", 3, 2, rb, 4, "forced: 3 programs loop over row blocks")
        if kind == "loop":
            return single("reduction.loop", cdiv(x, 2), 2, 16, 4, "forced")
        assert splittable, "the group should be splittable"
        split = 3
        rchunk = cdiv(cdiv(r, split), 16) * 16
        split = cdiv(r, rchunk)
        return LaunchConfig("reduction.split", (Stage((cdiv(x, 2), split), 2, 16, 4),
                                                Stage((cdiv(x, 2),), 2, next_power_of_2(split), 4)),
                            split=split, rchunk=rchunk, reason="forced")
    return heuristic


CASES = {
    "softmax": (lambda x: torch.softmax(x, -1), False),
    "layer_norm": (lambda x: torch.nn.functional.layer_norm(x, (x.shape[-1],)), False),
    "stats": (lambda x: (torch.var_mean(x, -1), x.amax(-1), x.argmin(-1), x.sum(-1), (x > 0).any(-1)), True),
    "column_stats": (lambda x: (x.sum(0), torch.var_mean(x, 0, correction=0), x.max(0)), True),
}


# softmax and LayerNorm reduce twice in a row (the second reduction reads the first): they
# never split, so "split" pairs only with the single-level cases
PAIRS = [(k, c) for k in ("persistent", "persistent_rows", "loop", "split") for c in CASES
         if k != "split" or CASES[c][1]]


@pytest.mark.parametrize("kind, case", PAIRS)
def test_scheduler_shapes_match_eager(monkeypatch, kind, case):
    fn, splittable = CASES[case]
    monkeypatch.setattr(reduction, "heuristic", force(kind))
    x = torch.randn(7, 50, device=DEVICE)
    x[2, 5] = float("nan")
    x[4, :] = 1.5  # ties everywhere in one row
    out = torchfuse.compile(fn)(x)
    torch.testing.assert_close(out, fn(x), equal_nan=True)
    schedulers = {next(iter(s.plans.values())).config.scheduler
                  for s in backend.RECENT[-1].steps if hasattr(s, "plans") and s.plans}
    assert schedulers == {f"reduction.{kind}"}


def _layout(x: int, r: int, inner: bool):
    """A stand-in for a call's loop layout: what the reduction heuristic reads."""
    from types import SimpleNamespace

    return SimpleNamespace(xnumel=x, rnumel=r, r_inner=inner, layout=SimpleNamespace(n_x=1, n_r=1))


@pytest.mark.parametrize("x, r", [(72, 784), (120, 784), (240, 196), (960, 49), (1280, 1)])
def test_narrow_outer_reductions_fill_the_gpu(x, r):
    """An outer reduction that cannot split and has few columns (a squeeze-excitation mean of a
    channels-last image at batch 1) gets narrower tiles and so more programs: at least as many
    as the GPU has multiprocessors, or tiles of the narrowest width."""
    sm = 132
    cfg = reduction.heuristic(_layout(x, r, inner=False), 1 << 14, interpret=False, sm_count=sm)
    st = cfg.stages[0]
    assert st.grid[0] == cdiv(x, st.XBLOCK)
    assert st.grid[0] >= sm or st.XBLOCK == reduction.OUTER_MIN_XBLOCK, cfg
    covered = st.RBLOCK if cfg.scheduler == "reduction.persistent" else r
    assert covered >= r and st.XBLOCK * st.RBLOCK <= 2 * reduction.TILE_ELEMENTS, cfg
    # wide outer reductions keep the wide tile
    wide = reduction.heuristic(_layout(128 * sm, 64, inner=False), 1 << 14, interpret=False, sm_count=sm)
    assert wide.stages[0].XBLOCK == reduction.OUTER_XBLOCK


def test_narrow_outer_tiles_match_eager(monkeypatch):
    """The narrow tiles the GPU heuristic picks for a channels-last mean over H*W (hard-swish
    written out as well, so the group cannot split) give eager's values when run."""
    real = reduction.heuristic

    def gpu_choice(rt, persistent_max, interpret, sm_count=0, splittable=False):
        return real(rt, persistent_max, False, 132, splittable)

    monkeypatch.setattr(reduction, "heuristic", gpu_choice)

    def f(x):
        y = torch.nn.functional.hardswish(x)
        return y, y.mean((2, 3), keepdim=True)

    x = torch.randn(1, 120, 28, 28, device=DEVICE).to(memory_format=torch.channels_last)
    got = torchfuse.compile(f, dynamic=False)(x)
    torch.testing.assert_close(got, f(x))
    configs = [p.config for s in backend.RECENT[-1].steps if hasattr(s, "plans") for p in s.plans.values()]
    assert [(c.scheduler, c.XBLOCK, c.RBLOCK) for c in configs] == [("reduction.persistent", 8, 1024)], configs
