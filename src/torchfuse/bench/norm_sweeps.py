"""The variant sweeps of ``torchfuse bench norms --sweep NAME``: norm-table cases compiled by
torchfuse under several sets of tunable overrides (:mod:`torchfuse.bench.variants`), each
kernel's device time from ``torch.profiler``.

Each sweep is data: the ops, row shapes and dtypes it runs, and its variants (name -> the
overrides). What the sweeps found is in ``benchmarks/NOTES.md`` (the runs named in each
entry's ``measured``); the shipped values are each tunable's default.
"""
from __future__ import annotations

import dataclasses

_REDUCTION = "schedulers.reduction"
_CODEGEN = "codegen.triton"
_PASSES = "graph_passes"


@dataclasses.dataclass(frozen=True)
class Sweep:
    """One variant sweep.

    Attributes:
        ops: norm-table ops (:data:`torchfuse.bench.norms.OPS`).
        shapes: ``(rows, row length)`` shapes; BatchNorm always runs at its own shape.
        dtypes: dtype names (``bfloat16``...).
        variants: variant name -> overrides (``[]``: torchfuse as shipped).
        measured: where the sweep's findings are recorded.
    """

    ops: tuple[str, ...]
    shapes: tuple[tuple[int, int], ...]
    dtypes: tuple[str, ...]
    variants: dict[str, list[str]]
    measured: str


def _split(xb: int, rb: int, warps: int, per_sm: int) -> list[str]:
    return [f"{_REDUCTION}.SPLIT_OUTER_XBLOCK={xb}", f"{_REDUCTION}.SPLIT_OUTER_RBLOCK={rb}",
            f"{_REDUCTION}.SPLIT_OUTER_WARPS={warps}", f"{_REDUCTION}.OUTER_SPLIT_PROGRAMS={per_sm}"]


def _inner_outer(per_sm: int, warps: int, tile: int, stages: int) -> list[str]:
    """``per_sm`` 0: as many programs as fit (the grid fitted to the kernel's residency)."""
    return [f"{_REDUCTION}.INNER_OUTER_TILE={tile}", f"{_REDUCTION}.INNER_OUTER_SHORT_TILE={tile}",
            f"{_REDUCTION}.INNER_OUTER_WARPS={warps}", f"{_REDUCTION}.INNER_OUTER_STAGES={stages}",
            f"{_REDUCTION}.INNER_OUTER_ELEMENTS_PER_THREAD={max(1, tile // (32 * warps))}",
            f"{_REDUCTION}.INNER_OUTER_FIT={per_sm == 0}", f"{_REDUCTION}.INNER_OUTER_PROGRAMS_PER_SM={per_sm or 2}"]


def _rows(tile: int, per_thread: int, batch_sums: bool = True, one_hot_sums: bool | str = True) -> list[str]:
    """A persistent row kernel's tile (``one_hot_sums="flat"``: 0-d inputs of pointwise kernels
    loaded as full blocks); one warp a row off, so each candidate runs as given."""
    return [f"{_REDUCTION}.TILE_ELEMENTS={tile}", f"{_REDUCTION}.ELEMENTS_PER_THREAD={per_thread}",
            f"{_REDUCTION}.ONE_WARP_ROW=0", f"{_CODEGEN}.BATCH_ROW_SUMS={batch_sums}",
            f"{_PASSES}.ONE_HOT_SUMS={bool(one_hot_sums)}", f"{_CODEGEN}.SCALAR_LOADS={one_hot_sums != 'flat'}"]


_NORM_SHAPES = ((16384, 4096), (8192, 8192), (4096, 3072), (32768, 1024))
_ROW_SHAPES = ((32768, 1024), (16384, 4096))

SWEEPS: dict[str, Sweep] = {
    # the split column reductions inside LayerNorm/RMSNorm backward and channels-last BatchNorm
    "split-norms": Sweep(
        ("layer_norm", "rms_norm", "batch_norm_cl"), ((16384, 4096), (32768, 1024)), ("bfloat16",),
        {f"X{xb} R{rb} w{w} {s}/SM": _split(xb, rb, w, s) for xb, rb, w, s in [
            (64, 8, 4, 8), (128, 8, 4, 8), (64, 16, 4, 8), (32, 16, 4, 8), (128, 16, 8, 8),
            (64, 32, 8, 8), (64, 8, 4, 4), (64, 8, 4, 16), (256, 8, 8, 8), (32, 32, 4, 8)]},
        "NOTES.md, run Q"),
    # LayerNorm/RMSNorm backward: the inner-outer kernel against the unpaired kernels
    "inner-outer": Sweep(
        ("layer_norm", "rms_norm"), ((16384, 4096), (32768, 1024), (4096, 3072)), ("bfloat16",),
        {"separate kernels": ["inner_outer=False"], "chosen": []}, "NOTES.md, runs AG to AK"),
    # ... and its launch configurations
    "inner-outer-all": Sweep(
        ("layer_norm", "rms_norm"), ((16384, 4096), (32768, 1024), (4096, 3072)), ("bfloat16",),
        {"separate kernels": ["inner_outer=False"], "chosen": [],
         **{f"{p or 'fit'}/SM, {w} warps, tile {t}, stages {s}": _inner_outer(p, w, t, s) for p, w, t, s in [
             (2, 8, 4096, 2), (0, 8, 4096, 2), (0, 8, 4096, 0), (0, 16, 4096, 0), (0, 16, 4096, 2), (0, 4, 2048, 2)]}},
        "NOTES.md, runs AH and AJ"),
    # sibling row sums reduced apart or together
    "rows-batch": Sweep(
        ("layer_norm", "rms_norm", "cross_entropy"), _ROW_SHAPES, ("bfloat16",),
        {"sums apart": _rows(4096, 32, batch_sums=False), "sums together": _rows(4096, 32)}, "NOTES.md, run AO"),
    # cross-entropy's backward: its one-hot row sum kept, rewritten, rewritten with flat loads
    "rows-onehot": Sweep(
        ("cross_entropy",), _ROW_SHAPES, ("bfloat16",),
        {"row sum": _rows(1024, 32, one_hot_sums=False), "one-hot sums": _rows(1024, 32),
         "one-hot sums, flat loads": _rows(1024, 32, one_hot_sums="flat")}, "NOTES.md, runs AQ to AS"),
    # rows a program and warps a row
    "rows-warps": Sweep(
        ("softmax", "cross_entropy", "layer_norm", "rms_norm"), _ROW_SHAPES, ("bfloat16",),
        {f"tile {t}, {e}/thread": _rows(t, e) for t, e in [(4096, 32), (1024, 32), (2048, 64), (2048, 32),
                                                          (4096, 64), (8192, 64), (4096, 128)]},
        "NOTES.md, run AQ"),
    # cross-entropy's forward rewrites (one-hot picks, log-softmax sums, looped one-hot sums)
    "picks-rewrites": Sweep(
        ("cross_entropy", "cross_entropy_plain"), _NORM_SHAPES, ("bfloat16", "float32"),
        {"as before": [f"{_PASSES}.ONE_HOT_PICKS=False", f"{_PASSES}.LOG_SOFTMAX_SUMS=False",
                       f"{_PASSES}.LOOPED_ONE_HOT_SUMS=False"],
         "rewritten": [f"{_PASSES}.ONE_HOT_PICKS=True", f"{_PASSES}.LOG_SOFTMAX_SUMS=True",
                       f"{_PASSES}.LOOPED_ONE_HOT_SUMS=True"]},
        "NOTES.md, runs BB to BF"),
    # looped kernels with the max and its sums in one loop
    "picks-online": Sweep(
        ("cross_entropy", "cross_entropy_plain"), _NORM_SHAPES, ("bfloat16", "float32"),
        {"two loops": [f"{_CODEGEN}.ONLINE_SUMS=False"], "online": [f"{_CODEGEN}.ONLINE_SUMS=True"]},
        "NOTES.md, runs BG and BH"),
    # the backward's one-hot row sum kept or rewritten into per-row terms on every row
    "picks-onehot": Sweep(
        ("cross_entropy", "cross_entropy_plain"), _NORM_SHAPES, ("bfloat16", "float32"),
        {"row sum": [f"{_PASSES}.ONE_HOT_SUMS=False"], "one-hot sums": [f"{_PASSES}.ONE_HOT_SUMS=True"]},
        "NOTES.md, run BI"),
}
