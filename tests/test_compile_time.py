"""Compile time: the phases of a first call, the graph cache and compiling each distinct kernel
once (runtime.phases, runtime.plan_cache, runtime.compile). Runs on CPU tensors through Triton's
interpreter."""
from __future__ import annotations

import dataclasses
import json
import logging
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

import torchfuse
from torchfuse import backend
from torchfuse.config import Tuning
from torchfuse.runtime import group, plan_cache
from torchfuse.runtime.compile import compile_all
from torchfuse.runtime.phases import PHASES, PhaseWindow


def program(x, w):
    return torch.softmax(x * 2 + w, -1).sum(0) + torch.nn.functional.gelu(x).mean()


def inputs():
    g = torch.Generator().manual_seed(0)
    return torch.randn(8, 16, generator=g), torch.randn(16, generator=g)


class Counting:
    """Wraps ``module.name`` for the test's duration to count its calls."""

    def __init__(self, monkeypatch, module, name: str):
        self.calls = 0
        self.original = getattr(module, name)
        monkeypatch.setattr(module, name, self)

    def __call__(self, *args, **kwargs):
        self.calls += 1
        return self.original(*args, **kwargs)


def CountingGenerate(monkeypatch) -> Counting:
    """Counts the kernels the code generator generates."""
    return Counting(monkeypatch, group, "generate")


def compile_and_check(cache_dir, **options):
    """Compile ``program`` anew (TorchDynamo's and torchfuse's in-memory state reset), run it,
    check it against eager; returns the compiled graph's graph cache."""
    torch._dynamo.reset()
    x, w = inputs()
    known = {id(c): c for c in backend.RECENT}  # held: an evicted graph's id could be reused
    compiled = torchfuse.compile(program, interpret=True, cache_dir=str(cache_dir), **options)
    torch.testing.assert_close(compiled(x, w), program(x, w))
    (graph,) = [c for c in backend.RECENT if id(c) not in known]
    return graph.plan_cache


def entry_files(cache_dir) -> list[Path]:
    """The graph cache's entries (not its indexes)."""
    return sorted(p for p in Path(cache_dir, "graphs").rglob("*.json") if p.parent.name != "index")


def test_first_call_phases_add_up_and_explain_reports_them(tmp_path):
    torch._dynamo.reset()
    x, w = inputs()
    compiled = torchfuse.compile(program, interpret=True, cache_dir=None)
    with PhaseWindow() as window:
        out = compiled(x, w)
    torch.testing.assert_close(out, program(x, w))
    phases = window.seconds
    for phase in ("dynamo", "aot_autograd", "passes", "segment", "codegen", "first_launch"):
        assert phases.get(phase, 0) > 0, phases
    named = sum(v for k, v in phases.items() if k in PHASES)
    assert named <= phases["total"] + 1e-3 and phases["other"] >= 0
    assert named + phases["other"] == pytest.approx(phases["total"], abs=2e-3)
    with PhaseWindow() as later:  # compiled: no compile phase runs again
        compiled(x, w)
    assert not {"dynamo", "aot_autograd", "segment", "codegen"} & set(later.seconds), later.seconds

    result = torchfuse.explain(program, x, w, verbose=False, cache_dir=str(tmp_path))
    assert result.compile_phases["segment"] > 0 and result.compile_phases["codegen"] > 0
    assert "time by phase: dynamo" in result.summary()
    # the graphs' stages count the seconds the phases count: segmentation alike (to the
    # phases' rounding); the passes phase adds the captured graph's rewrites to the stages
    stages = result.stage_seconds()
    assert stages["segment"] == pytest.approx(result.compile_phases["segment"], abs=1e-4)
    assert 0 < stages["ir"] <= result.compile_phases["passes"] + 1e-4


def test_graph_cache_hit_skips_code_generation(tmp_path, monkeypatch):
    counter = CountingGenerate(monkeypatch)
    first = compile_and_check(tmp_path)
    assert first.status == "miss" and first.misses == counter.calls > 0
    assert first.miss_reason.startswith("no entry for this graph's code")
    assert len(entry_files(tmp_path)) == 1
    generated = counter.calls
    second = compile_and_check(tmp_path)  # torchfuse's and Dynamo's in-memory state is new
    assert second.status == "hit" and second.hits == generated
    assert backend.RECENT[-1].segmentation.replayed  # and no partition is searched for
    assert counter.calls == generated  # nothing generated again
    # the entry is plain JSON naming its key, with the payload's hash
    data = json.loads(entry_files(tmp_path)[0].read_text())
    assert data["key"] == second.key and data["schema"] == plan_cache.SCHEMA
    assert all(src["text"].startswith("import") or "triton" in src["text"] for src in data["payload"]["sources"].values())


@pytest.mark.parametrize("change", ["option", "tuning", "version", "torch"])
def test_graph_cache_misses_when_what_decides_the_result_changes(tmp_path, monkeypatch, change):
    counter = CountingGenerate(monkeypatch)
    compile_and_check(tmp_path)
    generated = counter.calls
    options = {}
    if change == "option":
        options = {"exact_rounding": False}
    elif change == "tuning":  # a heuristic's constant (as a benchmark variant sets one)
        tuning = Tuning()
        persistent = dataclasses.replace(tuning.persistent, tile_elements=tuning.persistent.tile_elements * 2)
        options = {"tuning": dataclasses.replace(tuning, persistent=persistent)}
    elif change == "version":
        monkeypatch.setattr(torchfuse, "__version__", torchfuse.__version__ + ".post1")
    else:
        monkeypatch.setattr(torch, "__version__", torch.__version__ + "+other")
    again = compile_and_check(tmp_path, **options)
    assert again.status == "miss" and counter.calls == 2 * generated
    assert not backend.RECENT[-1].segmentation.replayed
    assert len(entry_files(tmp_path)) == 2
    # the miss says what changed against the entry stored for the same graph
    said = {"option": "options: exact_rounding True -> False",
            "tuning": "options: tuning.persistent.tile_elements 4096 -> 8192",
            "version": "versions: torchfuse", "torch": "versions: torch"}[change]
    assert "the nearest differs in" in again.miss_reason and said in again.miss_reason, again.miss_reason


def test_unusable_graph_cache_index_only_loses_the_explanation(tmp_path, monkeypatch):
    """An index that is not JSON (or lists garbage) is ignored: the miss is explained as a first
    compile, the entry is still written and then hit, and the index is rewritten whole."""
    compile_and_check(tmp_path)
    (index,) = (tmp_path / "graphs" / "index").glob("*.json")
    index.write_text("{not json")
    again = compile_and_check(tmp_path, exact_rounding=False)
    assert again.status == "miss" and again.miss_reason.startswith("no entry for this graph's code")
    assert compile_and_check(tmp_path, exact_rounding=False).status == "hit"
    assert len(json.loads(index.read_text())) == 1


def test_graph_cache_ignores_options_that_do_not_change_code(tmp_path, monkeypatch):
    counter = CountingGenerate(monkeypatch)
    compile_and_check(tmp_path)
    generated = counter.calls
    again = compile_and_check(tmp_path, progress=False, compile_threads=2, dump_dir=str(tmp_path / "dump"))
    assert again.status == "hit" and counter.calls == generated


def _truncate(path: Path) -> None:
    raw = path.read_bytes()
    path.write_bytes(raw[: len(raw) // 2])


def _edit_source(path: Path) -> None:
    """Change one kernel's text (the payload hash no longer matches)."""
    data = json.loads(path.read_text())
    src = next(iter(data["payload"]["sources"].values()))
    src["text"] = src["text"].replace("tl.program_id(0)", "tl.program_id(0) + 1")
    path.write_text(json.dumps(data))


def _edit_source_and_hash(path: Path) -> None:
    """Change one kernel's text and recompute the payload hash (the kernel key no longer matches)."""
    data = json.loads(path.read_text())
    src = next(iter(data["payload"]["sources"].values()))
    src["text"] = src["text"].replace("tl.program_id(0)", "tl.program_id(0) + 1")
    data["sha256"] = plan_cache._payload_hash(data["payload"])
    path.write_text(json.dumps(data))


def _garbage(path: Path) -> None:
    path.write_bytes(b"\x80\x81 not json")


def _other_schema(path: Path) -> None:
    data = json.loads(path.read_text())
    data["schema"] = plan_cache.SCHEMA + 1
    path.write_text(json.dumps(data))


def _edit_partitions(path: Path, edit) -> None:
    """Replace the stored partitions by ``edit(partitions)`` and recompute the payload hash (the
    entry passes every check but the replay's own)."""
    data = json.loads(path.read_text())
    data["payload"]["partitions"] = edit(data["payload"]["partitions"])
    data["sha256"] = plan_cache._payload_hash(data["payload"])
    path.write_text(json.dumps(data))


def _partition_out_of_range(path: Path) -> None:
    _edit_partitions(path, lambda parts: [[[0, 10 ** 6]]])


def _partition_groups_merged(path: Path) -> None:
    """One group of every grouped node: the softmax's and the mean's reductions share no domain."""
    def merge(parts):
        assert len(parts[0]) >= 2
        return [[sorted(i for g in parts[0] for i in g)]] + parts[1:]

    _edit_partitions(path, merge)


def _partition_malformed(path: Path) -> None:
    _edit_partitions(path, lambda parts: [[["0", 1]]])


@pytest.mark.parametrize("damage", [_truncate, _edit_source, _edit_source_and_hash, _garbage, _other_schema,
                                    _partition_malformed])
def test_damaged_graph_cache_entry_is_ignored_and_rewritten(tmp_path, monkeypatch, damage, caplog):
    counter = CountingGenerate(monkeypatch)
    compile_and_check(tmp_path)
    generated = counter.calls
    (path,) = entry_files(tmp_path)
    damage(path)
    with caplog.at_level("INFO", logger="torchfuse.cache"):  # (TORCHFUSE_LOGS=cache shows it)
        again = compile_and_check(tmp_path)  # values checked against eager
    assert again.status.startswith("ignored"), again.status
    assert not backend.RECENT[-1].segmentation.replayed
    assert counter.calls == 2 * generated
    assert any("graph cache entry" in r.getMessage() and "ignored" in r.getMessage() for r in caplog.records)
    third = compile_and_check(tmp_path)  # the rewritten entry is whole again
    assert third.status == "hit" and counter.calls == 2 * generated
    assert backend.RECENT[-1].segmentation.replayed


def CountingPartition(monkeypatch) -> Counting:
    """Counts the runs of the segmenter's partition search."""
    import torchfuse.segment as segment_module

    return Counting(monkeypatch, segment_module, "partition")


@pytest.mark.parametrize("damage", [_partition_out_of_range, _partition_groups_merged])
def test_stored_partition_that_does_not_fit_the_graph_is_searched_again(tmp_path, monkeypatch, damage, caplog):
    searches = CountingPartition(monkeypatch)
    compile_and_check(tmp_path)
    cold = str(backend.RECENT[-1].segmentation)
    searched = searches.calls
    (path,) = entry_files(tmp_path)
    damage(path)
    with caplog.at_level("DEBUG", logger="torchfuse.cache"):
        again = compile_and_check(tmp_path)  # values checked against eager
    assert again.status == "hit"  # the entry is whole; its partition does not fit the graph
    assert not backend.RECENT[-1].segmentation.replayed and searches.calls == 2 * searched
    assert str(backend.RECENT[-1].segmentation) == cold
    assert any("stored partition refused" in r.getMessage() for r in caplog.records)
    compile_and_check(tmp_path)  # the searched partition replaced the stored one
    assert backend.RECENT[-1].segmentation.replayed and searches.calls == 2 * searched


def training_program(x, w, b):
    h = torch.nn.functional.layer_norm(x, (x.shape[-1],), w, b)
    return torch.nn.functional.gelu(h * 2).sum(-1)


def test_graph_cache_hit_replays_the_segmentation_of_training_graphs(tmp_path, monkeypatch):
    """Forward and backward graphs of a second process (here: fresh in-memory state) replay the
    stored partitions, without a search, to the same steps; values and gradients as eager."""
    from test_ops import DEVICE

    searches = CountingPartition(monkeypatch)
    g = torch.Generator().manual_seed(0)
    # on the test device: the weight gradients are split column sums, whose grid-stride loop
    # the Triton 3.6 interpreter cannot run (a GPU machine's Triton compiles them instead)
    x, w, b = (t.to(DEVICE) for t in (torch.randn(6, 32, generator=g), torch.randn(32, generator=g),
                                       torch.randn(32, generator=g)))
    expected = [t.detach().clone().requires_grad_() for t in (x, w, b)]
    training_program(*expected).sum().backward()

    def run():
        torch._dynamo.reset()
        known = {id(c): c for c in backend.RECENT}  # held: an evicted graph's id could be reused
        args = [t.detach().clone().requires_grad_() for t in (x, w, b)]
        out = torchfuse.compile(training_program, interpret=DEVICE == "cpu", cache_dir=str(tmp_path))(*args)
        out.sum().backward()
        torch.testing.assert_close(out, training_program(*expected))
        for got, want in zip(args, expected):
            torch.testing.assert_close(got.grad, want.grad)
        return [c for c in backend.RECENT if id(c) not in known]

    cold = run()
    assert [c.name for c in cold] == ["forward", "backward"]
    assert not any(c.segmentation.replayed for c in cold)
    searched = searches.calls
    assert searched >= 2
    warm = run()
    assert all(c.segmentation.replayed for c in warm) and searches.calls == searched
    assert [str(c.segmentation) for c in warm] == [str(c.segmentation) for c in cold]
    assert [c.segmentation.partitions for c in warm] == [c.segmentation.partitions for c in cold]


def test_graph_cache_off_without_cache_dir(monkeypatch):
    counter = CountingGenerate(monkeypatch)
    torch._dynamo.reset()
    x, w = inputs()
    torch.testing.assert_close(torchfuse.compile(program, interpret=True, cache_dir=None)(x, w), program(x, w))
    assert backend.RECENT[-1].plan_cache is None and counter.calls > 0


# -- compiling each distinct kernel once --------------------------------------------------------

class FakeKernel:
    """Stands in for a loaded kernel: counts warm-ups; stage 1 fails."""

    def __init__(self, key):
        self.source = SimpleNamespace(key=key)
        self.warmups = []

    def warmup(self, stage, grid, args, xblock, rblock, num_warps, fp_fusion):
        self.warmups.append((stage, tuple(a.dtype if isinstance(a, torch.Tensor) else a for a in args)))
        if stage == 1:
            raise RuntimeError("stage 1 does not compile")


def test_identical_jobs_compile_once_and_share_their_result():
    a, b = FakeKernel("k1"), FakeKernel("k2")
    f32, f16 = torch.empty(4), torch.empty(4, dtype=torch.float16)
    job = lambda k, stage, t, n: (k, stage, (1,), [t, n], 64, 1, 4, False)  # noqa: E731
    jobs = [job(a, 0, f32, 32), job(a, 0, torch.empty(8), 48),  # same dtype, both multiples of 16: one compile
            job(a, 0, f16, 32),  # another dtype: compiled
            job(a, 0, f32, 1),  # an argument equal to 1 is specialized: compiled
            job(b, 0, f32, 32),  # another kernel: compiled
            job(a, 1, f32, 32), job(a, 1, f32, 64)]  # failing, once
    done = []
    errors = compile_all(jobs, threads=2, on_done=lambda: done.append(1))
    assert len(done) == len(jobs)
    assert sorted(a.warmups, key=str) == sorted([(0, (torch.float32, 32)), (0, (torch.float16, 32)),
                                                 (0, (torch.float32, 1)), (1, (torch.float32, 32))], key=str)
    assert b.warmups == [(0, (torch.float32, 32))]
    assert errors[:5] == [None] * 5
    assert isinstance(errors[5], RuntimeError) and errors[6] is errors[5]


_FRESH_PROCESS = """
import sys, torch, torchfuse
from torchfuse import backend
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.LayerNorm(16), torch.nn.Linear(16, 16), torch.nn.GELU())
x = torch.randn(4, 16, requires_grad=True)
compiled = torchfuse.compile(model, interpret=True, cache_dir=sys.argv[1])
out = compiled(x)
out.sum().backward()
grad = x.grad.clone()
x.grad = None
model(x).sum().backward()
torch.testing.assert_close(grad, x.grad)
print(" ".join(f"{c.name}:{c.plan_cache.status}:{c.plan_cache.hits}" for c in backend.RECENT))
"""


@pytest.mark.slow
def test_graph_cache_hit_in_a_fresh_process(tmp_path):
    """The key is the same in another process (no addresses or set orders in it)."""
    import os
    import subprocess

    script = tmp_path / "train_step.py"
    script.write_text(_FRESH_PROCESS)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    runs = [subprocess.run([sys.executable, str(script), str(tmp_path / "cache")], capture_output=True, text=True,
                           env=env, timeout=300) for _ in range(2)]
    for r in runs:
        assert r.returncode == 0, r.stderr[-2000:]
    first, second = (r.stdout.split() for r in runs)
    assert [s.split(":")[:2] for s in first] == [["forward", "miss"], ["backward", "miss"]], first
    assert [s.split(":")[:2] for s in second] == [["forward", "hit"], ["backward", "hit"]], second
    assert all(int(s.split(":")[2]) > 0 for s in second)


@pytest.mark.skipif(torch.cuda.is_available() and torch.cuda.device_count() < 2,
                    reason="a fake tensor on cuda:1 needs a second device where CUDA is present")
def test_compile_jobs_name_their_cuda_device():
    """A compile thread compiles and loads for the device of the job's tensors (threads start on
    device 0; under DDP a rank's kernels belong on its own GPU)."""
    from torch._subclasses import FakeTensorMode

    from torchfuse.runtime.compile import job_device

    with FakeTensorMode():
        on_1 = torch.empty(4, device="cuda:1")
    assert job_device((None, 0, (1,), [on_1, 7], 64, 1, 4, True)) == 1
    assert job_device((None, 0, (1,), [torch.empty(4), 7], 64, 1, 4, True)) is None


def test_recompile_log_says_what_the_warm_ups_did_not_cover(caplog):
    """A compile at launch is told apart from a module load: the log names the argument whose
    specialization (here a pointer's 16-byte alignment) no warm-up had."""
    from torchfuse.runtime.compile import Kernel

    class Stub:
        def warmup(self, *args, **kwargs):
            return None

    kernel = Kernel(FakeKernel("k").source, None, [Stub()], interpret=False)
    base = torch.empty(64)
    with caplog.at_level(logging.INFO, logger="torchfuse.recompile"):
        kernel.warmup(0, (1,), [base[:32], 32], 64, 1, 4, True)
        assert kernel.coverage(0, [base[8:40], 32], 64, 1, 4, True) == "its warm-up had this specialization"
        said = kernel.coverage(0, [base[1:33], 32], 64, 1, 4, True)
        assert said.startswith("not warmed up") and "argument 0" in said and "unaligned" in said
        assert "num_warps" in kernel.coverage(0, [base[:32], 32], 64, 1, 8, True)
    assert Kernel(FakeKernel("k").source, None, [Stub()], interpret=False).coverage(
        0, [base, 32], 64, 1, 4, True) == "no warm-up in this process"


def _helper_kernel(i: int):
    """A kernel module as code generation writes one: the header, then a kernel calling a
    helper that calls another (``tf_div_floor_int`` calls ``tf_div_trunc_int``)."""
    import hashlib

    from torchfuse.codegen.triton import HEADER, KernelSource

    body = (f"@triton.jit\ndef k{i}(x_ptr, y_ptr, n, XBLOCK: tl.constexpr):\n"
            "    o = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)\n"
            "    x = tl.load(x_ptr + o, mask=o < n)\n"
            f"    tl.store(y_ptr + o, tf_div_floor_int(x, -3) + {i}, mask=o < n)\n")
    text = HEADER + "\n\n" + body
    return KernelSource(name=f"k{i}", text=text, key=hashlib.sha256(text.encode()).hexdigest(), params=(),
                        stages=(f"k{i}",))


@pytest.mark.parametrize("interpret", [False, True], ids=["jit", "interpreted"])
def test_kernel_modules_share_the_header_made_once(tmp_path, interpret):
    """Kernel modules take the header's helpers from one namespace made once per process and
    helper forms (each helper a Triton function whose source Triton reads: most of a module's
    load time), and their own functions keep their line numbers in the module's text; under the
    interpreter the helpers are interpreted with their host twins in place, and a kernel
    computes what PyTorch does."""
    import inspect

    from torchfuse.codegen.helpers import HOST_VARIANTS
    from torchfuse.runtime import compile as kernel_compile
    from torchfuse.runtime.cache import SourceStore

    store = SourceStore(tmp_path)
    sources = [_helper_kernel(1000 + 2 * k + interpret) for k in range(2)]
    kernels = [kernel_compile.load(s, store, interpret) for s in sources]
    a, b = (k.fns[0].fn.__globals__ for k in kernels)
    assert a is not b and a["tf_div_floor_int"] is b["tf_div_floor_int"]
    for kernel, source in zip(kernels, sources):
        lines, first = inspect.getsourcelines(kernel.fns[0].fn)
        assert source.text.splitlines(True)[first - 1:first - 1 + len(lines)] == lines
    if not interpret:
        return
    for name, host in HOST_VARIANTS.items():
        if host in a:
            assert a[name] is a[host]
    x = torch.arange(-20, 20, dtype=torch.int32)
    y = torch.empty_like(x)
    kernels[0].fns[0][(1,)](x, y, x.numel(), XBLOCK=64)
    torch.testing.assert_close(y, torch.div(x, -3, rounding_mode="floor") + int(sources[0].name[1:]))
