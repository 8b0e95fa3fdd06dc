"""Training under DDP and FSDP2: torchfuse against eager and ``torch.compile`` under the same wrapper.

Models: BERT-base (masked LM) and GPT-2 (causal LM), built from their configurations
(``torchfuse.bench.suites.hf``: random weights, nothing downloaded), dropout off so that every
backend computes the same function; each rank trains on its own random tokens (the same for
every backend), AdamW, the loss from the model's head.

Two parts:

* ``--part single`` (one GPU, NCCL, world size 1): fp32 (TF32 off), backends ``eager``,
  ``torchfuse`` and ``torchfuse-reduce-overhead`` (torchfuse's CUDA graphs for training
  graphs, ``mode="reduce-overhead"``). World size 1 still runs DDP's buckets and the
  DDPOptimizer's graph split, and FSDP2's all-gather and reduce-scatter hooks.
* ``--part pair`` (two GPUs, NCCL): bf16 mixed precision (DDP: ``torch.autocast``; FSDP2:
  ``MixedPrecisionPolicy(param_dtype=bfloat16, reduce_dtype=float32)``), backends ``eager``,
  ``torch.compile`` and ``torchfuse``.

How each backend meets the wrapper: under DDP the DDP module is compiled (TorchDynamo's
DDPOptimizer splits its graph at the gradient buckets); under FSDP2 each transformer layer is
compiled and then sharded (``fully_shard(compile(layer))``), then the root is sharded
(``--fsdp-compile`` chooses ``layers``, ``root`` or both; compiling a HuggingFace root whose
layers are compiled modules raises ``InternalTorchDynamoError: TypeError: BertLayer does not
support len()`` inside TorchDynamo in PyTorch 2.11, for every backend).

Each case (part, model, wrapper, backend) runs in fresh processes, one per GPU, started by this
script with ``NCCL_NVLS_ENABLE=0``, ``TORCH_SYMM_MEM_DISABLE_MULTICAST=1`` and
``NVSHMEM_DISABLE_NVLS=1`` in their environment. Per case: the first step's time (compilation
included), the median step time of the timed steps, tokens per second (all ranks), peak memory
per GPU (over the timed steps, and over the whole case), every step's loss on every rank and its
largest relative difference from eager's, the graphs TorchDynamo captured, and for torchfuse with
CUDA graphs the graphs the CUDA graph trees recorded and re-recorded. A case that fails or
hangs (``--case-timeout``) is recorded with its error and the run goes on.

Results: ``distributed.json`` under ``--out``, rewritten after every case; cases already in
the file from an earlier run into the same folder are kept unless run again (so a run can be
split into several commands, eager first: the loss comparison reads eager's case from the
file). A table is printed at the end.

Usage (from the repository root):

    PYTHONPATH=src python benchmarks/distributed.py --part single --out $OUT/distributed
    PYTHONPATH=src python benchmarks/distributed.py --part pair --models bert --out $OUT/distributed

On a CPU, ``--device cpu --tiny`` runs the same with 2-layer models of width 32 on the gloo
backend (torchfuse's kernels in Triton's interpreter), to check the script itself.
"""
from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import multiprocessing
import os
import signal
import statistics
import sys
import time
import traceback
from pathlib import Path

#: what the two-GPU machine requires of every process that uses NCCL
NCCL_ENVIRONMENT = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}
PARTS = {
    "single": {"world_size": 1, "precision": "fp32", "backends": ("eager", "torchfuse", "torchfuse-reduce-overhead")},
    "pair": {"world_size": 2, "precision": "bf16", "backends": ("eager", "torch.compile", "torchfuse")},
}
#: per-GPU [batch, sequence]: the sizes of the HF suite's training cases for these models
SIZES = {"bert": (64, 128), "gpt2": (8, 512)}
TINY_SIZE = (2, 16)
#: largest relative difference of a step's loss from eager's that passes, by precision
TOLERANCE = {"fp32": 1e-3, "bf16": 3e-2}


# ------------------------------------------------------------------ one rank of one case
def _build(name: str, tiny: bool, sequence: int):
    """The model on the CPU (seeded, so every case starts from the same weights) and its vocabulary size."""
    import torch
    import transformers

    from torchfuse.bench.suites.hf import MODELS, make_config

    config = make_config(name, sequence, tiny)
    for key, value in config.to_dict().items():
        if ("dropout" in key or "pdrop" in key) and isinstance(value, float):
            setattr(config, key, 0.0)
    auto = {"masked-lm": transformers.AutoModelForMaskedLM, "causal-lm": transformers.AutoModelForCausalLM}
    torch.manual_seed(0)
    return auto[MODELS[name][1]].from_config(config), config.vocab_size


def _layers(model):
    """The model's transformer layers: its first ``ModuleList`` of two or more modules."""
    import torch

    for module in model.modules():
        if isinstance(module, torch.nn.ModuleList) and len(module) >= 2:
            return module
    raise ValueError(f"{type(model).__name__}: no list of layers found")


def _wrap(model, case: dict, device: str, rank: int):
    """(the wrapped model, what to call): see the module's docstring."""
    import torch

    from torchfuse.bench.backends import BACKENDS

    compile_fn = BACKENDS[case["backend"]].compile
    if case["wrapper"] == "ddp":
        ddp = torch.nn.parallel.DistributedDataParallel(model, device_ids=[rank] if device == "cuda" else None)
        return ddp, compile_fn(ddp, device) if compile_fn else ddp
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32) \
        if case["precision"] == "bf16" else MixedPrecisionPolicy()
    mesh = init_device_mesh(device, (case["world_size"],))
    layers = _layers(model)
    for i, layer in enumerate(layers):
        if compile_fn and "layers" in case["fsdp_compile"]:
            layer = layers[i] = compile_fn(layer, device)
        fully_shard(layer, mesh=mesh, mp_policy=policy)
    fully_shard(model, mesh=mesh, mp_policy=policy)
    return model, compile_fn(model, device) if compile_fn and "root" in case["fsdp_compile"] else model


def _cuda_graph_trees(device: str) -> dict | None:
    """Graphs the CUDA graph trees recorded in this process, and how often one was recorded
    again (a static input, such as a parameter, found at a new address); ``None`` without them."""
    if device != "cuda":
        return None
    import torch

    try:
        from torch._inductor.cudagraph_trees import get_manager

        manager = get_manager(torch.cuda.current_device(), create_if_none_exists=False)
        if manager is None:
            return None
        return {"graphs_recorded": next(manager.graph_counter),
                "re_recorded": sum(sum(v.values()) for v in manager.num_rerecord.values())}
    except Exception as e:  # private API: record what went wrong rather than fail the case
        return {"error": f"{type(e).__name__}: {e}"}


def _train(rank: int, case: dict, record: dict) -> None:
    """Warm-up and timed steps of one case on this rank; fills ``record``."""
    import torch
    import torch._dynamo

    from torchfuse.bench.backends import BACKENDS
    from torchfuse.bench.environment import device_name, precision_settings, versions

    device = case["device"]
    if device == "cuda":
        torch.cuda.set_device(rank)
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    batch, sequence = case["size"]
    model, vocab = _build(case["model"], case["tiny"], sequence)
    model = model.to(device)
    record.update(parameters=sum(p.numel() for p in model.parameters()), device_name=device_name(device))
    if rank == 0:
        record.update(versions=versions(), precision_settings=precision_settings())
    wrapped, run = _wrap(model, case, device, rank)
    optimizer = torch.optim.AdamW(wrapped.parameters(), lr=1e-4)
    autocast = case["precision"] == "bf16" and case["wrapper"] == "ddp"
    mark_step = BACKENDS[case["backend"]].mark_step

    def step(i: int) -> torch.Tensor:
        g = torch.Generator().manual_seed(1000 * rank + i)
        tokens = torch.randint(0, vocab, (batch, sequence), generator=g).to(device)
        if mark_step:
            torch.compiler.cudagraph_mark_step_begin()
        with torch.autocast(device, torch.bfloat16) if autocast else contextlib.nullcontext():
            loss = run(input_ids=tokens, labels=tokens).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return loss.detach()

    def synchronize():
        if device == "cuda":
            torch.cuda.synchronize()

    losses, times = [], []
    for i in range(case["warmup"] + case["steps"]):
        if i == case["warmup"] and device == "cuda":
            record["peak_gib_warmup"] = torch.cuda.max_memory_allocated() / 2**30
            torch.cuda.reset_peak_memory_stats()
        synchronize()
        t0 = time.perf_counter()
        loss = step(i)
        synchronize()
        times.append(time.perf_counter() - t0)
        losses.append(float(loss))
    timed = times[case["warmup"]:]
    record.update(losses=losses, step_seconds=times, first_step_s=times[0],
                  median_step_ms=statistics.median(timed) * 1e3 if timed else None,
                  dynamo_graphs=int(torch._dynamo.utils.counters["stats"]["unique_graphs"]),
                  cuda_graph_trees=_cuda_graph_trees(device))
    if device == "cuda":
        record["peak_gib"] = torch.cuda.max_memory_allocated() / 2**30
    if case["backend"].startswith("torchfuse"):
        from torchfuse import backend

        record["torchfuse_graphs"] = len(backend.RECENT) + len(backend.UNFUSED)
        captured = [c.stats.get("cudagraph", "") for c in backend.RECENT]
        record["torchfuse_captured"] = sum(s.startswith("captured") for s in captured)
        record["torchfuse_not_captured"] = sorted({s for s in captured if s.startswith("not captured")})


def _rank_main(rank: int, case: dict, folder: str) -> None:
    """One rank of one case: join the group, train, write ``rank<r>.json`` (with the error
    when it raises) and leave without waiting for the other ranks."""
    import torch

    record: dict = {"environment": {k: os.environ.get(k) for k in NCCL_ENVIRONMENT}}
    code = 0
    try:
        if case["device"] == "cpu":
            torch.set_num_threads(max(1, (os.cpu_count() or 1) // case["world_size"]))
        torch.distributed.init_process_group(
            "nccl" if case["device"] == "cuda" else "gloo", init_method=f"file://{folder}/store", rank=rank,
            world_size=case["world_size"], timeout=datetime.timedelta(seconds=case["timeout"]))
        _train(rank, case, record)
        torch.distributed.barrier()
        torch.distributed.destroy_process_group()
    except BaseException as e:  # noqa: BLE001 - recorded for the table; the run goes on
        record.update(error=f"{type(e).__name__}: {e}"[:2000], traceback=traceback.format_exc()[-6000:])
        code = 1
    (Path(folder) / f"rank{rank}.json").write_text(json.dumps(record))
    sys.stdout.flush()
    os._exit(code)  # a group whose peer failed can block in its destructor


# ------------------------------------------------------------------ the run
def run_case(case: dict, folder: Path) -> list[dict]:
    """Start one process per rank for ``case`` and wait: at most ``case["timeout"]`` seconds,
    30 s once one has failed; those left are killed. Returns each rank's record."""
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.glob("*"):
        old.unlink()
    context = multiprocessing.get_context("spawn")
    processes = [context.Process(target=_rank_main, args=(rank, case, str(folder))) for rank in range(case["world_size"])]
    try:
        for p in processes:
            p.start()
        from torchfuse.bench.ranks import wait_for_ranks

        wait_for_ranks(processes, case["timeout"], grace_s=30)
    finally:  # also when this script is stopped (SIGTERM from `timeout`): no rank outlives it
        for p in processes:
            if p.is_alive():
                p.kill()
            if p.pid is not None:
                p.join(10)
    records = []
    for rank, p in enumerate(processes):
        path = folder / f"rank{rank}.json"
        record = json.loads(path.read_text()) if path.exists() else {}
        if p.exitcode is None or (p.exitcode and "error" not in record):
            record["error"] = f"rank {rank} killed after {case['timeout']} s" if p.exitcode in (None, -9) else \
                f"rank {rank} exited with code {p.exitcode}"
        records.append(record)
    return records


def summarize(case: dict, records: list[dict], eager: dict | None, tolerance: float) -> dict:
    """One row of the results: the case, the ranks' records, and the comparison with eager's."""
    errors = [f"rank {r}: {rec['error']}" for r, rec in enumerate(records) if rec.get("error")]
    row = {"case": {k: case[k] for k in ("part", "model", "wrapper", "backend", "precision", "world_size", "size",
                                         "warmup", "steps", "fsdp_compile", "device", "tiny")},
           "ranks": [{k: v for k, v in rec.items() if k not in ("versions", "precision_settings")} for rec in records],
           "errors": errors}
    if records and records[0].get("versions"):
        row["versions"], row["precision_settings"] = records[0]["versions"], records[0]["precision_settings"]
    if errors:
        return row
    batch, sequence = case["size"]
    step_ms = max(rec["median_step_ms"] for rec in records) if case["steps"] else None
    row.update(median_step_ms=step_ms, first_step_s=max(rec["first_step_s"] for rec in records),
               tokens_per_s=case["world_size"] * batch * sequence / (step_ms / 1e3) if step_ms else None,
               peak_gib_per_gpu=[rec.get("peak_gib") for rec in records])
    if eager is not None and not eager.get("errors") and case["backend"] != "eager":
        diffs = [abs(a - b) / max(abs(a), 1e-12) for ours, theirs in zip(eager["ranks"], records)
                 for a, b in zip(ours["losses"], theirs["losses"])]
        row.update(loss_max_rel_diff=max(diffs), loss_tolerance=tolerance, loss_pass=max(diffs) <= tolerance)
        if eager.get("median_step_ms") and step_ms:
            row["speedup_over_eager"] = eager["median_step_ms"] / step_ms
    return row


def _table(cases: dict) -> str:
    lines = [f"{'case':52} {'step ms':>9} {'tokens/s':>10} {'peak GiB/GPU':>14} {'first s':>8} {'loss vs eager':>14}"]
    for key, row in sorted(cases.items()):
        if row["errors"]:
            lines.append(f"{key:52} FAILED: {row['errors'][0][:120]}")
            continue
        peak = "/".join(f"{p:.1f}" for p in row["peak_gib_per_gpu"] if p is not None) or "-"
        diff = row.get("loss_max_rel_diff")
        loss = "-" if diff is None else f"{diff:.1e} {'ok' if row['loss_pass'] else 'FAIL'}"
        step = f"{row['median_step_ms']:.1f}" if row.get("median_step_ms") else "-"
        tokens = f"{row['tokens_per_s']:.0f}" if row.get("tokens_per_s") else "-"
        lines.append(f"{key:52} {step:>9} {tokens:>10} {peak:>14} {row['first_step_s']:>8.1f} {loss:>14}")
    return "\n".join(lines)


def _stop(signum, frame) -> None:
    """SIGTERM (``timeout`` running out): leave through the ``finally`` that stops the ranks; the
    cases finished so far are already in the results file."""
    raise SystemExit(128 + signum)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--part", choices=sorted(PARTS), required=True)
    parser.add_argument("--out", required=True, help="folder for distributed.json")
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    parser.add_argument("--tiny", action="store_true", help="2-layer models of width 32, [batch, sequence] = [2, 16]")
    parser.add_argument("--models", default="bert,gpt2")
    parser.add_argument("--wrappers", default="ddp,fsdp2")
    parser.add_argument("--backends", default=None, help="default: the part's (eager always runs first)")
    parser.add_argument("--precision", choices=("fp32", "bf16"), default=None, help="default: the part's")
    parser.add_argument("--fsdp-compile", choices=("layers+root", "layers", "root"), default="layers")
    parser.add_argument("--warmup", type=int, default=3, help="untimed steps (compilation, CUDA graph recording)")
    parser.add_argument("--steps", type=int, default=10, help="timed steps")
    parser.add_argument("--size", default=None, help="per-GPU BATCHxSEQUENCE for every model (default: per model)")
    parser.add_argument("--tolerance", type=float, default=None, help="largest relative loss difference from eager")
    parser.add_argument("--case-timeout", type=float, default=420, help="seconds per case before its ranks are killed")
    parser.add_argument("--time-budget", type=float, default=None,
                        help="stop starting cases when less than the longest case so far is left")
    args = parser.parse_args(argv)

    part = PARTS[args.part]
    precision = args.precision or part["precision"]
    tolerance = args.tolerance if args.tolerance is not None else TOLERANCE[precision]
    backends = [b.strip() for b in (args.backends or ",".join(part["backends"])).split(",") if b.strip()]
    backends = ["eager"] + [b for b in backends if b != "eager"]
    from torchfuse.bench.backends import BACKENDS

    unknown = [b for b in backends if b not in BACKENDS]
    if unknown:
        parser.error(f"unknown backends {unknown}; known: {sorted(BACKENDS)}")
    os.environ.update(NCCL_ENVIRONMENT)  # inherited by every process started below
    signal.signal(signal.SIGTERM, _stop)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / "distributed.json"
    results = json.loads(path.read_text()) if path.exists() else {"runs": [], "cases": {}}
    given = list(sys.argv[1:] if argv is None else argv)
    given = [("DIR" if i and given[i - 1] == "--out" else a) for i, a in enumerate(given)]  # no machine paths
    results["runs"].append({"command": "python benchmarks/distributed.py " + " ".join(given),
                            "started": datetime.datetime.now().isoformat(timespec="seconds"),
                            "environment": dict(NCCL_ENVIRONMENT)})
    started, longest = time.monotonic(), 0.0
    for model in [m.strip() for m in args.models.split(",") if m.strip()]:
        size = tuple(int(x) for x in args.size.split("x")) if args.size else TINY_SIZE if args.tiny else SIZES[model]
        for wrapper in [w.strip() for w in args.wrappers.split(",") if w.strip()]:
            for backend in backends:
                key = f"{args.part}/{model}/{wrapper}/{backend}"
                skip = BACKENDS[backend].skip_reason(args.device, True)
                if skip:
                    print(f"{key}: skipped ({skip})", flush=True)
                    continue
                if args.time_budget and time.monotonic() - started + longest > args.time_budget:
                    print(f"{key}: not started (time budget)", flush=True)
                    continue
                case = {"part": args.part, "model": model, "wrapper": wrapper, "backend": backend,
                        "precision": precision, "world_size": part["world_size"], "size": size, "warmup": args.warmup,
                        "steps": args.steps, "fsdp_compile": args.fsdp_compile, "device": args.device,
                        "tiny": args.tiny, "timeout": args.case_timeout}
                t0 = time.monotonic()
                records = run_case(case, out / "ranks")
                longest = max(longest, time.monotonic() - t0)
                eager = results["cases"].get(f"{args.part}/{model}/{wrapper}/eager")
                results["cases"][key] = row = summarize(case, records, eager, tolerance)
                row["seconds"] = time.monotonic() - t0
                path.write_text(json.dumps(results, indent=1))
                print(f"{key}: {row['errors'][0][:200] if row['errors'] else 'done'} ({row['seconds']:.0f} s)", flush=True)
    print(_table({k: v for k, v in results["cases"].items() if k.startswith(args.part + "/")}))
    failed = [k for k, v in results["cases"].items() if v["errors"] or v.get("loss_pass") is False]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
