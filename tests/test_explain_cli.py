"""``torchfuse explain`` on the command line: a named model (the benchmark's builders) or a
``file.py:function``, at a size, dtype and mode, written as text, HTML and JSON."""
from __future__ import annotations

import sys
import textwrap
import warnings

import pytest
import torch

from conftest import DEVICE
from torchfuse.cli import main as torchfuse_main
from torchfuse.report import ExplainResult
from torchfuse.report.explain_cli import SpecError, hf_model, parse_option, parse_size


def test_hf_model_by_name_writes_text_html_and_json(tmp_path, monkeypatch, capsys):
    """``torchfuse explain hf:bert-base --quick``: the HF suite's BERT (tiny configuration), its
    inference graph fused; on a CPU the first line says interpret mode was turned on for it."""
    monkeypatch.delenv("TORCHFUSE_INTERPRET", raising=False)  # a user's shell
    prefix = tmp_path / "out" / "bert"
    assert torchfuse_main(["explain", "hf:bert-base", "--quick", "--device", DEVICE, "-o", str(prefix)]) == 0
    printed = capsys.readouterr().out
    text = (tmp_path / "out" / "bert.txt").read_text()
    assert text.strip() in printed and f"wrote {prefix}.txt, {prefix}.html and {prefix}.json" in printed
    assert "program: hf:bert-base (2x16 (batch x sequence), quick configuration), inference, fp32" in text, text
    if DEVICE == "cpu":
        assert text.startswith("note: this program runs on cpu tensors, so explain turned interpret mode on"), text
    result = ExplainResult.load(str(prefix) + ".json")
    assert [g.name for g in result.graphs] == ["inference"] and len(result.groups) >= 4
    assert {"layer_norm", "var_mean"} & {op for g in result.groups for op in g.ops}
    page = (tmp_path / "out" / "bert.html").read_text()
    assert "hf:bert-base" in page and 'id="graph-0-svg"' in page


def test_file_function_in_training_explains_forward_and_backward(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the default output prefix is relative
    script = tmp_path / "mine.py"
    script.write_text(textwrap.dedent("""
        import torch

        def build():
            torch.manual_seed(0)
            model = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.GELU(), torch.nn.LayerNorm(16))
            return model, (torch.randn(4, 16),)
    """))
    # without -o: explain-<model>-train, so that an inference run's files stay
    prefix = tmp_path / "explain-mine-build-train"
    assert torchfuse_main(["explain", "mine.py:build", "--train", "--device", DEVICE]) == 0
    result = ExplainResult.load(str(prefix) + ".json")
    assert sorted(g.name for g in result.graphs) == ["backward", "forward"], [g.name for g in result.graphs]
    assert all(g.groups for g in result.graphs)
    assert "program: mine.py:build (the function's inputs), training step, fp32" in prefix.with_suffix(".txt").read_text()
    # where the graph was captured: the user's model, not the module explain wraps it in
    locations = [c.location for c in result.captures if c.location is not None]
    assert locations and not any("explain_cli" in (loc.file or "") for loc in locations), locations
    # the module enclosing the whole graph (the user's model inside the command's wrapper), not its first op's
    assert [loc.module for loc in locations] == ["model (Sequential)"], locations


def test_calls_run_the_step_again_so_that_the_generated_function_is_listed(tmp_path, monkeypatch):
    """One call leaves each graph without its generated function (made at a second call with
    the same sizes), and the summary says how to see it from the command line; ``--calls 2``
    calls the step again with the same inputs, and the summary lists each graph's function."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mine.py").write_text(textwrap.dedent("""
        import torch

        def build():
            torch.manual_seed(0)
            return torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.GELU()), (torch.randn(4, 16),)
    """))
    texts = {}
    for calls in (1, 2):
        prefix = tmp_path / f"calls{calls}"
        assert torchfuse_main(["explain", "mine.py:build", "--train", "--device", DEVICE, "--calls", str(calls),
                               "-o", str(prefix)]) == 0
        texts[calls] = prefix.with_suffix(".txt").read_text()
        result = ExplainResult.load(str(prefix) + ".json")
        functions = [g.graph_function for g in result.graphs]
        assert sorted(g.name for g in result.graphs) == ["backward", "forward"]
        if calls == 1:
            assert all(f.startswith("not generated yet") for f in functions), functions
        else:
            assert functions and not any(f.startswith("not generated yet") for f in functions), functions
    assert "or --calls 2 on the command line" in texts[1] and "--calls 2 on the command line" not in texts[2]


def test_file_model_imports_the_modules_beside_it(tmp_path, monkeypatch):
    """``torchfuse explain models/mine.py:build`` where ``mine.py`` imports ``blocks.py`` from
    its own folder, run from another directory, as ``python models/mine.py`` would find it; the
    import path is as it was afterwards."""
    import sys

    folder = tmp_path / "models"
    folder.mkdir()
    (folder / "blocks.py").write_text("import torch\n\nBlock = lambda: torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.GELU())\n")
    (folder / "mine.py").write_text(textwrap.dedent("""
        import torch
        from blocks import Block

        def build():
            return Block(), (torch.randn(2, 8),)
    """))
    monkeypatch.chdir(tmp_path)
    path_before = list(sys.path)
    assert torchfuse_main(["explain", "models/mine.py:build", "--device", DEVICE, "-o", str(tmp_path / "out")]) == 0
    assert ExplainResult.load(str(tmp_path / "out.json")).groups
    assert sys.path == path_before
    sys.modules.pop("blocks", None)


def test_an_output_directory_gets_the_default_names_inside_it(tmp_path, monkeypatch):
    """``-o outdir/`` (a directory that does not exist yet, or one that does) writes the
    default names inside it; it wrote ``outdir/.txt`` and failed after the whole run."""
    (tmp_path / "tiny.py").write_text(textwrap.dedent("""
        import torch

        def build():
            return torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.GELU()), (torch.randn(2, 8),)
    """))
    monkeypatch.chdir(tmp_path)
    assert torchfuse_main(["explain", "tiny.py:build", "--device", DEVICE, "-o", "outdir/"]) == 0
    written = sorted(p.name for p in (tmp_path / "outdir").iterdir())
    assert written == ["explain-tiny-build.html", "explain-tiny-build.json", "explain-tiny-build.txt"], written
    assert torchfuse_main(["explain", "tiny.py:build", "--device", DEVICE, "--train", "-o", "outdir"]) == 0
    assert (tmp_path / "outdir" / "explain-tiny-build-train.json").is_file()


def test_file_model_explained_for_inference_runs_in_eval_mode(tmp_path, capsys):
    """Inference explains a file's model in eval mode, as the named models run: BatchNorm
    reads its running statistics and writes none (no state update among the ATen calls)."""
    script = tmp_path / "bn.py"
    script.write_text(textwrap.dedent("""
        import torch

        def build():
            return torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.BatchNorm1d(8)), (torch.randn(4, 8),)
    """))
    assert torchfuse_main(["explain", f"{script}:build", "--device", DEVICE, "-o", str(tmp_path / "bn")]) == 0
    text = (tmp_path / "bn.txt").read_text()
    assert "copy_" not in text and "running" not in text, text


def test_file_model_of_torch_modules_names_the_users_file(tmp_path, capsys):
    """A ``file.py:function`` model made of PyTorch's own modules: TorchDynamo records no frame
    of the user's for its ops, only the command's wrapper; every location (ATen calls, fusion
    groups, the capture) names the user's function in the user's file instead, in the text and
    the saved result."""
    script = tmp_path / "layers.py"
    script.write_text(textwrap.dedent("""
        import torch


        def build():
            torch.manual_seed(0)
            return torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.GELU()), (torch.randn(4, 16),)
    """))
    def_line = script.read_text().splitlines().index("def build():") + 1
    prefix = tmp_path / "layers"
    assert torchfuse_main(["explain", f"{script}:build", "--device", DEVICE, "-o", str(prefix)]) == 0
    result = ExplainResult.load(str(prefix) + ".json")
    (graph,) = result.graphs
    calls = [c for c in graph.aten_calls if c.category not in ("view", "constant")]
    locations = [c.location for c in calls] + [loc for g in graph.groups for loc in g.locations]
    locations.append(result.captures[0].location)
    assert calls and graph.groups and all(loc is not None for loc in locations), str(result)
    assert {(loc.file, loc.line, loc.function) for loc in locations} == {(str(script), def_line, "build")}, locations
    assert {loc.module for loc in locations} >= {"model[0] (Linear)", "model[1] (GELU)"}, locations
    text = (tmp_path / "layers.txt").read_text()
    assert f"aten.addmm.default  [vendor library (by design)]  layers.py:{def_line} in model[0] (Linear)" in text, text
    assert "explain_cli" not in text and "explain_cli" not in (tmp_path / "layers.html").read_text()


@pytest.mark.parametrize("argv, message", [
    (["hf:bert-huge"], "not one of the HF suite's models"),
    (["resnet"], "cannot read MODEL"),
    (["nowhere.py:f"], "no such file"),
    (["hf:bert", "--size", "8"], "BATCHxSEQUENCE"),
    (["hf:bert", "--size", "0x8"], "positive integers"),
    (["hf:bert", "--option", "no_such_option=1"], "unknown torchfuse option"),
    (["hf:bert", "--option", "max_group_ops=yes"], "max_group_ops=yes: max_group_ops takes an integer"),
    (["hf:bert", "--option", "interpret=maybe"], "interpret=maybe: interpret takes true or false"),
    (["hf:bert", "--mode", "fastest"], "unknown mode"),
    (["hf:bert", "--set", "persistent.no_such_field=1"], "unknown tuning field"),
    (["hf:bert", "--option", "tuning=persistent.no_such_field=1"], "unknown tuning field"),
    (["hf:bert", "--set", "persistent.tile_elements=many"], "is not an int"),
    (["hf:bert", "--calls", "0"], "called at least once"),
    *([(["hf:bert", "--device", "cuda"], "no usable CUDA device")] if not torch.cuda.is_available() else []),
])
def test_unusable_arguments_exit_2_with_the_reason(argv, message, capsys, tmp_path):
    assert torchfuse_main(["explain", *argv, "--quick", "-o", str(tmp_path / "x")]) == 2
    assert message in capsys.readouterr().err
    assert not list(tmp_path.iterdir())  # nothing written


def test_tuning_flag_prints_the_tuning_each_kernel_was_built_with(tmp_path, capsys):
    """``--tuning``: after the summary, each kernel with the fields of the Tuning sections its
    scheduler and the code writer read, a field changed by ``--set`` marked; without it only
    the changed field is named. The values match the tuning the kernels were compiled with."""
    script = tmp_path / "rows.py"
    script.write_text(textwrap.dedent("""
        import torch

        def build():
            torch.manual_seed(0)
            return (lambda x: torch.softmax(x * 2, -1)), (torch.randn(8, 64),)
    """))
    prefix = tmp_path / "rows"
    argv = ["explain", f"{script}:build", "--device", DEVICE, "--set", "persistent.tile_elements=2048", "-o"]
    assert torchfuse_main([*argv, str(prefix), "--tuning"]) == 0
    printed = capsys.readouterr().out
    result = ExplainResult.load(str(prefix) + ".json")
    rows = [k for k in result.kernels if k.scheduler == "reduction.persistent"]
    assert len(rows) == 1, [(k.name, k.scheduler) for k in result.kernels]
    block = printed[printed.index("tuning per kernel:"):]
    group = next(grp for g in result.graphs for grp in g.groups
                 if any(p.kernel_key == rows[0].key for p in grp.plans))
    header = f"  {rows[0].name} (reduction.persistent), key {rows[0].key[:12]}, run by inference group {group.id}:"
    assert f"{header}\n    persistent.tile_elements = 2048  (changed)\n" in block, block
    assert "    persistent.one_warp_row = 1024\n" in block and "    codegen.all_true_masks = True\n" in block, block
    assert "pointwise.large_block" not in block  # a section the persistent scheduler does not read
    assert torchfuse_main([*argv, str(tmp_path / "plain")]) == 0
    plain = capsys.readouterr().out
    assert "tuning per kernel:" not in plain
    assert "tuning changed from the defaults: persistent.tile_elements = 2048" in plain, plain


def test_parsers():
    assert parse_size("8x128") == (8, 128) and parse_size("4") == (4,)
    assert parse_option("freeze=true") == ("freeze", True) and parse_option("max_group_ops=64") == ("max_group_ops", 64)
    assert parse_option("cache_dir=none") == ("cache_dir", None) and parse_option("dump_dir=d") == ("dump_dir", "d")
    # a boolean option also takes the spellings its environment variable does; an int option keeps 1 an int
    assert parse_option("interpret=1") == ("interpret", True) and parse_option("freeze=off") == ("freeze", False)
    assert parse_option("compile_threads=1") == ("compile_threads", 1)
    assert hf_model("bert") == "bert" and hf_model("t5-small") == "t5" and hf_model("albert-base-v2") == "albert"
    for bad in ("8x", "ax3", ""):
        with pytest.raises(SpecError):
            parse_size(bad)
    with pytest.raises(SpecError):
        parse_option("freeze")


def test_torchfuse_help_lists_explain(capsys):
    assert torchfuse_main(["--help"]) == 0
    assert "explain" in capsys.readouterr().out


def test_hf_model_without_transformers_says_what_to_install(monkeypatch):
    """``hf:`` models without HuggingFace transformers installed: a one-line error naming
    what to install, not a traceback from the benchmark's suite."""
    import importlib.util

    from torchfuse.report.explain_cli import workload_step

    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "transformers" else find_spec(name, *a))
    with pytest.raises(SpecError, match="pip install transformers"):
        workload_step("hf:bert-base", None, "infer-fp32", "cpu", quick=True)


@pytest.mark.skipif(DEVICE != "cpu", reason="the warning is for graphs off CUDA")
def test_torchfuse_warnings_are_printed_once_in_the_summary(tmp_path, capsys, monkeypatch):
    """``--mode reduce-overhead`` on CPU tensors: the warning that the mode does nothing there is
    in the summary, and not printed a second time on stderr."""
    from torchfuse.runtime import cudagraphs

    monkeypatch.setattr(cudagraphs, "_warned_not_cuda", [False])  # shown once per process
    script = tmp_path / "tiny.py"
    script.write_text(textwrap.dedent("""
        import torch

        def build():
            return torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.GELU()), (torch.randn(2, 8),)
    """))
    with warnings.catch_warnings(record=True) as shown:  # what Python would print on stderr
        warnings.simplefilter("always")
        assert torchfuse_main(["explain", f"{script}:build", "--mode", "reduce-overhead", "--device", "cpu",
                               "-o", str(tmp_path / "tiny")]) == 0
    printed = capsys.readouterr().out
    assert "warning: torchfuse: mode=\"reduce-overhead\"" in printed, printed
    assert not [w for w in shown if "reduce-overhead" in str(w.message)], [str(w.message) for w in shown]


@pytest.mark.parametrize("stem", ["workload_script", "json"], ids=["own-name", "stdlib-name"])
def test_a_scripts_module_imports_by_name_without_shadowing_others(tmp_path, stem):
    """``explain file.py:build`` loads the file as a module registered under its name, as an
    import would (TorchDynamo in torch 2.11 imports a traced function's module by name to read
    its globals); a file named after a loaded module (``json.py``) gets a name of its own and
    leaves that module in place."""
    import importlib
    import json

    from torchfuse.report.explain_cli import file_step

    script = tmp_path / f"{stem}.py"
    script.write_text("import torch\n\ndef build():\n    return (lambda x: torch.relu(x)), (torch.ones(2),)\n")
    file_step(f"{script}:build", "infer-fp32", "cpu")
    loaded = [m for m in list(sys.modules.values()) if getattr(m, "__file__", None) == str(script.resolve())]
    assert len(loaded) == 1
    assert importlib.import_module(loaded[0].__name__) is loaded[0] and loaded[0].torch is torch
    assert sys.modules["json"] is json
