"""The subcommands that replaced the stand-alone benchmark scripts, on a CPU.

What can run on a CPU runs with ``--quick`` or small sizes, and its rows are checked against
values computed here: ``norms`` (the norm table, its ``--alt`` variants and ``--sweep`` sets),
``host runtime`` (the runtime's own launch time), the timer and the copy bandwidth, the
variants' overrides, the reconstruction of a launch sweep from its rows. ``sass`` runs in
``tests/test_bench.py``. The rest measure a GPU and cannot run here: ``sweep-launch``
(launches compiled kernels directly), ``profile`` (the device's kernels), ``conv-epilogue``
(cuDNN's fused convolutions) and ``host call|replay|launches`` (device launches); for those
only their refusal without a CUDA device is checked, and their GPU paths run in the named
runs on a GPU.
"""
from __future__ import annotations

import pytest
import torch

from conftest import DEVICE
from torchfuse.bench import timing
from torchfuse.bench.__main__ import main
from torchfuse.bench.rows import Provenance, load_rows

needs_no_gpu = pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal without a CUDA device")


def test_norms_rows_on_a_cpu(tmp_path):
    """The norm table's softmax and cross-entropy (rows of 64 x 128, fp32) in eager and torchfuse
    with an 'alt' variant: a row per case, backend and direction, every backend's values equal
    eager's (status ok), the fewest bytes as the module docstring counts them, speedups as
    ratios of the rows' own times, the variant's overrides recorded; the table written."""
    rows_file = tmp_path / "rows.jsonl"
    status = main(["norms", "--quick", "--device", "cpu", "--ops", "softmax,cross_entropy", "--dtypes", "float32",
                   "--backends", "eager,torchfuse", "--alt", "persistent.tile_elements=1024",
                   "--rows", str(rows_file), "--run-name", "cpu", "--out", str(tmp_path / "md")])
    assert status == 0
    rows = load_rows(rows_file)
    keys = {(r.case, r.mode, r.backend, r.variant) for r in rows}
    assert keys == {(f"norms/{op}/64x128", d, b, v) for op in ("softmax", "cross_entropy") for d in ("fwd", "bwd")
                    for b, v in (("eager", ""), ("torchfuse", ""), ("torchfuse", "alt"))}
    assert all(r.status == "ok" and r.median_ms > 0 and r.precision == "fp32" and r.run == "cpu" for r in rows)
    nd, es, n = 64 * 128, 4, 64
    want_bytes = {("softmax", "fwd"): 2 * nd * es, ("softmax", "bwd"): 3 * nd * es,
                  ("cross_entropy", "fwd"): nd * es + 8 * n, ("cross_entropy", "bwd"): 2 * nd * es + 8 * n}
    for r in rows:
        assert r.extra["bytes"] == want_bytes[(r.case.split("/")[1], r.mode)]
        eager = next(e for e in rows if (e.case, e.mode, e.backend) == (r.case, r.mode, "eager"))
        assert r.speedup_vs_eager == pytest.approx(eager.median_ms / r.median_ms, rel=1e-4)
        assert r.extra.get("overrides") == (["persistent.tile_elements=1024"] if r.variant else None)
    assert all(r.extra["schedule"] for r in rows if r.backend == "torchfuse")
    table = (tmp_path / "md" / "norms.md").read_text()
    assert "| softmax 64x128 fp32 | fwd |" in table and "alt: call us, of copy" in table


def test_norms_sweeps_name_tunables_that_exist():
    """Every override of every named sweep parses: it names an Options field or a Tuning field
    that exists, with a value of its type (a sweep left behind by a renamed or deleted tunable
    fails here)."""
    from torchfuse.bench.norm_sweeps import SWEEPS
    from torchfuse.bench.norms import OPS
    from torchfuse.bench.variants import parse_override

    for name, sweep in SWEEPS.items():
        assert set(sweep.ops) <= set(OPS) and sweep.variants, name
        for overrides in sweep.variants.values():
            for text in overrides:
                parse_override(text)


def test_norms_sweep_runs_its_variants(tmp_path):
    """``--sweep inner-outer`` runs torchfuse alone under its two variants (the inner-outer
    kernel off, and as shipped), at ``--quick`` shapes for the ops given."""
    rows_file = tmp_path / "rows.jsonl"
    assert main(["norms", "--quick", "--device", "cpu", "--sweep", "inner-outer", "--ops", "rms_norm",
                 "--dtypes", "float32", "--rows", str(rows_file)]) == 0
    rows = load_rows(rows_file)
    assert {(r.case, r.mode, r.backend, r.variant) for r in rows} == {
        ("norms/rms_norm/64x128", d, "torchfuse", v) for d in ("fwd", "bwd") for v in ("separate kernels", "chosen")}
    assert all(r.status == "ok" for r in rows)
    assert next(r for r in rows if r.variant == "separate kernels").extra["overrides"] == ["inner_outer=False"]


def test_norms_refuses_bad_overrides(capsys):
    for bad in ("persistent.no_such=1", "no_such_option=1", "persistent.tile_elements=x y",
                "schedulers.reduction.TILE_ELEMENTS=4096"):
        with pytest.raises(SystemExit):
            main(["norms", "--quick", "--device", "cpu", "--alt", bad])
        assert "error" in capsys.readouterr().err


def test_variants_set_options_and_tuning_fields():
    """``options_with``: Options fields from ``NAME=VALUE``, Tuning fields from
    ``SECTION.FIELD=VALUE`` (converted to the field's type, applied in order, on top of the
    given or default tuning); nothing outside the returned options changes."""
    from torchfuse import Options
    from torchfuse.bench.variants import options_with, parse_override
    from torchfuse.config.tuning import Tuning

    options = options_with(["persistent.tile_elements=128", "inner_outer=False", "codegen.sink_selects=False",
                            "persistent.tile_elements=256"], freeze=True)
    assert options.inner_outer is False and options.freeze is True
    assert options.tuning.persistent.tile_elements == 256 and options.tuning.codegen.sink_selects is False
    assert options.tuning.changed() == {"persistent.tile_elements": 256, "codegen.sink_selects": False}
    assert Options().tuning == Tuning() and options_with([]).tuning == Tuning()
    base = Tuning().replace("outer.xblock", 32)
    assert options_with(["outer.rblock=8"], tuning=base).tuning.changed() == {"outer.xblock": 32, "outer.rblock": 8}
    assert parse_override("codegen.sink_selects=False") == ("tuning", "codegen.sink_selects", False)
    assert parse_override("graph_passes.conv_epilogue_devices=cuda,cpu") == (
        "tuning", "graph_passes.conv_epilogue_devices", ("cuda", "cpu"))
    assert parse_override("max_group_ops=64") == ("option", "max_group_ops", 64)
    for bad in ("x", "=1", "inner_outer=maybe", "nosection.field=1", "persistent.tile_elements=many",
                "codegen.triton.SINK_SELECTS=False"):
        with pytest.raises(ValueError):
            parse_override(bad)


def test_host_runtime_times_both_launch_paths(tmp_path):
    """``host runtime``: the runtime's own time per launch, general and generated path, as rows."""
    rows_file = tmp_path / "rows.jsonl"
    assert main(["host", "runtime", "--calls", "200", "--repeats", "1", "--rows", str(rows_file)]) == 0
    rows = load_rows(rows_file)
    assert [r.variant for r in rows] == ["general launch path", "generated launch path"]
    assert all(r.device == "CPU" and r.extra["host_us_per_launch"] > 0 and r.extra["inputs"] == 3
               and r.extra["outputs"] == 2 for r in rows)


@needs_no_gpu
@pytest.mark.parametrize("argv", [["sweep-launch", "small"], ["sweep-launch", "large"], ["sweep-launch", "split"],
                                  ["profile", "train"], ["profile", "infer"], ["conv-epilogue"], ["host", "call"],
                                  ["host", "replay"], ["host", "launches"]])
def test_gpu_measurements_refuse_without_a_gpu(argv, tmp_path, capsys):
    rows_file = tmp_path / "rows.jsonl"
    assert main(argv + ["--rows", str(rows_file)]) == 1
    assert "needs a CUDA device" in capsys.readouterr().err and not rows_file.exists()


@needs_no_gpu
def test_profile_takes_torchfuse_variants_and_refuses_bad_settings(tmp_path, capsys):
    """``profile train`` takes ``torchfuse[SETTING;...]`` beside its backends (checked before
    it looks for a GPU); a setting that does not parse, or a variant in ``profile infer``,
    is a usage error."""
    ok = "torchfuse,torchfuse[runtime.pad_kernel=false;runtime.graph_function=false]"
    assert main(["profile", "train", "--backends", ok, "--rows", str(tmp_path / "rows.jsonl")]) == 1
    for argv in (["profile", "train", "--backends", "torchfuse[persistent.nope=1]"],
                 ["profile", "infer", "--backends", "torchfuse[inner_outer=False]"]):
        with pytest.raises(SystemExit):
            main(argv)
    assert "persistent.nope" in capsys.readouterr().err


def test_timer_and_copy_bandwidth_on_a_cpu():
    """The one timer's CPU path, the host clock, and the copy bandwidth's formula (bytes read
    plus written over the measured time) with a given timer."""
    calls = []
    ms = timing.median_ms(lambda: calls.append(sum(range(1000))), iters=5, device="cpu", warmup=2)
    assert ms > 0 and len(calls) == 7
    assert timing.host_us_per_call(lambda: None, 100, "cpu", warmup=1) > 0
    assert timing.copy_bandwidth("cpu", 2**20, timer=lambda fn: (fn(), 0.5)[1]) == pytest.approx(2 * 2**20 / 0.5e-3 / 1e9)
    assert timing.copy_bandwidth("cpu", 2**20, repeats=3) > 0
    assert timing.busy_time([(0.0, 2.0), (1.0, 3.0), (5.0, 6.0)]) == 4.0


def test_small_sweep_cases_come_back_from_rows():
    """A ``sweep-launch small`` case, as the heuristics' tests read it, from its rows."""
    from torchfuse.bench.launch_sweeps import small_sweep_cases

    p = Provenance("AC", "2026-11-30T18:00:00", "b213669", "NVIDIA H200", "2.11.0", "3.6.0")
    rows = [p.row("sweep-launch", "small/relu(x+b) 1x256x56x56", backend="eager", device_ms=0.005),
            p.row("sweep-launch", "small/relu(x+b) 1x256x56x56", backend="torchfuse", device_ms=0.002,
                  extra={"xnumel": 802816, "rnumel": 1, "scheduler": "pointwise", "XBLOCK": 1024, "RBLOCK": 1,
                         "warps": 2}),
            p.row("sweep-launch", "small/relu(x+b) 1x256x56x56", backend="torchfuse", variant="X256 R1 w2",
                  device_ms=0.0015, extra={"kind": "runtime", "XBLOCK": 256, "RBLOCK": 1, "warps": 2})]
    [case] = small_sweep_cases(rows)
    assert case["case"] == "relu(x+b) 1x256x56x56" and case["xnumel"] == 802816 and case["heuristic"] == [1024, 1, 2]
    assert case["candidates"] == [("runtime", 256, 1, 2, pytest.approx(1.5))]


def test_help_lists_every_subcommand(capsys):
    from torchfuse.bench.cli import SUBCOMMANDS

    assert main(["--help"]) == 0
    text = capsys.readouterr().out
    assert all(name in text for name in SUBCOMMANDS)


def test_graph_host_times_each_compiled_graph_alone():
    """``profile train --graph-host``'s measurement: every compiled graph a step calls, called
    again alone on that step's inputs, one time each (forward and backward of a training step)."""
    import torchfuse
    from torchfuse import backend
    from torchfuse.bench.host import graph_host_ms

    backend.RECENT.clear()
    w = torch.randn(16, 8, device=DEVICE, requires_grad=True)  # CPU tensors run through ATen on a GPU machine
    f = torchfuse.compile(lambda x: torch.tanh(x @ w).sum(), dynamic=False)
    x = torch.randn(4, 16, device=DEVICE)
    step = lambda: f(x).backward()  # noqa: E731
    step()
    step()
    times = graph_host_ms(step, list(backend.RECENT), calls=1, repeats=1, min_steps=1)
    assert sorted(k.split()[0] for k in times) == ["backward", "forward"], times
    assert all(v > 0 for v in times.values())
