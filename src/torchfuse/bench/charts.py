"""Bar charts like the nvFuser announcement's figures, written as PNG files with matplotlib.

One chart per (suite, mode, layout, device): a group of bars per case, one bar per backend,
height = speedup over eager (eager is the line at 1), and a last group with each backend's
geometric mean over the cases it ran. A backend that failed on a case gets an ``x`` at the
bottom of its slot instead of a bar. The micro suite also gets a chart of the achieved
fraction of device-copy bandwidth, on a GPU only: on a CPU the kernels run in Triton's
interpreter, whose fractions of a CPU copy are bars too short to see and say nothing.
"""
from __future__ import annotations

from pathlib import Path

from .backends import BASELINE
from .environment import slug
from .results import OK, FAILED, Result
from .timing import geometric_mean

COLORS = ["#4C72B0", "#DD8452", "#55A868", "#C44E52", "#8172B3", "#937860", "#DA8BC3", "#8C8C8C"]


def group_results(results: list[Result]) -> dict[tuple, list[Result]]:
    """``(suite, mode, channels_last, device_name) -> results``, in first-seen order."""
    groups: dict[tuple, list[Result]] = {}
    for r in results:
        groups.setdefault((r.suite, r.mode, r.channels_last, r.device_name), []).append(r)
    return groups


def chart_name(key: tuple) -> str:
    suite, mode, channels_last, device_name = key
    layout = "-channels-last" if channels_last else ""
    return f"{suite}-{mode}{layout}-{slug(device_name)}.png"


def _case_label(r: Result) -> str:
    return f"{r.model} {r.size}"


def plot_bars(path: Path, title: str, labels: list[str], series: dict[str, list], failed: dict[str, list[bool]],
              ylabel: str, reference_line: float, reference_label: str) -> None:
    """Write a grouped bar chart to ``path`` (PNG): a group per label, a bar per series
    (``None``: no bar), an ``x`` where ``failed`` says so, a dashed line at ``reference_line``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n_groups, n_series = len(labels), max(1, len(series))
    width = 0.8 / n_series
    fig, ax = plt.subplots(figsize=(min(22.0, max(6.0, 0.3 * n_groups * n_series + 2.5)), 5.0))
    for i, (name, values) in enumerate(series.items()):
        xs = [g + (i - (n_series - 1) / 2) * width for g in range(n_groups)]
        heights = [v if v is not None else 0.0 for v in values]
        bars = ax.bar(xs, heights, width, label=name, color=COLORS[i % len(COLORS)])
        for x, v, bar in zip(xs, values, bars):
            if v is not None:
                ax.annotate(f"{v:.2f}" if v >= 0.095 else f"{v:.2g}", (x, v), ha="center", va="bottom", fontsize=6, rotation=90,
                            xytext=(0, 2), textcoords="offset points")
        for x, bad in zip(xs, failed.get(name, [])):
            if bad:
                ax.plot([x], [0], marker="x", color=COLORS[i % len(COLORS)], markersize=7)
    ax.axhline(reference_line, color="black", linewidth=0.8, linestyle="--", label=reference_label)
    if labels and labels[-1] == "geomean":
        ax.axvline(n_groups - 1.5, color="grey", linewidth=0.6)
    ax.set_xticks(range(n_groups))
    slanted = n_groups > 6 or max((len(label) for label in labels), default=0) > 14
    ax.set_xticklabels(labels, rotation=35 if slanted else 0, ha="right" if slanted else "center", fontsize=7)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7, loc="upper left")
    if not series:
        ax.text(0.5, 0.5, "no backend besides eager ran", ha="center", va="center", transform=ax.transAxes)
    ax.margins(y=0.15)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=130)
    plt.close(fig)


def _series(results: list[Result], value, with_geomean: bool, with_baseline: bool = False):
    cases: dict[str, Result] = {}
    for r in results:
        cases.setdefault(r.case, r)
    backends = [b for b in dict.fromkeys(r.backend for r in results) if with_baseline or b != BASELINE]
    by = {(r.case, r.backend): r for r in results}
    labels = [_case_label(r) for r in cases.values()]
    series: dict[str, list] = {}
    failed: dict[str, list[bool]] = {}
    for b in backends:
        rows = [by.get((c, b)) for c in cases]
        if not any(r is not None and r.status in (OK, FAILED) for r in rows):
            continue  # skipped everywhere (e.g. needs CUDA): no legend entry
        values = [value(r) if r is not None and r.status == OK else None for r in rows]
        failed[b] = [r is not None and r.status == FAILED for r in rows]
        if with_geomean:
            values.append(geometric_mean([v for v in values if v is not None]))
            failed[b].append(False)
        series[b] = values
    if with_geomean:
        labels.append("geomean")
    return labels, series, failed


def has_bandwidth_chart(rows: list[Result]) -> bool:
    """Whether the rows of one chart group (one suite, mode, layout and device) get a bandwidth
    chart: micro-suite rows measured on a GPU against its device copy."""
    return bool(rows) and rows[0].suite == "micro" and rows[0].device == "cuda" and any(r.copy_fraction for r in rows)


def write_charts(out_dir: Path, results: list[Result], device_labels: dict[str, str]) -> list[Path]:
    """Write every chart under ``out_dir/charts``; returns their paths.

    Args:
        device_labels: device name -> how titles name it (CPU runs say so).
    """
    written = []
    for key, rows in group_results(results).items():
        suite, mode, channels_last, device_name = key
        label = device_labels.get(device_name, device_name)
        layout = ", channels-last" if channels_last else ""
        labels, series, failed = _series(rows, lambda r: r.speedup_vs_eager, with_geomean=True)
        path = Path(out_dir) / "charts" / chart_name(key)
        plot_bars(path, f"{suite} - {mode}{layout} - speedup over eager\n{label}", labels, series, failed,
              "speedup over eager (x)", 1.0, "eager")
        written.append(path)
        if has_bandwidth_chart(rows):
            labels, series, failed = _series(rows, lambda r: r.copy_fraction, with_geomean=False, with_baseline=True)
            path = Path(out_dir) / "charts" / chart_name(key).replace(".png", "-bandwidth.png")
            plot_bars(path, f"{suite} - {mode}{layout} - fraction of device-copy bandwidth\n{label}", labels, series,
                  failed, "achieved / copy bandwidth", 1.0, "device copy")
            written.append(path)
    return written
