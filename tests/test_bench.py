"""The benchmark harness, run end to end on a CPU in ``--quick`` mode (tiny models).

Each run writes a results directory; the tests check its files (run file, JSON, CSV, PNG
charts, markdown summary) and the fields of its results. The timings themselves are CPU
timings of interpreted kernels and are not checked.
"""
from __future__ import annotations

import csv
import importlib.util
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from torchfuse.bench import backends as backends_mod
from torchfuse.bench.__main__ import main
from torchfuse.bench.accuracy import FAIL, PASS, References, compare, disable_dropout, has_active_dropout
from torchfuse.bench.backends import BACKENDS, Backend, parse_backends, running_backends
from torchfuse.bench.results import Result, combine
from torchfuse.bench.suites import select, suite_cases

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
REQUIRED_FIELDS = {
    "suite", "model", "case", "size", "mode", "precision", "training", "channels_last", "device", "backend",
    "status", "error", "median_ms", "steps_timed", "speedup_vs_eager", "speedup_vs_torch_compile", "first_call_s",
    "first_call_cold_s", "first_call_warm_s", "peak_memory_mib", "kernels_per_step", "accuracy", "bytes_moved",
    "copy_fraction", "fusion_groups",
}


def run_bench(out: Path, *args: str) -> dict:
    """Run ``torchfuse bench`` on the CPU into ``out``; return ``results.json``."""
    status = main(["--quick", "--device", "cpu", "--no-progress", "--warmup", "0", "--rounds", "1", "--out", str(out),
                   *args])
    assert status == 0
    return json.loads((out / "results.json").read_text())


def by_backend(data: dict, mode: str | None = None) -> dict[str, dict]:
    return {r["backend"]: r for r in data["results"] if mode is None or r["mode"] == mode}


def check_outputs(out: Path, data: dict) -> None:
    """Every report file exists and agrees with the results."""
    assert len(list((out / "runs").glob("*.json"))) >= 1
    for r in data["results"]:
        assert REQUIRED_FIELDS <= set(r)
    run = data["runs"][-1]
    assert run["command"].startswith("python -m torchfuse.bench") and "--quick" in run["command"]
    assert run["versions"]["torch"] and run["versions"]["torchfuse"]
    assert run["device"] == "cpu" and "CPU" in run["device_label"]
    with open(out / "results.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == len(data["results"])
    assert {"backend", "median_ms", "speedup_vs_eager", "command", "torch"} <= set(rows[0])
    charts = sorted((out / "charts").glob("*.png"))
    assert charts and all(p.read_bytes()[:8] == PNG_MAGIC for p in charts)
    summary = (out / "summary.md").read_text()
    assert "CPU" in summary
    for chart in charts:
        assert f"charts/{chart.name}" in summary


@pytest.mark.slow
def test_micro_suite_compares_backends_and_reports_bandwidth(tmp_path, capsys):
    data = run_bench(tmp_path, "--suite", "micro", "--only", "bias_gelu", "--mode", "infer-fp32",
                     "--backends", "eager,torch.compile,torchfuse,eager-cudagraphs")
    header = capsys.readouterr().err
    assert "1 case(s) x 3 backend(s)" in header and "not run here: eager-cudagraphs" in header, header
    check_outputs(tmp_path, data)
    rows = by_backend(data)
    assert set(rows) == {"eager", "torch.compile", "torchfuse", "eager-cudagraphs"}
    eager, fused = rows["eager"], rows["torchfuse"]
    assert eager["status"] == "ok" and eager["median_ms"] > 0 and eager["speedup_vs_eager"] == pytest.approx(1.0)
    assert eager["accuracy"] == "reference"
    assert fused["status"] == "ok" and fused["accuracy"] == PASS, fused
    assert fused["fusion_groups"] >= 1 and fused["first_call_s"] > 0
    assert fused["speedup_vs_eager"] == pytest.approx(eager["median_ms"] / fused["median_ms"])
    # 64x32 fp32 input, 32 bias, 64x32 output
    assert fused["bytes_moved"] == (64 * 32 + 32 + 64 * 32) * 4
    assert fused["copy_fraction"] > 0 and data["runs"][-1]["copy_gbps"] > 0
    # Inductor needs a C++ compiler on a CPU: either it ran, or its failure is recorded
    inductor = rows["torch.compile"]
    assert inductor["status"] in ("ok", "failed")
    if inductor["status"] == "failed":
        assert inductor["error"] and inductor["stage"]
    else:
        assert inductor["speedup_vs_torch_compile"] == pytest.approx(1.0)
    assert rows["eager-cudagraphs"]["status"] == "skipped" and rows["eager-cudagraphs"]["error"] == "needs CUDA"
    assert rows["eager"]["kernels_per_step"] is None  # not available on a CPU
    # interpreted kernels' fractions of a CPU copy say nothing: no bandwidth chart, and none linked
    assert not list((tmp_path / "charts").glob("*bandwidth*"))
    assert "-bandwidth.png" not in (tmp_path / "summary.md").read_text()


def test_bandwidth_chart_only_for_gpu_measurements(tmp_path):
    """A micro-suite group gets its bandwidth chart when it was measured on a GPU; the same
    rows from a CPU get none (interpreted kernels' fractions of a CPU copy are invisible bars)."""
    from torchfuse.bench.charts import has_bandwidth_chart, write_charts

    def rows(device: str) -> list[Result]:
        return [Result(run_id="r", suite="micro", model="bias_gelu", case="micro/bias_gelu/64x32", size="64x32",
                       mode="infer-fp32", precision="fp32", training=False, channels_last=False, device=device,
                       device_name=device, backend=b, median_ms=ms, bandwidth_gbps=gbps, copy_fraction=frac)
                for b, ms, gbps, frac in (("eager", 2.0, 400.0, 0.1), ("torchfuse", 1.0, 3200.0, 0.8))]

    assert has_bandwidth_chart(rows("cuda")) and not has_bandwidth_chart(rows("cpu"))
    gpu = write_charts(tmp_path / "gpu", rows("cuda"), {})
    cpu = write_charts(tmp_path / "cpu", rows("cpu"), {})
    assert [p.name for p in gpu] == ["micro-infer-fp32-cuda.png", "micro-infer-fp32-cuda-bandwidth.png"]
    assert [p.name for p in cpu] == ["micro-infer-fp32-cpu.png"]
    assert all(p.read_bytes()[:8] == PNG_MAGIC for p in gpu + cpu)


@pytest.mark.slow
def test_micro_training_checks_gradients(tmp_path):
    data = run_bench(tmp_path, "--suite", "micro", "--only", "layer_norm", "--mode", "train-fp32",
                     "--backends", "eager,torchfuse")
    check_outputs(tmp_path, data)
    fused = by_backend(data)["torchfuse"]
    assert fused["training"] and fused["status"] == "ok" and fused["accuracy"] == PASS, fused
    x, w = 64 * 32 * 4, 32 * 4
    # forward: x, weight, bias, out; backward: grad out, x, weight, bias again, grads of all three
    assert fused["bytes_moved"] == (x + 2 * w + x) + (x + x + 2 * w + x + 2 * w)


@pytest.mark.slow
def test_hf_suite_runs_a_tiny_bert(tmp_path):
    data = run_bench(tmp_path, "--suite", "hf", "--only", "bert", "--mode", "infer-fp32",
                     "--backends", "eager,torchfuse")
    check_outputs(tmp_path, data)
    rows = by_backend(data)
    assert rows["eager"]["case"] == "hf/bert/2x16" and rows["eager"]["info"]["parameters"] > 0
    assert rows["torchfuse"]["status"] == "ok" and rows["torchfuse"]["accuracy"] == PASS
    assert rows["torchfuse"]["fusion_groups"] >= 1
    assert "hf-infer-fp32-cpu.png" in {p.name for p in (tmp_path / "charts").iterdir()}


@pytest.mark.slow
def test_timm_suite_runs_channels_last(tmp_path):
    data = run_bench(tmp_path, "--suite", "timm", "--only", "resnet18", "--mode", "infer-fp32",
                     "--backends", "eager,torchfuse", "--channels-last")
    check_outputs(tmp_path, data)
    rows = by_backend(data)
    assert all(r["channels_last"] for r in rows.values())
    assert rows["torchfuse"]["status"] == "ok" and rows["torchfuse"]["accuracy"] == PASS
    assert (tmp_path / "charts" / "timm-infer-fp32-channels-last-cpu.png").exists()


@pytest.mark.slow
def test_seed_suite_records_missing_torch_geometric(tmp_path):
    data = run_bench(tmp_path, "--suite", "seed", "--only", "mil_attention,sag_pool_gnn", "--mode", "infer-fp32",
                     "--backends", "eager,torchfuse")
    check_outputs(tmp_path, data)
    mil = [r for r in data["results"] if r["model"] == "mil_attention"]
    assert {r["status"] for r in mil} == {"ok"}
    gnn = [r for r in data["results"] if r["model"] == "sag_pool_gnn"]
    assert len(gnn) == 2
    if importlib.util.find_spec("torch_geometric") is None:
        assert all(r["status"] == "skipped" and r["error"] == "torch_geometric is not installed" for r in gnn)
    else:
        assert all(r["status"] in ("ok", "failed") for r in gnn)


def test_failing_backend_is_recorded_and_the_run_goes_on(tmp_path, monkeypatch):
    def broken(module, device):
        raise RuntimeError("no kernels today")

    monkeypatch.setitem(backends_mod.BACKENDS, "broken", Backend("broken", broken))
    data = run_bench(tmp_path, "--suite", "micro", "--only", "pointwise_chain,row_sum", "--mode", "infer-fp32",
                     "--backends", "eager,broken")
    failed = [r for r in data["results"] if r["backend"] == "broken"]
    assert len(failed) == 2
    assert all(r["status"] == "failed" and r["error"] == "RuntimeError: no kernels today" for r in failed)
    assert all(r["stage"] == "prepare" and r["speedup_vs_eager"] is None for r in failed)
    assert all(r["status"] == "ok" for r in data["results"] if r["backend"] == "eager")
    summary = (tmp_path / "summary.md").read_text()
    assert "no kernels today" in summary and "FAIL" in summary


def test_wrong_results_fail_the_accuracy_check(tmp_path, monkeypatch):
    def off_by_ten_percent(module, device):
        return lambda inputs, targets: module(inputs, targets) * 1.1

    monkeypatch.setitem(backends_mod.BACKENDS, "wrong", Backend("wrong", off_by_ten_percent))
    data = run_bench(tmp_path, "--suite", "micro", "--only", "softmax", "--mode", "infer-fp32",
                     "--backends", "eager,wrong")
    wrong = by_backend(data)["wrong"]
    assert wrong["status"] == "ok" and wrong["median_ms"] > 0  # it ran and was timed
    assert wrong["accuracy"] == FAIL and "output.0" in wrong["accuracy_detail"]
    assert "acc!" in (tmp_path / "summary.md").read_text()


def test_shards_merge_into_one_report(tmp_path):
    args = ["--suite", "micro", "--only", "pointwise_chain,row_sum,column_sum", "--mode", "infer-fp32",
            "--backends", "eager", "--no-accuracy"]
    first = run_bench(tmp_path / "a", *args, "--shard", "1/2")
    second = run_bench(tmp_path / "b", *args, "--shard", "2/2")
    assert {r["model"] for r in first["results"]} == {"pointwise_chain", "column_sum"}
    assert {r["model"] for r in second["results"]} == {"row_sum"}
    assert main(["merge", str(tmp_path / "a"), str(tmp_path / "b"), "--out", str(tmp_path / "all")]) == 0
    merged = json.loads((tmp_path / "all" / "results.json").read_text())
    assert {r["model"] for r in merged["results"]} == {"pointwise_chain", "row_sum", "column_sum"}
    assert len(merged["runs"]) == 2 and len(list((tmp_path / "all" / "runs").glob("*.json"))) == 2
    assert (tmp_path / "all" / "summary.md").exists()


def test_merge_lists_as_not_run_only_what_no_run_measured(tmp_path):
    """A case one run did not reach (time budget) but another run measured is not listed as
    not run in the merged report."""
    args = ["--suite", "micro", "--only", "softmax", "--mode", "infer-fp32", "--backends", "eager", "--no-accuracy"]
    run_bench(tmp_path / "late", *args, "--time-budget", "0")
    run_bench(tmp_path / "done", *args)
    assert main(["merge", str(tmp_path / "late"), str(tmp_path / "done"), "--out", str(tmp_path / "all")]) == 0
    assert "## Not run" not in (tmp_path / "all" / "summary.md").read_text()
    assert main(["merge", str(tmp_path / "late"), "--out", str(tmp_path / "alone")]) == 0
    assert "micro/softmax/64x32 infer-fp32" in (tmp_path / "alone" / "summary.md").read_text()


def test_time_budget_lists_what_was_not_run(tmp_path):
    data = run_bench(tmp_path, "--suite", "micro", "--only", "softmax", "--backends", "eager", "--time-budget", "0")
    assert data["results"] == []
    assert sorted(data["runs"][0]["not_run"]) == ["micro/softmax/64x32 infer-fp32", "micro/softmax/64x32 train-fp32"]
    assert "## Not run" in (tmp_path / "summary.md").read_text()


def test_combine_keeps_the_newest_run_of_each_case():
    def result(run_id, case, backend, ms):
        return Result(run_id=run_id, suite="micro", model=case, case=case, size="1", mode="infer-fp32",
                      precision="fp32", training=False, channels_last=False, device="cpu", device_name="CPU",
                      backend=backend, median_ms=ms)

    old = ({"run_id": "1", "started": "2026-01-01T00:00:00"},
           [result("1", "a", "eager", 1.0), result("1", "a", "torchfuse", 2.0), result("1", "b", "eager", 3.0)])
    new = ({"run_id": "2", "started": "2026-01-02T00:00:00"}, [result("2", "a", "eager", 5.0)])
    metas, kept = combine([new, old])
    assert [m["run_id"] for m in metas] == ["1", "2"]
    assert sorted((r.case, r.backend, r.median_ms) for r in kept) == [("a", "eager", 5.0), ("b", "eager", 3.0)]


def test_selection_and_backend_parsing():
    items = [(c, "infer-fp32") for c in suite_cases("micro", quick=True)]
    names = [c.model for c, _ in select(items, ["*norm*"], None)]
    assert names == ["layer_norm", "rms_norm", "batch_norm", "group_norm", "dropout_residual_layer_norm"]
    shards = [select(items, None, (i, 3)) for i in (1, 2, 3)]
    assert sum(len(s) for s in shards) == len(items)
    assert {c.id for s in shards for c, _ in s} == {c.id for c, _ in items}
    assert parse_backends("torchfuse") == ("eager", "torchfuse")
    with pytest.raises(ValueError):
        parse_backends("eager,nope")


def test_a_torchfuse_variant_backend_compiles_with_its_settings(tmp_path):
    """``torchfuse[SETTING;...]`` is a variant of torchfuse's backend compiled with those
    settings (options and tuning fields) in the same run; a setting that does not parse, or
    one given to another compiler's backend, is refused when the backends are parsed."""
    from torchfuse.bench.backends import backend_named

    name = "torchfuse[inner_outer=False;persistent.tile_elements=2048]"
    assert parse_backends(f"torchfuse,{name}") == ("eager", "torchfuse", name)
    variant = backend_named(name)
    assert variant.name == name and variant.modules == BACKENDS["torchfuse"].modules
    ro = backend_named("torchfuse-reduce-overhead[inner_outer=False]")
    assert ro.mark_step and ro.needs_cuda and ro.compile.options == {"cudagraphs": True}
    for bad in ("torchfuse[nope=1]", "torchfuse[persistent.nope=1]", "torch.compile[inner_outer=False]",
                "torchfuse[inner_outer=False", "nope[inner_outer=False]"):
        with pytest.raises(ValueError):
            parse_backends(bad)
    compiled = variant.compile(torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.GELU()), "cpu")
    compiled(torch.randn(2, 4))
    from torchfuse import backend as tf_backend

    opts = tf_backend.RECENT[-1].options
    assert opts.inner_outer is False and opts.tuning.persistent.tile_elements == 2048 and opts.interpret
    data = run_bench(tmp_path, "--suite", "micro", "--only", "bias_gelu", "--mode", "infer-fp32",
                     "--backends", f"torchfuse,{name}")
    rows = by_backend(data)
    assert rows[name]["status"] == "ok" and rows[name]["accuracy"] == PASS, rows[name]


def test_busy_time_is_the_union_of_intervals():
    from torchfuse.bench.timing import busy_time

    assert busy_time([]) == 0
    assert busy_time([(0, 2), (1, 3), (5, 6), (5.5, 5.7)]) == 4


def test_header_counts_the_backends_that_run():
    """The run header counts backends that run here, not those skipped (CUDA-only on a CPU,
    inference-only in training runs)."""
    everything = parse_backends(None)
    assert len(everything) == len(BACKENDS) == 8
    assert running_backends(everything, "cpu", {False, True}) == ("eager", "torch.compile", "torchfuse")
    assert running_backends(everything, "cuda", {True}) == ("eager", "torch.compile",
                                                            "torch.compile-reduce-overhead", "torchfuse",
                                                            "torchfuse-reduce-overhead")
    assert running_backends(everything, "cuda", {False, True}) == everything


def test_full_suites_cover_the_announcement():
    hf = suite_cases("hf", quick=False)
    assert {"bert", "roberta", "distilbert", "albert", "gpt2", "t5", "bart", "electra"} <= {c.model for c in hf}
    sizes = {c.size for c in hf if "train-amp-fp16" in c.modes}
    assert {(64, 128), (8, 512), (2, 1024), (8, 512, 128)} <= sizes
    vision = suite_cases("timm", quick=False)
    timm_models = {c.model for c in vision if not c.model.startswith("torchvision.")}
    assert len(timm_models) >= 12 and {"resnet50", "vit_base_patch16_224", "mobilevit_s"} <= timm_models
    assert any(c.model.startswith("torchvision.") for c in vision)
    assert {c.size for c in vision if c.model == "resnet50" and "infer-fp16" in c.modes} == {(1,), (8,)}
    micro = {c.model for c in suite_cases("micro", quick=False)}
    assert {"cross_entropy", "rope", "bias_gelu", "dropout_residual_layer_norm", "column_sum"} <= micro
    assert {c.model for c in suite_cases("seed", quick=False)} == {"mil_attention", "sag_pool_gnn",
                                                                    "transformer_encoder_padded"}


def test_accuracy_uses_the_float64_rule():
    torch.manual_seed(0)
    exact = torch.randn(1000, dtype=torch.float64)
    eager = exact.float() + 1e-3 * torch.randn(1000)
    refs = References(eager=[eager], eager_deterministic=True, fp64=[exact])
    assert compare(refs, [exact.float() + 1e-3 * torch.randn(1000)], 1e-4)[0] == PASS   # as far off as eager
    status, detail = compare(refs, [exact.float() + 1e-1 * torch.randn(1000)], 1e-4)     # 100x further
    assert status == FAIL and "RMSE" in detail
    assert compare(References([eager], False, [exact]), [eager], 1e-4)[0] == "eager-nondeterministic"


def test_dropout_is_disabled_for_accuracy_runs():
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Dropout(0.1))
    model[0].attention_dropout = 0.2  # HuggingFace-style float attribute
    assert has_active_dropout(model) and not has_active_dropout(model.eval())
    disable_dropout(model.train())
    assert model[1].p == 0.0 and model[0].attention_dropout == 0.0 and not has_active_dropout(model)


@pytest.mark.slow
def test_cold_start_times_first_calls_in_fresh_processes(tmp_path):
    """``--cold-start`` runs ``python -m torchfuse.bench first-call`` twice with fresh caches."""
    data = run_bench(tmp_path, "--suite", "micro", "--only", "row_sum", "--mode", "infer-fp32",
                     "--backends", "torchfuse", "--no-accuracy", "--cold-start")
    rows = by_backend(data)
    assert rows["torchfuse"]["status"] == "ok", rows["torchfuse"]
    assert rows["torchfuse"]["first_call_cold_s"] > 0, rows["torchfuse"]["warnings"]
    assert rows["torchfuse"]["first_call_warm_s"] > 0, rows["torchfuse"]["warnings"]
    assert rows["eager"]["first_call_cold_s"] is None  # nothing to compile
    for which in ("cold", "warm"):  # the first call split into compile phases (runtime.phases)
        phases = rows["torchfuse"][f"first_call_{which}_phases"]
        assert {"dynamo", "aot_autograd", "passes", "segment", "first_launch", "total"} <= set(phases), phases
        assert phases["total"] == pytest.approx(rows["torchfuse"][f"first_call_{which}_s"], rel=0.05, abs=0.05)
    assert rows["torchfuse"]["first_call_phases"]["segment"] > 0
    # Triton's compile by stage (bench.triton_stages): nothing compiles under the interpreter
    assert rows["torchfuse"]["first_call_cold_triton"] == {}, rows["torchfuse"]


def test_module_entry_point_lists_cases():
    done = subprocess.run([sys.executable, "-m", "torchfuse.bench", "list", "--quick", "--device", "cpu",
                           "--suite", "seed"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "seed/mil_attention/2x4" in done.stdout and "seed/transformer_encoder_padded/2x8" in done.stdout


def test_negative_peak_memory_is_not_reported(tmp_path, monkeypatch):
    """When more memory allocated before a backend is freed while it runs than it allocates
    itself, the difference from the baseline is negative and is not that backend's peak: the
    row records no number and says why."""
    from torchfuse.bench import timing

    monkeypatch.setattr(timing, "allocated_bytes", lambda device: 0)
    monkeypatch.setattr(timing, "peak_above", lambda baseline, device: -12.5)
    data = run_bench(tmp_path, "--suite", "micro", "--only", "softmax", "--mode", "infer-fp32", "--backends", "eager")
    row = by_backend(data)["eager"]
    assert row["status"] == "ok" and row["peak_memory_mib"] is None
    assert "not measured" in row["info"]["peak_memory"] and "12 MiB" in row["info"]["peak_memory"]


def test_sass_count_shows_the_flushed_exp_saving_instructions(tmp_path):
    """``torchfuse bench sass`` compiles torchfuse's kernels for sm_90 on this machine (no
    GPU) and counts their instructions: log-softmax's forward row kernels have fewer with the
    flush-to-zero summed exp (``Tuning.codegen.flush_summed_exp``) than without, the first of
    them three an element fewer (bf16 rows of 1024, one row on one warp: 32 elements a
    thread). The counts printed and the rows appended agree."""
    import re

    from torchfuse.bench.rows import load_rows

    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": str(root / "src")}

    def counts(name, *extra):
        rows = tmp_path / f"{name}.jsonl"
        done = subprocess.run([sys.executable, "-m", "torchfuse.bench", "sass", "--ops", "log_softmax",
                               "--shapes", "64x1024", "--rows", str(rows), *extra], capture_output=True, text=True,
                              timeout=600, env=env, cwd=root)
        assert done.returncode == 0, done.stderr[-3000:]
        found = [(int(n), int(r)) for n, r in re.findall(r"(\d+) instructions, (\d+) registers", done.stdout)]
        assert found, done.stdout
        recorded = load_rows(rows, suite="sass")
        assert [(r.extra["instructions"], r.extra["registers"]) for r in recorded] == found
        assert all(r.case == "norms/log_softmax/64x1024" and r.precision == "bf16" for r in recorded)
        return found

    flushed = counts("flushed")
    plain = counts("plain", "--set", "codegen.flush_summed_exp=False")
    assert len(flushed) == len(plain)
    assert plain[0][0] - flushed[0][0] >= 3 * 32, (plain, flushed)
    assert all(f[0] <= p[0] for f, p in zip(flushed, plain)), (plain, flushed)


def test_sass_count_compiles_kernels_as_they_are_launched(monkeypatch):
    """``torchfuse bench sass`` records each launch with its multiply-add contraction setting
    and compiles with it: off under torchfuse's default exact rounding, on with
    ``exact_rounding=False``; a second case does not wrap the recorder twice."""
    import torchfuse
    from torchfuse.bench import sass
    from torchfuse.runtime import compile as rc

    monkeypatch.setattr(rc.Kernel, "launch", rc.Kernel.launch)  # restored after the test
    x = torch.randn(8, 64)
    for exact in (True, False, True):
        launches: list = []
        sass._record(launches)
        torch._dynamo.reset()
        torchfuse.compile(lambda t: torch.softmax(t, -1), dynamic=False, interpret=True, exact_rounding=exact)(x)
        assert launches and all(rec[-1] is (not exact) for rec in launches), launches
        spec = sass.spec_of(*launches[0][1:])
        assert spec["fp_fusion"] is (not exact)


def test_triton_stage_clock_splits_a_compile_by_stage_and_restores_triton(tmp_path):
    """:class:`~torchfuse.bench.triton_stages.TritonStageClock` times one kernel compiled for
    sm_90 on this machine (no GPU): the front end and each backend stage once, their sum within
    the compile's wall time; leaving the block restores Triton's own functions and torchfuse's
    loader. In a child
    process, with its own Triton cache: the interpreter of other tests patches Triton."""
    script = tmp_path / "clock.py"
    script.write_text(textwrap.dedent('''
        import json, time
        import triton
        import triton.language as tl
        from triton.backends.compiler import GPUTarget
        from triton.backends.nvidia.compiler import CUDABackend
        from triton.compiler.compiler import ASTSource
        from torchfuse.bench.triton_stages import TritonStageClock
        from torchfuse.runtime import compile as runtime_compile

        @triton.jit
        def scale(x, y, n, BLOCK: tl.constexpr):
            i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            tl.store(y + i, tl.load(x + i, mask=i < n) * 2.0, mask=i < n)

        originals = (ASTSource.make_ir, CUDABackend.add_stages, runtime_compile.load_cubin)
        source = ASTSource(fn=scale, signature={"x": "*fp32", "y": "*fp32", "n": "i32", "BLOCK": "constexpr"},
                           constexprs={"BLOCK": 128})
        with TritonStageClock() as clock:
            wrapped = runtime_compile.load_cubin is not originals[2]  # PyTorch's loader, timed as "load"
            start = time.perf_counter()
            triton.compile(source, target=GPUTarget("cuda", 90, 32), options={"num_warps": 4})
            wall = time.perf_counter() - start
        restored = wrapped and (ASTSource.make_ir, CUDABackend.add_stages, runtime_compile.load_cubin) == originals
        print(json.dumps({"seconds": clock.seconds, "calls": clock.calls, "wall": wall, "restored": restored}))
    '''))
    env = {k: v for k, v in os.environ.items() if k not in ("TRITON_INTERPRET", "TORCHFUSE_INTERPRET")}
    env["TRITON_CACHE_DIR"] = str(tmp_path / "triton")
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    data = json.loads(done.stdout.strip().splitlines()[-1])
    assert data["restored"]
    stages = data["seconds"]
    assert {"front_end", "ttir", "ttgir", "llir", "ptx", "cubin"} <= set(stages), stages
    assert all(data["calls"][s] == 1 for s in ("front_end", "ttir", "ttgir", "llir", "ptx", "cubin")), data["calls"]
    assert all(v > 0 for v in stages.values()), stages
    assert sum(stages.values()) <= data["wall"] + 1e-3, (stages, data["wall"])
