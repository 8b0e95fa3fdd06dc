"""Training under DistributedDataParallel and FSDP2 with torchfuse, two CPU processes (gloo).

The test starts two processes itself (``multiprocessing``, spawn) that meet through a file
store in the test's temporary directory (no port to choose, so parallel test workers cannot
collide). In each, a small transformer and a small convolutional network (BatchNorm) train
twice from the same seed and data, eager and compiled with torchfuse (kernels in Triton's
interpreter), under DDP and under FSDP2 (``torch.distributed.fsdp.fully_shard``, which PyTorch
supports on CPU tensors with gloo). The first optimizer step accumulates two micro-batches, the
first without gradient synchronization (DDP's ``no_sync``, FSDP2's
``set_requires_gradient_sync(False)``); the second step takes one. Every loss, the gradients
after the unsynchronized micro-batch and after each step's synchronized one, and the parameters
and buffers after the steps are compared with eager's in fp32.

* DDP: the DDP module is compiled. Its bucket cap is 1 MiB, the smallest TorchDynamo's
  DDPOptimizer accepts (below its first bucket's 1 MiB it raises ``AssertionError: First
  bucket should be smaller/equal to other buckets``); each model's weights span two buckets, so
  the DDPOptimizer splits its graph in two and torchfuse compiles both pieces.
* FSDP2: each unit is compiled, then sharded (``fully_shard(torchfuse.compile(block))``), and
  for the transformer the sharded root is compiled too. FSDP2's hooks are excluded from TorchDynamo
  (``torch._dynamo.disable``, "skipping FSDP hooks"), so compiling only the root breaks the graph
  at every unit, and a unit whose forward is PyTorch's own (the ``nn.Sequential`` stages here)
  then runs uncompiled: compiling the units themselves is what fuses them.

Last, one rank raises in the middle of a compiled DDP step: the other must leave its collective
with an error on its own (its peer gone, or a 5 s gloo timeout) rather than wait, and the test
bounds every process's lifetime. One pair of processes runs all of it: starting them and the
first compilation dominate the time.
"""
from __future__ import annotations

import contextlib
import datetime
import json
import multiprocessing
import os
import time
import traceback
from pathlib import Path

import pytest
import torch
from torch import nn

from torchfuse.bench.ranks import wait_for_ranks

pytestmark = [
    pytest.mark.skipif(not torch.distributed.is_available() or not torch.distributed.is_gloo_available(),
                       reason="needs torch.distributed with gloo"),
    # CPU processes with the kernels in Triton's interpreter (CI's path); on a GPU machine
    # benchmarks/distributed.py runs the same wrappers with NCCL and compiled kernels
    pytest.mark.skipif(torch.cuda.is_available(), reason="interpreter tests; the GPU runs benchmarks/distributed.py"),
]

WORLD_SIZE = 2
SCENARIOS = ["ddp-transformer", "ddp-conv", "fsdp2-transformer", "fsdp2-conv"]
#: micro-batches of each optimizer step; the first micro-batch of a step of two runs unsynchronized
MICRO_BATCHES = (2, 1)
#: fp32, same math in a different order (fused reductions): a few ulps, grown by two SGD steps
RTOL, ATOL = 1e-5, 1e-6


# ------------------------------------------------------------------ models
class Block(nn.Module):
    """A pre-norm transformer block: causal self-attention and a GELU MLP. Input and output:
    ``[batch, sequence, width]`` float32."""

    def __init__(self, width: int, heads: int, hidden: int):
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.qkv, self.proj = nn.Linear(width, 3 * width), nn.Linear(width, width)
        self.fc1, self.fc2 = nn.Linear(width, hidden), nn.Linear(hidden, width)

    def forward(self, x):
        b, t, w = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(b, t, 3, self.heads, w // self.heads).permute(2, 0, 3, 1, 4)
        scores = (q @ k.transpose(-1, -2)) * (w // self.heads) ** -0.5
        causal = torch.ones(t, t, dtype=torch.bool, device=x.device).triu(1)
        attention = scores.masked_fill(causal, float("-inf")).softmax(-1) @ v
        x = x + self.proj(attention.transpose(1, 2).reshape(b, t, w))
        return x + self.fc2(nn.functional.gelu(self.fc1(self.norm2(x))))


class TinyTransformer(nn.Module):
    """Token and position embeddings, one :class:`Block`, a final LayerNorm and a head over
    the vocabulary. Input: ``[batch, sequence]`` int64 tokens; output: ``[batch, sequence,
    vocab]`` logits. The MLP's two weights (64 x 2048 each, 1 MiB in fp32) fill one DDP
    bucket of 1 MiB."""

    def __init__(self, vocab: int = 64, width: int = 64, heads: int = 2, hidden: int = 2048, sequence: int = 8):
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.position = nn.Parameter(0.02 * torch.randn(sequence, width))
        self.block = Block(width, heads, hidden)
        self.norm = nn.LayerNorm(width)
        self.head = nn.Linear(width, vocab)

    def forward(self, tokens):
        return self.head(self.norm(self.block(self.embed(tokens) + self.position)))


class TinyConvNet(nn.Module):
    """Two 3x3 convolution + BatchNorm + ReLU stages, global average pooling, a linear head.
    Input: ``[batch, 3, H, W]`` float32; output: ``[batch, classes]``. The second convolution's
    weight (192 x 192 x 3 x 3 fp32, 1.3 MiB) fills one DDP bucket of 1 MiB."""

    def __init__(self, channels: int = 192, classes: int = 10):
        super().__init__()
        self.stage1 = nn.Sequential(nn.Conv2d(3, channels, 3, padding=1, bias=False), nn.BatchNorm2d(channels), nn.ReLU())
        self.stage2 = nn.Sequential(nn.Conv2d(channels, channels, 3, padding=1, bias=False), nn.BatchNorm2d(channels),
                                    nn.ReLU())
        self.head = nn.Linear(channels, classes)

    def forward(self, x):
        return self.head(self.stage2(self.stage1(x)).mean((2, 3)))


def _batch(model_name: str, rank: int, step: int, micro: int):
    """Inputs and targets of one micro-batch: different on every rank, step and micro-batch."""
    g = torch.Generator().manual_seed(1000 * rank + 10 * step + micro)
    if model_name == "transformer":
        tokens = torch.randint(0, 64, (2, 9), generator=g)
        return tokens[:, :-1], tokens[:, 1:]
    return torch.randn(2, 3, 6, 6, generator=g), torch.randint(0, 10, (2,), generator=g)


def _loss(model_name: str, out, target):
    return nn.functional.cross_entropy(out.flatten(0, -2) if model_name == "transformer" else out, target.flatten())


# ------------------------------------------------------------------ what each rank runs
def _wrap(model: nn.Module, wrapper: str, compiled: bool) -> tuple[nn.Module, nn.Module]:
    """The model wrapped for training, and what to call (see the module's docstring); under
    FSDP2 the units are the children with a weight over 4096 elements, and the root is compiled
    as well for the transformer (its embeddings, final norm and head), not for the convolutional
    network (whose root holds only the head: the units alone, the shorter form)."""
    import torchfuse

    if wrapper == "ddp":
        model = nn.parallel.DistributedDataParallel(model, bucket_cap_mb=1)
        return model, torchfuse.compile(model, interpret=True) if compiled else model
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    mesh = init_device_mesh("cpu", (WORLD_SIZE,))
    for name, child in list(model.named_children()):
        if any(p.numel() > 4096 for p in child.parameters()):
            if compiled:
                child = torchfuse.compile(child, interpret=True)
                setattr(model, name, child)
            fully_shard(child, mesh=mesh)
    model = fully_shard(model, mesh=mesh)
    compile_root = compiled and isinstance(model, TinyTransformer)
    return model, torchfuse.compile(model, interpret=True) if compile_root else model


@contextlib.contextmanager
def _without_sync(model: nn.Module, wrapper: str):
    """Gradients accumulate locally, without the all-reduce (DDP) or reduce-scatter (FSDP2)."""
    if wrapper == "ddp":
        with model.no_sync():
            yield
        return
    model.set_requires_gradient_sync(False)
    try:
        yield
    finally:
        model.set_requires_gradient_sync(True)


def _named(items) -> list:
    """Names as in the model before compiling: without the compiled wrappers' ``_orig_mod.``."""
    return [(name.replace("_orig_mod.", ""), t) for name, t in items]


def _local(t: torch.Tensor | None):
    if t is None:
        return None
    return (t.to_local() if hasattr(t, "to_local") else t).detach().clone()


def _train(model_name: str, wrapper: str, rank: int, compiled: bool) -> dict:
    """SGD steps of :data:`MICRO_BATCHES`; returns the losses, the local gradients after the
    unsynchronized micro-batch (``grads_unsynced``) and after each step (``grads``, a list), and
    the parameters and buffers after the last step (``state``)."""
    torch.manual_seed(0)
    model, run = _wrap(TinyTransformer() if model_name == "transformer" else TinyConvNet(), wrapper, compiled)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    record: dict = {"losses": [], "grads": []}
    for step, micro_batches in enumerate(MICRO_BATCHES):
        for micro in range(micro_batches):
            x, target = _batch(model_name, rank, step, micro)
            unsynced = micro < micro_batches - 1
            with _without_sync(run, wrapper) if unsynced else contextlib.nullcontext():
                loss = _loss(model_name, run(x), target)
                loss.backward()
            record["losses"].append(loss.item())
            if unsynced:
                # FSDP2 keeps the unsynchronized sum on its unsharded parameters: .grad appears at the sync
                record["grads_unsynced"] = {n: _local(p.grad) for n, p in _named(model.named_parameters())
                                            if p.grad is not None}
        record["grads"].append({n: _local(p.grad) for n, p in _named(model.named_parameters())})
        optimizer.step()
        optimizer.zero_grad()
    record["state"] = {n: _local(t) for n, t in _named([*model.named_parameters(), *model.named_buffers()])}
    return record


def _differences(eager: dict, fused: dict) -> list[str]:
    """What differs beyond RTOL/ATOL between two :func:`_train` records, as readable lines."""
    lines = [f"loss {i}: eager {a:.7g}, torchfuse {b:.7g}" for i, (a, b) in enumerate(zip(eager["losses"],
                                                                                            fused["losses"]))
             if abs(a - b) > ATOL + RTOL * abs(a)]
    pairs = [("grads_unsynced", eager["grads_unsynced"], fused["grads_unsynced"]), ("state", eager["state"], fused["state"])]
    pairs += [(f"grads of step {i}", a, b) for i, (a, b) in enumerate(zip(eager["grads"], fused["grads"]))]
    for what, ours, theirs in pairs:
        if set(ours) != set(theirs):
            lines.append(f"{what}: names differ: {sorted(set(ours) ^ set(theirs))}")
        for name in sorted(set(ours) & set(theirs)):
            a, b = ours[name], theirs[name]
            if (a is None) != (b is None):
                lines.append(f"{what} {name}: eager {a is not None and 'a tensor'}, torchfuse {b is not None and 'a tensor'}")
            elif a is not None and not torch.allclose(a.double(), b.double(), rtol=RTOL, atol=ATOL):
                lines.append(f"{what} {name}: max abs diff {(a.double() - b.double()).abs().max().item():.3g}")
    return lines


def _norm(grads: dict) -> float:
    return sum(float(g.double().square().sum()) for g in grads.values() if g is not None) ** 0.5


def _rank(rank: int, record: dict) -> None:
    """Every model under every wrapper, eager then torchfuse (``record["scenarios"]``: the
    differences, the graphs torchfuse compiled, gradient norms); then a compiled DDP step in
    which rank 1 raises (``record["steps"]``: the steps rank 0 finished)."""
    import torch._dynamo
    from torchfuse import backend

    record["scenarios"] = {}
    for scenario in SCENARIOS:
        wrapper, model_name = scenario.split("-")
        torch._dynamo.reset()  # each model is new: stay clear of TorchDynamo's recompile limit
        before = len(backend.RECENT), len(backend.UNFUSED)
        eager = _train(model_name, wrapper, rank, compiled=False)
        fused = _train(model_name, wrapper, rank, compiled=True)
        record["scenarios"][scenario] = {
            "differences": _differences(eager, fused), "losses": fused["losses"],
            "graphs": [c.name for c in backend.RECENT[before[0]:]] + [u["name"] for u in backend.UNFUSED[before[1]:]],
            "fusion_groups": sum(len(c.segmentation.groups) for c in backend.RECENT[before[0]:]),
            "grad_norm_unsynced": _norm(fused["grads_unsynced"]), "grad_norm": _norm(fused["grads"][-1])}
    _raise_in_a_step(rank, record)


def _raise_in_a_step(rank: int, record: dict) -> None:
    """A compiled DDP model on a process group with a 5 s timeout; rank 1 raises after its
    second forward, while rank 0 goes on to that step's backward and its all-reduce."""
    import torchfuse

    group = torch.distributed.new_group(timeout=datetime.timedelta(seconds=5))
    torch.manual_seed(0)
    model = nn.parallel.DistributedDataParallel(nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.LayerNorm(16)),
                                                process_group=group)
    run = torchfuse.compile(model, interpret=True)
    record["steps"] = 0
    for step in range(3):
        loss = run(torch.randn(4, 8)).square().mean()
        if rank == 1 and step == 1:
            record["raised_at"] = time.time()
            raise ValueError("rank 1 fails on purpose")
        loss.backward()
        record["steps"] = step + 1


# ------------------------------------------------------------------ process handling
def _rank_main(target, rank: int, folder: str, timeout_s: float) -> None:
    """One rank: join the group, run ``target(rank, record)``, write ``record`` (with the error
    and the time it was caught, when it raises) to ``rank<r>.json``, leave without waiting
    for the other rank."""
    import warnings

    # as in the test configuration: a graph torchfuse could not compile must fail, not run unfused
    warnings.filterwarnings("error", "torchfuse.*could not be compiled", RuntimeWarning)
    warnings.filterwarnings("error", "torchfuse. could not compile", RuntimeWarning)
    torch.set_num_threads(1)  # two processes on a small machine
    record: dict = {}
    code = 0
    try:
        torch.distributed.init_process_group("gloo", init_method=f"file://{folder}/store", rank=rank,
                                             world_size=WORLD_SIZE, timeout=datetime.timedelta(seconds=timeout_s))
        target(rank, record)
        torch.distributed.barrier()
    except BaseException as e:  # noqa: BLE001 - reported to the test, which decides
        record.update(error=f"{type(e).__name__}: {e}", error_type=type(e).__name__, failed_at=time.time(),
                      traceback=traceback.format_exc())
        code = 1
    (Path(folder) / f"rank{rank}.json").write_text(json.dumps(record))
    # a group whose peer died can block in its destructor: leave at once, the record is written
    os._exit(code)


def _run_ranks(target, folder: Path, *, timeout_s: float, deadline_s: float, grace_s: float) -> tuple[list, list]:
    """Start ``WORLD_SIZE`` processes running ``target`` and wait for them: at most
    ``deadline_s`` in all, and ``grace_s`` after the first one exits with an error; those still
    running then are killed. Returns each rank's record (``None`` if it wrote none) and the
    ranks that were killed."""
    context = multiprocessing.get_context("spawn")
    processes = [context.Process(target=_rank_main, args=(target, rank, str(folder), timeout_s), daemon=True)
                 for rank in range(WORLD_SIZE)]
    for p in processes:
        p.start()
    wait_for_ranks(processes, deadline_s, grace_s)
    killed = [rank for rank, p in enumerate(processes) if p.is_alive()]
    for p in processes:
        if p.is_alive():
            p.kill()
        p.join(5)
    records = []
    for rank in range(WORLD_SIZE):
        path = folder / f"rank{rank}.json"
        records.append(json.loads(path.read_text()) if path.exists() else None)
    return records, killed


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> dict:
    """Both ranks' records of :func:`_rank` (``records``) and the ranks that had to be killed
    (``killed``). The group's timeout covers one rank compiling while the other waits; ten
    minutes at most in all, 20 s once a rank has failed.

    Under pytest-xdist the first worker to need it runs the pair and the others read its
    result (the ``pytest-xdist`` recipe for a fixture run once: a file lock in the run's shared
    temporary directory), so the processes start once per test run."""
    def start(folder: Path) -> dict:
        folder.mkdir(exist_ok=True)
        records, killed = _run_ranks(_rank, folder, timeout_s=120, deadline_s=600, grace_s=20)
        return {"records": records, "killed": killed}

    if not os.environ.get("PYTEST_XDIST_WORKER"):
        result = start(tmp_path_factory.mktemp("distributed"))
    else:
        from filelock import FileLock

        shared = tmp_path_factory.getbasetemp().parent
        with FileLock(str(shared / "distributed.lock")):
            cached = shared / "distributed.json"
            if cached.exists():
                result = json.loads(cached.read_text())
            else:
                result = start(shared / "distributed")
                cached.write_text(json.dumps(result))
    for rank, record in enumerate(result["records"]):
        assert record is not None and len(record.get("scenarios", ())) == len(SCENARIOS), \
            f"rank {rank} did not finish its scenarios (killed: {result['killed']}): " \
            f"{record and record.get('traceback')}"
    return result


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_training_matches_eager(run, scenario):
    """Losses, gradients (unsynchronized and after each step), parameters and buffers equal
    eager's on both ranks, and torchfuse fused something in forward and backward graphs."""
    for rank, record in enumerate(run["records"]):
        result = record["scenarios"][scenario]
        assert not result["differences"], f"rank {rank}: " + "\n".join(result["differences"])
        assert result["fusion_groups"] > 0 and {"forward", "backward"} <= set(result["graphs"]), result
        assert len(result["losses"]) == sum(MICRO_BATCHES)


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_gradients_are_synchronized_only_when_asked(run, scenario):
    """The ranks train on different data: after the unsynchronized micro-batch their gradients
    differ (DDP; FSDP2 sets none on its sharded parameters until the synchronization), after
    the synchronized one DDP's are the same on both ranks (FSDP2's are each rank's shard)."""
    first, second = (record["scenarios"][scenario] for record in run["records"])
    assert first["losses"][0] != second["losses"][0]
    if scenario.startswith("ddp"):
        assert first["grad_norm_unsynced"] != pytest.approx(second["grad_norm_unsynced"], rel=1e-3)
        assert first["grad_norm"] == pytest.approx(second["grad_norm"], rel=1e-6)
    else:
        assert first["grad_norm_unsynced"] == second["grad_norm_unsynced"] == 0


@pytest.mark.parametrize("model_name", ["transformer", "conv"])
def test_ddp_graph_is_split_at_buckets_and_every_piece_compiled(run, model_name):
    """The DDPOptimizer splits the captured graph at 1 MiB buckets: torchfuse compiles a
    forward and a backward graph for each piece (two or more)."""
    graphs = run["records"][0]["scenarios"][f"ddp-{model_name}"]["graphs"]
    assert graphs.count("forward") >= 2 and graphs.count("forward") == graphs.count("backward"), graphs


def test_a_rank_that_raises_does_not_hang_the_other(run):
    """Rank 1 raises in the middle of a compiled DDP step and exits; rank 0, waiting for it in
    a collective, raises a distributed error by itself, within seconds."""
    records = run["records"]
    assert not run["killed"], f"ranks {run['killed']} had to be killed"
    assert records[1]["error"] == "ValueError: rank 1 fails on purpose", records[1].get("traceback")
    assert "error" in records[0] and records[0]["steps"] == 1, records[0]
    assert records[0]["error_type"] in ("DistBackendError", "DistNetworkError", "RuntimeError"), records[0]["traceback"]
    assert records[0]["failed_at"] - records[1]["raised_at"] < 20
