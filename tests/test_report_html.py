"""The HTML report renders in a real browser: graph, tables, kernel sources and the bandwidth
chart are laid out with a non-zero size, and the page fetches nothing.

Runs headless Chromium (Debian's ``chromium`` package) on a copy of the page with a probe
script appended, which measures the elements and writes the measurements into the DOM that
``--dump-dom`` prints. Skipped when ``/usr/bin/chromium`` is absent.
"""
from __future__ import annotations

import html
import json
import os
import re
import subprocess

import pytest
import torch

import torchfuse
from conftest import DEVICE

CHROMIUM = "/usr/bin/chromium"

pytestmark = pytest.mark.skipif(not os.path.exists(CHROMIUM),
                                reason="needs headless Chromium at /usr/bin/chromium (apt-get install chromium)")

_PROBE = """
<script>
(function () {
  function size(el) {
    if (!el) return null;
    var r = el.getBoundingClientRect(), s = getComputedStyle(el);
    return {w: r.width, h: r.height, shown: s.display !== 'none' && s.visibility !== 'hidden'};
  }
  var out = {
    graph: size(document.querySelector('svg.graph')),
    groupBoxes: Array.prototype.map.call(document.querySelectorAll('svg.graph a.group rect'), size),
    atenBoxes: Array.prototype.map.call(document.querySelectorAll('svg.graph a.aten rect'), size),
    edges: document.querySelectorAll('svg.graph path.edge').length,
    groupTable: size(document.querySelector('table.groups')),
    groupRows: document.querySelectorAll('table.groups tr[id]').length,
    atenTable: size(document.querySelector('table.aten')),
    breaks: size(document.querySelector('#breaks')),
    kernelSource: size(document.querySelector('details.kernel[open] pre.source')),
    kernelText: (document.querySelector('details.kernel[open] pre.source') || {}).textContent || '',
    kernels: document.querySelectorAll('details.kernel').length,
    chart: size(document.querySelector('#bandwidth svg.chart')),
    bars: document.querySelectorAll('#bandwidth rect.bar').length,
    roof: size(document.querySelector('#bandwidth line.roof'))
  };
  var pre = document.createElement('pre');
  pre.id = 'probe';
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
})();
</script>
"""


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(16, 16)

    def forward(self, x):
        h = torch.nn.functional.layer_norm(self.lin(x).relu() + x, (16,))
        torch._dynamo.graph_break()
        return torch.cumsum(h, -1).sigmoid() * h


def _render_in_chromium(page: str, tmp_path) -> dict:
    path = tmp_path / "probe.html"
    path.write_text(page.replace("</body>", _PROBE + "</body>"), encoding="utf-8")
    args = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync",
            f"--user-data-dir={tmp_path / 'profile'}", "--window-size=1400,1000", "--dump-dom", path.as_uri()]
    run = subprocess.run(args, capture_output=True, text=True, timeout=120)
    found = re.search(r'<pre id="probe">(.*?)</pre>', run.stdout, re.S)
    assert found, f"no probe output (exit {run.returncode}): {run.stderr[-2000:]}"
    return json.loads(html.unescape(found.group(1)))


def _visible(box: dict | None) -> bool:
    return box is not None and box["shown"] and box["w"] > 0 and box["h"] > 0


def test_html_report_renders_graph_tables_and_sources(tmp_path):
    torch.manual_seed(0)
    with torch.no_grad():
        result = torchfuse.explain(Model().to(DEVICE), torch.randn(4, 16, device=DEVICE), verbose=False,
                                   html=str(tmp_path / "report.html"))
    # what a GPU run with measure=True adds: times, bandwidths and the copy roof
    result.timing.available, result.timing.copy_gbps, result.timing.copy_bytes = True, 4000.0, 512 * 2**20
    result.timing.device, result.timing.note = "test device", "made-up times"
    for k, g in enumerate(result.groups):
        for p in g.plans:
            p.time_ms, p.bandwidth_gbps = 0.002 * (k + 1), 1500.0 / (k + 1)
            p.copy_fraction = p.bandwidth_gbps / 4000.0
    page = open(result.write_html(str(tmp_path / "measured.html")), encoding="utf-8").read()

    # self-contained: nothing to fetch
    first = (tmp_path / "report.html").read_text(encoding="utf-8")
    for text in (first, page):
        assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", text)
        assert "<link" not in text and "@import" not in text and not re.search(r"url\((?!#)", text)

    dom = _render_in_chromium(page, tmp_path)
    n_groups = len(result.graphs[0].groups)
    assert _visible(dom["graph"]) and dom["graph"]["w"] >= 200
    assert len(dom["groupBoxes"]) >= n_groups > 0 and all(_visible(b) for b in dom["groupBoxes"])
    assert len(dom["atenBoxes"]) >= 1 and all(_visible(b) for b in dom["atenBoxes"])  # addmm
    assert dom["edges"] >= 1
    assert _visible(dom["groupTable"]) and dom["groupRows"] == len(result.groups)
    assert _visible(dom["atenTable"]) and _visible(dom["breaks"])
    assert _visible(dom["kernelSource"]) and "@triton.jit" in dom["kernelText"] and "tl.store" in dom["kernelText"]
    assert dom["kernels"] == len(result.kernels) >= 1
    assert _visible(dom["chart"]) and dom["bars"] == sum(len(g.plans) for g in result.groups)
    assert dom["roof"] is not None and dom["roof"]["shown"] and dom["roof"]["h"] > 0  # a vertical line

    # without measurements the page says why, and still renders
    assert "Not available" in first
