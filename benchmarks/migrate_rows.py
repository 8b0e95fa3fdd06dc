"""One-off: the numbers of the result folders still current, as rows of benchmarks/results/rows.jsonl.

Run once from the repository root (PYTHONPATH=src) before those folders leave the tree; the
commit that removes them removes this script too (git history keeps both).
"""
from __future__ import annotations

import json
import re
from pathlib import Path

from torchfuse.bench.results import result_from_dict
from torchfuse.bench.rows import ROWS_FILE, Provenance, append_rows, rows_from_results

R = Path("benchmarks/results")
H200, TORCH, TRITON = "NVIDIA H200", "2.11.0", "3.6.0"
#: backends renamed since (the same configurations: Options.cudagraphs, freeze=True)
RENAMED = {"torchfuse-cudagraphs": "torchfuse-reduce-overhead",
           "torchfuse-cudagraphs-frozen": "torchfuse-reduce-overhead-frozen"}


def bench_rows(path: Path, run: str | None, commit: str | None, note: str | None = None, run_names=None):
    data = json.loads(path.read_text())
    metas = {m["run_id"]: m for m in data["runs"]}
    out = []
    for run_id, meta in metas.items():
        results = [result_from_dict(r) for r in data["results"] if r["run_id"] == run_id]
        name = run or (run_names or {}).get(run_id, run_id)
        for row in rows_from_results(results, meta, name):
            recorded = meta.get("versions", {}).get("torchfuse_commit")
            if commit:
                row.commit = commit
                if recorded != commit:
                    row.extra["metadata_commit"] = recorded
            if row.backend in RENAMED:
                row.extra["backend_as_recorded"] = row.backend
                row.backend = RENAMED[row.backend]
            if note:
                row.extra["note"] = note
            row.extra["source"] = str(path.relative_to(R).parent)
            out.append(row)
    return out


def norms_rows(path: Path, prov: Provenance, alt: list[str], date_note: str):
    data = json.loads(path.read_text())
    copy = data["copy_GBps"]
    out = []
    names = {"eager": ("eager", ""), "inductor": ("torch.compile", ""), "torchfuse": ("torchfuse", ""),
             "torchfuse_alt": ("torchfuse", "alt")}
    for r in data["rows"]:
        case = f"norms/{r['op']}/{'x'.join(map(str, r['shape']))}"
        precision = {"bfloat16": "bf16", "float32": "fp32", "float16": "fp16"}[r["dtype"]]
        for d in ("fwd", "bwd"):
            nbytes = r[f"{d}_bytes"]
            gpu = {k: r.get(f"{d}_{k}_gpu_ms") for k in names}
            for key, (backend, variant) in names.items():
                ms = r.get(f"{d}_{key}_ms")
                if ms is None:
                    continue
                failed = isinstance(ms, str)
                t = gpu[key] if not failed else None
                gbps = nbytes / (t * 1e-3) / 1e9 if t else None
                extra = {"bytes": nbytes, "copy_gbps": copy, "date_source": date_note, "source": path.parent.name if path.parent.name.startswith("2026") else str(path.relative_to(R))}
                if r.get(f"{d}_{key}_per_kernel_us"):
                    extra["per_kernel_us"] = r[f"{d}_{key}_per_kernel_us"]
                if backend == "torchfuse" and r.get("torchfuse_schedule"):
                    extra["schedule"] = r["torchfuse_schedule"]
                if variant:
                    extra["overrides"] = alt
                out.append(prov.row(
                    "norms", case, mode=d, precision=precision, backend=backend, variant=variant,
                    status="failed" if failed else "ok", error=ms if failed else None,
                    median_ms=None if failed else ms, device_ms=t, kernels=r.get(f"{d}_{key}_kernels"),
                    bandwidth_gbps=gbps, copy_fraction=gbps / copy if gbps else None,
                    speedup_vs_eager=gpu["eager"] / t if t and gpu["eager"] else None,
                    speedup_vs_torch_compile=gpu["inductor"] / t if t and gpu["inductor"] else None, extra=extra))
    return out


def sweep_small_rows(path: Path, prov: Provenance):
    out = []
    common = dict(mode="fwd", precision="fp16", layout="channels-last")
    for c in json.loads(path.read_text()):
        case = f"small/{c['case']}"
        for backend, key in (("eager", "eager_us"), ("torch.compile", "inductor_us")):
            us = c.get(key)
            out.append(prov.row("sweep-launch", case, backend=backend, device_ms=us / 1e3 if us is not None else None,
                                status="ok" if us is not None else "failed", extra={"source": path.parent.name if path.parent.name.startswith("2026") else str(path.relative_to(R))}, **common))
        heuristic = c["heuristic"] if len(c["heuristic"]) == 3 else [c["heuristic"][0], 1, c["heuristic"][1]]
        info = {"xnumel": c["xnumel"], "rnumel": c.get("rnumel", 1), "scheduler": c.get("scheduler", "pointwise"),
                "XBLOCK": heuristic[0], "RBLOCK": heuristic[1], "warps": heuristic[2], "source": path.parent.name if path.parent.name.startswith("2026") else str(path.relative_to(R))}
        us = c.get("torchfuse_us")
        out.append(prov.row("sweep-launch", case, backend="torchfuse", device_ms=us / 1e3 if us is not None else None,
                            status="ok" if us is not None else "failed", extra=info, **common))
        for cand in c["candidates"]:
            kind, *cfg, us = cand
            xb, rb, w = cfg if len(cfg) == 3 else (cfg[0], 1, cfg[1])
            out.append(prov.row("sweep-launch", case, backend="torchfuse",
                                variant=f"{'' if kind == 'runtime' else kind + ' '}X{xb} R{rb} w{w}",
                                device_ms=us / 1e3, extra={"kind": kind, "XBLOCK": xb, "RBLOCK": rb, "warps": w},
                                **common))
    return out


def sweep_large_rows(path: Path, prov: Provenance):
    out = []
    for c in json.loads(path.read_text()):
        case, copy, nbytes = f"large/{c['case']}", c["copy_GBps"], c["bytes"]
        frac = lambda ms: nbytes / (ms * 1e-3) / 1e9 / copy  # noqa: E731
        h = c["heuristic"]
        heuristic = {"scheduler": h[0], "bytes": nbytes, "copy_gbps": copy, "source": path.parent.name if path.parent.name.startswith("2026") else str(path.relative_to(R))}
        if len(h) == 4:
            heuristic.update(XBLOCK=h[1], RBLOCK=h[2], warps=h[3])
        out.append(prov.row("sweep-launch", case, mode="fwd", precision="bf16", backend="torchfuse",
                            median_ms=c["default_ms"], copy_fraction=frac(c["default_ms"]), extra=heuristic))
        for xb, rb, w, ms in c.get("candidates", []):
            out.append(prov.row("sweep-launch", case, mode="fwd", precision="bf16", backend="torchfuse",
                                variant=f"X{xb} R{rb} w{w}", median_ms=ms, status="ok" if ms is not None else "failed",
                                copy_fraction=frac(ms) if ms else None,
                                extra={"kind": "runtime", "XBLOCK": xb, "RBLOCK": rb, "warps": w}))
    return out


def conv_rows(path: Path, prov: Provenance):
    data = json.loads(path.read_text())
    out = []
    model = {"cudnn_fused_graph": ("cudnn-fused-graph", ""), "inductor_reduce_overhead": ("torch.compile-reduce-overhead", ""),
             "torchfuse_frozen": ("torchfuse-reduce-overhead-frozen", ""),
             "torchfuse_frozen_no_epilogues": ("torchfuse-reduce-overhead-frozen", "conv_epilogues=False"),
             "eager": ("eager", "")}
    for batch, figures in data["model"].items():
        for key, (backend, variant) in model.items():
            err = figures.get("err_cudnn_fused" if key == "cudnn_fused_graph" else f"err_{key}")
            out.append(prov.row("conv-epilogue", f"conv-epilogue/resnet50/{batch}", mode="infer-fp16", precision="fp16",
                                layout="channels-last", backend=backend, variant=variant,
                                median_ms=figures[f"{key}_ms"], extra={"max_abs_error": err, "source": path.parent.name if path.parent.name.startswith("2026") else str(path.relative_to(R))}))
    for r in data["per_conv"]:
        case = f"conv-epilogue/{r['hw']}x{r['hw']} {r['cin']}->{r['cout']} k{r['k']} s{r['stride']}/{r['batch']}"
        precision = {"torch.float16": "fp16", "torch.bfloat16": "bf16"}[r.get("dtype", "torch.float16")]
        for mode, backend, key, err in (("conv", "eager", "conv_us", None),
                                        ("relu", "torchfuse", "torchfuse_relu_us", "err_torchfuse"),
                                        ("relu", "cudnn-fused", "cudnn_relu_us", "err_cudnn"),
                                        ("add-relu", "torchfuse", "torchfuse_add_relu_us", "err_torchfuse_add"),
                                        ("add-relu", "cudnn-fused", "cudnn_add_relu_us", "err_cudnn_add")):
            out.append(prov.row("conv-epilogue", case, mode=mode, precision=precision, layout="channels-last",
                                backend=backend, device_ms=r[key] / 1e3,
                                extra={"max_abs_error": r[err]} if err else {}))
    return out


def replay_rows(log: Path, prov: Provenance, layout: str):
    names = {"Inductor reduce-overhead": ("torch.compile-reduce-overhead", ""),
             "cudagraphs": ("torchfuse-reduce-overhead", ""),
             "cudagraphs + freeze": ("torchfuse-reduce-overhead-frozen", ""),
             "cudagraphs + freeze, no conv epilogues": ("torchfuse-reduce-overhead-frozen", "conv_epilogues=False")}
    out = []
    for m in re.finditer(r"^== (.+?): ([\d.]+) ms/call, enqueue ([\d.]+) ms/call", log.read_text(), re.M):
        backend, variant = names[m.group(1)]
        out.append(prov.row("host", "host/replay/mobilenetv3_large_100/1", mode="infer-fp16", precision="fp16",
                            layout=layout, backend=backend, variant=variant,
                            extra={"per_call_ms": float(m.group(2)), "enqueue_ms": float(m.group(3)),
                                   "source": log.parent.name}))
    return out


def prov(run, date, commit, torch=TORCH, command=None):
    return Provenance(run=run, date=date, commit=commit, device=H200, torch=torch, triton=TRITON, command=command)


def main():
    rows = []
    # the 2026-11-30 merged report: each run under its letter
    letters = {"20261130-070018-hf-447": "F", "20261130-070241-timm-1046": "F", "20261130-071240-hf-6154": "G",
               "20261130-083732-timm-5690": "H", "20261130-083922-timm-6298": "H", "20261130-084043-micro-6708": "H",
               "20261130-084902-timm-1255": "I", "20261130-090955-timm-5742": "J", "20261130-091254-timm-6847": "J",
               "20261130-104217-timm-1358": "K", "20261130-104343-timm-1965": "K", "20261130-112450-hf-1582": "N",
               "20261130-112817-timm-2453": "N", "20261130-125515-hf-5838": "P", "20261130-130642-hf-2299": "Q"}
    rows += bench_rows(R / "2026-11-30-h200-summary/results.json", None, None, run_names=letters)
    sweep_prov = prov("2026-11-30-sweep", "2026-11-30T01:16:17", "6e41e54",
                      command="python benchmarks/sweep.py --json sweep.json")
    rows += sweep_large_rows(R / "2026-11-30-h200-sweep/sweep.json", sweep_prov)
    rows += sweep_small_rows(R / "2026-11-30-h200-run-ac/sweep_small.json",
                             prov("AC", "2026-11-30T18:00:00", "b213669", command="python benchmarks/sweep_small.py"))
    rows += sweep_small_rows(R / "2026-11-30-h200-run-ad/sweep_small.json",
                             prov("AD", "2026-11-30T18:10:00", "83c10a9", command="python benchmarks/sweep_small.py"))
    ax = prov("AX", "2026-12-01T03:54:00", "845e0b2", command="python benchmarks/conv_epilogue.py")
    for name in ("model.json", "bf16.json", "b32.json"):
        rows += conv_rows(R / "2026-12-01-h200-run-ax" / name, ax)
    rows += bench_rows(R / "2026-12-01-h200-run-ax/infer-cl/results.json", "AX", "845e0b2")
    rows += bench_rows(R / "2026-12-01-h200-run-ay/infer-cf/results.json", "AY", "1c85562")
    ba = prov("BA", "2026-12-01T04:25:42", "f307b0d", command="python benchmarks/replay_host.py --model mobilenetv3_large_100")
    rows += replay_rows(R / "2026-12-01-h200-run-ba/host--channels-first.log", ba, "")
    rows += replay_rows(R / "2026-12-01-h200-run-ba/host--channels-last.log", ba, "channels-last")
    bn_alt = ["codegen.triton.SINK_SELECTS=False", "codegen.triton.ROW_PRELUDE=False", "ir.ops.EXACT_RECIPROCALS=False",
              "schedulers.reduction.SPLIT_OUTER_RBLOCK_ONE_INPUT=16"]
    rows += norms_rows(R / "2026-12-01-h200-run-bn/norms/norms.json",
                       prov("BN", "2026-12-01T10:59:44", "d241a08", "2.11.0+cu130",
                            "python benchmarks/norms.py " + " ".join(f"--alt {a}" for a in bn_alt)
                            + " --per-kernel --time-budget 310"),
                       bn_alt, "the measured commit's time (the run's own was not recorded)")
    rows += norms_rows(R / "2026-12-01-h200-run-bo/norms/norms.json",
                       prov("BO", "2026-12-01T11:14:47", "0024a52", "2.11.0+cu130",
                            "python benchmarks/norms.py --ops layer_norm,rms_norm,softmax,log_softmax,cross_entropy "
                            "--shapes 32768x1024 --dtypes bfloat16 --per-kernel --time-budget 45 "
                            "--alt schedulers.reduction.WRITING_ROWS_XBLOCK=2"),
                       ["schedulers.reduction.WRITING_ROWS_XBLOCK=2"],
                       "estimated: just before the same run's HuggingFace training (11:15:47)")
    rows += bench_rows(R / "2026-12-01-h200-run-bo/train-hf/results.json", "BO", "0024a52")
    rows += bench_rows(R / "2026-12-01-h200-training-steps/results.json", "training-steps", "550d5ec")
    rows += bench_rows(R / "2026-12-01-h200-training-steps/t5-rerun/results.json", "training-steps-t5-rerun", "550d5ec")
    rows.sort(key=lambda r: r.date)
    ROWS_FILE.unlink(missing_ok=True)
    print(append_rows(ROWS_FILE, rows), "rows")


if __name__ == "__main__":
    main()
