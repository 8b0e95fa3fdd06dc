"""``torchfuse conformance`` on a representative set of fusible OpInfo entries, and its table.

The full run (every OpInfo entry and dtype; see README "Correctness checks") takes hours on a
CPU; CI runs the ops below through the same runner, a few samples each, forward and backward,
each op alone and between pointwise neighbours, and requires every (op, dtype) to pass: values
equal to eager's within the dtype's tolerance (or no farther than eager's from float64, where
CPU eager rounds fp16/bf16 intermediates that CUDA's kernels keep in fp32) and the op fused.
Sabotage tests check that a wrong kernel makes the runner report ``fail``; the table tests
read back the Markdown and JSON of a real small run.
"""
from __future__ import annotations

import dataclasses
import json
import re

import pytest
import torch

from conftest import DEVICE

pytest.importorskip("expecttest", reason="PyTorch's OpInfo database needs expecttest (pip install -e '.[test]')")

from torchfuse.config import Options  # noqa: E402
from torchfuse.conformance import catalog, classify, cli, report, runner  # noqa: E402
from torchfuse.ir import ops  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

#: OpInfo entry -> dtypes: pointwise unary and binary (with ``alpha``, where CPU eager rounds
#: ``alpha * b`` to fp16), comparisons into ``where``, reductions (plain, NaN-propagating and
#: Welford), softmax and log_softmax (fp32 accumulation for bf16), layer_norm, hardtanh (whose
#: error input TorchDynamo alone rejects with another exception type), and casts.
CASES = {
    "sigmoid": "float32,bfloat16",
    "add": "float16,int32",
    "mul": "float32,bool",
    "where": "float32",
    "sum": "float32,int64",
    "amax": "bfloat16",
    "var_mean": "float32",
    "softmax": "float32",
    "log_softmax": "bfloat16",
    "nn.functional.layer_norm": "float32",
    "nn.functional.hardtanh": "float32",
    "bfloat16": "float32",
    "double": "float16",
}


@pytest.fixture(scope="module")
def op_db():
    return {catalog.full_name(info): info for info in catalog.load_op_db()}


def options() -> Options:
    return Options.from_env(interpret=DEVICE == "cpu")


def run(op_db, name: str, dtypes: str, max_samples: int = 2) -> dict[str, classify.Verdict]:
    """The runner's verdicts for ``name`` (what ``torchfuse conformance --ops NAME`` computes)."""
    args = cli.parser().parse_args(["--dtypes", dtypes, "--max-samples", str(max_samples),
                                    "--max-error-samples", "1", "--sample-timeout", "0"])
    return cli.run_op(catalog.OpCase(name, op_db[name]), args, options(), DEVICE)


@pytest.mark.parametrize("name", list(CASES))
def test_fusible_op_conforms(op_db, name):
    """Every listed dtype of the op passes: no mismatch with eager, no exception eager did not
    raise, and a fusion group ran (a fallback to ATen here is a regression too)."""
    verdicts = run(op_db, name, CASES[name])
    assert set(verdicts) == set(CASES[name].split(",")), verdicts
    bad = {dt: f"{v.status}: {v.reason}" for dt, v in verdicts.items() if v.status != "pass"}
    assert not bad, bad
    assert all(v.samples >= 1 for v in verdicts.values())


def _sabotage(monkeypatch, name: str, wrong: str) -> None:
    """Make the registry op ``name`` emit ``wrong`` (``{}`` is the correct expression); without
    a cache directory, so that no graph cache entry serves the correct kernel."""
    monkeypatch.setenv("TORCHFUSE_DISABLE_CACHE", "1")
    opdef = ops.REGISTRY[name]
    emit = opdef.emit
    monkeypatch.setitem(ops.REGISTRY, name, dataclasses.replace(
        opdef, emit=lambda a, dt, at: wrong.format(emit(a, dt, at))))


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_wrong_kernel_fails(op_db, monkeypatch, dtype):
    """A kernel off by 1% is a ``fail`` (in fp16 too, where the float64 reference must not
    excuse it), and the reason names the mismatch."""
    _sabotage(monkeypatch, "sigmoid", "({} * 1.01)")
    verdict = run(op_db, "sigmoid", dtype, max_samples=1)[dtype]
    assert verdict.status == "fail", verdict
    assert "not close" in verdict.reason or "differ" in verdict.reason, verdict.reason


def test_wrong_gradient_fails(op_db, monkeypatch):
    """A wrong kernel that only the backward graph uses (``tanh``'s gradient ``grad * (1 - y*y)``
    computes ``1 - y*y`` as one ``fma`` where eager's kernel contracts it, else with a ``sub``) is
    found through the gradients."""
    _sabotage(monkeypatch, "fma", "({} + 0.25)")
    _sabotage(monkeypatch, "sub", "({} + 0.25)")
    verdict = run(op_db, "tanh", "float32", max_samples=1)["float32"]
    assert verdict.status == "fail", verdict
    assert verdict.reason.startswith("gradient "), verdict.reason


def test_graph_traced_with_the_leaves_requires_grad(op_db):
    """``embedding_bag`` picks ``_embedding_bag_forward_only`` (no derivative) when no input
    requires grad: the runner's graph must be traced as the leaves require grad, so that its
    forward and gradients match eager's instead of raising."""
    verdict = run(op_db, "nn.functional.embedding_bag", "float32", max_samples=1)["float32"]
    assert verdict.status in ("pass", "aten"), verdict
    assert verdict.backward, verdict


def test_comparison_with_float64_reference():
    """Off eager by more than the tolerance passes only when no farther from float64 than eager."""
    exact = torch.tensor([0.9501953125, 1.0, -2.0], dtype=torch.float64)
    eager = torch.tensor([0.9512, 1.0, -2.0], dtype=torch.float16)
    closer = torch.tensor([0.9502, 1.0, -2.0], dtype=torch.float16)
    farther = torch.tensor([0.9473, 1.0, -2.0], dtype=torch.float16)
    rtol, atol = catalog.default_tolerance(torch.float16)
    assert runner.compare(closer, eager, rtol, atol) is not None
    assert runner.compare_with_reference(closer, eager, exact, rtol, atol) is None
    problem = runner.compare_with_reference(farther, eager, exact, rtol, atol)
    assert problem is not None and "output 0" in problem
    nan = torch.tensor([float("nan"), 1.0, -2.0], dtype=torch.float16)
    assert runner.compare_with_reference(nan, eager, exact, rtol, atol) is not None
    # eager's NaN where float64 has a number: only a value close to that number passes
    assert runner.compare_with_reference(closer, nan, exact, rtol, atol) is None
    assert runner.compare_with_reference(farther, nan, exact, rtol, atol) is not None
    assert runner.compare_with_reference(torch.tensor([1, 2]), torch.tensor([1, 3]),
                                         torch.tensor([1, 3]), 0, 0) is not None


def _markdown_rows(text: str) -> tuple[list[str], dict[str, list[str]]]:
    """The dtype columns and ``{op: cells}`` of the table in ``table.md``."""
    lines = [ln for ln in text.splitlines() if ln.startswith("| ")]
    header = [c.strip() for c in lines[0].strip("|").split("|")]
    assert header[0] == "op" and set(lines[1].replace("|", "").split()) == {"---"}
    rows = {}
    for ln in lines[2:]:
        cells = [c.strip() for c in ln.strip().strip("|").split("|")]
        rows[cells[0].strip("`")] = cells[1:]
    return header[1:], rows


def _check_written(out, ops_expected: set[str]) -> dict:
    data = json.loads((out / "table.json").read_text())
    assert set(data) == {"meta", "counts", "results"}
    assert set(data["results"]) == ops_expected
    statuses = [v["status"] for row in data["results"].values() for v in row.values()]
    assert set(statuses) <= set(classify.STATUSES)
    assert data["counts"] == {s: statuses.count(s) for s in classify.STATUSES}
    for row in data["results"].values():
        for v in row.values():
            assert {"status", "reason", "samples", "backward", "seconds"} <= set(v)
    meta = data["meta"]
    assert meta["torch"] == torch.__version__ and meta["device"] == DEVICE
    assert "not_run" in meta and meta["seconds"] >= 0

    md = (out / "table.md").read_text()
    c = data["counts"]
    assert f"**{c['pass']} pass, {c['aten']} aten (ran through ATen), {c['fail']} fail, " \
           f"{c['skipped']} skipped.**" in md
    for command in meta.get("commands") or [meta["command"]]:
        assert command in md
    columns, rows = _markdown_rows(md)
    assert set(rows) == ops_expected
    cell = {"pass": "pass", "aten": "aten", "fail": "**FAIL**", "skipped": "skip"}
    for op, row in data["results"].items():
        for dt, cellv in zip(columns, rows[op]):
            assert cellv == (cell[row[dt]["status"]] if dt in row else ""), (op, dt, cellv)
    assert set(columns) == {dt for row in data["results"].values() for dt in row}
    fails = re.search(r"^## Fails\n\n(.*?)\n\n## ", md, re.S | re.M).group(1)
    listed = [ln for ln in fails.splitlines() if ln.startswith("- ")]
    assert len(listed) == c["fail"] and (c["fail"] or fails == "None.")
    return data


def test_table_from_a_real_run(tmp_path, capsys):
    """``torchfuse conformance`` writes table.json and table.md that agree with each other, says
    where it wrote them, and shards merge into one table with both commands and every (op,
    dtype)."""
    common = ["--dtypes", "float32,int32", "--max-samples", "1", "--max-error-samples", "0",
              "--no-backward", "--quiet"]
    ops_run = {"neg", "sum", "nonzero"}  # fused pointwise, a reduction, ATen (graph break)
    for i in (1, 2):
        assert cli.main(["--ops", ",".join(sorted(ops_run)), "--shard", f"{i}/2", "--out",
                         str(tmp_path / f"s{i}"), *common]) == 0
    one, two = (_check_written(tmp_path / f"s{i}", shard) for i, shard in ((1, {"neg", "nonzero"}), (2, {"sum"})))
    assert one["meta"]["shard"] == [1, 2] and "--shard 1/2" in one["meta"]["command"]
    printed = capsys.readouterr().out
    assert f"table: {tmp_path / 's2' / 'table.md'} and {tmp_path / 's2' / 'table.json'}" in printed, printed

    assert cli.main(["--merge", str(tmp_path / "s1"), str(tmp_path / "s2" / "table.json"),
                     "--out", str(tmp_path / "merged")]) == 0
    merged = _check_written(tmp_path / "merged", ops_run)
    assert len(merged["meta"]["commands"]) == 2
    assert merged["results"]["neg"]["float32"]["status"] == "pass"
    assert {v["status"] for v in merged["results"]["sum"].values()} <= {"pass", "aten"}
    assert merged["results"]["nonzero"]["float32"]["status"] == "aten"
    # the printed summary names ATen as the table does
    assert "aten (ran through ATen)" in printed and "fallback" not in printed
    from torchfuse.conformance.cli import source_commit

    commit = source_commit()
    assert one["meta"]["commit"] == commit and merged["meta"].get("commits", [None]) == [commit]
    if commit is not None:
        assert commit in (tmp_path / "merged" / "table.md").read_text()


def test_tables_written_before_aten_was_named_read_the_same(tmp_path):
    """A table whose entries say ``fallback`` (the older name) reads as ``aten`` and renders
    as the cell ``aten``."""
    old = {"meta": {"command": "c"}, "results": {"nonzero": {"float32": {"status": "fallback", "reason": "r"}}}}
    (tmp_path / "table.json").write_text(json.dumps(old))
    table, _ = report.read_json(tmp_path / "table.json")
    assert table["nonzero"]["float32"].status == "aten"
    assert "| `nonzero` | aten |" in report.to_markdown(table, {})


def test_compare_lists_every_differing_verdict(tmp_path, capsys):
    """``--compare`` lists each (op, dtype) whose verdict differs between two tables with both
    verdicts and reasons, and the entries and dtypes only one table has."""
    cpu = {"sin": {"float32": classify.Verdict("pass"), "float16": classify.Verdict("pass")},
           "cos": {"float32": classify.Verdict("aten", "aten.cos: why")}}
    gpu = {"sin": {"float32": classify.Verdict("fail", "output 0: off"), "float16": classify.Verdict("pass"),
                   "bfloat16": classify.Verdict("pass")},
           "tan": {"float32": classify.Verdict("pass")}}
    report.write(cpu, {"device": "cpu"}, tmp_path / "cpu")
    report.write(gpu, {"device": "cuda", "gpu": "NVIDIA H200"}, tmp_path / "gpu")
    assert cli.main(["--compare", str(tmp_path / "cpu"), str(tmp_path / "gpu" / "table.json"),
                     "--out", str(tmp_path / "diff")]) == 0
    text = (tmp_path / "diff" / "differences.md").read_text()
    assert text == capsys.readouterr().out
    assert "- `sin` float32: pass / **FAIL**" in text and "output 0: off" in text
    assert "- `sin` bfloat16: only in" in text and "- `cos`: only in" in text and "- `tan`: only in" in text
    assert "`sin` float16" not in text and "NVIDIA H200" in text
    assert "2 (op, dtype) pairs in both; 1 with another verdict; 3 entries or dtypes in one table only." in text


def test_merge_replaces_rerun_dtypes_only():
    """A later part replaces the (op, dtype) verdicts it has and keeps the rest of the row."""
    first = ({"sin": {"float32": classify.Verdict("fail", "x"), "float16": classify.Verdict("pass")}},
             {"command": "a", "not_run": ["cos"], "seconds": 3.0, "shard": [1, 1]})
    second = ({"sin": {"float32": classify.Verdict("pass")}}, {"command": "b", "seconds": 1.0})
    table, meta = report.merge([first, second])
    assert {dt: v.status for dt, v in table["sin"].items()} == {"float32": "pass", "float16": "pass"}
    assert meta["commands"] == ["a", "b"] and meta["not_run"] == ["cos"] and meta["seconds"] == 4.0


def test_op_patterns_match_last_name_part_and_report_misses(op_db):
    """``--ops layer_norm`` selects ``nn.functional.layer_norm``; a pattern that selects
    nothing is named (and alone makes the command fail) instead of running zero ops quietly."""
    infos = list(op_db.values())
    names = [c.name for c in catalog.select_ops(infos, ["layer_norm"])]
    assert "nn.functional.layer_norm" in names
    assert catalog.unmatched_patterns(infos, ["layer_norm", "no_such_op"]) == ["no_such_op"]
    assert cli.main(["--ops", "no_such_op", "--list"]) == 2
