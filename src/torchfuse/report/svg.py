"""Pictures for the HTML report, as inline SVG text: the step graph and the bandwidth chart.

:func:`graph_svg` draws one :class:`~torchfuse.report.result.GraphReport` as a layered
diagram: each drawn step (fusion group or ATen call) sits one layer below the deepest step it
reads from, steps of a layer are ordered by the mean position of their producers (one
barycentric pass, to keep edges short), and edges are curves from producer to consumer.
Fusion groups are coloured boxes listing their ops (each group its own hue; reductions with
a double border; failed groups dashed red); ATen calls are grey boxes. Each box links to its
row in the report's tables.

:func:`bandwidth_svg` draws each timed kernel's achieved bandwidth (GB/s) as a bar, with the
device copy bandwidth of the same run as the roof line.

Coordinates are CSS pixels; text is escaped; no scripts or external resources.
"""
from __future__ import annotations

import math
from html import escape

from .result import SELF_EXPLAINED, ExplainResult, GraphReport, Step
from .summary import CATEGORY_TEXT, compress_ops

BOX_WIDTH = 236
GAP_X = 28
GAP_Y = 46
LINE = 14
CHARS = 36  # characters per 11px text line inside a box
TITLE_CHARS = 30  # characters of the 12px bold title


def group_colour(index: int) -> tuple[str, str]:
    """``(fill, stroke)`` for group ``index``: golden-angle hues, light fill, dark stroke."""
    hue = (index * 137.508 + 200) % 360
    return f"hsl({hue:.0f}, 70%, 88%)", f"hsl({hue:.0f}, 55%, 38%)"


def _wrap(text: str, width: int = CHARS, most: int = 4) -> list[str]:
    words, lines, cur = text.split(" "), [], ""
    for w in words:
        if cur and len(cur) + 1 + len(w) > width:
            lines.append(cur)
            cur = w
        else:
            cur = f"{cur} {w}" if cur else w
    if cur:
        lines.append(cur)
    if len(lines) > most:
        lines = lines[: most - 1] + [lines[most - 1][: width - 4] + " ..."]
    return [line if len(line) <= width else line[: width - 3] + "..." for line in lines]


def _box_text(graph: GraphReport, step: Step) -> tuple[str, list[str]]:
    if step.kind == "group":
        g = graph.groups[step.index]
        scheduler = g.plans[0].scheduler if g.plans else g.kind
        title = f"group {g.id} \u00b7 " + ("FAILED: on ATen" if g.failed else scheduler)
        kernel = g.kernel or g.name
        kernel = kernel if len(kernel) <= CHARS else kernel[: CHARS - 3] + "..."
        return title, [kernel] + _wrap(compress_ops(g.ops, skip=("unsqueeze", "expand", "squeeze", "alias")) or "-")
    c = graph.aten_calls[step.index]
    short = c.op.replace("aten.", "").replace(".default", "")
    label = {"library": "vendor library", "fallback": "fallback", "rng_state": "random draw"}.get(c.category, c.category)
    return short, _wrap(label, most=1)


def layout(steps: list[Step]) -> tuple[list[int], list[int]]:
    """Layer and position-in-layer of each step (see the module docstring)."""
    layer = []
    for s in steps:
        layer.append(1 + max((layer[p] for p in s.after), default=-1))
    position = [0] * len(steps)
    by_layer: dict[int, list[int]] = {}
    for i, lay in enumerate(layer):
        by_layer.setdefault(lay, []).append(i)
    for lay in sorted(by_layer):
        members = by_layer[lay]
        if lay > 0:
            def centre(i: int) -> float:
                ps = steps[i].after
                return sum(position[p] for p in ps) / len(ps) if ps else float(i)
            members.sort(key=lambda i: (centre(i), i))
        for k, i in enumerate(members):
            position[i] = k
    return layer, position


def graph_svg(graph: GraphReport, anchor_prefix: str) -> str:
    """The steps of ``graph`` as an SVG element (``anchor_prefix`` names the table rows)."""
    steps = graph.steps
    if not steps:
        return '<p class="note">No steps to draw.</p>'
    texts = [_box_text(graph, s) for s in steps]
    heights = [26 + LINE * len(lines) for _, lines in texts]
    layer, position = layout(steps)
    n_layers = max(layer) + 1
    layer_height = [0] * n_layers
    layer_width = [0] * n_layers
    for i, lay in enumerate(layer):
        layer_height[lay] = max(layer_height[lay], heights[i])
        layer_width[lay] = max(layer_width[lay], position[i] + 1)
    y0 = [0] * n_layers
    for lay in range(1, n_layers):
        y0[lay] = y0[lay - 1] + layer_height[lay - 1] + GAP_Y
    widest = max(layer_width)
    width = 20 + widest * (BOX_WIDTH + GAP_X)
    height = y0[-1] + layer_height[-1] + 40
    xs = []
    for i in range(len(steps)):
        shift = (widest - layer_width[layer[i]]) * (BOX_WIDTH + GAP_X) / 2  # centre short layers
        xs.append(10 + shift + position[i] * (BOX_WIDTH + GAP_X))
    ys = [y0[layer[i]] + 10 for i in range(len(steps))]

    out = [f'<svg class="graph" xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height:.0f}" '
           f'viewBox="0 0 {width:.0f} {height:.0f}" role="img" aria-label="{escape(graph.name)} graph">',
           '<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" '
           'orient="auto-start-reverse"><path d="M 0 0 L 10 5 L 0 10 z" fill="#6b7280"/></marker></defs>']
    for i, s in enumerate(steps):  # edges first, under the boxes
        for p in s.after:
            x1, y1 = xs[p] + BOX_WIDTH / 2, ys[p] + heights[p]
            x2, y2 = xs[i] + BOX_WIDTH / 2, ys[i] - 2
            mid = (y1 + y2) / 2
            out.append(f'<path class="edge" d="M {x1:.0f} {y1:.0f} C {x1:.0f} {mid:.0f}, {x2:.0f} {mid:.0f}, '
                       f'{x2:.0f} {y2:.0f}" fill="none" stroke="#9ca3af" stroke-width="1.4" marker-end="url(#arrow)"/>')
    for i, s in enumerate(steps):
        title, lines = texts[i]
        x, y, h = xs[i], ys[i], heights[i]
        if s.kind == "group":
            g = graph.groups[s.index]
            fill, stroke = group_colour(g.id)
            cls, href = "box group", f"#{anchor_prefix}-group-{g.id}"
            style = f'fill="{fill}" stroke="{stroke}" stroke-width="2"'
            if g.failed:
                style = 'fill="#fee2e2" stroke="#b91c1c" stroke-width="2" stroke-dasharray="6 3"'
            tip = "\n".join([f"group {g.id} ({g.name})", f"kernel {g.kernel}"] + g.nodes[:30])
        else:
            c = graph.aten_calls[s.index]
            cls, href = "box aten", f"#{anchor_prefix}-aten-{s.index}"
            style = 'fill="#e5e7eb" stroke="#6b7280" stroke-width="1.2"'
            tip = f"{c.op}\n{CATEGORY_TEXT.get(c.category, c.category)}" + (
                f": {c.reason}" if c.category not in SELF_EXPLAINED else "")
            stroke = "#374151"
        out.append(f'<a href="{href}" class="{cls}"><title>{escape(tip)}</title>')
        out.append(f'<rect x="{x:.0f}" y="{y:.0f}" width="{BOX_WIDTH}" height="{h}" rx="{8 if s.kind == "group" else 3}" {style}/>')
        if s.kind == "group" and graph.groups[s.index].kind == "reduction" and not graph.groups[s.index].failed:
            out.append(f'<rect x="{x + 3:.0f}" y="{y + 3:.0f}" width="{BOX_WIDTH - 6}" height="{h - 6}" rx="6" '
                       f'fill="none" stroke="{stroke}" stroke-width="1"/>')
        out.append(f'<text x="{x + 10:.0f}" y="{y + 18:.0f}" class="box-title">{escape(title[:TITLE_CHARS])}</text>')
        for k, line in enumerate(lines):
            cls = "box-kernel" if k == 0 and s.kind == "group" else "box-line"
            out.append(f'<text x="{x + 10:.0f}" y="{y + 34 + k * LINE:.0f}" class="{cls}">{escape(line)}</text>')
        if s.output:
            out.append(f'<text x="{x + BOX_WIDTH - 8:.0f}" y="{y + h + 13:.0f}" text-anchor="end" '
                       f'class="box-out">output</text>')
        out.append("</a>")
    out.append("</svg>")
    return "\n".join(out)


def _nice_step(raw: float) -> float:
    """The smallest of 1, 2, 5 x 10^k at least ``raw`` (axis tick spacing)."""
    if raw <= 0:
        return 1.0
    k = math.floor(math.log10(raw))
    for m in (1, 2, 5, 10):
        if m * 10**k >= raw:
            return m * 10**k
    return 10 ** (k + 1)


def format_number(v: float) -> str:
    """Three significant digits, no exponent for everyday magnitudes (``0.0844``, ``12.3``, ``4410``)."""
    if v == 0:
        return "0"
    return f"{v:.0f}" if abs(v) >= 100 else f"{v:.3g}"


def bandwidth_svg(result: ExplainResult) -> str:
    """Achieved GB/s per timed kernel plan, with the device copy as the roof line."""
    rows = []
    for graph in result.graphs:
        for g in graph.groups:
            for p in g.plans:
                if p.bandwidth_gbps is not None:
                    rows.append((f"g{graph.index}.{g.id} {p.kernel}", p))
    copy = result.timing.copy_gbps or 0.0
    if not rows:
        return '<p class="note">No kernel was timed.</p>'
    rows.sort(key=lambda r: -(r[1].time_ms or 0))
    rows = rows[:40]
    label_w, bar_w, row_h = 300, 520, 22
    step = _nice_step(max(copy, max(p.bandwidth_gbps for _, p in rows)) * 1.08 / 5)
    top = 5 * step
    width, height = label_w + bar_w + 150, 40 + row_h * len(rows) + 36
    scale = bar_w / top
    out = [f'<svg class="chart" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" role="img" aria-label="achieved bandwidth per kernel">']
    for k in range(6):  # axis ticks
        v = top * k / 5
        x = label_w + v * scale
        out.append(f'<line x1="{x:.0f}" y1="30" x2="{x:.0f}" y2="{height - 30}" stroke="#e5e7eb"/>')
        out.append(f'<text x="{x:.0f}" y="{height - 14}" text-anchor="middle" class="axis">{format_number(v)}</text>')
    out.append(f'<text x="{label_w + bar_w / 2:.0f}" y="{height - 1}" text-anchor="middle" class="axis">'
               f'achieved GB/s (bytes moved / kernel time), most expensive kernels first</text>')
    for k, (label, p) in enumerate(rows):
        y = 34 + k * row_h
        w = max(1.0, p.bandwidth_gbps * scale)
        frac = p.copy_fraction or 0.0
        colour = "#16a34a" if frac >= 0.7 else "#f59e0b" if frac >= 0.3 else "#dc2626"
        out.append(f'<text x="{label_w - 8}" y="{y + 14}" text-anchor="end" class="bar-label">{escape(label[:44])}</text>')
        out.append(f'<rect class="bar" x="{label_w}" y="{y + 3}" width="{w:.1f}" height="{row_h - 7}" fill="{colour}">'
                   f'<title>{escape(label)}: {p.time_ms * 1e3:.1f} us, {p.bytes_moved} B, '
                   f'{p.bandwidth_gbps:.1f} GB/s ({frac:.0%} of copy)</title></rect>')
        out.append(f'<text x="{label_w + w + 6:.0f}" y="{y + 14}" class="bar-value">{format_number(p.bandwidth_gbps)} GB/s '
                   f'({frac:.0%}) {format_number(p.time_ms * 1e3)} us</text>')
    if copy:
        x = label_w + copy * scale
        out.append(f'<line class="roof" x1="{x:.0f}" y1="22" x2="{x:.0f}" y2="{height - 30}" stroke="#1d4ed8" '
                   f'stroke-width="2" stroke-dasharray="6 4"/>')
        out.append(f'<text x="{x:.0f}" y="16" text-anchor="middle" class="roof-label">device copy {format_number(copy)} GB/s</text>')
    out.append("</svg>")
    return "\n".join(out)
