"""Golden-kernel replay: the kernel sources a fixed corpus generates, by hash.

A refactor of the segmenter, the schedulers or codegen must keep every kernel source and
every launch configuration of this corpus as they are, except those it means to change, and
say which and why. The test compiles the corpus, plans every fusion group and compares, per
kernel, the SHA-256 of its source text (the kernel cache key), its scheduler and its launch
configuration with the committed files ``tests/golden/<part>.json``. A mismatch fails listing
every changed, added and removed kernel with its old and new scheduler and launch
configuration, and writes the new sources to a temporary folder.

The corpus, one test (and one golden file) per part:

* ``ops_forward``: every case of ``test_ops.test_op_forward`` (each pointwise op spec over
  its dtypes, alone and between a producer and a consumer), at its shape;
* ``ops_backward``: every case of ``test_ops.test_op_backward`` (training graphs: AOTAutograd's
  forward and backward);
* ``ops_reductions``: every case of ``test_reductions.test_reduction_dtypes`` (each registry
  reduction over its dtypes), at its shape (persistent) and at 4 rows of 65536 (split);
* ``norms_4096x3072`` and ``norms_8192x32768``: the normalization table's graphs
  (``torchfuse bench norms``; copied here so that editing the benchmark leaves the corpus as
  it is): LayerNorm, RMSNorm, softmax, log-softmax and cross-entropy over rows, and
  channels-last BatchNorm, in fp32, bf16 and fp16, inference and training (forward and
  backward). Rows of 3072 are persistent, with inner-outer backward kernels; rows of 32768
  loop, their column sums and cross-entropy's mean over 8192 rows split. BatchNorm runs at
  64x256x56x56 (split column reductions) and 8x960x7x7 (persistent, narrowed column tiles);
* ``random``: dropout in training graphs (forward and backward), bf16 and fp32: alone over
  8192x768 and over 5x37 (one element a thread), as ``native_dropout`` (CUDA tensors' form),
  after a residual add and before a LayerNorm, and after a softmax (the Philox draws, four
  numbers a call, of pointwise and row kernels).

The op cases are the op tests' own: a new spec there adds kernels here (regenerate the files).

Kernels are planned as on an H200: the heuristics pick the configurations of a device of 132
multiprocessors (``Options.launch_configs_for_sm_count``) and cross-entropy takes its GPU
decomposition (``Tuning.decompose.nll_by_mask_devices``). Nothing runs:
graphs are traced with fake tensors, and each compiled graph is planned for its traced sizes
and strides (all a plan needs), so large shapes cost neither memory nor interpreter time.
Kernels are generated, not loaded: no kernel cache is read or written.

Commands (from the repository root, with ``PYTHONPATH=src`` when torchfuse is not installed)::

    python -m pytest -q tests/test_golden_kernels.py                       # compare
    python -m pytest -q tests/test_golden_kernels.py --update-golden       # regenerate the files
    python -m pytest -q tests/test_golden_kernels.py --golden-sources DIR  # also write every source

To see how kernels changed, write the sources on both commits and diff them
(``--golden-sources old`` on the first, ``--golden-sources new`` on the second,
``diff -r old new``). PyTorch's decompositions change between versions, so the comparison
runs only under the PyTorch version (major.minor) the files were generated with, CI's; under
another the tests skip, naming both versions.
"""
from __future__ import annotations

import json
import tempfile
import types
from pathlib import Path
from typing import Callable

import pytest
import torch
import torch.nn.functional as F

import test_ops
from torchfuse import backend
from torchfuse.config import Options, Tuning
from torchfuse.decompose import decomposition_table
from torchfuse.runtime import group
from torchfuse.runtime.executor import GroupRunner

GOLDEN = Path(__file__).parent / "golden"
#: the multiprocessors of an H200, whose launch configurations the corpus is planned with
SM_COUNT = 132
#: PyTorch major.minor: decompositions (and so kernels) may differ between versions
TORCH_VERSION = ".".join(torch.__version__.split("+")[0].split(".")[:2])

pytestmark = pytest.mark.filterwarnings("ignore:.*encountered in:RuntimeWarning")


# ----------------------------------------------------------------------------- planning

#: the GPU's cross-entropy form (the CPU takes it too: the corpus is traced on CPU tensors)
TUNING = Tuning().replace("decompose.nll_by_mask_devices", ("cuda", "cpu"))


def options(**overrides) -> Options:
    """Every option given, none read from the environment: interpreter on, no cache, no dump,
    the launch configurations of an H200 and its cross-entropy form."""
    return Options(interpret=True, cache_dir=None, dump_dir=None, launch_configs_for_sm_count=SM_COUNT,
                   tuning=TUNING, **overrides)


def plan_kernels(kernels: dict[str, tuple], case: str, before: list) -> None:
    """Plan every fusion group of the graphs compiled since ``before`` (a copy of
    ``backend.RECENT``) for their traced sizes and strides, as their first call would, without
    running anything; add ``"<case>/<graph>/<group>": (KernelSource or None, LaunchConfig)`` to
    ``kernels`` (``None``: the group's domain is empty, nothing to launch)."""
    for cg in [g for g in backend.RECENT if all(g is not b for b in before)]:
        cg._prepare([None] * cg.n_slots, (), {})  # a first call's planning, with no inputs to run
        for step in cg.steps:
            if isinstance(step, GroupRunner):
                assert step.failed is None, f"{case}: {step.group.name}: {step.failed}"
                plan = step.plans[()]
                name = f"{case}/{cg.name}/{step.group.name}"
                assert name not in kernels, name
                kernels[name] = (plan.kernel.source if plan.kernel is not None else None, plan.config)


def compile_aten_graph(kernels: dict, case: str, fn: Callable, args: list, opts: Options, decomposed: bool) -> None:
    """Plan ``fn``'s ATen graph compiled as an inference graph: ``decomposed``, functionalized
    and decomposed as AOTAutograd would (the kernels ``test_ops.run_traced`` gets, at a third of
    its cost), else as traced (``test_ops.run_graph``)."""
    from torch.fx.experimental.proxy_tensor import make_fx

    before = list(backend.RECENT)
    traced = lambda *a: tuple(fn(*a))  # noqa: E731
    if decomposed:  # in-place ops become functional ones, as under AOTAutograd
        traced = torch.func.functionalize(traced, remove="mutations_and_views")
    table = decomposition_table(opts.tuning.decompose) if decomposed else None
    gm = make_fx(traced, decomposition_table=table, tracing_mode="fake")(*args)
    backend.compile_graph(gm, list(args), opts, name="inference")
    plan_kernels(kernels, case, before)


def compile_backend(kernels: dict, case: str, fn: Callable, args: list, opts: Options) -> None:
    """Plan ``fn`` traced and handed to the torchfuse backend (AOTAutograd and the compiler, as
    for a graph TorchDynamo captured): the inference graph when no input requires grad, else the
    training graph's forward and backward (compiled at once rather than at the first backward)."""
    from torch.fx.experimental.proxy_tensor import make_fx

    before = list(backend.RECENT)
    grad = any(a.requires_grad for a in args)

    def as_tuple(*a):  # the backend takes tuple outputs
        out = fn(*a)
        return (out,) if isinstance(out, torch.Tensor) else tuple(out)

    gm = make_fx(as_tuple, tracing_mode="fake")(*[a.detach() for a in args])
    with torch.set_grad_enabled(grad), torch._functorch.config.patch(force_non_lazy_backward_lowering=True):
        backend.torchfuse_backend(gm, list(args), options=opts)
    plan_kernels(kernels, case, before)


# ----------------------------------------------------------------------------- the corpus

def ops_forward() -> dict[str, tuple]:
    """test_ops.test_op_forward's graphs: every op spec over its dtypes, alone and chained."""
    opts = options(interpret_integer_division=True)  # as test_ops compiles
    kernels: dict[str, tuple] = {}
    for name, dtype in test_ops.CASES:
        fn = test_ops.alone_and_chained(test_ops.SPECS[name])
        args = test_ops._case_inputs(name, dtype)
        compile_aten_graph(kernels, f"{name}-{test_ops.dtype_id(dtype)}", fn, args, opts, decomposed=True)
    return kernels


def ops_backward() -> dict[str, tuple]:
    """test_ops.test_op_backward's training graphs."""
    opts = options(interpret_integer_division=True)
    kernels: dict[str, tuple] = {}
    for name in test_ops.GRAD_CASES:
        for dtype in test_ops.GRAD_DTYPES.get(name, (test_ops.F32,)):
            xs = test_ops.sample_inputs(name, dtype, specials=False)
            leaves = [x.clone().requires_grad_(x.dtype.is_floating_point) for x in xs]
            compile_backend(kernels, f"{name}-{test_ops.dtype_id(dtype)}", test_ops.SPECS[name].fn, leaves, opts)
    return kernels


#: test_reductions.test_reduction_dtypes' shape (persistent), and one whose few long rows split
REDUCTION_SHAPES = ((5, 37), (4, 65536))


def ops_reductions() -> dict[str, tuple]:
    """test_reductions.test_reduction_dtypes' graphs (every registry reduction over its dtypes,
    reducing dim 1), at REDUCTION_SHAPES."""
    import test_reductions

    opts = options(interpret_integer_division=True)
    kernels: dict[str, tuple] = {}
    with torch._subclasses.fake_tensor.FakeTensorMode():
        inputs = {(shape, dtype): torch.empty(shape, dtype=dtype) for shape in REDUCTION_SHAPES
                  for dtype in {d for _, d in test_reductions.RCASES}}
    for name, dtype in test_reductions.RCASES:
        spec = test_reductions.RSPECS[name]
        fn = lambda a, spec=spec: tuple(test_reductions.outputs(spec.fn(a)))  # noqa: E731
        for shape in REDUCTION_SHAPES:
            case = f"{name}-{'x'.join(map(str, shape))}-{test_ops.dtype_id(dtype)}"
            compile_aten_graph(kernels, case, fn, [inputs[shape, dtype]], opts, decomposed=not spec.decomposed)
    return kernels


def _layer_norm(x, w, b):
    return F.layer_norm(x, (x.shape[-1],), w, b, eps=1e-5)


def _rms_norm(x, w):
    return F.rms_norm(x, (x.shape[-1],), w, eps=1e-6)


def _softmax(x):
    return torch.softmax(x, -1)


def _log_softmax(x):
    return torch.log_softmax(x, -1)


def _cross_entropy(x, t):
    return F.cross_entropy(x, t, ignore_index=-100, label_smoothing=0.1)


def _batch_norm(x, w, b, rm, rv):
    return F.batch_norm(x, rm, rv, w, b, training=True, momentum=0.1, eps=1e-5)


#: the normalization table's graphs over rows: name -> (function, whether it takes weights
#: (how many), whether it takes class targets), as torchfuse.bench.norms builds them
ROW_OPS = {"layer_norm": (_layer_norm, 2, False), "rms_norm": (_rms_norm, 1, False), "softmax": (_softmax, 0, False),
           "log_softmax": (_log_softmax, 0, False), "cross_entropy": (_cross_entropy, 0, True)}
NORM_DTYPES = (torch.float32, torch.bfloat16, torch.float16)
#: per part: the rows of ROW_OPS and BatchNorm's channels-last input
NORM_SHAPES = {"norms_4096x3072": ((4096, 3072), (64, 256, 56, 56)),
               "norms_8192x32768": ((8192, 32768), (8, 960, 7, 7))}


def _norm_cases(rows: tuple, image: tuple):
    """``(case, function, inputs, indices of the inputs that take gradients)`` of one part."""
    n, d = rows
    c = image[1]
    for dtype in NORM_DTYPES:
        dt = test_ops.dtype_id(dtype)
        for name, (fn, weights, targets) in ROW_OPS.items():
            args = [torch.empty(n, d, dtype=dtype)] + [torch.empty(d, dtype=dtype) for _ in range(weights)]
            args += [torch.empty(n, dtype=torch.int64)] if targets else []
            yield f"{name}-{n}x{d}-{dt}", fn, args, range(1 + weights)
        x = torch.empty(image, dtype=dtype).to(memory_format=torch.channels_last)
        yield (f"batch_norm_cl-{'x'.join(map(str, image))}-{dt}", _batch_norm,
               [x] + [torch.empty(c, dtype=dtype) for _ in range(4)], range(3))


def norms(part: str) -> dict[str, tuple]:
    """The normalization table's graphs of one part, inference and training, each dtype."""
    opts = options()
    kernels: dict[str, tuple] = {}
    with torch._subclasses.fake_tensor.FakeTensorMode():  # the sizes, no memory
        cases = list(_norm_cases(*NORM_SHAPES[part]))
    for case, fn, args, grad_idx in cases:
        compile_backend(kernels, case, fn, args, opts)
        compile_backend(kernels, case, fn, [a.detach().requires_grad_(i in grad_idx) for i, a in enumerate(args)], opts)
    return kernels


def _dropout(x):
    return F.dropout(x, 0.1, training=True)


def _native_dropout(x):  # the form a graph of CUDA tensors traces (a CPU one traces bernoulli)
    return torch.ops.aten.native_dropout(x, 0.1, True)[0]


def _dropout_residual_layer_norm(x, r, w, b):
    return F.layer_norm(F.dropout(x, 0.1, training=True) + r, (x.shape[-1],), w, b, eps=1e-12)


def _softmax_dropout(x):
    return F.dropout(torch.softmax(x, -1), 0.1, training=True)


#: random kernels: name -> (function, the inputs' shapes); each in bf16 and fp32, training
RANDOM_CASES = {"dropout-8192x768": (_dropout, [(8192, 768)]),
                "dropout-5x37": (_dropout, [(5, 37)]),
                "native_dropout-8192x768": (_native_dropout, [(8192, 768)]),
                "dropout_residual_layer_norm-4096x768": (_dropout_residual_layer_norm,
                                                         [(4096, 768), (4096, 768), (768,), (768,)]),
                "softmax_dropout-6144x128": (_softmax_dropout, [(6144, 128)])}


def random_kernels() -> dict[str, tuple]:
    """Dropout alone (large, and small enough for one element a thread), after a residual
    LayerNorm, and after a softmax: forward and backward graphs of training, bf16 and fp32."""
    opts = options()
    kernels: dict[str, tuple] = {}
    with torch._subclasses.fake_tensor.FakeTensorMode():
        cases = [(f"{name}-{test_ops.dtype_id(dtype)}", fn, [torch.empty(sh, dtype=dtype) for sh in shapes])
                 for name, (fn, shapes) in RANDOM_CASES.items() for dtype in (torch.bfloat16, torch.float32)]
    for case, fn, args in cases:
        compile_backend(kernels, case, fn, [a.requires_grad_() for a in args], opts)
    return kernels


PARTS = {"ops_forward": ops_forward, "ops_backward": ops_backward, "ops_reductions": ops_reductions,
         **{part: (lambda part=part: norms(part)) for part in NORM_SHAPES}, "random": random_kernels}


# ----------------------------------------------------------------------------- golden files

def describe(config) -> str:
    """A launch configuration in one line: each stage's grid, blocks and warps, and a split
    reduction's chunks."""
    text = "; ".join(f"grid={list(st.grid)} X={st.XBLOCK} R={st.RBLOCK} w={st.num_warps}" for st in config.stages)
    if len(config.stages) > 1:
        text += f"; split={config.split} rchunk={config.rchunk}"
    return text


def entries(kernels: dict[str, tuple]) -> dict[str, dict]:
    """What the golden files hold per kernel: source hash, scheduler, launch configuration."""
    return {name: {"sha256": src.key if src is not None else None, "scheduler": config.scheduler,
                   "launch": describe(config)} for name, (src, config) in kernels.items()}


def write_golden(path: Path, table: dict[str, dict]) -> None:
    """One kernel a line, sorted by name: diffs show the kernels that changed."""
    lines = [f"  {json.dumps(k)}: {json.dumps(table[k], sort_keys=True)}" for k in sorted(table)]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text('{\n "torch": ' + json.dumps(TORCH_VERSION) + ',\n "kernels": {\n' + ",\n".join(lines)
                    + "\n }\n}\n")


def write_sources(root: Path, kernels: dict[str, tuple], names) -> None:
    """``root/<case>/<graph>/<group>.py``: the source text of each kernel of ``names``."""
    for name in names:
        src = kernels[name][0]
        if src is not None:
            *folders, group = name.split("/")
            path = root.joinpath(*folders, group + ".py")
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(src.text)


def differences(old: dict[str, dict], new: dict[str, dict]) -> list[str]:
    """One line per kernel added, removed, or with another source or launch configuration."""
    def show(e):
        return f"{e['scheduler']} {e['launch']}"

    lines = []
    for name in sorted(set(old) | set(new)):
        o, n = old.get(name), new.get(name)
        if o == n:
            continue
        if o is None:
            lines.append(f"added    {name}: {show(n)}")
        elif n is None:
            lines.append(f"removed  {name}: {show(o)}")
        else:
            what = "source" if o["sha256"] != n["sha256"] else "launch"
            sha = f"sha256 {str(o['sha256'])[:12]} -> {str(n['sha256'])[:12]}; " if what == "source" else ""
            configs = show(o) if show(o) == show(n) else f"{show(o)} -> {show(n)}"
            lines.append(f"{what:8} {name}: {sha}{configs}")
    return lines


@pytest.fixture
def h200_planning(monkeypatch):
    """Planned kernels are generated but not loaded (nothing is written to a kernel cache, nor
    imported: loading them is a third of the time, and the op tests run them). (The H200's
    launch configurations and cross-entropy form come with :func:`options`.)"""
    monkeypatch.setattr(group, "load", lambda source, *how: types.SimpleNamespace(source=source))


@pytest.mark.parametrize("part", list(PARTS))
def test_golden_kernels(part, h200_planning, request):
    """Every kernel of the part has the source hash, scheduler and launch configuration of its
    golden file, and the file lists no kernel the corpus no longer makes."""
    path = GOLDEN / f"{part}.json"
    update = request.config.getoption("--update-golden")
    golden = json.loads(path.read_text()) if path.is_file() else None
    if not update:
        assert golden is not None, f"{path} is missing: run with --update-golden"
        if golden["torch"] != TORCH_VERSION:
            pytest.skip(f"{path.name} was generated with PyTorch {golden['torch']}, this is {TORCH_VERSION}")
    kernels = PARTS[part]()
    table = entries(kernels)
    sources_dir = request.config.getoption("--golden-sources")
    if sources_dir:
        write_sources(Path(sources_dir) / part, kernels, kernels)
    if update:
        write_golden(path, table)
        return
    diff = differences(golden["kernels"], table)
    if diff:
        changed = [line.split()[1].rstrip(":") for line in diff if not line.startswith("removed")]
        folder = Path(tempfile.mkdtemp(prefix=f"torchfuse-golden-{part}-"))
        write_sources(folder, kernels, changed)
        pytest.fail(f"{len(diff)} of {len(golden['kernels'])} golden kernels of {part} differ (new sources of the "
                    f"changed and added ones in {folder}; regenerate with --update-golden and say which "
                    "changed and why):\n" + "\n".join(diff), pytrace=False)


def test_differences_name_each_changed_added_and_removed_kernel():
    """The failure report: a kernel whose source hash changed, one whose launch configuration
    changed, one added and one removed are each listed once with their configurations; equal
    kernels are not listed."""
    entry = {"sha256": "a" * 64, "scheduler": "reduction.persistent", "launch": "grid=[8] X=1 R=1024 w=1"}
    old = {"same": entry, "source": entry, "launch": entry, "gone": entry}
    new = {"same": dict(entry), "source": {**entry, "sha256": "b" * 64},
           "launch": {**entry, "scheduler": "reduction.loop", "launch": "grid=[8] X=1 R=4096 w=16"}, "new": entry}
    assert differences(old, new) == [
        "removed  gone: reduction.persistent grid=[8] X=1 R=1024 w=1",
        "launch   launch: reduction.persistent grid=[8] X=1 R=1024 w=1 -> reduction.loop grid=[8] X=1 R=4096 w=16",
        "added    new: reduction.persistent grid=[8] X=1 R=1024 w=1",
        "source   source: sha256 aaaaaaaaaaaa -> bbbbbbbbbbbb; reduction.persistent grid=[8] X=1 R=1024 w=1",
    ]
