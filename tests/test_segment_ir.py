"""The segmenter and the schedulers on small IR built by hand (not through ``torch.compile``):
which fusion groups a graph becomes, which scheduler the registry picks for them at the
thresholds its heuristics document (read from ``Tuning`` and ``Options``), and the generated
kernels' values under Triton's interpreter against eager PyTorch."""
from __future__ import annotations

import dataclasses

import pytest
import torch

from torchfuse import schedulers
from torchfuse.config import Options, Tuning
from torchfuse.ir import ops
from torchfuse.ir.graph import Graph, Node, TensorMeta, Value
from torchfuse.runtime.executor import CompiledGraph, GroupRunner
from torchfuse.segment import segment

F32 = torch.float32
CPU = torch.device("cpu")
T = Tuning()
H200 = 132  # multiprocessors of the GPU whose launch configurations are planned


class Builder:
    """Builds a :class:`Graph` of registry ops on contiguous fp32 CPU tensors."""

    def __init__(self):
        self.inputs: list[Value] = []
        self.nodes: list[Node] = []

    def _value(self, shape: tuple[int, ...], dtype=F32) -> Value:
        stride, step = [], 1
        for s in reversed(shape):
            stride.append(step)
            step *= s
        return Value(f"v{len(self.inputs) + len(self.nodes)}", TensorMeta(dtype, tuple(shape), tuple(reversed(stride)),
                                                                          CPU))

    def input(self, *shape: int) -> Value:
        v = self._value(shape)
        self.inputs.append(v)
        return v

    def op(self, name: str, *args, shape: tuple[int, ...], **kwargs) -> Value:
        """Registry op ``name`` on ``args`` (values or numbers) as its ATen overload takes them;
        its result has ``shape`` (fp32)."""
        opdef = ops.REGISTRY[name]
        inputs, attrs = opdef.parse(args, kwargs)
        if opdef.kind == "pointwise":
            examples = [torch.empty((), dtype=x.meta.dtype) if isinstance(x, Value) else x for x in inputs]
            attrs["compute_dtype"] = ops.compute_dtype_for_promotion(opdef, attrs, examples)
        out = self._value(shape)
        node = Node(op=name, inputs=inputs, attrs=attrs, outputs=[out], target=opdef.aten[0], args=args,
                    kwargs=kwargs)
        out.producer = node
        self.nodes.append(node)
        return out

    def graph(self, *outputs: Value) -> Graph:
        return Graph(list(self.inputs), list(self.nodes), list(outputs))


def _options(**overrides) -> Options:
    return Options(interpret=True, cache_dir=None, dump_dir=None, **overrides)


def _softmax(rows: int, cols: int) -> Graph:
    """``exp(x - amax(x)) / sum(...)`` over rows of ``cols``: a row reduction whose results are
    broadcast back over the row."""
    b = Builder()
    x = b.input(rows, cols)
    m = b.op("amax", x, [1], True, shape=(rows, 1))
    e = b.op("exp", b.op("sub", x, m, shape=(rows, cols)), shape=(rows, cols))
    s = b.op("sum", e, [1], True, shape=(rows, 1))
    return b.graph(b.op("div", e, s, shape=(rows, cols)))


def _column_sums(rows: int, cols: int) -> Graph:
    """``(2 * x).sum(0)``: a column (outer) reduction."""
    b = Builder()
    x = b.input(rows, cols)
    return b.graph(b.op("sum", b.op("mul", x, 2.0, shape=(rows, cols)), [0], shape=(cols,)))


def _planned(graph: Graph, options: Options) -> list:
    """The launch configuration of each fusion group of ``graph``, for contiguous inputs."""
    compiled = CompiledGraph(segment(graph, options), options, name="ir")
    configs = []
    for runner in compiled.steps:
        if isinstance(runner, GroupRunner):
            tensors = [runner.group.inputs[i] for i in runner.tensor_in]
            plan = runner.make_plan({}, [t.meta.shape for t in tensors], [t.meta.stride for t in tensors],
                                    compile_now=False)
            configs.append(plan.config)
    return configs


def _run(graph: Graph, options: Options, *inputs: torch.Tensor):
    """The graph's outputs from its generated kernels (Triton's interpreter) and its runners."""
    compiled = CompiledGraph(segment(graph, options), options, name="ir")
    out = compiled(list(inputs))
    used = {next(iter(r.plans.values())).config.scheduler for r in compiled.steps if isinstance(r, GroupRunner)}
    return out, used


def test_a_pointwise_chain_is_one_pointwise_group():
    b = Builder()
    x, y = b.input(6, 40), b.input(6, 40)
    t = b.op("mul", x, 2.0, shape=(6, 40))
    t = b.op("exp", t, shape=(6, 40))
    t = b.op("add", t, y, shape=(6, 40))
    out = b.op("relu", t, shape=(6, 40))
    graph = b.graph(out)
    seg = segment(graph, _options())
    assert len(seg.groups) == 1 and not seg.groups[0].domain.reduced, str(seg)
    assert [s.name for s in schedulers.candidates(seg.groups[0])] == ["pointwise"]
    a, c = torch.randn(6, 40), torch.randn(6, 40)
    got, used = _run(graph, _options(), a, c)
    assert used == {"pointwise"}
    torch.testing.assert_close(got[0], torch.relu(torch.exp(a * 2.0) + c))


def test_a_row_reduction_and_its_broadcast_are_one_group():
    seg = segment(_softmax(4, 32), _options())
    assert len(seg.groups) == 1 and seg.groups[0].domain.reduced, str(seg)
    names = {s.name for s in schedulers.candidates(seg.groups[0])}
    assert {"reduction.persistent", "reduction.loop"} <= names and "reduction.split" not in names


@pytest.mark.parametrize("persistent_max", [1024, 8192])
def test_rows_up_to_the_persistent_limit_are_persistent_and_longer_ones_looped(persistent_max):
    """On a GPU target, a row of at most ``Options.persistent_max_elements`` elements (padded
    to a power of two) stays in registers; one element more and the row is reduced in a loop."""
    options = _options(persistent_max_elements=persistent_max, launch_configs_for_sm_count=H200)
    inside = _planned(_softmax(256, persistent_max), options)
    outside = _planned(_softmax(256, persistent_max + 1), options)
    assert [c.scheduler for c in inside] == ["reduction.persistent"]
    assert inside[0].RBLOCK == persistent_max
    assert [c.scheduler for c in outside] == ["reduction.loop"]


@pytest.mark.parametrize("cols", [24, 100])
def test_persistent_and_looped_rows_match_eager(cols):
    """The same threshold under the interpreter (``persistent_max_elements=64``): rows of 24
    run persistent, rows of 100 looped (in steps of ``Tuning.looped.interpret_rblock``, lowered
    here to 32 so the loop runs several steps with a masked last one); values as eager's."""
    options = _options(persistent_max_elements=64, tuning=T.replace("looped.interpret_rblock", 32))
    x = torch.randn(5, cols)
    x[1, 3] = 40.0
    got, used = _run(_softmax(5, cols), options, x)
    assert used == {"reduction.persistent" if cols <= 64 else "reduction.loop"}
    torch.testing.assert_close(got[0], torch.softmax(x, 1))


def test_column_sums_split_from_the_documented_number_of_rows():
    """A column reduction over few columns (fewer programs than ``Tuning.split.outer_below``
    per multiprocessor) splits its rows across the GPU from ``Tuning.split.min_r // 8`` rows."""
    options = _options(launch_configs_for_sm_count=H200)
    rows = T.split.min_r // 8
    seg = segment(_column_sums(rows, 8), options)
    assert [s.name for s in schedulers.candidates(seg.groups[0])][0] == "reduction.split"
    assert [c.scheduler for c in _planned(_column_sums(rows, 8), options)] == ["reduction.split"]
    assert [c.scheduler for c in _planned(_column_sums(rows - 1, 8), options)] != ["reduction.split"]
    # with more programs than that per multiprocessor, the columns fill the GPU without splitting
    wide = T.outer.xblock * T.split.outer_below * H200
    assert [c.scheduler for c in _planned(_column_sums(rows, wide), options)] != ["reduction.split"]


def test_split_column_sums_match_eager():
    """Under the interpreter a reduction of at most 4 kept elements splits from
    ``Tuning.split.interpret_min_r`` reduced ones; two stages, values against float64."""
    rows = T.split.interpret_min_r
    x = torch.randn(rows, 3, generator=torch.Generator().manual_seed(0))

    def check(got, x):  # within fp32 summation's worst-case bound, in any order (Higham, 2002, 4.2)
        exact = (2.0 * x.double()).sum(0)
        bound = x.shape[0] * 2.0 ** -24 * (2.0 * x.double()).abs().sum(0)
        assert ((got.double() - exact).abs() <= bound).all(), (got, exact)

    got, used = _run(_column_sums(rows, 3), _options(), x)
    assert used == {"reduction.split"}
    check(got[0], x)
    got, used = _run(_column_sums(rows - 1, 3), _options(), x[:-1])
    assert used != {"reduction.split"}
    check(got[0], x[:-1])


def test_a_changed_tuning_moves_the_threshold():
    """The split heuristic reads ``Tuning.split.min_r`` from the options it is given."""
    rows = T.split.min_r // 8
    lower = _options(launch_configs_for_sm_count=H200, tuning=T.replace("split.min_r", T.split.min_r * 2))
    assert [c.scheduler for c in _planned(_column_sums(rows, 8), lower)] != ["reduction.split"]
    assert dataclasses.replace(lower, tuning=T).tuning.split.min_r == T.split.min_r


def test_a_stored_partition_replays_to_the_searched_one_and_a_cyclic_one_is_refused(caplog):
    def chain():
        """``e = exp(x); n = neg(e); out = e + n``: one pointwise group when searched."""
        b = Builder()
        x = b.input(6, 40)
        e = b.op("exp", x, shape=(6, 40))
        n = b.op("neg", e, shape=(6, 40))
        return b.graph(b.op("add", e, n, shape=(6, 40)))

    searched = segment(chain(), _options())
    assert searched.partitions == [[[0, 1, 2]]] and not searched.replayed
    again = segment(chain(), _options(), stored=searched.partitions)
    assert again.replayed and str(again) == str(searched)
    # exp and add as one group, neg alone: each group needs the other's result first
    with caplog.at_level("DEBUG", logger="torchfuse.cache"):
        cyclic = segment(chain(), _options(), stored=[[[0, 2]]])
    assert not cyclic.replayed and str(cyclic) == str(searched)
    assert any("computed from its own" in r.getMessage() for r in caplog.records)
    x = torch.randn(6, 40)
    got, _ = _run(chain(), _options(), x)
    torch.testing.assert_close(got[0], torch.exp(x) - torch.exp(x))


def test_remembered_and_grown_domains_are_the_domains_aligning_afresh_gives(monkeypatch):
    """``Units.domain`` answers a node list it aligned before from memory (the sibling passes
    try merges again) and grows a remembered group's domain by the nodes a merge adds
    (``domain.extend``) instead of aligning the whole group again: every answer, refusals
    included, is what aligning that list afresh gives (sizes, reduced dims and every value's
    dims), the partition is the same, and nothing is remembered once the partition is made."""
    from torchfuse import domain
    from torchfuse.segment import fuse

    def graph() -> Graph:  # LayerNorm-backward-like: column and row sums of one gradient, a
        b = Builder()      # chain after them, and a reshape that splits a dim (no domain with its reader);
        x, g, w, y = b.input(64, 32), b.input(64, 32), b.input(32), b.input(16)
        h = b.input(32, 64)  # and two sums of one input, one through a transpose: siblings whose
        by_rows = b.op("sum", h, [1], shape=(32,))  # merged group takes the other one's seed
        by_cols = b.op("sum", b.op("mul", b.op("permute", h, [1, 0], shape=(64, 32)), 2.0, shape=(64, 32)), [0],
                       shape=(32,))
        gx = b.op("mul", g, x, shape=(64, 32))
        dw = b.op("sum", gx, [0], shape=(32,))
        db = b.op("sum", g, [0], shape=(32,))
        gw = b.op("mul", g, w, shape=(64, 32))
        rows = b.op("sum", gw, [1], True, shape=(64, 1))
        t = b.op("sub", gw, rows, shape=(64, 32))
        for _ in range(3):
            t = b.op("mul", b.op("permute", t, [1, 0], shape=(32, 64)), 0.5, shape=(32, 64))
            t = b.op("permute", b.op("exp", t, shape=(32, 64)), [1, 0], shape=(64, 32))
        split = b.op("reshape", b.op("neg", y, shape=(16,)), [4, 4], shape=(4, 4))
        return b.graph(dw, db, t, b.op("exp", split, shape=(4, 4)), by_rows, by_cols)

    def key(answer):
        if isinstance(answer, str):
            return answer
        return answer.sizes, answer.reduced, sorted((v.name, d) for v, d in answer.dims.items())

    def described(units) -> list:
        groups = {id(u): u for u in units.unit.values()}.values()
        return sorted(([n.outputs[0].name for n in u], key(domain.align(u, units.outputs_of(u)))) for u in groups)

    remembering, extending = fuse.Units.domain, domain.extend
    asked: list = []
    grown: list = []

    def checked(self, nodes, grown_from=None):
        answer = remembering(self, nodes, grown_from)
        asked.append(tuple(nodes))
        assert key(answer) == key(domain.align(nodes, self.outputs_of(nodes))), nodes
        return answer

    def counted(*args):
        result = extending(*args)
        grown.append(result is not None)
        return result

    monkeypatch.setattr(fuse.Units, "domain", checked)
    monkeypatch.setattr(fuse, "extend", counted)
    remembered = fuse.partition(graph(), _options())
    assert remembered._domains == {}
    assert len(asked) > len(set(asked))  # some lists were asked again
    assert any(grown)  # some domains were grown
    assert any(isinstance(domain.align(list(a), remembered.outputs_of(list(a))), str) for a in asked)  # refusals
    monkeypatch.setattr(fuse.Units, "domain", lambda self, nodes, grown_from=None: domain.align(nodes, self.outputs_of(nodes)))
    afresh = fuse.partition(graph(), _options())
    assert described(remembered) == described(afresh)
