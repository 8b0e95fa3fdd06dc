"""Named GPU runs (``benchmarks/runs.toml``, ``torchfuse bench run-named``): every run parses,
names commands that exist and fits one 10-minute GPU command with its time-budget flags; the
step-table runs cover the documented matrix; the runner runs steps, stops one at its limit,
collects rows and regenerates charts (on a CPU, with CPU-only steps)."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from torchfuse.bench.cli import plan, run_parser
from torchfuse.bench.named_runs import (RUN_LIMIT_S, STARTUP_S, NamedRun, Step, check_run, commands, execute,
                                        load_runs, main)

ROOT = Path(__file__).resolve().parents[1]
RUNS, TABLES = load_runs(ROOT / "benchmarks" / "runs.toml")


@pytest.mark.parametrize("name", list(RUNS))
def test_every_named_run_is_valid_and_fits_one_gpu_command(name):
    run = RUNS[name]
    assert run.measures and run.steps
    assert check_run(run, ROOT) == []
    assert run.limit_s <= RUN_LIMIT_S <= 600


def test_check_run_reports_what_would_not_fit_or_not_run():
    """The checks can fail: an unknown subcommand, a missing or too large budget, limits over
    ten minutes, a selection that selects nothing, a missing script."""
    bad = NamedRun("bad", "x", (
        Step("a", "bench", ("nosuch",), 100),
        Step("b", "bench", ("norms",), 100),
        Step("c", "bench", ("norms", "--time-budget", str(100 - STARTUP_S + 5)), 100),
        Step("d", "bench", ("--suite", "hf", "--only", "hf/nosuch/*,hf/bert/64x128", "--time-budget", "10"), 100),
        Step("e", "script", ("benchmarks/nosuch.py",), 100),
        Step("f", "conformance", ("--shard", "{shard}/4", "--time-budget", "10"), 100),
        Step("g", "pytest", ("tests/nosuch.py",), 100)))
    problems = " | ".join(check_run(bad, ROOT))
    for expected in ("over 570 s", "no bench subcommand 'nosuch'", "b: no --time-budget", "c: --time-budget 75",
                     "--only 'hf/nosuch/*' selects nothing", "no script benchmarks/nosuch.py",
                     "shards and a {shard} argument", "no tests/nosuch.py"):
        assert expected in problems, (expected, problems)


def _selection(run: str) -> set[tuple]:
    """(case, mode, layout, backend) of a suites run's steps, as the harness would select them."""
    out = set()
    for step in RUNS[run].steps:
        args = run_parser().parse_args([a.replace("{out}", "OUT") for a in step.args])
        for case, mode in plan(args, "cuda"):
            out |= {(case.id, mode, args.channels_last, b) for b in args.backends}
    return out


def test_the_step_tables_cover_the_documented_matrix():
    """Table ``steps``: training in AMP fp16 and bf16 on BERT-base 64x128, GPT-2 8x512, T5-small
    8x512x128, ResNet-50 128, ConvNeXt-T 128, ViT-B/16 64 with five backends; inference in fp16
    of ResNet-50, MobileNetV3-Large, ViT-B/16 at batch 1 and 8 in both layouts with eight."""
    selected = set().union(*(_selection(r) for r in TABLES["steps"]["runs"]))
    train_cases = ["hf/bert/64x128", "hf/gpt2/8x512", "hf/t5/8x512x128", "timm/resnet50/128",
                   "timm/convnext_tiny/128", "timm/vit_base_patch16_224/64"]
    train_backends = ["eager", "torch.compile", "torch.compile-reduce-overhead", "torchfuse",
                      "torchfuse-reduce-overhead"]
    infer_backends = ["eager", "eager-cudagraphs", "torch.compile", "torch.compile-reduce-overhead",
                      "torch.compile-reduce-overhead-frozen", "torchfuse", "torchfuse-reduce-overhead",
                      "torchfuse-reduce-overhead-frozen"]
    want = {(c, m, False, b) for c in train_cases for m in ("train-amp-fp16", "train-amp-bf16") for b in train_backends}
    want |= {(f"timm/{model}/{batch}", "infer-fp16", cl, b) for model in
             ("resnet50", "mobilenetv3_large_100", "vit_base_patch16_224") for batch in (1, 8)
             for cl in (False, True) for b in infer_backends}
    assert selected == want
    for table in TABLES.values():
        assert set(table["runs"]) <= set(RUNS)


def test_commands_add_rows_and_expand_shards(tmp_path):
    bench = Step("n", "bench", ("norms", "--time-budget", "10", "--out", "{out}/norms"), 60)
    [cmd] = commands(bench, "myrun", tmp_path)
    assert cmd[:4] == [sys.executable, "-m", "torchfuse.bench", "norms"]
    assert cmd[cmd.index("--out") + 1] == str(tmp_path / "norms")
    assert cmd[cmd.index("--rows") + 1] == str(tmp_path / "rows.jsonl") and cmd[cmd.index("--run-name") + 1] == "myrun"
    shards = commands(Step("c", "conformance", ("--shard", "{shard}/48", "--out", "{out}/s{shard}"), 60, (3, 5)),
                      "x", tmp_path)
    assert [c[c.index("--shard") + 1] for c in shards] == ["3/48", "4/48", "5/48"]
    assert shards[0][1:4] == ["-m", "torchfuse.cli", "conformance"] and shards[2][-1] == str(tmp_path / "s5")


def test_a_named_run_runs_its_steps_and_stops_one_at_its_limit(tmp_path):
    """A run of a CPU bench step (the norm table's softmax, eager alone), a script and a script
    that outlives its limit: each step's log, exit status and time in ``run.json``; the slow one
    stopped and marked; the bench step's rows in ``rows.jsonl`` and a chart made from them."""
    script = tmp_path / "hello.py"
    script.write_text("import sys, pathlib\npathlib.Path(sys.argv[1]).write_text('hi')\n")
    slow = tmp_path / "slow.py"
    slow.write_text("import time\nprint('started', flush=True)\ntime.sleep(60)\n")
    run = NamedRun("cpu-check", "a test", (
        Step("norms", "bench", ("norms", "--quick", "--device", "cpu", "--ops", "softmax", "--dtypes", "float32",
                                "--backends", "eager", "--time-budget", "30"), 240),
        Step("hello", "script", (str(script), "{out}/hello.txt"), 60),
        Step("slow", "script", (str(slow),), 3)))
    out = tmp_path / "out"
    assert execute(run, out) == 1  # the slow step did not exit by itself
    report = json.loads((out / "run.json").read_text())
    steps = {s["step"]: s for s in report["steps"]}
    assert steps["norms"]["exit"] == [0] and steps["hello"]["exit"] == [0] and not steps["hello"]["timed_out"]
    assert steps["slow"]["timed_out"] and steps["slow"]["exit"] != [0] and steps["slow"]["seconds"] < 40
    assert "started" in (out / "slow.log").read_text()
    assert (out / "hello.txt").read_text() == "hi"
    rows = [json.loads(line) for line in (out / "rows.jsonl").read_text().splitlines()]
    assert {(r["suite"], r["run"], r["backend"], r["mode"]) for r in rows} == {
        ("norms", "cpu-check", "eager", "fwd"), ("norms", "cpu-check", "eager", "bwd")}
    assert (out / "charts" / "norms-fwd-fp32-cpu.png").exists() and report["charts"] == "charts/index.md"


def test_run_named_lists_and_refuses_unknown_names(capsys):
    assert main(["--list", "--runs", str(ROOT / "benchmarks" / "runs.toml")]) == 0
    listed = capsys.readouterr().out
    assert all(name in listed for name in RUNS) and "table steps" in listed
    assert main(["nosuch", "--runs", str(ROOT / "benchmarks" / "runs.toml")]) == 2
    assert main(["norms", "--dry-run", "--runs", str(ROOT / "benchmarks" / "runs.toml")]) == 0
    assert "torchfuse.bench norms --per-kernel --time-budget 500 --out OUT/norms --rows OUT/rows.jsonl" in \
        capsys.readouterr().out
