"""``torchfuse bench profile train|infer``: one training step or inference call, kernel by
kernel (CUDA only).

* ``train``: a HuggingFace model (``--model bert``; ``gpt2``...) or an image classifier
  (``--model timm:resnet50``) trained with AMP (bf16, or ``--dtype fp16`` with
  ``GradScaler`` as the step tables run it) and ``AdamW(fused=True)`` under eager,
  torchfuse and Inductor: the step time (:func:`torchfuse.bench.timing.time_steps`, median of
  5 after 3 warm-up steps), the device time and count of its kernels (``torch.profiler``; a
  CPU-side range's or a fusion group's annotation's device time is not counted twice), the
  generated kernels' share, the time the GPU sat idle, torchfuse's graphs and fallbacks, and
  the kernels that take the most device time; ``--host-top N`` adds host events and a
  ``cProfile`` of three steps, ``--graph-host`` the host time per call of each torchfuse
  graph called alone (:func:`torchfuse.bench.host.graph_host_ms`), ``--host-phases`` the
  host time of each phase of the step (:func:`host_phases`). A backend
  ``torchfuse[SETTING;...]`` is torchfuse compiled with those settings
  (:mod:`torchfuse.bench.variants`), profiled in the same process on the same weights.
* ``infer``: a TIMM model's inference (``--model mobilenetv3_large_100 --batch 1``, fp16 or
  bf16, ``--channels-last``) under eager, Inductor and torchfuse (frozen by default), CUDA
  graphs off so that the profiler sees every kernel: kernels and device time per call, the
  largest difference from eager's output, the kernels that take the most device time;
  ``--dump FILE`` writes every backend's kernels in launch order.

The harness's suites measure the same steps' medians, device and idle times for their
tables; these profiles are for finding where the time goes.
"""
from __future__ import annotations

import argparse
import collections
import json
import statistics
import sys
import time
from pathlib import Path

import torch

from . import timing
from .backends import split_variant
from .rows import add_row_arguments, provenance, save_rows
from .variants import options_with, parse_overrides

#: profile backend names -> the row's backend name
BACKEND_NAMES = {"eager": "eager", "inductor": "torch.compile", "torchfuse": "torchfuse",
                 "torchfuse-frozen": "torchfuse-frozen"}


def _kernel_events(prof) -> list:
    """The profiler's averaged device kernels, without user annotations (each fusion group's
    launch range also appears as a device-side annotation spanning its kernels)."""
    return [e for e in prof.key_averages() if e.device_type == torch.autograd.DeviceType.CUDA
            and not getattr(e, "is_user_annotation", False)]


def _torchfuse_graphs(last: int | None = None) -> list[dict]:
    from torchfuse import backend

    graphs = backend.RECENT if last is None else backend.RECENT[-last:]
    return [{"graph": g.name, "groups": len(g.segmentation.groups), "calls": len(g.segmentation.calls),
             "fallbacks": g.stats.get("fallbacks"), "cudagraph": g.stats.get("cudagraph")} for g in graphs]


def train_workload(model_name: str, batch: int, seq: int, target_seq: int = 128):
    """``(model, loss_of, case)``: a model on the GPU in train mode, ``loss_of(module)`` -> loss.

    HuggingFace models are the step bench's (``suites/hf.py``: the library's default config,
    random tokens as labels); a sequence-to-sequence model (``t5``) reads ``seq`` source tokens
    and ``target_seq`` label tokens."""
    torch.manual_seed(0)
    if model_name.startswith("timm:"):  # an image classifier, cross-entropy on random labels
        import timm

        model = timm.create_model(model_name[5:], pretrained=False).cuda().train()
        images = torch.randn(batch, 3, 224, 224, device="cuda")
        labels = torch.randint(0, 1000, (batch,), device="cuda")
        return model, lambda m: torch.nn.functional.cross_entropy(m(images), labels), f"profile/{model_name}/{batch}"
    from .modes import MODES
    from .suites import hf
    from .workload import BuildContext

    seq2seq = hf.MODELS[model_name][1] == "seq2seq-lm"
    size = (batch, seq, target_seq) if seq2seq else (batch, seq)
    # the builder reads only that the mode trains; the step applies the precision
    work = hf.build(model_name, size, BuildContext(device="cuda", mode=MODES["train-amp-bf16"]))
    return (work.model, lambda m: work.loss(m(**work.inputs)),
            f"profile/{model_name}/" + "x".join(str(n) for n in size))


def _settings(name: str) -> tuple[str, ...] | None:
    """The settings of ``name`` when it is ``torchfuse[SETTING;...]`` (torchfuse compiled with
    :mod:`torchfuse.bench.variants` overrides; train only), else None."""
    variant = split_variant(name)
    return variant[1] if variant is not None and variant[0] == "torchfuse" else None


def profile_train(args, prov) -> list:
    import torchfuse
    from torch.profiler import ProfilerActivity, profile

    model, loss_of, case = train_workload(args.model, args.batch, args.seq, args.target_seq)
    opt = torch.optim.AdamW(model.parameters(), fused=True)
    dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}[args.dtype]
    scaler = torch.amp.GradScaler("cuda", enabled=args.dtype == "fp16")

    def step(m):
        with torch.autocast("cuda", dtype):
            loss = loss_of(m)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        opt.zero_grad(set_to_none=True)

    mode = "reduce-overhead" if args.cudagraphs else None
    makers = {"eager": lambda: model, "torchfuse": lambda: torchfuse.compile(model, mode=mode),
              "inductor": lambda: torch.compile(model, mode=mode)}
    for name in args.backends.split(","):
        if _settings(name) is not None:  # a variant: torchfuse with these settings
            makers[name] = lambda s=_settings(name): torchfuse.compile(model, mode=mode, options=options_with(s))

    def marked(m):  # a new CUDA-graph step: the previous step's outputs may be overwritten
        if args.cudagraphs:
            torch.compiler.cudagraph_mark_step_begin()
        step(m)

    rows = []
    for name in args.backends.split(","):
        m = makers[name]()
        for _ in range(3):
            marked(m)
        torch.cuda.synchronize()
        wall = statistics.median(timing.time_steps(lambda: marked(m), 5, "cuda"))
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            marked(m)
            torch.cuda.synchronize()
        if args.trace:
            Path(args.trace).mkdir(parents=True, exist_ok=True)
            prof.export_chrome_trace(str(Path(args.trace) / f"{name}.json"))
        kernels = _kernel_events(prof)
        device = sum(e.self_device_time_total for e in kernels) / 1e3
        count = sum(e.count for e in kernels)
        generated = sum(e.self_device_time_total for e in kernels if e.key.startswith("tf_")) / 1e3
        top = sorted((e for e in kernels if e.self_device_time_total > 0), key=lambda e: -e.self_device_time_total)
        extra = {"generated_ms": generated,
                 "top_kernels": [[e.key[:110], e.self_device_time_total / 1e3, e.count] for e in top[:args.top]]}
        print(f"\n== {name}: {wall:.1f} ms/step, device time {device:.1f} ms, {count} kernels; generated kernels "
              f"(tf_*) {generated:.2f} ms; the GPU is idle for {max(wall - device, 0):.1f} ms of the step")
        if name.startswith("torchfuse"):
            extra["graphs"] = _torchfuse_graphs()
            for g in extra["graphs"]:
                print(f"   {g}")
        for key, ms, n in extra["top_kernels"]:
            print(f"   {ms:8.2f} ms {n:5d}x  {key}")
        if args.host_top:
            extra["host_top"] = _host_top(prof, lambda: marked(m), args.host_top)
        if args.host_phases:
            extra["host_phases_ms"] = host_phases(m, loss_of, opt, scaler, dtype, args.cudagraphs)
            print("   host ms of each phase (median of 10 steps, device asleep): "
                  + ", ".join(f"{k} {v:.2f}" for k, v in extra["host_phases_ms"].items()))
        if args.graph_host and name.startswith("torchfuse") and not args.cudagraphs:
            from torchfuse import backend

            from .host import graph_host_ms
            extra["graph_host_ms"] = graph_host_ms(lambda: marked(m), list(backend.RECENT))
            print("   host ms per call of each graph alone: "
                  + ", ".join(f"{k} {v:.2f}" for k, v in extra["graph_host_ms"].items()))
        rows.append(prov.row("profile", case, mode=f"train-amp-{args.dtype}", precision=args.dtype,
                             backend=BACKEND_NAMES.get(name, name)
                             + ("-reduce-overhead" if args.cudagraphs and name != "eager" else ""),
                             median_ms=wall, device_ms=device, idle_ms=max(wall - device, 0.0), kernels=count,
                             extra=extra))
    return rows


def host_phases(m, loss_of, opt, scaler, dtype, cudagraphs: bool, steps: int = 10) -> dict[str, float]:
    """Host milliseconds of each phase of a training step: ``forward`` (the compiled call
    and loss), ``backward``, ``optimizer`` (``GradScaler.step`` and ``update``, or the
    optimizer's step), ``zero_grad``, their ``total``, and ``in graphs``: the part spent
    inside torchfuse's compiled graphs (0 for other backends).

    Before each step the device is put to sleep for 200 ms (``torch.cuda._sleep``), so that no
    launch waits for the device: each phase's time is its host work alone, which a step whose
    device work is shorter shows as GPU idle time. Medians over ``steps`` steps.
    """
    from torchfuse.runtime.executor import CompiledGraph

    inside = [0.0]
    plain = CompiledGraph.__call__

    def timed(self, args):
        t = time.perf_counter()
        try:
            return plain(self, args)
        finally:
            inside[0] += time.perf_counter() - t

    cycles = int(torch.cuda.get_device_properties(0).clock_rate * 1e3 * 0.2)  # clock_rate is kHz
    phases: dict[str, list[float]] = collections.defaultdict(list)
    CompiledGraph.__call__ = timed
    try:
        for _ in range(steps):
            torch.cuda.synchronize()
            torch.cuda._sleep(cycles)
            inside[0] = 0.0
            t0 = time.perf_counter()
            if cudagraphs:
                torch.compiler.cudagraph_mark_step_begin()
            with torch.autocast("cuda", dtype):
                loss = loss_of(m)
            t1 = time.perf_counter()
            scaler.scale(loss).backward()
            t2 = time.perf_counter()
            scaler.step(opt)
            scaler.update()
            t3 = time.perf_counter()
            opt.zero_grad(set_to_none=True)
            t4 = time.perf_counter()
            for k, v in (("forward", t1 - t0), ("backward", t2 - t1), ("optimizer", t3 - t2),
                         ("zero_grad", t4 - t3), ("total", t4 - t0), ("in graphs", inside[0])):
                phases[k].append(v * 1e3)
    finally:
        CompiledGraph.__call__ = plain
        torch.cuda.synchronize()
    return {k: statistics.median(v) for k, v in phases.items()}


def _host_top(prof, step, top: int) -> list:
    """Host events by self CPU time in the profiled step, then a ``cProfile`` of three steps
    (printed); returns the events as ``[name, ms, count]``."""
    import cProfile
    import io
    import pstats

    events = sorted(prof.key_averages(), key=lambda e: -e.self_cpu_time_total)[:top]
    print(f"   host: {sum(e.self_cpu_time_total for e in prof.key_averages()) / 1e3:.1f} ms of self CPU time")
    for e in events:
        print(f"   {e.self_cpu_time_total / 1e3:8.2f} ms host {e.count:5d}x  {e.key[:100]}")
    prof_py = cProfile.Profile()
    prof_py.enable()
    for _ in range(3):
        step()
    torch.cuda.synchronize()
    prof_py.disable()
    buf = io.StringIO()
    pstats.Stats(prof_py, stream=buf).sort_stats("tottime").print_stats(top)
    print("   Python functions by own time over 3 steps:")
    print("\n".join("   " + line for line in buf.getvalue().splitlines()[-top - 3:]))
    return [[e.key[:100], e.self_cpu_time_total / 1e3, e.count] for e in events]


def profile_infer(args, prov) -> list:
    import timm
    from torch.profiler import ProfilerActivity, profile

    import torchfuse

    dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}[args.dtype]
    fmt = torch.channels_last if args.channels_last else torch.contiguous_format
    torch.manual_seed(0)
    model = timm.create_model(args.model, pretrained=False).cuda().eval().to(dtype).to(memory_format=fmt)
    size = model.default_cfg.get("input_size", (3, 224, 224))
    x = torch.randn(args.batch, *size, device="cuda", dtype=dtype).to(memory_format=fmt)
    with torch.no_grad():
        ref = model(x).float()
    makers = {"eager": lambda: model, "inductor": lambda: torch.compile(model),
              "torchfuse": lambda: torchfuse.compile(model),
              "torchfuse-frozen": lambda: torchfuse.compile(model, freeze=True)}
    rows, dumped = [], {}
    for name in args.backends.split(","):
        torch._dynamo.reset()
        m = makers[name]()
        with torch.no_grad():
            for _ in range(3):
                out = m(x)
            torch.cuda.synchronize()
            err = (out.float() - ref).abs().max().item()
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                m(x)
                torch.cuda.synchronize()
        ks = [(e.name, e.device_time_total) for e in prof.events()  # kernels, not launch ranges
              if e.device_type == torch.autograd.DeviceType.CUDA and e.device_time_total > 0
              and not getattr(e, "is_user_annotation", False)]
        dumped[name] = ks
        total = sum(t for _, t in ks)
        by = collections.defaultdict(lambda: [0, 0.0])
        for n, t in ks:
            key = n if len(n) < 90 else n[:87] + "..."
            by[key][0] += 1
            by[key][1] += t
        top = sorted(by.items(), key=lambda kv: -kv[1][1])[:args.top]
        print(f"\n== {name}: {len(ks)} kernels, {total:.0f} us device time, max |out - eager| {err:.3g}")
        for n, (c, t) in top:
            print(f"  {t:8.1f} us  {c:4d}x  {t / c:6.1f} us  {n}")
        extra = {"max_abs_error": err, "top_kernels": [[n, t / 1e3, c] for n, (c, t) in top]}
        if name.startswith("torchfuse"):
            extra["graphs"] = _torchfuse_graphs(3)
        rows.append(prov.row("profile", f"profile/{args.model}/{args.batch}", mode=f"infer-{args.dtype}",
                             precision=args.dtype, layout="channels-last" if args.channels_last else "",
                             backend=BACKEND_NAMES[name], device_ms=total / 1e3, kernels=len(ks), extra=extra))
    if args.dump:
        Path(args.dump).write_text(json.dumps(dumped, indent=0))
    return rows


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    p = argparse.ArgumentParser(prog="torchfuse bench profile", description=__doc__.splitlines()[0])
    p.add_argument("what", choices=("train", "infer"))
    p.add_argument("--model", default=None, help="train: a model of the HuggingFace suite (bert, gpt2, t5...) or timm:<name> (default bert); "
                                                 "infer: a TIMM model (default mobilenetv3_large_100)")
    p.add_argument("--batch", type=int, default=None, help="default 64 (train), 1 (infer)")
    p.add_argument("--seq", type=int, default=128, help="train, HuggingFace: sequence length")
    p.add_argument("--target-seq", type=int, default=128, help="train, sequence-to-sequence models (t5): label length")
    p.add_argument("--top", type=int, default=18, help="kernels listed by device time")
    p.add_argument("--backends", default=None, help="comma-separated of eager, inductor, torchfuse or "
                                                    "torchfuse[SETTING;...] (train; default "
                                                    "eager,torchfuse) or torchfuse-frozen (infer; default "
                                                    "eager,inductor,torchfuse-frozen)")
    p.add_argument("--host-top", type=int, default=0, help="train: also this many host events and a cProfile")
    p.add_argument("--host-phases", action="store_true",
                   help="train: also the host time of each phase of the step (forward, backward, optimizer)")
    p.add_argument("--graph-host", action="store_true",
                   help="train: also the host time per call of each torchfuse graph called alone (no CUDA graphs)")
    p.add_argument("--trace", default=None, help="train: write each backend's profiled step as a Chrome trace "
                                                 "(DIR/<backend>.json)")
    p.add_argument("--cudagraphs", action="store_true",
                   help="train: compile with mode='reduce-overhead' (CUDA graphs) for Inductor and torchfuse")
    p.add_argument("--channels-last", action="store_true", help="infer: model and input in channels-last")
    p.add_argument("--dtype", default=None, choices=["fp16", "bf16"],
                   help="train: the autocast dtype (default bf16; fp16 adds GradScaler); infer: model and input "
                        "dtype (default fp16)")
    p.add_argument("--dump", default=None, help="infer: write every backend's kernels in launch order to this JSON")
    add_row_arguments(p)
    args = p.parse_args(argv)
    train = args.what == "train"
    args.model = args.model or ("bert" if train else "mobilenetv3_large_100")
    args.batch = args.batch or (64 if train else 1)
    args.dtype = args.dtype or ("bf16" if train else "fp16")
    args.backends = args.backends or ("eager,torchfuse" if train else "eager,inductor,torchfuse-frozen")
    variant = {b: train and _settings(b) is not None for b in args.backends.split(",")}
    unknown = [b for b, v in variant.items()
               if (b not in BACKEND_NAMES and not v) or (train and b == "torchfuse-frozen")]
    if unknown:
        p.error(f"unknown backend(s) {unknown}")
    try:
        for b in args.backends.split(","):
            if _settings(b) is not None:
                parse_overrides(_settings(b))
    except ValueError as e:
        p.error(str(e))
    if not torch.cuda.is_available():
        print("torchfuse bench profile: needs a CUDA device (it profiles the device's kernels)", file=sys.stderr)
        return 1
    prov = provenance(args.run_name, "cuda", argv, "profile")
    rows = profile_train(args, prov) if train else profile_infer(args, prov)
    save_rows(args, "cuda", rows)
    return 0
