"""Training where users already train, on a GPU: the HF Trainer, timm and Lightning, eager against torchfuse.

Three parts, each trained twice from the same seed and data (eager, then compiled the way the
README says), losses compared step by step:

* ``hf``: ``transformers.Trainer`` (with accelerate) fine-tuning a BERT-base classifier (random
  weights from its configuration: nothing is downloaded) on synthetic sentences whose label is
  learnable, bf16 mixed precision; torchfuse by ``model.compile(backend="torchfuse")``.
* ``timm``: timm's own ``train.py`` with ``--torchcompile torchfuse`` when ``--timm-train``
  (or ``$TIMM_TRAIN_PY``) names it, on a small ImageFolder of random images written under
  the output directory; the script is not in timm's wheel, so without it the same path it
  takes: ``timm.create_model`` then ``torch.compile(model, backend="torchfuse")``, SGD steps
  under bf16 autocast on random images.
* ``lightning``: ``lightning.Trainer.fit`` of a LightningModule (a transformer-encoder
  classifier) passed as ``torch.compile(module, backend="torchfuse")``, ``bf16-mixed``.

Dropout is off, so eager and torchfuse compute the same function and the differences are
rounding. A part passes when every step's loss is within ``--tolerance`` (relative) of
eager's. Prints a table; writes ``integrations.json`` under ``--out``. About two to four
minutes on an H200, most of it torchfuse's first compiles.

Usage (on a GPU): ``PYTHONPATH=src python benchmarks/integrations.py --out $OUT/integrations``

``--tiny`` runs every part with tiny models in fp32 (on a CPU, kernels in Triton's
interpreter: ``TORCHFUSE_INTERPRET=1 ... --tiny --device cpu --steps 3 --batch 4``), to check
the script itself.
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # configurations only; never reach the hub


def _compare(eager: list[float], fused: list[float], tolerance: float) -> dict:
    rel = [abs(a - b) / max(abs(a), 1e-12) for a, b in zip(eager, fused)]
    return {"eager_losses": eager, "torchfuse_losses": fused, "max_rel_diff": max(rel) if rel else None,
            "max_abs_diff": max((abs(a - b) for a, b in zip(eager, fused)), default=None),
            "pass": bool(rel) and len(eager) == len(fused) and max(rel) <= tolerance}


class _StepTimes:
    """Wall time of each step (the GPU synchronized first), fed by a framework callback."""

    def __init__(self):
        self.marks = [time.perf_counter()]

    def mark(self) -> None:
        if torch.cuda.is_initialized():
            torch.cuda.synchronize()
        self.marks.append(time.perf_counter())

    def summary(self) -> dict:
        steps = [b - a for a, b in zip(self.marks, self.marks[1:])]
        later = steps[3:] or steps[1:]
        return {"first_step_s": steps[0] if steps else None,
                "median_step_ms": statistics.median(later) * 1e3 if later else None}


# -- HF Trainer ----------------------------------------------------------------------------------

def hf_part(args, out: Path) -> dict:
    import transformers

    vocab, length = (64, 8) if args.tiny else (30522, 128)
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(vocab // 2, vocab, (args.batch * args.steps, length), generator=g)
    labels = (ids[:, 1] % 2).long()  # learnable: the parity of the first word piece
    data = [{"input_ids": ids[i], "attention_mask": torch.ones(length, dtype=torch.long), "labels": labels[i]}
            for i in range(len(ids))]

    def run(compiled: bool):
        times = _StepTimes()

        class Timer(transformers.TrainerCallback):
            def on_step_end(self, *a, **k):
                times.mark()

        torch.manual_seed(0)
        tiny = dict(vocab_size=vocab, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32,
                    max_position_embeddings=16) if args.tiny else {}
        config = transformers.BertConfig(num_labels=2, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                                         problem_type="single_label_classification", **tiny)
        model = transformers.BertForSequenceClassification(config)
        if compiled:
            model.compile(backend="torchfuse")
        targs = transformers.TrainingArguments(
            output_dir=str(out / ("hf-torchfuse" if compiled else "hf-eager")), per_device_train_batch_size=args.batch,
            max_steps=args.steps, learning_rate=5e-5, warmup_steps=0, bf16=not args.tiny, logging_steps=1,
            save_strategy="no", report_to=[], seed=0, dataloader_num_workers=2, disable_tqdm=True,
            use_cpu=args.device == "cpu")
        trainer = transformers.Trainer(model=model, args=targs, train_dataset=data, callbacks=[Timer()])
        times.marks = [time.perf_counter()]
        trainer.train()
        return [h["loss"] for h in trainer.state.log_history if "loss" in h], times.summary()

    eager, eager_t = run(False)
    fused, fused_t = run(True)
    what = "tiny BERT classifier, fp32" if args.tiny else "BERT-base classifier, bf16"
    return {"part": "hf", "what": f"transformers.Trainer, {what}, batch {args.batch}x{length}",
            **_compare(eager, fused, args.tolerance), "eager_time": eager_t, "torchfuse_time": fused_t}


# -- timm ----------------------------------------------------------------------------------------

def _find_train_py(given: str | None) -> Path | None:
    import timm

    for candidate in (given, os.environ.get("TIMM_TRAIN_PY"), Path(timm.__file__).resolve().parents[1] / "train.py"):
        if candidate and Path(candidate).is_file():
            return Path(candidate)
    return None


def _image_folder(root: Path, classes: int = 4, train: int = 64, val: int = 8, pixels: int = 64) -> Path:
    from PIL import Image

    g = torch.Generator().manual_seed(0)
    for split, count in (("train", train), ("validation", val)):
        for c in range(classes):
            folder = root / split / f"class{c}"
            folder.mkdir(parents=True, exist_ok=True)
            for i in range(count):
                pixels_ = (torch.rand(pixels, pixels, 3, generator=g) * 255).to(torch.uint8).numpy()
                Image.fromarray(pixels_).save(folder / f"{i}.png")
    return root


def timm_train_py(args, out: Path, script: Path) -> dict:
    """timm's train.py itself, eager and ``--torchcompile torchfuse``; its per-epoch losses."""
    data = _image_folder(out / "timm-images")
    results = {}
    for name, extra in (("eager", []), ("torchfuse", ["--torchcompile", "torchfuse"])):
        argv = [str(data), "--model", "resnet50", "--num-classes", "4", "--input-size", "3", "64", "64",
                "-b", "32", "--epochs", "2", "--lr", "0.01", "--warmup-epochs", "0", "--sched", "step",
                "--amp", "--amp-dtype", "bfloat16", "--no-aug", "--workers", "2", "--seed", "0", "--log-interval", "1",
                "--output", str(out / "timm-train"), "--experiment", name, *extra]
        # train.py finds the backend through torchfuse's entry point once installed; importing
        # torchfuse first registers it for a checkout on PYTHONPATH
        launcher = ("import sys, runpy, torchfuse; sys.argv = sys.argv[1:]; "
                    "runpy.run_path(sys.argv[0], run_name='__main__')")
        t0 = time.perf_counter()
        proc = subprocess.run([sys.executable, "-c", launcher, str(script), *argv], capture_output=True, text=True,
                              timeout=args.timm_timeout)
        (out / f"timm-train-{name}.log").write_text(proc.stdout + proc.stderr)
        summary = out / "timm-train" / name / "summary.csv"
        if proc.returncode != 0 or not summary.is_file():
            return {"part": "timm", "what": f"timm train.py ({script})", "pass": False,
                    "error": f"{name} run failed (exit {proc.returncode}); see timm-train-{name}.log"}
        with open(summary, newline="") as f:
            rows = list(csv.DictReader(f))
        results[name] = ([float(r["train_loss"]) for r in rows] + [float(r["eval_loss"]) for r in rows],
                         time.perf_counter() - t0)
    (eager, eager_s), (fused, fused_s) = results["eager"], results["torchfuse"]
    return {"part": "timm", "what": f"timm train.py --torchcompile torchfuse, resnet50, bf16 ({script}); "
                                    "losses: train per epoch, then eval per epoch",
            **_compare(eager, fused, args.tolerance), "eager_time": {"run_s": eager_s},
            "torchfuse_time": {"run_s": fused_s}}


def timm_compile_path(args) -> dict:
    """What train.py does, without it: create_model, torch.compile(backend=...), SGD steps."""
    import timm

    name, pixels, classes = ("test_resnet", 32, 4) if args.tiny else ("resnet50", 224, 1000)
    g = torch.Generator().manual_seed(0)
    batches = [(torch.randn(args.batch, 3, pixels, pixels, generator=g),
                torch.randint(0, classes, (args.batch,), generator=g)) for _ in range(4)]

    def run(compiled: bool):
        torch.manual_seed(0)
        model = timm.create_model(name, pretrained=False, num_classes=classes).to(args.device).train()
        step_model = torch.compile(model, backend="torchfuse") if compiled else model
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
        losses, times = [], _StepTimes()
        for i in range(args.steps):
            x, y = (t.to(args.device, non_blocking=True) for t in batches[i % len(batches)])
            with torch.autocast(args.device, dtype=torch.bfloat16, enabled=not args.tiny):
                loss = torch.nn.functional.cross_entropy(step_model(x), y)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
            times.mark()
        return losses, times.summary()

    eager, eager_t = run(False)
    fused, fused_t = run(True)
    return {"part": "timm", "what": f"timm.create_model({name!r}) + torch.compile(backend='torchfuse') as train.py "
                                    f"does (train.py not found), {'fp32' if args.tiny else 'bf16 autocast'}, "
                                    f"batch {args.batch}x{pixels}x{pixels}",
            **_compare(eager, fused, args.tolerance), "eager_time": eager_t, "torchfuse_time": fused_t}


# -- Lightning -----------------------------------------------------------------------------------

def lightning_part(args) -> dict:
    import lightning as L

    class Classifier(L.LightningModule):
        def __init__(self):
            super().__init__()
            layer = torch.nn.TransformerEncoderLayer(width, heads, 4 * width, dropout=0.0, batch_first=True,
                                                     norm_first=True)
            self.encoder = torch.nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
            self.head = torch.nn.Linear(width, 10)

        def forward(self, x):
            return self.head(self.encoder(x).mean(1))

        def training_step(self, batch, batch_idx):
            x, y = batch
            return torch.nn.functional.cross_entropy(self(x), y)

        def configure_optimizers(self):
            return torch.optim.AdamW(self.parameters(), lr=1e-4)

    width, heads, layers, length = (16, 2, 1, 8) if args.tiny else (512, 8, 4, 128)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(args.batch * args.steps, length, width, generator=g)
    data = torch.utils.data.TensorDataset(x, (x[:, 0, 0] > 0).long() + 2 * (x[:, 0, 1] > 0).long())

    def run(compiled: bool):
        times = _StepTimes()
        losses = []

        class Record(L.Callback):
            def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx):
                losses.append(outputs["loss"].item())
                times.mark()

        torch.manual_seed(0)
        module = Classifier()
        trainer = L.Trainer(max_steps=args.steps, accelerator="gpu" if args.device == "cuda" else "cpu", devices=1,
                            precision="32-true" if args.tiny else "bf16-mixed", logger=False,
                            enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                            callbacks=[Record()])
        times.marks = [time.perf_counter()]
        trainer.fit(torch.compile(module, backend="torchfuse") if compiled else module,
                    torch.utils.data.DataLoader(data, batch_size=args.batch))
        return losses, times.summary()

    eager, eager_t = run(False)
    fused, fused_t = run(True)
    return {"part": "lightning", "what": f"lightning.Trainer.fit, {layers}-layer transformer encoder (d={width}), "
                                         f"{'fp32' if args.tiny else 'bf16-mixed'}, batch {args.batch}x{length}",
            **_compare(eager, fused, args.tolerance), "eager_time": eager_t, "torchfuse_time": fused_t}


def _row(r: dict) -> str:
    def ms(t):
        return f"{t['median_step_ms']:.1f}" if t and t.get("median_step_ms") else "-"

    def first(t):
        return f"{t['first_step_s']:.1f}" if t and t.get("first_step_s") else "-"

    diff = f"{r['max_rel_diff']:.2e}" if r.get("max_rel_diff") is not None else "-"
    last = (f"{r['eager_losses'][-1]:.4f} / {r['torchfuse_losses'][-1]:.4f}" if r.get("eager_losses")
            and r.get("torchfuse_losses") else "-")
    return (f"{r['part']:10s} {'pass' if r.get('pass') else 'FAIL':5s} {len(r.get('eager_losses') or []):6d} "
            f"{last:>19s} {diff:>10s} {ms(r.get('eager_time')):>9s} {ms(r.get('torchfuse_time')):>9s} "
            f"{first(r.get('torchfuse_time')):>8s}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default=os.path.join(os.environ.get("OUT", "."), "integrations"))
    p.add_argument("--parts", default="hf,timm,lightning")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--tolerance", type=float, default=2e-2, help="largest relative loss difference (bf16)")
    p.add_argument("--timm-train", default=None, help="timm's train.py (from its repository); else $TIMM_TRAIN_PY")
    p.add_argument("--timm-timeout", type=int, default=240)
    p.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    p.add_argument("--tiny", action="store_true", help="tiny models in fp32: checks the script (on a CPU too)")
    args = p.parse_args(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        print("integrations.py needs a CUDA device (or --tiny --device cpu to check the script)", file=sys.stderr)
        return 2
    import torchfuse  # noqa: F401  (registers the backend for a checkout on PYTHONPATH)

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    results = []
    for part in args.parts.split(","):
        t0 = time.perf_counter()
        try:
            if part == "hf":
                r = hf_part(args, out)
            elif part == "timm":
                script = _find_train_py(args.timm_train)
                r = timm_train_py(args, out, script) if script else timm_compile_path(args)
            elif part == "lightning":
                r = lightning_part(args)
            else:
                raise ValueError(f"unknown part {part!r}")
        except Exception as e:  # one part's failure is a result, not the end of the run
            r = {"part": part, "pass": False, "error": f"{type(e).__name__}: {e}"}
        r["seconds"] = time.perf_counter() - t0
        results.append(r)
        print(f"{part}: {'pass' if r.get('pass') else 'FAIL'} in {r['seconds']:.0f} s"
              + (f" ({r['error']})" if r.get("error") else ""), flush=True)
    print(f"\n{'part':10s} {'loss':5s} {'steps':>6s} {'last eager/fused':>19s} {'max rel':>10s} "
          f"{'eager ms':>9s} {'fused ms':>9s} {'first s':>8s}")
    for r in results:
        print(_row(r))
        print(f"           {r.get('what', '')}")
    env = {"torch": torch.__version__, "torchfuse": torchfuse.__version__, "tiny": args.tiny,
           "device": torch.cuda.get_device_name() if args.device == "cuda" else "cpu"}
    for mod in ("transformers", "accelerate", "timm", "lightning", "triton"):
        try:
            env[mod] = __import__(mod).__version__
        except ImportError:
            env[mod] = None
    (out / "integrations.json").write_text(json.dumps({"environment": env, "results": results}, indent=1))
    print(f"\nwrote {out / 'integrations.json'}")
    return 0 if all(r.get("pass") for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
