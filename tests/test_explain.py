"""Explain, logs, profiler names and reproducers (torchfuse.report).

One explain run of a small model with a graph break, an op torchfuse cannot fuse (cumsum), a
matrix product and a second batch size is shared by the tests that read its result; the
failure tests force a codegen or segmentation failure with monkeypatch.
"""
from __future__ import annotations

import copy
import json
import logging
import os
import re
import subprocess
import sys

import pytest
import torch

import torchfuse
import torchfuse.backend as backend
from torchfuse.config import LOG_TOPICS, configure_logging, log_topics_from_env
from torchfuse.report import ExplainResult
from conftest import DEVICE


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(16, 16)
        self.norm = torch.nn.LayerNorm(16)

    def forward(self, x):
        h = self.norm(torch.nn.functional.gelu(self.lin(x)) * 2 + x)
        torch._dynamo.graph_break()  # the graph break the tests look for
        y = torch.cumsum(h, dim=-1)
        return (y.sigmoid() * h).sum(-1)


def _line_of(marker: str) -> int:
    with open(__file__) as f:
        return next(i for i, line in enumerate(f, 1) if marker in line and "_line_of" not in line)


@pytest.fixture(scope="module")
def explained():
    """(result, compiled graphs it described) for Block on two batch sizes."""
    torch.manual_seed(0)
    model = Block().to(DEVICE)
    before = {id(c) for c in backend.RECENT}
    with torch.no_grad():
        result = torchfuse.explain(model, torch.randn(4, 16, device=DEVICE),
                                   more_inputs=[(torch.randn(6, 16, device=DEVICE),)], verbose=False)
    compiled = [c for c in backend.RECENT if id(c) not in before]
    return result, compiled


def test_explain_captures_graph_breaks_with_source_lines(explained):
    result, _ = explained
    assert len(result.captures) == 4  # two graphs per batch size (Dynamo re-traces on the new size)
    assert len(result.graph_breaks) == 1
    brk = result.graph_breaks[0]
    assert brk.location.file == __file__
    assert brk.location.line == _line_of("the graph break the tests look for")
    assert "graph_break()" in brk.location.code and "graph_break" in brk.reason
    assert brk.location.function == "forward"


def test_a_captures_heading_names_its_line_not_its_first_ops_module(explained):
    result, _ = explained
    first = result.captures[0].location
    assert first.file == __file__ and first.function == "forward"
    # the graph's first op is in self.lin, but the graph is the whole of Block.forward's first half
    assert first.module == ""
    assert "(capture 0 at test_explain.py:" in result.summary() and "in lin (Linear), TorchDynamo" not in result.summary()


class Outer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.LayerNorm(8))

    def forward(self, x):
        return self.inner(x) * 2


def test_a_frozen_graph_is_labelled_with_what_was_hoisted():
    torch.manual_seed(0)
    model = Outer().eval()
    x = torch.randn(3, 8)
    with torch.no_grad():
        frozen = torchfuse.explain(model, x, verbose=False, freeze=True)
        plain = torchfuse.explain(model, x, verbose=False)
        # a graph whose ops all run inside one submodule names it
        inner = torchfuse.explain(model.inner, x, verbose=False)
    assert frozen.graphs[0].frozen.startswith("1 op on weights alone hoisted into 1 constant")  # the transpose for addmm
    assert "frozen (freeze=True): " in frozen.summary()
    assert ExplainResult.from_dict(json.loads(json.dumps(frozen.to_dict()))).graphs[0].frozen == frozen.graphs[0].frozen
    assert plain.graphs[0].frozen == "" and "frozen" not in plain.summary()
    assert inner.captures[0].location.module == ""  # the compiled module itself is not named
    assert Outer.forward.__code__.co_firstlineno < frozen.captures[0].location.line


def test_explain_groups_match_the_segmentation(explained):
    result, compiled = explained
    fused = [g for g in result.graphs if g.status == "fused"]
    assert len(fused) == len(compiled) == 4
    for report, graph in zip(fused, compiled):
        assert report.name == graph.name == "inference"
        assert len(report.groups) == len(graph.segmentation.groups)
        assert [g.name for g in report.groups] == [g.name for g in graph.segmentation.groups]
        for group in report.groups:
            assert re.fullmatch(r"tf_(pw|red)_\w+", group.kernel)
            assert group.ops and group.nodes and group.inputs and group.outputs and not group.failed
            plan = group.plans[0]
            assert plan.scheduler.startswith(("pointwise", "reduction")) and plan.reason
            assert plan.stages[0].grid[0] >= 1 and plan.stages[0].XBLOCK >= 1 and plan.bytes_moved > 0
            assert result.kernel(plan.kernel_key).name == group.kernel
            assert "@triton.jit" in result.kernel(plan.kernel_key).text
        assert set(report.stage_seconds) == {"ir", "segment", "codegen", "compile", "plan"}
        assert report.kernels_compiled + report.kernels_cached == len(report.groups)
        # the stages line names the stages as the header's phases and adds up to the graph's
        # compile time (to the printed rounding)
        text = result.summary()
        line = text[text.index(f"graph {report.index}: "):].splitlines()[1]
        parts = re.fullmatch(r"  stages: passes ([\d.]+) s, segment ([\d.]+) s, codegen ([\d.]+) s, "
                             r"triton_compile ([\d.]+) s", line)
        assert parts is not None, line
        assert sum(map(float, parts.groups())) == pytest.approx(report.compile_seconds, abs=3e-3)
    # the layer norm group and the sigmoid-mul-sum group, each a reduction
    assert {g.kind for r in fused for g in r.groups} == {"reduction"}
    assert any("var_mean" in g.ops for g in result.groups) and any("sigmoid" in g.ops for g in result.groups)
    # the group's source line is the user's line
    norm_group = next(g for g in result.groups if "var_mean" in g.ops)
    assert norm_group.locations[0].file == __file__ and "self.norm" in norm_group.locations[0].code


def test_explain_says_why_ops_stay_on_aten(explained):
    result, _ = explained
    calls = {c.op: c for c in result.aten_calls}
    assert calls["aten.cumsum.default"].category == "unsupported"
    assert calls["aten.cumsum.default"].reason  # the registry's reason, as logged
    assert calls["aten.cumsum.default"].location.line == _line_of("torch.cumsum(h, dim=-1)")
    assert calls["aten.addmm.default"].category == "library"
    assert all(c.reason for c in result.aten_calls)


def test_explain_reports_recompilations_and_cache(explained):
    result, _ = explained
    dynamo = [r for r in result.recompilations if r.source == "dynamo"]
    assert len(dynamo) == 2 and all("size mismatch" in r.reason for r in dynamo)
    assert result.kernels_compiled + result.kernels_cached == len(result.groups) == 4
    assert {p.sizes for g in result.groups for p in g.plans} >= {"static"}
    assert not result.timing.available  # on a CPU: no GPU times; on a GPU: measure=False
    assert ("CUDA" in result.timing.note) if DEVICE == "cpu" else ("measure=True" in result.timing.note)


def _pointwise(x):
    return torch.relu(x) * 2 + 1


@pytest.mark.filterwarnings("ignore:torchfuse. this graph runs on CPU tensors:UserWarning")
def test_explain_on_cpu_without_interpret_says_nothing_was_fused():
    """CPU tensors without interpret mode run through ATen: the environment line and the
    timing note say so, instead of claiming compiled or interpreted kernels."""
    from torchfuse.report.explain import MODE_CPU_UNFUSED

    x = torch.randn(8, 8)
    result = torchfuse.explain(_pointwise, x, verbose=False, interpret=False)
    assert result.kernels_compiled + result.kernels_cached == 0 and not result.groups
    assert result.environment["mode"] == MODE_CPU_UNFUSED
    assert "ATen" in MODE_CPU_UNFUSED and "TORCHFUSE_INTERPRET=1" in MODE_CPU_UNFUSED
    assert not result.timing.available and "no kernel ran" in result.timing.note
    text = result.summary()
    assert "Triton's interpreter, whose times" not in text and "compiled Triton kernels" not in text
    torch.testing.assert_close(torchfuse.compile(_pointwise, interpret=False)(x), _pointwise(x))


def test_explain_on_cpu_with_interpret_names_the_interpreter():
    from torchfuse.report.explain import MODE_INTERPRETER

    x = torch.randn(8, 8)
    result = torchfuse.explain(_pointwise, x, verbose=False, interpret=True)
    assert result.kernels_compiled + result.kernels_cached == 1
    assert result.environment["mode"] == MODE_INTERPRETER
    assert not result.timing.available and "Triton's interpreter" in result.timing.note
    torch.testing.assert_close(torchfuse.compile(_pointwise, interpret=True)(x), _pointwise(x))


def test_explain_on_cpu_turns_interpret_on_and_says_so_first(monkeypatch, tmp_path):
    """Pasted on a CPU without interpret mode, explain shows the interpreter's plan instead of
    every op "fusion disabled": it turns interpret mode on, says so in its first line (text and
    HTML), and with ``measure=True`` says why there are no times."""
    from torchfuse.report.explain import MODE_INTERPRETER

    monkeypatch.delenv("TORCHFUSE_INTERPRET", raising=False)
    assert not torchfuse.Options().interpret  # the user's default here
    x = torch.randn(8, 8)
    result = torchfuse.explain(_pointwise, x, verbose=False, measure=True, html=str(tmp_path / "r.html"))
    assert result.environment["mode"] == MODE_INTERPRETER and len(result.groups) == 1
    assert not any(c.category == "disabled" for c in result.aten_calls)
    first, second = result.notes
    assert first.startswith("this program runs on cpu tensors, so explain turned interpret mode on"), first
    assert "measure=True gave no kernel times" in second and "CUDA" in second, second
    lines = result.summary().splitlines()
    assert lines[0] == f"note: {first}" and lines[1] == f"note: {second}"
    page = (tmp_path / "r.html").read_text()
    assert page.index("explain turned interpret mode on") < page.index('id="summary"')
    torch.testing.assert_close(torchfuse.compile(_pointwise, interpret=True)(x), _pointwise(x))
    assert "with the interpreter's launch configurations (a GPU gets its own)" in first
    # with a GPU's launch configurations chosen, the note says so instead
    monkeypatch.setenv("TORCHFUSE_LAUNCH_CONFIGS_FOR_SM_COUNT", "132")
    sized = torchfuse.explain(_pointwise, x, verbose=False).notes[0]
    assert "with the launch configurations of a GPU of 132 multiprocessors (launch_configs_for_sm_count)" in sized


def test_explain_counts_agree_between_text_tiles_and_drawing(explained):
    """Every count the report gives is the same number: ATen calls that move data (views and
    module constants apart) in the text, the HTML tiles, each graph's HTML header and its
    drawing; the compile-time tile and the text's compile time; both within the call's time."""
    result, _ = explained
    page = __import__("torchfuse.report.html", fromlist=["render_html"]).render_html(result)
    work = [c for c in result.aten_calls if c.category not in ("view", "constant")]
    idle = len(result.aten_calls) - len(work)
    assert idle > 0 and work  # the case that read "2 ATen calls" against 1
    assert f"{len(work)} op(s) on ATen (and {idle} that move(s) no data)" in result.summary()
    assert f'<div class="card"><b>{len(work)}</b>ops on ATen</div>' in page
    assert f'<div class="card"><b>{idle}</b>calls that move no data</div>' in page
    for g in result.graphs:
        section = page.split(f'<section id="graph-{g.index}">')[1].split("</section>")[0]
        header = re.search(r"<p class=muted>(.*?);", section).group(1)
        g_work = [c for c in g.aten_calls if c.category not in ("view", "constant")]
        assert re.match(rf"{len(g.groups)} fusion groups?, {len(g_work)} ATen calls?\b", header), header
        drawn = section.count('class="box aten"')
        assert drawn == len([c for c in g_work if c.category != "fallback"]), (drawn, header)
        assert section.count('class="box group"') == len(g.groups)
        assert header in result.summary()
    seconds = result.compile_seconds()
    assert f"<b>{seconds:.2f} s</b>compile time" in page
    assert f"the 2 calls took {result.seconds:.2f} s, {seconds:.2f} s of it compiling" in result.summary()
    own = sum(g.compile_seconds for g in result.graphs)
    assert 0 < own <= seconds <= result.seconds


def test_explain_mode_for_each_device_and_option():
    from torchfuse.report.explain import MODE_COMPILED, MODE_CPU_UNFUSED, MODE_INTERPRETER, _run_mode

    compiled, interpreted = torchfuse.Options(interpret=False), torchfuse.Options(interpret=True)
    assert _run_mode(torch.device("cuda"), compiled) == MODE_COMPILED
    assert _run_mode(torch.device("cpu"), interpreted) == MODE_INTERPRETER
    assert _run_mode(torch.device("cpu"), compiled) == MODE_CPU_UNFUSED
    assert _run_mode(torch.device("cuda"), interpreted) == MODE_INTERPRETER


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_explain_on_cuda_says_compiled_kernels():
    from torchfuse.report.explain import MODE_COMPILED

    x = torch.randn(8, 8, device="cuda")
    result = torchfuse.explain(_pointwise, x, verbose=False, interpret=False)
    assert result.environment["mode"] == MODE_COMPILED and result.kernels_compiled + result.kernels_cached == 1
    assert "measure=True" in result.timing.note


def test_explain_summary_text(explained):
    result, _ = explained
    text = result.summary()
    assert "1 graph break(s)" in text and "test_explain.py" in text
    assert "aten.cumsum.default" in text and "unsupported" in text and "vendor library" in text
    for g in result.groups:
        assert g.kernel in text
    assert "size mismatch" in text
    # each graph ran once per set of sizes: the summary (and only the summary) says how to see
    # the generated function of later calls
    assert all(g.graph_function.startswith("not generated yet") for g in result.graphs)
    assert text.count("more_inputs=[inputs of the same sizes]") == len(result.graphs)
    assert not any("more_inputs" in g.graph_function for g in result.graphs)


def test_more_inputs_given_a_tensor_instead_of_argument_tuples_says_so():
    """``more_inputs=[x]`` would call the model with x's rows as arguments: a TypeError says to
    pass ``[(x,)]``."""
    x = torch.randn(4, 8, device=DEVICE)
    with pytest.raises(TypeError, match=r"more_inputs=\[\(x,\)\]"):
        torchfuse.explain(torch.nn.Linear(8, 8).to(DEVICE), x, more_inputs=[x], verbose=False)


def test_measure_times_every_plan_through_its_group_runner(explained):
    """The GPU timing path, run here with a stand-in timer: each plan's runner is called on random
    inputs of the plan's sizes (no re-planning), and bandwidths are bytes over time."""
    from torchfuse.report import measure

    result, compiled = explained
    graphs = copy.deepcopy([g for g in result.graphs if g.status == "fused"])
    timed = []

    def timer(fn):
        fn()
        timed.append(fn)
        return 0.5  # ms

    timing = measure.measure(compiled, graphs, torch.device(DEVICE), timer=timer, copy_bytes=1 << 16)
    assert timing.available and timing.copy_gbps == pytest.approx(2 * (1 << 16) / 0.5e-3 / 1e9)
    plans = [p for g in graphs for grp in g.groups for p in grp.plans]
    assert len(timed) == len(plans) + 1  # every plan, and the copy
    for p in plans:
        assert p.time_ms == 0.5 and p.bandwidth_gbps == pytest.approx(p.bytes_moved / 0.5e-3 / 1e9)
        assert p.copy_fraction == pytest.approx(p.bandwidth_gbps / timing.copy_gbps)
    assert all(c.stats["events"] == [] and c.stats["fallbacks"] == 0 for c in compiled)


def test_explain_result_json_round_trip(explained, tmp_path):
    result, _ = explained
    path = result.save(str(tmp_path / "result.json"))
    with open(path) as f:
        data = json.load(f)  # plain JSON
    assert data["schema"] == 1 and len(data["graphs"]) == 4
    loaded = ExplainResult.load(path)
    assert loaded == result
    assert loaded.graph_breaks[0].location.line == result.graph_breaks[0].location.line
    # the `torchfuse report` command renders it
    from torchfuse.cli import main

    assert main(["report", path, "-o", str(tmp_path / "report.html")]) == 0
    html = (tmp_path / "report.html").read_text()
    assert "<svg" in html and "tf_red_" in html and "aten.cumsum.default" in html
    # -o naming a folder puts the page in it, named after the result
    (tmp_path / "pages").mkdir()
    assert main(["report", path, "-o", str(tmp_path / "pages")]) == 0
    assert (tmp_path / "pages" / "result.html").read_text() == html


def test_report_command_rejects_bad_input(tmp_path, capsys):
    from torchfuse.cli import main

    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    assert main(["report", str(bad)]) == 2
    assert "cannot read" in capsys.readouterr().err
    good = ExplainResult()
    good.save(str(tmp_path / "empty.json"))
    assert main(["report", str(tmp_path / "empty.json"), "-o", str(tmp_path / "empty.json" / "page.html")]) == 2
    assert "cannot write" in capsys.readouterr().err


# -- logs


def test_log_topics_from_the_environment(monkeypatch):
    monkeypatch.setenv("TORCHFUSE_LOGS", "fusion, cache")
    assert log_topics_from_env() == {"fusion", "cache"}
    monkeypatch.setenv("TORCHFUSE_LOGS", "all")
    assert log_topics_from_env() == set(LOG_TOPICS)
    monkeypatch.delenv("TORCHFUSE_LOGS")
    assert log_topics_from_env() == frozenset()
    monkeypatch.setenv("TORCHFUSE_LOGS", "fusion,fuson")
    with pytest.warns(UserWarning, match="unknown topic.*fuson"):
        assert log_topics_from_env() == {"fusion"}


_ROOT_LOGGING_SCRIPT = """
import logging, torch, torchfuse
logging.basicConfig(level=logging.DEBUG, format="ROOT %(name)s %(message)s")
f = torchfuse.compile(lambda x: (x * 2).relu().sum(), interpret=True, cache_dir=None)
f(torch.randn(8))
"""


@pytest.mark.parametrize("topics", ["", "fusion"])
def test_an_application_logging_at_debug_sees_only_the_chosen_topics_once(topics):
    """An application that configures the root logger at DEBUG (as training scripts often do)
    does not receive torchfuse's INFO records unless ``TORCHFUSE_LOGS`` chooses them, and a
    chosen topic's records print once (its own handler), not again through the root's."""
    env = dict(os.environ, TORCHFUSE_LOGS=topics, TORCHFUSE_INTERPRET="1", TRITON_INTERPRET="1")
    done = subprocess.run([sys.executable, "-c", _ROOT_LOGGING_SCRIPT], capture_output=True, text=True,
                          env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stderr.splitlines()
    assert not [l for l in lines if l.startswith("ROOT torchfuse")], lines
    fusion = [l for l in lines if l.startswith("[torchfuse.fusion] ")]
    if topics:
        assert any("fusion group" in l for l in fusion), lines
        assert len(fusion) == len(set(fusion)), fusion
    else:
        assert not fusion, fusion


def test_logging_topics_produce_records(caplog, topic_logs, tmp_path):
    topic_logs("fusion", "schedule")

    def f(x, idx):
        return torch.cumsum(x * 2, 0)[idx].relu()

    x = torch.randn(10, device=DEVICE)
    idx = torch.tensor([1, 3], device=DEVICE)
    torchfuse.compile(f, cache_dir=str(tmp_path))(x, idx)
    by_logger = {}
    for r in caplog.records:
        by_logger.setdefault(r.name, []).append(r.getMessage())
    assert any("on ATen" in m and "cumsum" in m for m in by_logger["torchfuse.fusion"])
    assert any("fusion groups" in m for m in by_logger["torchfuse.fusion"])
    assert any("pointwise" in m for m in by_logger["torchfuse.schedule"])
    # the launch configuration itself, not a layout's repr
    assert any(re.search(r"pointwise over \d+ elements: grid=\(\d+,\) XBLOCK=\d+ RBLOCK=1 warps=\d+", m)
               for m in by_logger["torchfuse.schedule"]), by_logger["torchfuse.schedule"]
    assert "torchfuse.cache" not in by_logger and "torchfuse.recompile" not in by_logger
    handler = next(h for h in logging.getLogger("torchfuse.fusion").handlers if getattr(h, "_torchfuse", False))
    assert handler.format(caplog.records[0]).startswith("[torchfuse.fusion] ")


def test_fusion_log_counts_views_apart_from_aten_calls(caplog, topic_logs):
    """The ``fusion`` log's line per graph counts fusion groups and ATen calls as explain's
    graph line does: views (ops whose schema returns an alias of an input: they launch
    nothing) counted apart; its per-op lines add up to the same ATen calls."""
    import operator

    topic_logs("fusion")

    def f(x, w):
        h = (x @ w).t()
        return torch.cumsum(h.relu(), 0)[1:] * 2

    x, w = torch.randn(4, 8, device=DEVICE), torch.randn(8, 6, device=DEVICE)
    before = {id(c) for c in backend.RECENT}
    with caplog.at_level(logging.INFO, logger="torchfuse.fusion"):
        result = torchfuse.explain(f, x, w, verbose=False)
    (compiled,) = [c for c in backend.RECENT if id(c) not in before]
    calls = [n for n in compiled.segmentation.calls if n.target is not operator.getitem]
    views = sum(bool(getattr(n.target, "is_view", False)) for n in calls)
    work = len(calls) - views
    assert views and work, [str(n.target) for n in calls]
    counts = re.compile(r"(\d+) fusion groups?, (\d+) ATen calls?(?: \(and (\d+) that moves? no data\))?")
    expected = (len(compiled.segmentation.groups), work, views)
    messages = [r.getMessage() for r in caplog.records if r.name == "torchfuse.fusion"]
    (line,) = [m for m in messages if m.startswith("inference: ") and counts.search(m)]
    assert tuple(int(n or 0) for n in counts.search(line).groups()) == expected, line
    (graph_line,) = [l for l in result.summary().splitlines() if l.startswith("graph 0: ")]
    assert tuple(int(n or 0) for n in counts.search(graph_line).groups()) == expected, graph_line
    per_op = [int(m.group(1)) for m in map(re.compile(r"inference: (\d+) x \S+ on ATen").match, messages) if m]
    assert sum(per_op) == work, messages


def test_cache_topic_logs_misses_then_hits(caplog, topic_logs, tmp_path):
    topic_logs("cache")

    def f(x):
        return (x * 3).sin() + 1.5

    x = torch.randn(12, device=DEVICE)
    torchfuse.compile(f, cache_dir=str(tmp_path))(x)
    messages = [r.getMessage() for r in caplog.records if r.name == "torchfuse.cache"]
    assert messages and all(m.startswith(("kernel cache miss", "kernel cache hit", "graph cache miss")) for m in messages)
    assert any(m.startswith("graph cache miss") and "no entry for this graph's code" in m for m in messages), messages


def test_recompilation_of_a_torch_module_names_the_users_frame(caplog, topic_logs):
    """TorchDynamo compiles a ``torch.nn`` container through a wrapper of its own (in
    ``torch/_dynamo/external_utils.py``); its recompilation is placed at the user's line that
    made the call, in the explain result and in the ``recompile`` log alike."""
    topic_logs("recompile")
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU()).to(DEVICE)
    x, wider = torch.randn(2, 8, device=DEVICE), torch.randn(3, 8, device=DEVICE)
    with caplog.at_level(logging.INFO, logger="torchfuse.recompile"):
        result = torchfuse.explain(model, x, more_inputs=[(wider,)], verbose=False)  # the call that recompiles
    place = f"({__file__}:{_line_of('the call that recompiles')})"
    (dynamo,) = [r for r in result.recompilations if r.source == "dynamo"]
    assert dynamo.where.endswith(place) and "size mismatch" in dynamo.reason, dynamo
    assert f"[dynamo] {dynamo.where}: " in result.summary()
    logged = [r.getMessage() for r in caplog.records if r.getMessage().startswith("TorchDynamo compiles")]
    assert len(logged) == 1 and place in logged[0], logged
    torch_dir = os.path.dirname(torch.__file__)
    assert torch_dir not in dynamo.where and torch_dir not in logged[0], (dynamo.where, logged)


# -- profiler names


def test_kernel_launches_are_named_in_profiler_traces():
    def f(x):
        return torch.tanh(x) * x - 1

    x = torch.randn(64, device=DEVICE)
    g = torchfuse.compile(f)
    g(x)  # compile outside the profile
    kernel = backend.RECENT[-1].segmentation.groups[0]
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        g(x)
    names = {e.name for e in prof.events()}
    launched = [n for n in names if n.startswith("tf_pw_")]
    assert launched == ["tf_pw_tanh_mul_sub"], names
    assert kernel.name.endswith("tanh_mul_sub")


# -- reproducers


def _run_reproducer(path: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, TORCHFUSE_INTERPRET="1", TRITON_INTERPRET="1", TORCHFUSE_DISABLE_CACHE="1")
    return subprocess.run([sys.executable, path, "--device", "cpu"], capture_output=True, text=True, env=env,
                          timeout=240)


def test_kernel_failure_writes_a_reproducer_that_runs(monkeypatch, tmp_path):
    import torchfuse.runtime.group as group_runtime

    def broken(group, *args, **kwargs):
        raise ValueError("codegen failure forced by the test")

    monkeypatch.setattr(group_runtime, "generate", broken)

    def f(x, w):
        return torch.nn.functional.softmax(x @ w, dim=-1) * 2

    x, w = torch.randn(4, 8, device=DEVICE), torch.randn(8, 8, device=DEVICE)
    with pytest.warns(RuntimeWarning, match="could not be compiled.*reproducer: ") as caught:
        # (no cache: a graph cache entry would serve the kernel the test makes fail)
        result = torchfuse.explain(f, x, w, verbose=False, dump_dir=str(tmp_path), cache_dir=None)
    message = next(str(w.message) for w in caught if "reproducer: " in str(w.message))
    path = message.split("reproducer: ")[1].strip()
    assert os.path.isfile(path) and path.startswith(str(tmp_path / "reproducers"))
    # the explain result records the failure, the fallback ops and the reproducer
    (group,) = result.groups
    assert group.failed.startswith("ValueError: codegen failure forced") and group.reproducer == path
    assert result.fallbacks == 1 and any(path in w for w in result.warnings)
    fallbacks = [c for c in result.aten_calls if c.category == "fallback"]
    assert {c.op for c in fallbacks} >= {"aten.amax.default", "aten.exp.default"}
    assert all("codegen failure forced" in c.reason for c in fallbacks)
    text = open(path).read()
    assert "codegen failure forced by the test" in text and "torch.ops.aten.mm.default" in text
    # a fresh interpreter rebuilds the graph, runs it through torchfuse and compares with eager
    run = _run_reproducer(path)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "no failure reproduced: 1 fusion groups ran and matched eager" in run.stdout


def test_a_reproducer_tells_rounding_from_a_wrong_value(tmp_path):
    """A reproducer's comparison with eager is against a float64 reference, as the model tests
    judge: a sum in another order (several ulps of a result with cancellation) passes, where
    ``assert_close``'s default tolerance failed the reproducer of a fixed failure; a wrong
    value or a NaN where eager has none fails."""
    import importlib.util

    from torchfuse.report.reproducer import input_spec, reproducer_text

    gm = torch.fx.symbolic_trace(lambda x: x.sum(0))
    path = tmp_path / "reproducer_under_test.py"
    path.write_text(reproducer_text(gm, [input_spec(torch.randn(4, 3))], "check", "a test"))
    spec = importlib.util.spec_from_file_location("reproducer_under_test", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    terms = torch.tensor([[1e4, -1e4 + 0.5, 3.25], [-0.125, 1e4, 0.0]], dtype=torch.float64)
    exact = terms.sum(0, keepdim=True)
    eager = terms.float().sum(0, keepdim=True)
    other_order = terms.float().flip(0).sum(0, keepdim=True) + torch.tensor([[0.0, 2 ** -9, 0.0]])
    module.check_output(0, other_order, eager, exact)
    with pytest.raises(AssertionError, match="output 0: error against float64"):
        module.check_output(0, eager * 1.01, eager, exact)
    with pytest.raises(AssertionError, match="NaN"):
        module.check_output(0, torch.where(eager > 1, float("nan"), eager), eager, exact)


def test_a_graph_taking_a_data_dependent_size_compiles_without_a_deprecation_warning():
    """Training on ``x[mask]`` (the backward graph takes the data-dependent row count as an
    input): recording the inputs for a reproducer takes that size's hint without PyTorch's
    ``size_hint`` FutureWarning reaching the program, and values and gradients equal eager's."""
    from conftest import data_dependent_capture

    def f(x):
        y = x[x > 0]
        return (y * y.shape[0]).tanh()

    x = torch.randn(6, 5, device=DEVICE)
    with data_dependent_capture() as caught:
        compiled = torchfuse.compile(f)
        for data in (x, -x.abs(), x.abs() + 1):
            a, b = data.clone().requires_grad_(), data.clone().requires_grad_()
            got, want = compiled(a), f(b)
            torch.testing.assert_close(got, want)
            got.sum().backward()
            want.sum().backward()
            torch.testing.assert_close(a.grad, b.grad)
    assert not [w for w in caught if issubclass(w.category, FutureWarning) and "torchfuse" in w.filename], \
        [str(w.message) for w in caught]


def test_graph_failure_writes_a_reproducer(monkeypatch, tmp_path):
    import torchfuse.segment

    def broken(graph, options, stored=None):
        raise AssertionError("segmentation failure forced by the test")

    monkeypatch.setattr(torchfuse.segment, "segment", broken)

    def f(x):
        return (x.exp() + 1).sum(0)

    x = torch.randn(3, 5, device=DEVICE)
    with pytest.warns(RuntimeWarning, match="could not compile inference graph.*reproducer: "):
        result = torchfuse.explain(f, x, verbose=False, dump_dir=str(tmp_path))
    (graph,) = result.graphs
    assert graph.status == "compile failed" and "segmentation failure forced" in graph.error
    assert os.path.isfile(graph.reproducer)
    assert {c.op for c in graph.aten_calls} == {"aten.exp.default", "aten.add.Tensor", "aten.sum.dim_IntList"}
    assert all(c.category == "fallback" for c in graph.aten_calls)
    text = open(graph.reproducer).read()
    compile(text, graph.reproducer, "exec")  # a valid script
    assert "('tensor', (3, 5), (5, 1), 'float32'," in text


def test_explain_lists_the_rewrites_of_the_captured_graph():
    """A training graph whose half-precision convolutions run channels-last (on for CUDA,
    forced here on the test's device) says so per graph; a graph with nothing rewritten has
    no such line."""
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.ReLU(), torch.nn.Conv2d(4, 4, 3)).to(DEVICE, torch.bfloat16)
    x = torch.randn(2, 3, 10, 10, device=DEVICE, dtype=torch.bfloat16, requires_grad=True)
    result = torchfuse.explain(model, x, verbose=False, tuning=f"graph_passes.channels_last_devices={DEVICE}")
    assert result.captures[0].rewrites == {"channels_last_convolutions": 2}, result.captures[0].rewrites
    assert ("graph rewrites of this capture (before and after AOTAutograd): channels_last_convolutions x2"
            in result.summary())
    again = type(result).from_dict(result.to_dict())
    assert again.captures[0].rewrites == {"channels_last_convolutions": 2}
    plain = torchfuse.explain(lambda a: a * 2, torch.randn(4, device=DEVICE), verbose=False)
    assert plain.captures[0].rewrites == {} and "graph rewrites of this capture" not in plain.summary()


def test_batch_norm_buffer_writes_are_state_updates():
    """Training-mode BatchNorm's writes to its running statistics and batch counter are calls
    of ``copy_`` in the forward graph; explain files them as state updates, not as ops torchfuse
    cannot fuse, and the buffers end as eager's."""
    import copy

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.BatchNorm2d(8), torch.nn.ReLU()).to(DEVICE)
    reference = copy.deepcopy(model)
    x = torch.randn(2, 3, 10, 10, device=DEVICE)
    result = torchfuse.explain(model, x, backward=True, verbose=False)
    reference(x).sum().backward()
    writes = [c for g in result.graphs for c in g.aten_calls if c.op == "aten.copy_.default"]
    assert len(writes) == 3 and all(c.category == "state" for c in writes), [(c.op, c.category) for c in writes]
    assert "state update (by design)" in result.summary()
    # one capture compiled as a forward and a backward graph, both listed: the header says so
    assert [g.name for g in result.graphs] == ["forward", "backward"]
    assert result.summary().startswith(
        "torchfuse explain: 1 graph captured by TorchDynamo (compiled as 2: forward, backward), ")
    for (name, a), b in zip(model.named_buffers(), reference.buffers()):
        torch.testing.assert_close(a, b, msg=name)


def test_a_backward_compiled_ahead_and_never_run_is_marked_not_run():
    """Without ``backward=True``, a new batch size's capture still has a backward graph
    (AOTAutograd compiles it ahead of time for dynamic sizes) that never ran: the summary says
    so for that graph alone (its groups have no kernel), and with ``backward=True`` it runs."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.LayerNorm(32)).to(DEVICE)
    for backward in (False, True):
        result = torchfuse.explain(model, torch.randn(3, 16, device=DEVICE), backward=backward, verbose=False,
                                   more_inputs=[(torch.randn(5, 16, device=DEVICE),)])
        idle = [g for g in result.graphs if g.name == "backward" and not any(grp.kernel for grp in g.groups)]
        assert len(idle) == (0 if backward else 1), [(g.name, [grp.kernel for grp in g.groups]) for g in result.graphs]
        assert result.summary().count("not run: compiled ahead of its first backward") == len(idle)


def test_explain_runs_the_backward_of_every_call_and_names_its_capture(tmp_path):
    """With ``backward=True`` and ``more_inputs`` of a new batch size, each call's backward runs
    (the gradients are eager's for both calls), so every backward graph listed ran its kernels;
    each backward graph carries its forward's capture (not -1), whether AOTAutograd compiled it
    with the capture or at its first backward, and the text, the HTML and a saved copy name it."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.LayerNorm(16),
                                torch.nn.Linear(16, 8)).to(DEVICE)
    reference = copy.deepcopy(model)
    inputs = {3: torch.randn(3, 8, device=DEVICE), 5: torch.randn(5, 8, device=DEVICE)}  # batch -> input
    result = torchfuse.explain(model, inputs[3], backward=True, more_inputs=[(inputs[5],)], verbose=False)
    for x in inputs.values():
        reference(x).sum().backward()
    for a, b in zip(model.parameters(), reference.parameters()):
        torch.testing.assert_close(a.grad, b.grad)
    backwards = [g for g in result.graphs if g.name == "backward"]
    assert len(backwards) == len(result.captures) == 2, str(result)
    text = result.summary()
    page = open(result.write_html(str(tmp_path / "r.html")), encoding="utf-8").read()
    loaded = ExplainResult.load(result.save(str(tmp_path / "r.json")))
    assert loaded == result and loaded.summary() == text
    assert f"the 2 calls took {result.seconds:.2f} s" in text
    for g in backwards:
        # every group ran: a kernel, a launch plan, a kernel compiled or found in the cache
        assert g.status == "fused" and g.groups, str(result)
        assert all(grp.kernel and grp.plans for grp in g.groups), str(result)
        assert g.kernels_compiled + g.kernels_cached == len(g.groups), str(result)
        # its capture is its forward's: the capture lists both, and the batch sizes agree
        assert 0 <= g.capture < len(result.captures), str(result)
        capture = result.captures[g.capture]
        assert g.index in capture.graphs, str(result)
        forward = [result.graphs[i] for i in capture.graphs if result.graphs[i].name == "forward"]
        assert len(forward) == 1, str(result)
        batch = next(b for b in inputs if any(b in s for grp in forward[0].groups for p in grp.plans
                                                  for s in p.input_shapes))
        other = next(b for b in inputs if b != batch)
        shapes = [s for grp in g.groups for p in grp.plans for s in p.input_shapes]
        assert any(batch in s for s in shapes) and not any(other in s for s in shapes), (batch, shapes)
        line = next(l for l in text.splitlines() if l.startswith(f"graph {g.index}: backward"))
        # (a Sequential of torch's modules: no line of the user's and no enclosing submodule to name)
        assert f"(capture {g.capture}, " in line and "compiled at the first backward" not in line, line
        assert ("compiled at its first backward" in line) == g.at_first_backward, line
        section = page.split(f'<section id="graph-{g.index}">')[1].split("</section>")[0]
        assert f"from capture {g.capture}, " in section, section[:300]
    assert {g.capture for g in backwards} == {0, 1}
    # the first capture (static sizes) gets its backward at the first backward; its compile
    # time lies outside the capture's backend call and still counts
    late = [g for g in backwards if g.at_first_backward]
    assert late, str(result)
    assert result.compile_seconds() >= sum(c.seconds for c in result.captures) + sum(g.compile_seconds for g in late)


class TiedHead(torch.nn.Module):
    """An embedding whose weight is also the output projection's: the backward graph computes
    the projection's weight gradient early and adds the embedding's to it at its end."""

    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(10, 8)
        self.norm = torch.nn.LayerNorm(8)

    def forward(self, idx):
        return torch.tanh(self.norm(self.emb(idx)) @ self.emb.weight.t())


def test_backward_groups_are_numbered_and_listed_in_execution_order(monkeypatch):
    """Each graph's fusion groups are listed, and numbered 0, 1, 2 ..., in the order their
    kernels ran, backward graphs included (the tied weight's gradient sum is built from a
    value the backward computes first but runs last)."""
    from torchfuse.runtime.executor import GroupRunner

    ran = []  # group names in the order the graphs ran them
    call = GroupRunner.__call__

    def recording(self, *args, **kwargs):
        ran.append(self.group.name)
        return call(self, *args, **kwargs)

    monkeypatch.setattr(GroupRunner, "__call__", recording)
    torch.manual_seed(0)
    model = TiedHead().to(DEVICE)
    result = torchfuse.explain(model, torch.randint(0, 10, (4, 6), device=DEVICE), backward=True, verbose=False)
    assert [g.name for g in result.graphs] == ["forward", "backward"], str(result)
    assert [grp.name for g in result.graphs for grp in g.groups] == ran, (ran, str(result))
    text = result.summary().splitlines()
    for g in result.graphs:
        start = text.index(next(line for line in text if line.startswith(f"graph {g.index}: ")))
        end = next(i for i in range(start + 1, len(text)) if text[i].startswith(("graph ", "recompilations:")))
        printed = [int(m.group(1)) for line in text[start:end] if (m := re.match(r" {4}group (\d+) ", line))]
        assert printed == list(range(len(g.groups))) and len(printed) >= 2, (g.name, printed)


def test_explain_says_when_nothing_was_captured():
    """A call TorchDynamo runs wholly in eager produces no graph (this PyTorch skips the frame
    of a BatchNorm with ``momentum=None``, which reads its batch counter with ``.item()``): the
    summary says so, instead of only counting zero graphs and zero graph breaks; when graphs
    are captured it does not. Outputs are eager's either way."""
    import copy

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4, momentum=None)).to(DEVICE)
    reference = copy.deepcopy(model)
    x = torch.randn(2, 3, 8, 8, device=DEVICE)
    result = torchfuse.explain(model, x, verbose=False)
    assert ("nothing was captured" in result.summary()) == (not result.captures)
    torch.testing.assert_close(model(x), reference(x))
    plain = torchfuse.explain(torch.nn.ReLU(), x, verbose=False)
    assert plain.captures and "nothing was captured" not in plain.summary()


def test_aten_lines_name_every_source_of_a_counted_op():
    """An op left on ATen several times is one summary line with a count; the line names each
    distinct module it came from, not only the first."""
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.ReLU(), torch.nn.Conv2d(8, 8, 3),
                                torch.nn.ReLU()).to(DEVICE)
    x = torch.randn(2, 3, 10, 10, device=DEVICE)
    result = torchfuse.explain(model, x, verbose=False)
    torch.testing.assert_close(torchfuse.compile(model)(x), model(x))
    line = next(l for l in result.summary().splitlines() if "aten.convolution.default x2" in l)
    assert "model[0] (Conv2d)" in line and "model[2] (Conv2d)" in line, line


def test_graph_with_fusion_switched_off_is_not_called_nothing_to_fuse():
    """``fuse=False`` leaves fusible ops on ATen: the summary says that fuse=False is why (not
    the device), keeps the matrix product's own reason, and a graph of a matrix product alone
    still has nothing to fuse."""
    gelu = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.GELU()).to(DEVICE)
    x = torch.randn(4, 16, device=DEVICE)
    off = torchfuse.explain(gelu, x, fuse=False)
    assert [g.status for g in off.graphs] == ["not fused: fuse=False"], str(off)
    text = str(off)
    assert "not fused: fuse=False" in text and "interpret" not in text.split("\n")[1], text
    assert "aten.addmm.default  [vendor library (by design)]" in text, text
    on = torchfuse.explain(gelu, x)
    assert [g.status for g in on.graphs] == ["fused"], str(on)
    mm = torchfuse.explain(lambda a, b: a @ b, x, torch.randn(16, 8, device=DEVICE))
    assert [g.status for g in mm.graphs] == ["nothing to fuse"], str(mm)


def test_an_unfused_graph_under_cuda_graphs_is_not_called_fused():
    """Under ``mode="reduce-overhead"`` an inference graph keeps its runtime even with no fusion
    group (to replay it as a CUDA graph); fusion switched off still reads as not fused."""
    gelu = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.GELU()).to(DEVICE).eval()
    x = torch.randn(4, 16, device=DEVICE)
    with torch.no_grad():
        off = torchfuse.explain(gelu, x, fuse=False, mode="reduce-overhead")
    assert [g.status for g in off.graphs] == ["not fused: fuse=False"], str(off)


def test_explain_lists_aten_views_as_views():
    """An ATen call that returns a view (``select``, ``unbind``), which the registry has no
    entry for, is listed as a view (no data moves), not as unsupported; values are eager's."""
    def f(x):
        a, b = x.unbind(1)[:2]
        return torch.relu(x[:, 2]) + x.select(1, 1) * a - b

    x = torch.randn(4, 3, device=DEVICE)
    torch._dynamo.reset()
    result = torchfuse.explain(f, x)
    views = {c.op: c for c in result.aten_calls if "select" in c.op or "unbind" in c.op}
    assert views and all(c.category == "view" for c in views.values()), [(c.op, c.category) for c in views.values()]
    # the headline counts them apart from the ATen calls that move data
    idle = sum(c.category in ("view", "constant") for c in result.aten_calls)
    assert f"{len(result.aten_calls) - idle} op(s) on ATen (and {idle} that move(s) no data)" in result.summary(), \
        result.summary().splitlines()[0]
    # and the graph's own line counts them the same way (one graph here)
    assert f"{len(result.aten_calls) - idle} ATen calls (and {idle} that move no data)" in result.summary(), \
        result.summary()
    torch.testing.assert_close(torchfuse.compile(f, dynamic=False)(x), f(x))


def test_arithmetic_on_sizes_and_views_of_unfused_graphs_move_no_data():
    """Arithmetic on symbolic sizes (the quotient of a size in a graph traced with dynamic
    sizes) and the views of a graph left unfused (CPU tensors without interpret) are listed as
    moving no data, not as ATen ops torchfuse could not fuse; values are eager's."""
    def f(x):
        return x.sum(-1) / x.shape[-1] + x.numel() / 3

    torch._dynamo.reset()
    result = torchfuse.explain(f, torch.randn(4, 8, device=DEVICE), more_inputs=[(torch.randn(6, 10, device=DEVICE),)],
                               verbose=False)
    sizes = [c for c in result.aten_calls if c.op in ("mul", "truediv")]
    assert sizes and all(c.category == "shape" for c in sizes), [(c.op, c.category) for c in result.aten_calls]
    assert not [c for c in result.aten_work if c.op in ("mul", "truediv")]
    assert "no data moved: " in result.summary()
    if DEVICE == "cpu":
        model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.GELU())
        plain = torchfuse.explain(model, torch.randn(4, 8), verbose=False, interpret=False)
        views = [c for c in plain.aten_calls if c.op in ("aten.permute.default", "aten.t.default", "aten.view.default")]
        assert views and all(c.category == "view" for c in views), [(c.op, c.category) for c in plain.aten_calls]
    x = torch.randn(5, 12, device=DEVICE)
    torch.testing.assert_close(torchfuse.compile(f)(x), f(x))


def test_recaptures_for_a_new_batch_size_are_labelled_recompilations(explained, tmp_path):
    """The second batch size makes TorchDynamo capture both frames of the graph break again:
    each new capture names the first capture of its frame, the header counts them, and a saved
    result keeps the labels."""
    result, _ = explained
    assert [c.recompiles for c in result.captures] == [None, None, 0, 1]
    # TorchDynamo's ids: the recaptures are their frames' second compiles, named as the guard
    # failures name the first ones
    ids = [c.dynamo_id for c in result.captures]
    assert [i.split("/")[1] for i in ids] == ["0", "0", "1", "1"] and ids[2][0] == ids[0][0], ids
    for r in result.recompilations:
        if r.source == "dynamo":
            assert r.reason.startswith("the guards of TorchDynamo compile ") and r.reason.split()[5] in ids[:2], r
    text = result.summary()
    assert "4 graphs captured by TorchDynamo (2 of them recompilations for new inputs)" in text
    for g in result.graphs:
        first = result.captures[g.capture].recompiles
        label = f"(capture {g.capture} at"
        assert label in text
        assert (f", a recompilation of capture {first})" in text) == (first is not None)
        assert f", TorchDynamo compile {result.captures[g.capture].dynamo_id}" in text
    assert ExplainResult.load(result.save(str(tmp_path / "r.json"))).captures == result.captures


def test_module_paths_read_as_python_indexes_them():
    """An op's module is named as Python reaches it: numbered children of containers indexed,
    a compiled ``nn.Sequential``'s own children as ``model[i]``."""
    from torchfuse.report.collect import module_of

    linear = torch.nn.Linear
    assert module_of({"a": ("L['self'].layers.0.attn", linear)}) == "layers[0].attn (Linear)"
    assert module_of({"a": ("L['self'].0", linear)}) == "model[0] (Linear)"
    assert module_of({"a": ("L['self'].blocks.1.2", linear)}) == "blocks[1][2] (Linear)"
    assert module_of({"a": ("L['self']", linear)}) == "(root) (Linear)"


def _padded(x):
    return torch.nn.functional.pad(torch.relu(x) * 2, (1, 1), mode="reflect") + 1


def test_ops_from_pytorchs_own_python_are_credited_to_the_users_line():
    """``F.pad``'s reflect mode is Python inside PyTorch; the groups and ATen calls it makes
    are located at the user's call of it, not at PyTorch's lines."""
    x = torch.randn(4, 8, device=DEVICE)
    result = torchfuse.explain(_padded, x, verbose=False)
    torch.testing.assert_close(torchfuse.compile(_padded)(x), _padded(x))
    locations = [loc for g in result.graphs for grp in g.groups for loc in grp.locations]
    locations += [c.location for g in result.graphs for c in g.aten_calls if c.location is not None]
    assert locations and all(loc.file == __file__ for loc in locations), locations


def test_a_capture_of_a_library_module_names_no_empty_place():
    # torch.nn.Sequential's forward is torch's own code and the capture is the whole module:
    # neither a user's line nor an enclosing submodule is known
    torch._dynamo.reset()
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.GELU())
    result = torchfuse.explain(model, torch.randn(4, 8), verbose=False)
    assert "(capture 0, TorchDynamo compile" in result.summary()
    assert " at ," not in result.summary() and " at )" not in result.summary()


class _KeywordModel(torch.nn.Module):
    """Called with keyword arguments, as HuggingFace models are (``input_ids=...``)."""

    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(50, 8)
        self.norm = torch.nn.LayerNorm(8)

    def forward(self, input_ids, attention_mask=None):
        h = self.norm(self.embed(input_ids))
        return h * attention_mask[..., None] if attention_mask is not None else h


def test_explain_takes_keyword_inputs():
    """``example_kwargs`` are the first call's keyword arguments, and a dict in ``more_inputs``
    is a later call's (here of other sizes: a second capture)."""
    torch._dynamo.reset()
    torch.manual_seed(0)
    model = _KeywordModel().to(DEVICE)
    first = {"input_ids": torch.randint(0, 50, (2, 5), device=DEVICE),
             "attention_mask": torch.ones(2, 5, device=DEVICE)}
    later = {"input_ids": torch.randint(0, 50, (3, 7), device=DEVICE),
             "attention_mask": torch.zeros(3, 7, device=DEVICE)}
    result = torchfuse.explain(model, example_kwargs=first, more_inputs=[later], verbose=False)
    assert result.calls == 2 and len(result.captures) == 2, str(result)
    assert all(g.groups for g in result.graphs), str(result)
    with pytest.raises(TypeError, match="keyword dicts"):
        torchfuse.explain(model, example_kwargs=first, more_inputs=[later["input_ids"]], verbose=False)


def test_a_fused_function_run_outside_the_graph_is_a_listed_break():
    """A ``@fused`` function first called inside a compiled function (no trace for its
    signature yet) runs outside the compiled graph. TorchDynamo lists no break when the call
    is its frame's first op, and names torchfuse's own code when it is not; explain lists the
    break at the user's line either way, with why."""
    from torchfuse.fusion import fused

    def scaled_gelu(x, b):
        y = torch.nn.functional.gelu(x + b)
        if x.shape[-1] > 32:
            y = y * 2
        return y

    first_fn, later_fn = (fused(scaled_gelu, interpret=DEVICE == "cpu") for _ in range(2))
    x, b = torch.randn(4, 64, device=DEVICE), torch.randn(64, device=DEVICE)
    first = lambda x, b: first_fn(x, b).mean(-1).exp()  # the break the tests look for (first)
    later = lambda x, b: later_fn(x.cos(), b).sum(-1)  # the break the tests look for (later)
    for fn, marker in ((first, "(first)"), (later, "(later)")):
        torch._dynamo.reset()
        result = torchfuse.explain(fn, x, b, verbose=False)
        breaks = [g for g in result.graph_breaks if "scaled_gelu" in g.reason]
        assert len(breaks) == 1, result.graph_breaks
        assert breaks[0].location.file == __file__, breaks[0].location
        assert breaks[0].location.line == _line_of(f"the break the tests look for {marker}"), breaks[0].location
        assert "had no trace" in breaks[0].reason
        assert not any(g.location is not None and g.location.file.endswith("trace.py") for g in result.graph_breaks)
        torch.testing.assert_close(torchfuse.compile(fn)(x, b), fn(x, b))


def test_a_frame_skipped_for_a_break_inside_a_loop_is_a_listed_break():
    """A graph break inside a loop makes TorchDynamo run the whole frame eagerly (a MoE
    layer's loop over experts with ``torch.where(mask)``): no compiled graph carries a break
    reason, and the calls it compiles alone looked like a program without breaks. Explain
    lists the skipped frame at its ``def`` line, with the break that caused it."""
    class Experts(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = torch.nn.ModuleList(torch.nn.Linear(8, 8) for _ in range(2))

        def forward(self, x):  # the frame the tests look for
            for layer in self.layers:
                x = torch.sigmoid(layer(x)) * 2
                torch._dynamo.graph_break()
            return x

    result = torchfuse.explain(Experts().to(DEVICE), torch.randn(3, 8, device=DEVICE), verbose=False)
    skipped = [b for b in result.graph_breaks if "skipped the frame" in b.reason]
    assert len(skipped) == 1, result.graph_breaks
    assert skipped[0].reason.startswith("forward runs eagerly") and "graph_break()" in skipped[0].reason
    assert (skipped[0].location.file, skipped[0].location.line) == (__file__, _line_of("the frame the tests look for"))
    assert "1 graph break" in result.summary().splitlines()[0]


def test_random_draws_of_a_checkpointed_region_are_aten_calls_that_move_data(tmp_path):
    """Under non-reentrant checkpointing, AOTAutograd wraps dropout's draw in higher-order ops
    (``run_and_save_rng_state`` in the forward and ``run_with_rng_state`` in the backward, or
    ``graphsafe_run_with_rng_state`` in both on CUDA) that run on ATen with PyTorch's generator.
    Explain lists each as an ATen call that writes its numbers, by design; the elements of the
    forward's ``(state, numbers)`` result are not listed; the mask ``rand > p`` fuses (no
    "operand is not a tensor"), and the draw's stand-in operand moves no data."""
    import torch.utils.checkpoint

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.l1, self.l2 = torch.nn.Linear(32, 64), torch.nn.Linear(64, 32)

        def inner(self, x):
            return self.l2(torch.nn.functional.dropout(torch.nn.functional.gelu(self.l1(x)), 0.1, training=True))

        def forward(self, x):
            return torch.utils.checkpoint.checkpoint(self.inner, x, use_reentrant=False)

    torch.manual_seed(0)
    result = torchfuse.explain(Block().to(DEVICE), torch.randn(4, 16, 32, device=DEVICE), backward=True,
                               verbose=False)
    assert [g.name for g in result.graphs] == ["forward", "backward"], str(result)
    text = result.summary()
    for g in result.graphs:
        draws = [c for c in g.aten_calls if c.op.endswith("rng_state")]
        assert [c.category for c in draws] == ["rng_state"], [(c.op, c.category) for c in g.aten_calls]
        assert draws[0] in g.aten_work and draws[0] not in g.idle_calls
        assert not [c for c in g.aten_calls if "getitem" in c.op or "gt" in c.op or c.category == "unsupported"], \
            [(c.op, c.category, c.reason) for c in g.aten_calls]
        assert [c.category for c in g.aten_calls if "empty_strided" in c.op] == ["allocation"]
        assert any("gt" in grp.ops for grp in g.groups), [grp.ops for grp in g.groups]
        line = next(l for l in text.splitlines() if l.strip().startswith(draws[0].op + "  ["))
        assert "random draw of a checkpointed region, by design" in line, line
        # the draws and the matrix products are the graph's ATen calls; the rest moves no data
        products = [c for c in g.aten_calls if c.category == "library"]
        assert len(g.aten_work) == len(products) + 1, [(c.op, c.category) for c in g.aten_work]
        assert f"{len(g.aten_work)} ATen calls (and {len(g.idle_calls)} that move no data)" in text
    assert "not a tensor" not in text and "not in the op registry" not in text, text
    assert len(result.graphs[0].groups) == 1, text  # the GELU, the mask and its scale
    loaded = ExplainResult.load(result.save(str(tmp_path / "r.json")))
    assert loaded.summary() == text


def test_an_already_compiled_model_is_explained_unwrapped_with_a_warning():
    """``explain(torch.compile(model, ...), x)`` would describe explain's own compile of the
    wrapper, not the wrapper's: the model inside is explained, with a warning and a note, and
    its locations name the model's modules."""
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.GELU(), torch.nn.LayerNorm(8)).to(DEVICE)
    x = torch.randn(4, 8, device=DEVICE)
    compiled = torchfuse.compile(model, fuse=False)
    with torch.no_grad(), pytest.warns(RuntimeWarning, match="already compiled with torch.compile"):
        result = torchfuse.explain(compiled, x, verbose=False)
    assert any("already compiled" in n for n in result.notes)
    assert result.groups and not any("__self__" in str(g) for g in result.groups)


def test_a_printed_summary_holds_torchfuse_warnings_once_and_other_warnings_still_reach_the_caller(capsys, monkeypatch):
    """With ``verbose=True`` torchfuse's warnings and notes are printed in the summary and not
    also raised (each appeared twice); another library's warning is still raised, and with
    ``verbose=False`` torchfuse's are raised too."""
    import warnings

    from torchfuse.runtime import cudagraphs

    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.GELU()).to(DEVICE)
    x = torch.randn(4, 8, device=DEVICE)

    def f(x):
        warnings.warn("a user warning from inside the model", UserWarning)
        return model(x)

    monkeypatch.setattr(cudagraphs, "_warned_not_cuda", [False])  # its once-per-process warning, here
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = torchfuse.explain(torchfuse.compile(f, fuse=False), x, mode="reduce-overhead")
    text = capsys.readouterr().out
    raised = [str(w.message) for w in caught]
    assert any("a user warning from inside the model" in m for m in raised), raised
    assert not any(m.startswith("torchfuse") for m in raised), raised
    assert "already compiled" in text and text.count("already compiled") == 1, text
    if DEVICE != "cuda":  # a CPU graph under reduce-overhead is warned about once, in the summary
        assert result.warnings and text.count("runs uncaptured") == 1, text
    monkeypatch.setattr(cudagraphs, "_warned_not_cuda", [False])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        quiet = torchfuse.explain(torchfuse.compile(f, fuse=False), x, mode="reduce-overhead", verbose=False)
    raised = [str(w.message) for w in caught]
    assert capsys.readouterr().out == ""
    assert any("already compiled" in m for m in raised) and len(quiet.warnings) == len(result.warnings), raised
    assert all(any(w in m for m in raised) for w in quiet.warnings), (raised, quiet.warnings)


def test_a_dump_dir_that_cannot_be_written_warns_and_the_graph_still_fuses(tmp_path):
    """``dump_dir`` naming a file: the dump is skipped with a warning naming it, and the graph
    compiles and fuses as without it (it ran unfused, blamed on AOTAutograd)."""
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("")
    fn = lambda x: (x.sin() + 1).softmax(-1)
    x = torch.randn(4, 8, device=DEVICE)
    with pytest.warns(RuntimeWarning, match="dump_dir .* cannot be written"):
        result = torchfuse.explain(fn, x, dump_dir=str(not_a_dir), verbose=False)
    assert len(result.groups) == 1 and result.graphs[0].status == "fused", result.graphs
    with pytest.warns(RuntimeWarning, match="dump_dir .* cannot be written"):
        torch.testing.assert_close(torchfuse.compile(fn, dump_dir=str(not_a_dir))(x), fn(x))


def test_a_folded_batchnorms_shift_is_attributed_to_the_batchnorm():
    """With ``freeze=True`` a BatchNorm folded into its convolution leaves a per-channel add
    (a fusion group of its own where nothing follows): it carries the BatchNorm's source, so
    explain names where it comes from."""
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4)).to(DEVICE).eval()
    with torch.no_grad():
        result = torchfuse.explain(model, torch.randn(1, 3, 8, 8, device=DEVICE), freeze=True, verbose=False)
    (group,) = result.groups
    assert any("BatchNorm2d" in (loc.module or "") for loc in group.locations), group.locations


def test_explain_takes_dynamic_and_fullgraph_as_torchfuse_compile_does():
    """``dynamic=`` and ``fullgraph=`` reach ``torch.compile`` as from :func:`torchfuse.compile`
    (they were refused as unknown options): ``dynamic=True`` compiles the first call with
    symbolic sizes, and ``fullgraph=True`` raises TorchDynamo's error at a graph break."""
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.GELU()).to(DEVICE)
    x = torch.randn(4, 8, device=DEVICE)
    with torch.no_grad():
        static = torchfuse.explain(model, x, verbose=False)
        dynamic = torchfuse.explain(model, x, verbose=False, dynamic=True)
    assert {p.sizes for g in static.graphs for grp in g.groups for p in grp.plans} == {"static"}
    assert all(p.sizes.startswith("s") for g in dynamic.graphs for grp in g.groups for p in grp.plans), str(dynamic)

    def breaks(t):
        torch._dynamo.graph_break()
        return t * 2

    with pytest.raises(torch._dynamo.exc.Unsupported):
        torchfuse.explain(breaks, x, verbose=False, fullgraph=True)
