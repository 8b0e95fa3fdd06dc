"""The variant sweeps of ``torchfuse bench norms --sweep NAME``: norm-table cases compiled by
torchfuse under several sets of overrides of ``Options`` and ``Tuning`` fields
(:mod:`torchfuse.bench.variants`), each kernel's device time from ``torch.profiler``.

Each sweep is data: the ops, row shapes and dtypes it runs, and its variants (name -> the
overrides). What the sweeps found is in ``benchmarks/NOTES.md`` (the runs named in each
entry's ``measured``); the shipped values are each field's default. The sweeps of paths that
were measured and removed (the online normalizer, one-hot sums) went with them.
"""
from __future__ import annotations

import dataclasses


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
    return [f"split.outer_xblock={xb}", f"split.outer_rblock={rb}", f"split.outer_warps={warps}",
            f"split.outer_programs={per_sm}"]


def _inner_outer(per_sm: int, warps: int, tile: int, stages: int) -> list[str]:
    """``per_sm`` 0: as many programs as fit (the grid fitted to the kernel's residency)."""
    return [f"inner_outer.tile={tile}", f"inner_outer.short_tile={tile}", f"inner_outer.warps={warps}",
            f"inner_outer.stages={stages}", f"inner_outer.elements_per_thread={max(1, tile // (32 * warps))}",
            f"inner_outer.fit={per_sm == 0}", f"inner_outer.programs_per_sm={per_sm or 2}"]


def _rows(tile: int, per_thread: int, batch_sums: bool = True) -> list[str]:
    """A persistent row kernel's tile; one warp a row off, so each candidate runs as given."""
    return [f"persistent.tile_elements={tile}", f"persistent.elements_per_thread={per_thread}",
            "persistent.one_warp_row=0", f"codegen.batch_row_sums={batch_sums}"]


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
    # rows a program and warps a row
    "rows-warps": Sweep(
        ("softmax", "cross_entropy", "layer_norm", "rms_norm"), _ROW_SHAPES, ("bfloat16",),
        {f"tile {t}, {e}/thread": _rows(t, e) for t, e in [(4096, 32), (1024, 32), (2048, 64), (2048, 32),
                                                          (4096, 64), (8192, 64), (4096, 128)]},
        "NOTES.md, run AQ"),
    # cross-entropy's forward rewrites (one-hot picks, log-softmax sums)
    "picks-rewrites": Sweep(
        ("cross_entropy", "cross_entropy_plain"), _NORM_SHAPES, ("bfloat16", "float32"),
        {"as before": ["graph_passes.one_hot_picks=False", "graph_passes.log_softmax_sums=False"],
         "rewritten": ["graph_passes.one_hot_picks=True", "graph_passes.log_softmax_sums=True"]},
        "NOTES.md, runs BB to BF"),
}
