"""Reports of a results directory: the terminal table, ``summary.md`` and its charts.

:func:`write_reports` regenerates everything in a results directory from its run files
(``runs/*.json``): ``results.json``, ``results.csv``, ``charts/*.png`` and ``summary.md``,
which links the charts and tabulates speedups, first-call times, memory, kernel launches,
accuracy and every failure with its error.
"""
from __future__ import annotations

import datetime
from pathlib import Path

from .accuracy import EAGER_DIFFERS, FAIL
from .backends import BASELINE
from .charts import chart_name, group_results, has_bandwidth_chart, write_charts
from .results import FAILED, OK, SKIPPED, Result, case_label, combine, load_runs, write_tables
from .timing import geometric_mean


def _fmt(value, spec: str = ".2f", suffix: str = "") -> str:
    return "" if value is None else f"{value:{spec}}{suffix}"


def speedup_cell(r: Result | None) -> str:
    """``1.23x``, with ``acc!`` when accuracy failed; ``FAIL``; ``-`` when skipped."""
    if r is None or r.status == SKIPPED:
        return "-"
    if r.status == FAILED:
        return "FAIL"
    text = _fmt(r.speedup_vs_eager, ".2f", "x") or "n/a"
    if r.accuracy == FAIL:
        text += " acc!"
    elif r.accuracy == EAGER_DIFFERS:
        text += " ?"
    return text


def speedup_table(rows: list[Result]) -> tuple[list[str], list[list[str]]]:
    """Header and rows: case, eager milliseconds, each other backend's speedup; geomean last."""
    backends = [b for b in dict.fromkeys(r.backend for r in rows)
                if b != BASELINE and any(r.backend == b and r.status != SKIPPED for r in rows)]
    by = {(r.case, r.backend): r for r in rows}
    cases = list(dict.fromkeys(r.case for r in rows))
    header = ["case", "eager ms"] + backends
    body = []
    for c in cases:
        first = next(r for r in rows if r.case == c)
        eager = by.get((c, BASELINE))
        eager_cell = _fmt(eager.median_ms, ".3f") if eager and eager.status == OK else (
            "FAIL" if eager and eager.status == FAILED else "-")
        body.append([f"{first.model} {first.size}", eager_cell] + [speedup_cell(by.get((c, b))) for b in backends])
    geo = ["geomean", ""]
    for b in backends:
        g = geometric_mean([by[(c, b)].speedup_vs_eager for c in cases if (c, b) in by
                            and by[(c, b)].status == OK and by[(c, b)].speedup_vs_eager])
        geo.append(_fmt(g, ".2f", "x") or "-")
    body.append(geo)
    return header, body


def text_table(header: list[str], body: list[list[str]]) -> str:
    widths = [max(len(str(x)) for x in col) for col in zip(header, *body)]
    line = lambda cells: "  ".join(str(c).ljust(w) for c, w in zip(cells, widths)).rstrip()  # noqa: E731
    return "\n".join([line(header), line(["-" * w for w in widths])] + [line(r) for r in body])


def markdown_table(header: list[str], body: list[list[str]]) -> str:
    esc = lambda c: str(c).replace("|", "\\|").replace("\n", " ")  # noqa: E731
    lines = ["| " + " | ".join(esc(h) for h in header) + " |", "|" + "---|" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(esc(c) for c in row) + " |" for row in body])


def _title(key: tuple, labels: dict[str, str]) -> str:
    suite, mode, channels_last, device_name = key
    layout = " · channels-last" if channels_last else ""
    return f"{suite} · {mode}{layout} · {labels.get(device_name, device_name)}"


def terminal_report(results: list[Result], labels: dict[str, str]) -> str:
    """The tables printed at the end of a run."""
    parts = []
    for key, rows in group_results(results).items():
        parts.append(f"\n== {_title(key, labels)} ==  (speedup over eager; acc! = accuracy check failed)")
        parts.append(text_table(*speedup_table(rows)))
        for r in rows:
            if r.status == FAILED:
                parts.append(f"  FAIL {r.case} {r.backend} ({r.stage}): {r.error}")
    return "\n".join(parts)


DETAIL_HEADER = ["case", "backend", "status", "median ms", "device ms", "idle ms", "vs eager", "vs torch.compile",
                 "first call s", "cold s", "warm s", "peak MiB", "kernels/step", "launches/step", "accuracy"]


def detail_rows(rows: list[Result]) -> tuple[list[str], list[list[str]]]:
    micro = any(r.bytes_moved for r in rows)
    header = DETAIL_HEADER + (["GB/s", "of copy"] if micro else [])
    body = []
    for r in rows:
        if r.status == SKIPPED:
            continue  # listed once per reason under the table
        status = r.status if r.status != FAILED else f"failed ({r.stage})"
        row = [f"{r.model} {r.size}", r.backend, status, _fmt(r.median_ms, ".3f"), _fmt(r.device_ms, ".3f"),
               _fmt(r.idle_ms, ".3f"), _fmt(r.speedup_vs_eager, ".2f", "x"),
               _fmt(r.speedup_vs_torch_compile, ".2f", "x"), _fmt(r.first_call_s, ".1f"),
               _fmt(r.first_call_cold_s, ".1f"), _fmt(r.first_call_warm_s, ".1f"), _fmt(r.peak_memory_mib, ".0f"),
               _fmt(r.kernels_per_step, "d"), _fmt(r.launches_per_step, "d"), r.accuracy or ""]
        if micro:
            row += [_fmt(r.bandwidth_gbps, ".3g"), _fmt(r.copy_fraction, ".1%")]
        body.append(row)
    return header, body


def markdown_summary(metas: list[dict], results: list[Result], charts_dir: str = "charts") -> str:
    labels = {m["device_name"]: m.get("device_label", m["device_name"]) for m in metas}
    out = ["# torchfuse benchmark results", "",
           f"Generated {datetime.datetime.now().isoformat(timespec='seconds')} from {len(metas)} run(s). "
           "Speedups are medians of interleaved step times over eager measured in the same run; "
           "`acc!` marks a failed accuracy check (`torch._dynamo.utils.same` against a float64 reference), "
           "`FAIL` a backend that raised (its error is listed below).", ""]
    if any(m["device"] == "cpu" for m in metas):
        out += ["**CPU runs** check that the harness works: torchfuse's kernels run in Triton's interpreter "
                "there, so their times say nothing about performance.", ""]
    out += ["## Runs", ""]
    run_rows = []
    for m in metas:
        v = m.get("versions", {})
        run_rows.append([m["run_id"], m.get("started", ""), m.get("device_name", ""), f"`{m.get('command', '')}`",
                         v.get("torch", ""), v.get("triton", ""), f"{v.get('torchfuse', '')} {v.get('torchfuse_commit') or ''}",
                         _fmt(m.get("copy_gbps"), ".0f"), "yes" if m.get("interrupted") else "",
                         str(len(m.get("not_run", [])))])
    out += [markdown_table(["run", "started", "device", "command", "torch", "triton", "torchfuse", "copy GB/s",
                            "interrupted", "not run"], run_rows), ""]
    for key, rows in group_results(results).items():
        out += [f"## {_title(key, labels)}", "", f"![{_title(key, labels)}]({charts_dir}/{chart_name(key)})", ""]
        if has_bandwidth_chart(rows):
            out += [f"![bandwidth]({charts_dir}/{chart_name(key).replace('.png', '-bandwidth.png')})", ""]
        out += [markdown_table(*speedup_table(rows)), "", "<details><summary>All measurements</summary>", "",
                markdown_table(*detail_rows(rows)), "", "</details>", ""]
        failures = [r for r in rows if r.status == FAILED]
        accuracy = [r for r in rows if r.status == OK and r.accuracy == FAIL]
        if failures:
            out += ["Failures:", ""] + [f"- `{r.case}` **{r.backend}** ({r.stage}): `{r.error}`" for r in failures] + [""]
        if accuracy:
            out += ["Accuracy failures:", ""] + [f"- `{r.case}` **{r.backend}**: {r.accuracy_detail}"
                                                 for r in accuracy] + [""]
        skipped = {}
        for r in rows:
            if r.status == SKIPPED:
                skipped.setdefault(f"{r.backend}: {r.error}", []).append(r.case)
        if skipped:
            out += ["Skipped: " + "; ".join(f"{k} ({len(v)} case{'s' if len(v) > 1 else ''})"
                                            for k, v in skipped.items()), ""]
    # a case one run did not reach may have been measured by another run of the merge
    measured = {case_label(r.case, r.mode, r.channels_last) for r in results}
    not_run = [f"- `{item}` ({m['run_id']})" for m in metas for item in m.get("not_run", []) if item not in measured]
    if not_run:
        out += ["## Not run", "", "Left when a run reached its time budget or was interrupted; run them with "
                "`--only`.", ""] + not_run + [""]
    return "\n".join(out)


def write_reports(out_dir: Path, sources: list[Path] | None = None) -> dict[str, Path]:
    """Regenerate the reports of ``out_dir`` from the run files of ``sources`` (default: its
    own ``runs/``). Returns the paths written (``json``, ``csv``, ``summary``, ``charts``)."""
    out_dir = Path(out_dir)
    metas, results = combine(load_runs(sources or [out_dir]))
    json_path, csv_path = write_tables(out_dir, metas, results)
    labels = {m["device_name"]: m.get("device_label", m["device_name"]) for m in metas}
    charts = write_charts(out_dir, results, labels)
    summary = out_dir / "summary.md"
    summary.write_text(markdown_summary(metas, results))
    return {"json": json_path, "csv": csv_path, "summary": summary, "charts": charts}
