"""Results as rows: appending, reading, the newest row of each measurement, the rows a suite
run appends, ``rows add``, and the charts and tables regenerated from rows (CPU only; the
figures are synthetic or CPU timings, never checked as performance)."""
from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pytest

from torchfuse.bench import rows as rows_mod
from torchfuse.bench.rows import Provenance, append_rows, current_rows, load_rows, row_to_json
from torchfuse.bench.tables import chart_groups, group_name, write_current

ROOT = Path(__file__).resolve().parents[1]
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def prov(run: str, date: str, commit: str = "abc1234") -> Provenance:
    return Provenance(run=run, date=date, commit=commit, device="NVIDIA H200", torch="2.11.0", triton="3.6.0",
                      command="python -m torchfuse.bench ...")


def test_rows_round_trip_leaving_defaults_out(tmp_path):
    """Rows appended twice read back in order with every field; lines carry the provenance
    fields always and the others only where they differ from their defaults; a key that is not
    a field lands in ``extra``; a line that is not a row names its file and line."""
    p = prov("BN", "2026-12-01T10:00:00")
    written = [p.row("norms", "norms/softmax/64x128", mode="fwd", precision="bf16", backend="torchfuse",
                     median_ms=0.0123456789, copy_fraction=0.93, extra={"bytes": 4096, "per_kernel_us": {"k": 1.5}}),
               p.row("norms", "norms/softmax/64x128", mode="bwd", backend="eager", status="failed", error="boom")]
    path = tmp_path / "rows.jsonl"
    assert append_rows(path, written[:1]) == 1 and append_rows(path, written[1:]) == 1
    lines = path.read_text().splitlines()
    first = json.loads(lines[0])
    assert set(rows_mod.REQUIRED) <= set(first) and "variant" not in first and "layout" not in first
    got = load_rows(path)
    assert [r.mode for r in got] == ["fwd", "bwd"]
    assert got[0].median_ms == pytest.approx(0.0123457) and got[0].extra == {"bytes": 4096, "per_kernel_us": {"k": 1.5}}
    assert got[1].status == "failed" and got[1].error == "boom" and got[1].variant == ""
    assert load_rows(path, mode="bwd") == [got[1]]
    with open(path, "a") as f:
        f.write(json.dumps({**first, "new_figure": 3}) + "\n{not json\n")
    with pytest.raises(ValueError, match=r"rows.jsonl:4"):
        load_rows(path)
    lines = path.read_text().splitlines()[:3]
    path.write_text("\n".join(lines) + "\n")
    assert load_rows(path)[2].extra["new_figure"] == 3
    assert load_rows(tmp_path / "missing.jsonl") == []


def test_current_rows_keep_the_newest_of_each_measurement():
    """Per (suite, case, mode, precision, layout, backend, variant, device) the row with the
    latest date wins (the later line on a tie); keys keep their first order."""
    old, new = prov("A", "2026-11-30T10:00:00"), prov("B", "2026-12-01T10:00:00")
    rows = [new.row("hf", "hf/bert/64x128", backend="eager", median_ms=2.0),
            old.row("hf", "hf/bert/64x128", backend="torchfuse", median_ms=9.0),
            old.row("hf", "hf/bert/64x128", backend="eager", median_ms=1.0),
            new.row("hf", "hf/bert/64x128", backend="torchfuse", median_ms=3.0),
            new.row("hf", "hf/bert/64x128", backend="torchfuse", variant="alt", median_ms=4.0),
            new.row("hf", "hf/bert/64x128", backend="torchfuse", median_ms=5.0)]
    current = current_rows(rows)
    assert [(r.backend, r.variant, r.median_ms) for r in current] == [("eager", "", 2.0), ("torchfuse", "", 5.0),
                                                                       ("torchfuse", "alt", 4.0)]


def test_a_suite_run_appends_one_row_per_result(tmp_path):
    """``torchfuse bench --rows FILE`` appends a row per result of the run, with its figures,
    run name and provenance; a CPU run appends none without ``--rows``."""
    from torchfuse.bench.__main__ import main

    rows_file = tmp_path / "rows.jsonl"
    args = ["--quick", "--device", "cpu", "--no-progress", "--warmup", "0", "--rounds", "1", "--suite", "micro",
            "--only", "softmax", "--mode", "infer-fp32", "--backends", "eager,torchfuse"]
    assert main(args + ["--out", str(tmp_path / "a"), "--rows", str(rows_file), "--run-name", "check"]) == 0
    results = json.loads((tmp_path / "a" / "results.json").read_text())["results"]
    rows = load_rows(rows_file)
    assert len(rows) == len(results) == 2
    for row, result in zip(rows, results):
        assert (row.run, row.suite, row.case, row.mode, row.backend) == ("check", "micro", result["case"], "infer-fp32",
                                                                          result["backend"])
        assert row.median_ms == pytest.approx(result["median_ms"], rel=1e-5)
        assert row.device == "CPU" and row.torch and row.command.startswith("python -m torchfuse.bench")
        assert row.extra["bytes_moved"] == result["bytes_moved"]
    assert rows[1].speedup_vs_eager == pytest.approx(rows[0].median_ms / rows[1].median_ms, rel=1e-4)
    assert main(args + ["--out", str(tmp_path / "b")]) == 0
    assert len(load_rows(rows_file)) == 2 and not list(tmp_path.glob("b/*.jsonl"))


def test_a_variant_backend_becomes_its_base_with_a_variant():
    """A bracketed backend (``torchfuse[SETTING;...]``, a run's A/B variant) is recorded as its
    base with the settings as the variant, so the step table of the backends as shipped leaves
    it out."""
    from torchfuse.bench.results import Result
    from torchfuse.bench.tables import steps_table

    def result(backend, ms):
        return Result(run_id="r", suite="hf", model="t5", case="hf/t5/8x512x128", size="8x512x128",
                      mode="train-amp-fp16", precision="fp16", training=True, channels_last=False, device="cuda",
                      device_name="NVIDIA H100 80GB HBM3", backend=backend, median_ms=ms)

    meta = {"run_id": "r", "started": "2026-12-06T10:00:00", "device_name": "NVIDIA H100 80GB HBM3",
            "versions": {"torchfuse_commit": "abc1234"}}
    rows = rows_mod.rows_from_results([result("eager", 40.0), result("torchfuse", 20.0),
                                       result("torchfuse[graph_passes.linear_group_devices=;runtime.pad_kernel=false]",
                                              30.0)], meta)
    assert [(r.backend, r.variant) for r in rows] == [
        ("eager", ""), ("torchfuse", ""), ("torchfuse", "graph_passes.linear_group_devices=;runtime.pad_kernel=false")]
    table = steps_table(rows, device="NVIDIA H100 80GB HBM3")
    assert table.splitlines()[0] == "| ms a step | eager | torchfuse |"
    assert "| t5 8x512x128 | 40.0 | **20.0** |" in table


def test_rows_add_appends_only_rows_not_there(tmp_path, capsys):
    p = prov("X", "2026-12-01T10:00:00")
    target, source = tmp_path / "rows.jsonl", tmp_path / "out.jsonl"
    append_rows(target, [p.row("micro", "micro/softmax/64x32", backend="eager", median_ms=1.0)])
    append_rows(source, [p.row("micro", "micro/softmax/64x32", backend="eager", median_ms=1.0),
                         p.row("micro", "micro/softmax/64x32", backend="torchfuse", median_ms=0.5)])
    assert rows_mod.rows_main(["add", str(source), "--to", str(target)]) == 0
    assert rows_mod.rows_main(["add", str(source), "--to", str(target)]) == 0
    assert [r.backend for r in load_rows(target)] == ["eager", "torchfuse"]
    assert "0 new row(s)" in capsys.readouterr().out


def _synthetic_rows() -> list:
    old, new = prov("old", "2026-11-30T10:00:00", "1111111"), prov("new", "2026-12-01T10:00:00", "2222222")
    rows = []
    for run, eager_ms, fused_ms in ((old, 10.0, 9.0), (new, 10.0, 4.0)):
        rows += [run.row("hf", "hf/bert/64x128", mode="train-amp-fp16", precision="fp16", backend="eager",
                         median_ms=eager_ms, speedup_vs_eager=1.0),
                 run.row("hf", "hf/bert/64x128", mode="train-amp-fp16", precision="fp16", backend="torchfuse",
                         median_ms=fused_ms, speedup_vs_eager=eager_ms / fused_ms)]
    rows += [new.row("hf", "hf/gpt2/8x512", mode="train-amp-fp16", precision="fp16", backend="eager", median_ms=8.0,
                     speedup_vs_eager=1.0),
             new.row("hf", "hf/gpt2/8x512", mode="train-amp-fp16", precision="fp16", backend="torchfuse",
                     status="failed", error="boom"),
             new.row("hf", "hf/gpt2/8x512", mode="train-amp-fp16", precision="fp16", backend="torchfuse",
                     variant="alt", median_ms=1.0, speedup_vs_eager=8.0),
             new.row("norms", "norms/softmax/16384x4096", mode="fwd", precision="bf16", backend="torchfuse",
                     device_ms=0.0666, copy_fraction=0.95),
             new.row("norms", "norms/softmax/16384x4096", mode="fwd", precision="bf16", backend="eager",
                     device_ms=0.2129, copy_fraction=0.30),
             new.row("host", "host/replay/x/1", backend="torchfuse", extra={"per_call_ms": 0.3})]
    return rows


def test_charts_and_tables_are_regenerated_from_the_newest_rows(tmp_path):
    """``write_current`` draws a chart per (suite, mode, precision, layout, device) of the
    charted suites from the newest row of each measurement, variants and uncharted suites left
    out; the tables show those rows' figures (a failure as FAIL) and name their runs; a chart
    whose group has no rows any more is removed."""
    rows = _synthetic_rows()
    groups = chart_groups(rows)
    assert set(groups) == {("hf", "train-amp-fp16", "fp16", "", "NVIDIA H200"),
                           ("norms", "fwd", "bf16", "", "NVIDIA H200")}
    stale = tmp_path / "timm-gone.png"
    stale.write_bytes(PNG_MAGIC)
    written = write_current(rows, tmp_path)
    charts = sorted(p.name for p in written if p.suffix == ".png")
    assert charts == ["hf-train-amp-fp16-nvidia-h200.png", "norms-fwd-bf16-nvidia-h200.png"]
    assert all((tmp_path / c).read_bytes()[:8] == PNG_MAGIC for c in charts) and not stale.exists()
    index = (tmp_path / "index.md").read_text()
    assert "| bert 64x128 | 10.000 ms | 2.50x |" in index  # the newer run's 10 / 4, not the older 10 / 9
    assert "| gpt2 8x512 | 8.000 ms | FAIL |" in index and "8.00x" not in index
    assert "| geomean |  | 2.50x |" in index
    assert "| softmax 16384x4096 | 30% (212.9 us) | 95% (66.6 us) |" in index
    assert "new (2222222, 2026-12-01)" in index and "old (" not in index
    assert group_name(("timm", "infer-fp16", "fp16", "channels-last", "NVIDIA H200")) == \
        "timm-infer-fp16-channels-last-nvidia-h200"


def test_committed_rows_hold_the_current_tables_and_their_charts():
    """The repository's rows file parses, every row names its run and commit, the migrated
    tables are there (training steps with the T5 rerun, the norm table of runs BN and BO,
    inference of runs AX and AY, host replay of run BA, the 2026-11-30 report), and the
    committed ``charts/index.md`` is what ``torchfuse bench charts`` makes of the rows."""
    path = ROOT / "benchmarks" / "results" / "rows.jsonl"
    rows = load_rows(path)
    assert rows and all(r.run and r.commit and r.date and r.device for r in rows)
    runs = {(r.run, r.suite) for r in rows}
    for expected in [("training-steps", "hf"), ("training-steps", "timm"), ("training-steps-t5-rerun", "hf"),
                     ("BN", "norms"), ("BO", "norms"), ("AX", "timm"), ("AY", "timm"), ("BA", "host"),
                     ("H", "micro"), ("K", "timm")]:
        assert expected in runs, expected
    bn = [r for r in rows if r.run == "BN" and r.variant == ""]
    assert len({(r.case, r.precision, r.mode) for r in bn}) == 84  # the whole table: 42 cases x 2 directions
    assert all(row_to_json(r) == line for r, line in zip(rows, path.read_text().splitlines()))
    import tempfile

    with tempfile.TemporaryDirectory() as out:
        write_current(rows, Path(out))
        assert (Path(out) / "index.md").read_text() == (path.parent / "charts" / "index.md").read_text()
        assert sorted(p.name for p in Path(out).glob("*.png")) == \
            sorted(p.name for p in (path.parent / "charts").glob("*.png"))


def test_steps_table_shows_the_newest_wall_times_per_case_and_backend(tmp_path, capsys):
    """``rows show --table steps`` prints a markdown table of the step suites' median step times
    in one mode on one device: the newest row per cell, a failure as ``failed``, the fastest of a
    line in bold, variants, other suites, modes and devices left out, and the runs behind it."""
    from torchfuse.bench.tables import steps_table

    rows = _synthetic_rows()
    other = prov("other", "2026-12-02T10:00:00", "3333333")
    rows += [other.row("hf", "hf/bert/64x128", mode="train-amp-bf16", precision="bf16", backend="eager", median_ms=1.0),
             dataclasses.replace(other.row("timm", "timm/resnet50/128", mode="train-amp-fp16", precision="fp16",
                                           backend="eager", median_ms=1.0), device="NVIDIA A100"),
             other.row("hf", "hf/bert/64x128", mode="train-amp-fp16", precision="fp16", layout="channels-last",
                       backend="eager", median_ms=2.0)]
    table = steps_table(rows, mode="train-amp-fp16", device="NVIDIA H200")
    assert table.splitlines() == [
        "| ms a step | eager | torchfuse |",
        "|---|---:|---:|",
        "| bert 64x128 | 10.0 | **4.0** |",  # run new's 4.0, not run old's 9.0
        "| gpt2 8x512 | **8.0** | failed |",  # the alt variant's 1.0 is not shown
        "",
        "NVIDIA H200, train-amp-fp16, torch 2.11.0, Triton 3.6.0; rows of run new (2222222, 2026-12-01).",
    ]
    path = tmp_path / "rows.jsonl"
    append_rows(path, rows)
    assert rows_mod.rows_main(["show", str(path), "--table", "steps"]) == 0
    assert capsys.readouterr().out.strip() == table
    assert rows_mod.rows_main(["show", str(path), "--table", "steps", "--mode", "infer-fp16"]) == 2
    assert "no rows" in capsys.readouterr().err
    # another layout is a table of its own, not the newest cell of this one
    assert rows_mod.rows_main(["show", str(path), "--table", "steps", "--layout", "channels-last"]) == 0
    assert capsys.readouterr().out.splitlines()[2] == "| bert 64x128 | **2.0** |"


def test_steps_table_gives_each_runs_speedup_over_its_peer_and_the_recent_range():
    """With torchfuse and its peer in the table, a column gives torchfuse's speedup in the run
    of the line's two cells (each run's own pair: the host's speed between runs cancels) and
    the range over the three newest runs up to it that measured both. A run is one harness
    invocation (one name repeats on several dates); a failed row, another layout and a run
    that measured one backend add nothing; cells of two different runs, or a failed cell, show
    ``-``."""
    from torchfuse.bench.tables import steps_table

    def two(run, case, ours, theirs, suffix="", **kw):
        return [run.row("hf", case, mode="train-amp-fp16", precision="fp16", backend="torchfuse" + suffix,
                        median_ms=ours, **kw),
                run.row("hf", case, mode="train-amp-fp16", precision="fp16", backend="torch.compile" + suffix,
                        median_ms=theirs, **kw)]

    rows = []
    for k, (ours, theirs) in enumerate([(10.0, 5.0), (9.0, 9.9), (8.0, 10.0), (12.0, 13.2)]):
        run = prov("steps", f"2026-12-0{k + 1}T10:00:00")  # one name, four invocations
        rows += two(run, "hf/gpt2/8x512", ours, theirs)
        rows += two(run, "hf/gpt2/8x512", ours / 2, theirs, suffix="-reduce-overhead")
        rows += two(run, "hf/gpt2/8x512", 1.0, 100.0, layout="channels-last")  # another table
    failed = prov("steps", "2026-12-06T10:00:00")  # newer, but its torchfuse row failed
    rows += [failed.row("hf", "hf/gpt2/8x512", mode="train-amp-fp16", precision="fp16",
                        backend="torchfuse-reduce-overhead", status="failed", error="boom"),
             failed.row("hf", "hf/gpt2/8x512", mode="train-amp-fp16", precision="fp16",
                        backend="torch.compile-reduce-overhead", median_ms=1.0)]
    late = prov("late", "2026-12-09T10:00:00")  # torchfuse alone
    rows += [late.row("hf", "hf/bert/64x128", mode="train-amp-fp16", precision="fp16", backend="torchfuse",
                      median_ms=2.0)]
    rows += two(prov("bert", "2026-12-08T10:00:00"), "hf/bert/64x128", 3.0, 6.0)
    lines = steps_table(rows).splitlines()
    assert lines[0] == ("| ms a step | torch.compile | torch.compile-reduce-overhead | torchfuse | "
                        "torchfuse-reduce-overhead | speedup over torch.compile | speedup, reduce-overhead |")
    # 0.5, 1.1, 1.25, 1.1 by run: the newest is the cells' run, the range the newest three
    assert lines[2] == ("| gpt2 8x512 | 13.2 | **1.0** | 12.0 | failed | 1.10x (1.10-1.25x over 3 runs) | - |")
    # the torchfuse cell is run late's, the torch.compile cell run bert's: no ratio of one run
    assert lines[3] == "| bert 64x128 | 6.0 | - | **2.0** | - | - | - |"
    older = [r for r in rows if r.date < "2026-12-04"]
    assert steps_table(older).splitlines()[2].endswith("| 1.25x (0.50-1.25x over 3 runs) | 2.50x (1.00-2.50x over 3 runs) |")


def test_readme_results_table_is_the_steps_table_of_the_committed_rows():
    """The README's results table is what ``torchfuse bench rows show --table steps`` prints
    from ``benchmarks/results/rows.jsonl`` (after new rows, paste its output there again)."""
    from torchfuse.bench.tables import steps_table

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    device = re.search(r'rows show --table steps --device "([^"]+)"', readme).group(1)
    table = steps_table(load_rows(ROOT / "benchmarks" / "results" / "rows.jsonl"), device=device)
    assert table in readme
