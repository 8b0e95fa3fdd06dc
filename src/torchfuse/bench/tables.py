"""The current tables and charts, regenerated from the rows (``torchfuse bench charts``).

From a rows file (:mod:`torchfuse.bench.rows`) it keeps the newest row of each measurement
(:func:`~torchfuse.bench.rows.current_rows`) of the backends as shipped (no variant), groups
them by (suite, mode, precision, layout, device), and writes per group a bar chart (PNG,
matplotlib) and a markdown table into one folder, with ``index.md`` linking them and naming
the runs and commits each table comes from:

* the step suites (``hf``, ``timm``, ``micro``, ``seed``): speedup over eager of each backend
  per case, geometric mean last (eager's own milliseconds in the table);
* ``norms``: each backend's fraction of a device copy per case (device microseconds in the
  table).

Speedups are always within one run: a row's ``speedup_vs_eager`` comes from the run that
measured it; a table can mix runs (newest row of each case), never a ratio across runs.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .charts import plot_bars
from .environment import slug
from .rows import ROWS_FILE, Row, current_rows, load_rows
from .timing import geometric_mean

CHARTS_DIR = Path("benchmarks") / "results" / "charts"

#: suite -> the figure its charts show: (row attribute, axis label, reference line, its label, geomean)
CHARTED = {
    "hf": ("speedup_vs_eager", "speedup over eager (x)", 1.0, "eager", True),
    "timm": ("speedup_vs_eager", "speedup over eager (x)", 1.0, "eager", True),
    "micro": ("speedup_vs_eager", "speedup over eager (x)", 1.0, "eager", True),
    "seed": ("speedup_vs_eager", "speedup over eager (x)", 1.0, "eager", True),
    "norms": ("copy_fraction", "achieved / device-copy bandwidth", 1.0, "device copy", False),
}


def chart_groups(rows: list[Row]) -> dict[tuple, list[Row]]:
    """``(suite, mode, precision, layout, device) -> rows``: the current rows of the charted
    suites, backends as shipped, measured or failed (not skipped)."""
    groups: dict[tuple, list[Row]] = {}
    for r in current_rows(rows):
        if r.suite in CHARTED and not r.variant and r.status in ("ok", "failed"):
            groups.setdefault((r.suite, r.mode, r.precision, r.layout, r.device), []).append(r)
    return groups


def group_name(key: tuple) -> str:
    """File name stem of a group: ``hf-train-amp-fp16-nvidia-h200``, ``norms-fwd-bf16-nvidia-h200``."""
    suite, mode, precision, layout, device = key
    parts = [suite, mode] + ([precision] if precision and precision not in mode else []) + [layout, device]
    return slug(" ".join(p for p in parts if p))


def group_title(key: tuple) -> str:
    suite, mode, precision, layout, device = key
    parts = [suite, mode] + ([precision] if precision and precision not in mode else []) + ([layout] if layout else [])
    return " · ".join(parts) + f" · {device}"


def case_label(case: str) -> str:
    """``hf/bert/64x128`` -> ``bert 64x128``."""
    return " ".join(case.split("/")[1:]) or case


def _matrix(rows: list[Row], baseline: bool) -> tuple[list[str], list[str], dict]:
    """Cases in first-seen order; backends in the order of the harness's table
    (:data:`torchfuse.bench.backends.BACKENDS`), others after them."""
    from .backends import BACKENDS

    order = {name: i for i, name in enumerate(BACKENDS)}
    cases = list(dict.fromkeys(r.case for r in rows))
    seen = list(dict.fromkeys(r.backend for r in rows))
    backends = sorted(seen, key=lambda b: (order.get(b, len(order)), seen.index(b)))
    return cases, [b for b in backends if baseline or b != "eager"], {(r.case, r.backend): r for r in rows}


def write_group_chart(path: Path, key: tuple, rows: list[Row]) -> None:
    attribute, ylabel, line, line_label, with_geomean = CHARTED[key[0]]
    cases, backends, by = _matrix(rows, baseline=not with_geomean)
    labels = [case_label(c) for c in cases] + (["geomean"] if with_geomean else [])
    series, failed = {}, {}
    for b in backends:
        cells = [by.get((c, b)) for c in cases]
        values = [getattr(r, attribute) if r is not None and r.status == "ok" else None for r in cells]
        failed[b] = [r is not None and r.status == "failed" for r in cells]
        if with_geomean:
            values.append(geometric_mean([v for v in values if v is not None]))
            failed[b].append(False)
        series[b] = values
    plot_bars(path, f"{group_title(key)}\n{ylabel}", labels, series, failed, ylabel, line, line_label)


def group_table(key: tuple, rows: list[Row]) -> str:
    """Markdown: a line per case, a column per backend (speedup over eager with eager's ms, or
    fraction of copy with device microseconds); failures as ``FAIL``."""
    attribute, _, _, _, with_geomean = CHARTED[key[0]]
    cases, backends, by = _matrix(rows, baseline=True)
    fraction = attribute == "copy_fraction"

    def cell(r: Row | None) -> str:
        if r is None:
            return "-"
        if r.status != "ok":
            return "FAIL"
        if fraction:
            us = f"{r.device_ms * 1e3:.1f} us" if r.device_ms is not None else (
                f"{r.median_ms * 1e3:.1f} us call" if r.median_ms is not None else "")
            return f"{100 * r.copy_fraction:.0f}% ({us})" if r.copy_fraction is not None else us or "-"
        if r.backend == "eager":
            return f"{r.median_ms:.3f} ms" if r.median_ms is not None else "-"
        return f"{r.speedup_vs_eager:.2f}x" if r.speedup_vs_eager is not None else "n/a"

    lines = ["| case | " + " | ".join(backends) + " |", "|---|" + "---:|" * len(backends)]
    lines += [f"| {case_label(c)} | " + " | ".join(cell(by.get((c, b))) for b in backends) + " |" for c in cases]
    if with_geomean:
        geo = [geometric_mean([by[(c, b)].speedup_vs_eager for c in cases if (c, b) in by
                               and by[(c, b)].status == "ok" and by[(c, b)].speedup_vs_eager]) for b in backends]
        lines.append("| geomean | " + " | ".join("" if b == "eager" else (f"{g:.2f}x" if g else "-")
                                                 for b, g in zip(backends, geo)) + " |")
    return "\n".join(lines)


#: the suites of the step tables (``[tables.steps]`` in ``benchmarks/runs.toml``)
STEP_SUITES = ("hf", "timm")


#: (torchfuse backend, its peer) pairs whose speedup the step table gives per run, with the
#: column's heading
SPEEDUP_PAIRS = (("torchfuse", "torch.compile", "speedup over torch.compile"),
                 ("torchfuse-reduce-overhead", "torch.compile-reduce-overhead", "speedup, reduce-overhead"),
                 ("torchfuse-reduce-overhead-frozen", "torch.compile-reduce-overhead-frozen",
                  "speedup, reduce-overhead frozen"))


def _in_table(r: Row, mode: str, device: str, layout: str) -> bool:
    """Whether row ``r`` is a measurement of the step table of ``mode``, ``device``, ``layout``."""
    return (r.suite in STEP_SUITES and r.mode == mode and r.device == device and r.layout == layout
            and not r.variant)


def _run_ratios(rows: list[Row], mode: str, device: str, layout: str, pairs: list) -> dict:
    """``{(case, pair): [((date, run), peer ms / torchfuse ms), ...]}``, oldest run first, over
    every run (a harness invocation: its name and start date, which all its rows carry) that
    measured both backends of a pair in one process."""
    runs: dict[tuple, dict] = {}
    for r in rows:
        if _in_table(r, mode, device, layout) and r.status == "ok" and r.median_ms:
            runs.setdefault((r.date, r.run, r.case), {})[r.backend] = r.median_ms
    out: dict = {}
    for (date, run, case), ms in sorted(runs.items()):
        for ours, theirs in pairs:
            if ours in ms and theirs in ms:
                out.setdefault((case, (ours, theirs)), []).append(((date, run), ms[theirs] / ms[ours]))
    return out


def _ratio_cell(ratios: list | None, ours: Row | None, theirs: Row | None, recent_runs: int) -> str:
    """torchfuse's speedup in the run of the line's two cells, with its range over the
    ``recent_runs`` newest runs up to that one that measured both; ``-`` where the two cells
    are not of one run or one of them failed."""
    if not ratios or ours is None or theirs is None or (ours.date, ours.run) != (theirs.date, theirs.run):
        return "-"
    keys = [k for k, _ in ratios]
    if (ours.date, ours.run) not in keys:
        return "-"
    recent = [v for _, v in ratios[:keys.index((ours.date, ours.run)) + 1][-recent_runs:]]
    text = f"{recent[-1]:.2f}x"
    if len(recent) > 1:
        text += f" ({min(recent):.2f}-{max(recent):.2f}x over {len(recent)} runs)"
    return text


def steps_table(rows: list[Row], mode: str = "train-amp-fp16", device: str = "NVIDIA H200", layout: str = "",
                recent_runs: int = 3) -> str:
    """Markdown: the step table of ``mode`` on ``device`` in one memory ``layout`` (``""``:
    channels-first, or not an image; ``"channels-last"``), wall milliseconds a step (median).

    One line per case of the step suites (:data:`STEP_SUITES`), one column per backend as
    shipped (no variant), in the harness's backend order; each cell is the newest row of that
    measurement (:func:`~torchfuse.bench.rows.current_rows`), ``failed`` where it failed, the
    fastest of a line in bold. A last line names the runs, commits, dates and versions behind
    the cells. For each pair of :data:`SPEEDUP_PAIRS` whose backends both have a column, a
    column gives torchfuse's speedup over its peer in the run of the line's two cells, and
    its range over the ``recent_runs`` newest runs up to it that measured both (each run's
    backends ran in one process, so a run's ratio holds where the host's speed moved between
    runs; the runs may be of different commits). This is the results table of the README.

    Raises:
        ValueError: no row of ``mode`` on ``device``.
    """
    picked = [r for r in current_rows(rows) if _in_table(r, mode, device, layout) and r.status in ("ok", "failed")]
    if not picked:
        raise ValueError(f"no rows of suites {', '.join(STEP_SUITES)} in mode {mode}"
                         f"{', ' + layout if layout else ''} on {device}")
    cases, backends, by = _matrix(picked, baseline=True)

    def cell(r: Row | None, fastest: float | None) -> str:
        if r is None:
            return "-"
        if r.status != "ok" or r.median_ms is None:
            return "failed"
        text = f"{r.median_ms:.1f}"
        return f"**{text}**" if r.median_ms == fastest else text

    pairs = [(ours, theirs) for ours, theirs, _ in SPEEDUP_PAIRS if ours in backends and theirs in backends]
    ratios = _run_ratios(rows, mode, device, layout, pairs)
    heads = backends + [head for ours, theirs, head in SPEEDUP_PAIRS if (ours, theirs) in pairs]
    lines = ["| ms a step | " + " | ".join(heads) + " |", "|---|" + "---:|" * len(heads)]
    for c in cases:
        times = [by[(c, b)].median_ms for b in backends if (c, b) in by and by[(c, b)].status == "ok"
                 and by[(c, b)].median_ms is not None]
        fastest = min(times) if times else None
        cells = [cell(by.get((c, b)), fastest) for b in backends]
        cells += [_ratio_cell(ratios.get((c, p)), by.get((c, p[0])), by.get((c, p[1])), recent_runs) for p in pairs]
        lines.append(f"| {case_label(c)} | " + " | ".join(cells) + " |")
    runs = sorted({(r.date[:10], r.run, r.commit or "?") for r in picked})
    versions = sorted({f"torch {r.torch}, Triton {r.triton}" for r in picked})
    lines += ["", f"{device}, {mode}{', ' + layout if layout else ''}, {'; '.join(versions)}; rows of "
              + ", ".join(f"run {run} ({commit}, {date})" for date, run, commit in runs) + "."]
    return "\n".join(lines)


def write_current(rows: list[Row], out_dir: Path) -> list[Path]:
    """Write every group's chart (``<group>.png``) and ``index.md`` into ``out_dir``, removing
    charts of groups that have no rows any more; returns the paths written."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    groups = chart_groups(rows)
    written, index = [], ["# Current benchmark tables", "",
                          "Generated by `torchfuse bench charts` from the rows file (`benchmarks/results/rows.jsonl`): "
                          "for each case and backend the newest row. Speedups are over eager measured in the same run; "
                          "fractions are of a device copy measured in the same process.", ""]
    for key, group in groups.items():
        path = out_dir / f"{group_name(key)}.png"
        write_group_chart(path, key, group)
        written.append(path)
        sources = sorted({(r.run, r.commit or "?", r.date[:10]) for r in group})
        index += [f"## {group_title(key)}", "", f"![{group_title(key)}]({path.name})", "", group_table(key, group), "",
                  "Runs: " + ", ".join(f"{run} ({commit}, {date})" for run, commit, date in sources), ""]
    for old in out_dir.glob("*.png"):
        if old not in written:
            old.unlink()
    (out_dir / "index.md").write_text("\n".join(index))
    return written + [out_dir / "index.md"]


def main(argv: list[str] | None = None) -> int:
    """``torchfuse bench charts [--rows FILE...] [--out DIR]``."""
    p = argparse.ArgumentParser(prog="torchfuse bench charts",
                                description="Regenerate the current charts and tables from the rows.")
    p.add_argument("--rows", type=Path, nargs="+", default=[ROWS_FILE])
    p.add_argument("--out", type=Path, default=CHARTS_DIR)
    args = p.parse_args(argv)
    try:
        rows = load_rows(*args.rows)
    except ValueError as e:
        print(f"torchfuse bench charts: {e}", file=sys.stderr)
        return 2
    paths = write_current(rows, args.out)
    print(f"{len(paths) - 1} chart(s) and {args.out / 'index.md'} from {len(rows)} row(s)")
    return 0
