"""The HTML report: one self-contained page for an explain result.

Takes an :class:`~torchfuse.report.result.ExplainResult`; returns (or writes) a single HTML
file with inline CSS, inline SVG pictures (:mod:`.svg`) and a few lines of inline script
(expand or collapse every kernel source). No fonts, scripts, styles or images are fetched, so
the file opens offline and can be attached to a bug report.

Sections: summary, graph breaks, one section per compiled graph (its drawing, fusion groups
with launch configurations and timings, ATen calls with reasons, stage times), the
bandwidth chart (GPU runs with ``measure=True``), recompilations, generated kernel sources.
Element ids used by tests and links: ``graph-<i>`` (a graph's section), ``graph-<i>-svg``,
``groups-<i>`` (its group table), ``g<i>-group-<id>`` (a group's row), ``g<i>-aten-<k>``,
``kernel-<key[:16]>`` (a kernel's source), ``bandwidth`` (the chart).
"""
from __future__ import annotations

import os
from html import escape

from .result import NO_WORK, SELF_EXPLAINED, ExplainResult, GraphReport, SourceLocation
from .summary import CATEGORY_TEXT, call_time_text, compress_ops, graph_counts, graph_origin, launch_text
from .svg import bandwidth_svg, format_number, graph_svg, group_colour

_CSS = """
:root { --fg: #111827; --muted: #6b7280; --line: #e5e7eb; --accent: #1d4ed8; }
* { box-sizing: border-box; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: var(--fg);
       margin: 0; padding: 24px 32px 64px; max-width: 1500px; }
h1 { font-size: 24px; margin: 0 0 4px; } h2 { font-size: 19px; margin: 36px 0 8px; border-bottom: 1px solid var(--line); padding-bottom: 4px; }
h3 { font-size: 15px; margin: 20px 0 6px; }
.muted, .note { color: var(--muted); }
.note-first { background: #fef9c3; border: 1px solid #fde68a; border-radius: 6px; padding: 8px 12px; }
.cards { display: flex; flex-wrap: wrap; gap: 12px; margin: 16px 0; }
.card { border: 1px solid var(--line); border-radius: 8px; padding: 10px 14px; min-width: 130px; }
.card b { display: block; font-size: 22px; }
table { border-collapse: collapse; width: 100%; margin: 6px 0 12px; font-size: 13px; }
th, td { border-bottom: 1px solid var(--line); padding: 5px 8px; text-align: left; vertical-align: top; }
th { background: #f9fafb; font-weight: 600; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
code, pre { font: 12px/1.4 ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; }
pre { background: #f8fafc; border: 1px solid var(--line); border-radius: 6px; padding: 10px; overflow: auto; max-height: 640px; }
.swatch { display: inline-block; width: 12px; height: 12px; border-radius: 3px; border: 1.5px solid; vertical-align: -1px; margin-right: 6px; }
.swatch.aten { background: #e5e7eb; border-color: #6b7280; border-radius: 1px; }
.graph-wrap { overflow: auto; border: 1px solid var(--line); border-radius: 8px; background: #fff; max-height: 900px; }
svg text { font-family: system-ui, sans-serif; }
svg .box-title { font-size: 12px; font-weight: 600; fill: #111827; }
svg .box-line { font-size: 11px; fill: #374151; }
svg .box-kernel { font: 10px ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; fill: #111827; }
svg .box-out { font-size: 10px; fill: #1d4ed8; }
svg a:hover rect { filter: brightness(0.95); }
svg .axis, svg .bar-value { font-size: 11px; fill: #4b5563; } svg .bar-label { font-size: 11px; fill: #111827; }
svg .roof-label { font-size: 11px; fill: #1d4ed8; font-weight: 600; }
.failed { color: #b91c1c; font-weight: 600; }
.tag { display: inline-block; border-radius: 4px; padding: 0 6px; font-size: 12px; background: #f3f4f6; }
.tag.library, .tag.rng_state { background: #dbeafe; } .tag.unsupported { background: #fef3c7; } .tag.fallback { background: #fee2e2; }
details { margin: 6px 0; } summary { cursor: pointer; }
tr:target { background: #fef9c3; }
button { font: inherit; font-size: 12px; padding: 2px 10px; margin-right: 6px; }
"""

_SCRIPT = """
function setAllKernels(open) {
  document.querySelectorAll('details.kernel').forEach(function (d) { d.open = open; });
}
"""


def _loc(loc: SourceLocation | None) -> str:
    if loc is None:
        return ""
    text = f'<span title="{escape(loc.file)}">{escape(os.path.basename(loc.file))}:{loc.line}</span>' if loc.file else ""
    if loc.module:
        text += ("<br>" if text else "") + f'<span class="muted">{escape(loc.module)}</span>'
    return text + (f"<br><code>{escape(loc.code)}</code>" if loc.code else "")


def _kernel_anchor(key: str) -> str:
    return f"kernel-{key[:16]}"


def _summary_cards(r: ExplainResult) -> str:
    stages = r.stage_seconds()
    cards = [("graphs captured", len(r.captures)), ("graph breaks", len(r.graph_breaks)),
             ("fusion groups", len(r.groups)), ("ops on ATen", len(r.aten_work)),
             *([("calls of torchfuse's own kernels", len(r.own_kernel_calls))] if r.own_kernel_calls else []),
             ("calls that move no data", len(r.idle_calls)),
             ("kernels compiled", r.kernels_compiled), ("kernels cached", r.kernels_cached),
             ("fallbacks", r.fallbacks), ("recompilations", len(r.recompilations)),
             ("compile time", f"{r.compile_seconds():.2f} s")]
    body = "".join(f'<div class="card"><b>{escape(str(v))}</b>{escape(k)}</div>' for k, v in cards)
    stage_text = ", ".join(f"{k} {v:.3f} s" for k, v in stages.items())
    return f'<div class="cards" id="summary">{body}</div><p class="muted">Compile time per stage: {escape(stage_text)}</p>'


def _breaks(r: ExplainResult) -> str:
    if not r.graph_breaks:
        return "<h2>Graph breaks</h2><p>None: TorchDynamo captured the program without breaks.</p>"
    rows = []
    for i, b in enumerate(r.graph_breaks):
        detail = f"<details><summary>details</summary><pre>{escape(b.detail)}</pre></details>" if b.detail != b.reason else ""
        rows.append(f"<tr><td class=num>{i + 1}</td><td>{_loc(b.location)}</td><td>{escape(b.location.function if b.location else '')}</td>"
                    f"<td>{escape(b.reason)}{detail}</td></tr>")
    return ("<h2>Graph breaks</h2><table id=\"breaks\"><tr><th>#</th><th>where</th><th>function</th><th>reason</th></tr>"
            + "".join(rows) + "</table>")


def _time_cells(p) -> str:
    if p is None or p.time_ms is None:
        return "<td class=num>-</td><td class=num>-</td><td class=num>-</td>"
    frac = f"{p.copy_fraction:.0%}" if p.copy_fraction is not None else "-"
    return (f"<td class=num>{p.time_ms * 1e3:.1f}</td><td class=num>{p.bandwidth_gbps or 0:.0f}</td>"
            f"<td class=num>{frac}</td>")


def _groups_table(g: GraphReport, prefix: str) -> str:
    if not g.groups:
        return "<p class=note>No fusion groups.</p>"
    head = ("<tr><th>group</th><th>kernel</th><th>ops</th><th>scheduler and launch configuration</th><th>why</th>"
            "<th>bytes moved</th><th>time (us)</th><th>GB/s</th><th>of copy</th><th>source lines</th></tr>")
    rows = []
    for grp in g.groups:
        fill, stroke = group_colour(grp.id)
        swatch = f'<span class="swatch" style="background:{fill};border-color:{stroke}"></span>'
        ops = escape(compress_ops(grp.ops))
        locs = "<br>".join(_loc(loc) for loc in grp.locations[:3])
        ir = escape("\n".join(grp.nodes))
        ops_cell = f"{ops}<details><summary>IR ({len(grp.nodes)} nodes)</summary><pre>{ir}</pre></details>"
        plans = grp.plans or [None]
        for k, p in enumerate(plans):
            first = k == 0
            kernel = (f'<a href="#{_kernel_anchor(p.kernel_key)}"><code>{escape(p.kernel)}</code></a>'
                      if p is not None and p.kernel_key else f"<code>{escape(grp.kernel or '-')}</code>")
            if grp.failed and first:
                kernel += (f'<div class="failed">failed, ran through ATen: {escape(grp.failed.splitlines()[0][:300])}</div>'
                           + (f"<div>reproducer: <code>{escape(grp.reproducer)}</code></div>" if grp.reproducer else ""))
            config = (f"<b>{escape(p.scheduler)}</b> <span class=muted>[{escape(p.sizes)}]</span><br>"
                      f"<code>{escape(launch_text(p))}</code>") if p is not None else "-"
            why = escape(p.reason) if p is not None else ""
            nbytes = f"{p.bytes_moved:,}" if p is not None else "-"
            times = _time_cells(p)
            row_id = f' id="{prefix}-group-{grp.id}"' if first else ""
            rows.append(f"<tr{row_id}><td>{swatch}{grp.id} <span class=muted>{escape(grp.kind)}</span></td>"
                        f"<td>{kernel}</td><td>{ops_cell if first else ''}</td><td>{config}</td><td>{why}</td>"
                        f"<td class=num>{nbytes}</td>{times}<td>{locs if first else ''}</td></tr>")
    return f'<table id="groups-{g.index}" class="groups">{head}{"".join(rows)}</table>'


def _aten_row(g: GraphReport, prefix: str, k: int) -> str:
    c = g.aten_calls[k]
    cat = CATEGORY_TEXT.get(c.category, c.category)
    reason = "" if c.category in SELF_EXPLAINED else c.reason  # the category says it all
    return (f'<tr id="{prefix}-aten-{k}"><td><code>{escape(c.op)}</code></td>'
            f'<td><span class="tag {escape(c.category)}">{escape(cat)}</span></td><td>{escape(reason)}</td>'
            f"<td><code>{escape(c.node[:160])}</code></td><td>{_loc(c.location)}</td></tr>")


def _aten_table(g: GraphReport, prefix: str) -> str:
    """Calls that do work first; views and module constants (no data moves) folded below."""
    if not g.aten_calls:
        return "<p class=note>Every op runs in a generated kernel.</p>"
    head = "<tr><th>op</th><th>why on ATen</th><th>reason</th><th>IR</th><th>source line</th></tr>"
    idle = [k for k, c in enumerate(g.aten_calls) if c.category in NO_WORK]
    work = [k for k in range(len(g.aten_calls)) if k not in set(idle)]
    html = (f'<table id="aten-{g.index}" class="aten">{head}{"".join(_aten_row(g, prefix, k) for k in work)}</table>'
            if work else "<p class=note>Only views, constants and arithmetic on sizes: no op that moves data runs on ATen.</p>")
    if idle:
        html += (f"<details><summary>{len(idle)} views and module constants (no data moves)</summary>"
                 f'<table class="aten idle">{head}{"".join(_aten_row(g, prefix, k) for k in idle)}</table></details>')
    return html


def _graph_section(r: ExplainResult, g: GraphReport) -> str:
    prefix = f"g{g.index}"
    origin = ("from " if g.capture >= 0 else "") + graph_origin(g, r)
    status = escape(g.status) if g.status != "compile failed" else f'<span class="failed">compile failed</span>'
    parts = [f'<section id="graph-{g.index}"><h2>Graph {g.index}: {escape(g.name)} '
             f'<span class="muted">({escape(origin)}; {status})</span></h2>']
    if g.frozen:
        parts.append(f"<p>Frozen (freeze=True): {escape(g.frozen)}</p>")
    if g.error:
        parts.append(f'<p class="failed">Error: {escape(g.error.splitlines()[0][:400])}</p>')
    if g.reproducer:
        parts.append(f"<p>Reproducer: <code>{escape(g.reproducer)}</code></p>")
    stages = " &middot; ".join(f"{escape(k)} {v * 1e3:.1f} ms" for k, v in g.stage_seconds.items())
    parts.append(f"<p class=muted>{escape(graph_counts(g))}; "
                 f"kernels {g.kernels_compiled} compiled, {g.kernels_cached} cached; {g.fallbacks} fallbacks"
                 + (f"; CUDA graph: {escape(g.cudagraph)}" if g.cudagraph else "") + f"<br>stages: {stages}</p>")
    parts.append('<p class="legend"><span class="swatch" style="background:hsl(200,70%,88%);border-color:hsl(200,55%,38%)"></span>'
                 'fusion group (one generated kernel; double border: reduction) &nbsp; '
                 '<span class="swatch aten"></span>ATen call &nbsp; <span class=muted>arrows: data flow; views and '
                 'module constants are looked through; click a box for its row</span></p>')
    parts.append(f'<div class="graph-wrap" id="graph-{g.index}-svg">{graph_svg(g, prefix)}</div>')
    parts.append(f"<h3>Fusion groups</h3>{_groups_table(g, prefix)}")
    parts.append(f"<h3>Ops on ATen</h3>{_aten_table(g, prefix)}")
    parts.append("</section>")
    return "\n".join(parts)


def _timing_section(r: ExplainResult) -> str:
    t = r.timing
    if not t.available:
        return f'<h2 id="bandwidth">Kernel times and bandwidth</h2><p class="note">Not available: {escape(t.note)}.</p>'
    return (f'<h2>Kernel times and bandwidth</h2><p class=muted>{escape(t.device)}: device copy '
            f'{format_number(t.copy_gbps or 0)} GB/s ({t.copy_bytes / 2**20:.0f} MiB). {escape(t.note)}. A memory-bound kernel '
            f'cannot beat the copy line; green bars reach 70% of it, red ones less than 30%.</p>'
            f'<div id="bandwidth" class="graph-wrap">{bandwidth_svg(r)}</div>')


def _recompilations(r: ExplainResult) -> str:
    if not r.recompilations:
        return "<h2>Recompilations</h2><p>None.</p>"
    rows = "".join(f"<tr><td>{escape(x.source)}</td><td>{escape(x.where)}</td><td><code>{escape(x.reason)}</code></td></tr>"
                   for x in r.recompilations)
    return f'<h2>Recompilations</h2><table id="recompilations"><tr><th>by</th><th>where</th><th>reason</th></tr>{rows}</table>'


def _kernels(r: ExplainResult) -> str:
    if not r.kernels:
        return "<h2>Kernel sources</h2><p>No kernels were generated.</p>"
    users: dict[str, list[str]] = {}
    for g in r.graphs:
        for grp in g.groups:
            for p in grp.plans:
                if p.kernel_key:
                    users.setdefault(p.kernel_key, []).append(f"graph {g.index} group {grp.id}")
    parts = ['<h2>Kernel sources</h2><p><button onclick="setAllKernels(true)">expand all</button>'
             '<button onclick="setAllKernels(false)">collapse all</button></p>']
    for i, k in enumerate(r.kernels):
        used = ", ".join(sorted(set(users.get(k.key, []))))
        parts.append(f'<details class="kernel" id="{_kernel_anchor(k.key)}"{" open" if i == 0 else ""}>'
                     f"<summary><code>{escape(k.name)}</code> <span class=muted>key {k.key[:12]}; "
                     f"{len(k.text.splitlines())} lines; {escape(used)}</span></summary>"
                     f"{_source_blocks(k)}{_tuning_block(k)}</details>")
    return "\n".join(parts)


def _tuning_block(k) -> str:
    """The tuning the kernel was built with, folded (changed fields counted in the title)."""
    if not k.tuning:
        return ""
    changed = sum(line.endswith("(changed)") for line in k.tuning)
    return (f'<details class="helpers"><summary>tuning of {escape(k.scheduler)} ({changed} changed from the '
            f"defaults)</summary><pre>{escape(chr(10).join(k.tuning))}</pre></details>")


def _source_blocks(k) -> str:
    """The kernel functions first; the module's imports and shared helpers folded below them."""
    at = k.text.find(f"\ndef {k.stages[0]}(") if k.stages else -1
    start = k.text.rfind("\n@", 0, at) + 1 if at > 0 else -1  # its decorator line
    if start <= 0:
        return f'<pre class="source">{escape(k.text)}</pre>'
    helpers = k.text[:start].rstrip()
    return (f'<pre class="source">{escape(k.text[start:])}</pre><details class="helpers"><summary>imports and '
            f"shared helpers ({len(helpers.splitlines())} lines)</summary><pre>{escape(helpers)}</pre></details>")


def render_html(result: ExplainResult) -> str:
    """The report page as one string."""
    env = result.environment
    env_text = " &middot; ".join(f"{escape(k)} {escape(str(v))}" for k, v in env.items())
    notes = "".join(f'<p class="note-first">{escape(n)}</p>' for n in result.notes)
    body = [f"<h1>torchfuse explain</h1>{notes}<p class=muted>{env_text} &middot; {escape(call_time_text(result))}</p>",
            _summary_cards(result), _breaks(result)]
    body += [_graph_section(result, g) for g in result.graphs]
    body += [_timing_section(result), _recompilations(result), _kernels(result)]
    if result.warnings:
        body.append("<h2>Warnings</h2><ul>" + "".join(f"<li><code>{escape(w)}</code></li>" for w in result.warnings) + "</ul>")
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            f"<title>torchfuse explain</title><style>{_CSS}</style><script>{_SCRIPT}</script></head>"
            "<body>" + "\n".join(body) + "</body></html>\n")


def write_html(result: ExplainResult, path: str) -> str:
    """Write :func:`render_html` to ``path`` (UTF-8); returns ``path``."""
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(render_html(result))
    return str(path)
