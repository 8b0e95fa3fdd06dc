"""The first training call of BERT-base (masked LM) compiled with torchfuse on a CPU, by compile phase.

Where a GPU is not at hand, this measures torchfuse's compile work on CPU tensors: Hugging
Face's ``BertForMaskedLM`` from its default configuration (12 layers, width 768; dropout off),
one forward with the loss and one backward, kernels run by Triton's interpreter
(``interpret=True``; their run time is the ``first_launch`` phase and says nothing of a GPU).
Compile work barely depends on the sizes, so a small batch serves. Prints one JSON line (the
phases of :class:`torchfuse.runtime.phases.PhaseWindow`, per graph its counters and its graph
cache status) and the phases as text.

Cold and warm starts: run it twice with the same ``--cache-dir`` (empty before the first run);
the second process finds the graph cache and Triton's cache the first one filled::

    PYTHONPATH=src python benchmarks/first_call_cpu.py --cache-dir /tmp/first-call   # cold
    PYTHONPATH=src python benchmarks/first_call_cpu.py --cache-dir /tmp/first-call   # warm
    PYTHONPATH=src python benchmarks/first_call_cpu.py --profile first.prof          # cProfile

Needs ``transformers``.
"""
from __future__ import annotations

import argparse
import cProfile
import json
import os


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--seq", type=int, default=16)
    parser.add_argument("--layers", type=int, default=12)
    parser.add_argument("--cache-dir", default=None, help="torchfuse's and Triton's caches go under it")
    parser.add_argument("--profile", default=None, help="write cProfile's statistics of the first call here")
    args = parser.parse_args()
    if args.cache_dir:  # read when first compiling, not at import
        os.environ["TORCHFUSE_CACHE_DIR"] = os.path.join(args.cache_dir, "torchfuse")
        os.environ["TRITON_CACHE_DIR"] = os.path.join(args.cache_dir, "triton")

    import torch
    import transformers

    import torchfuse  # noqa: F401  (registers the backend)
    from torchfuse import backend
    from torchfuse.runtime.phases import PhaseWindow, format_phases

    torch.manual_seed(0)
    config = transformers.BertConfig(num_hidden_layers=args.layers, hidden_dropout_prob=0.0,
                                     attention_probs_dropout_prob=0.0)
    model = transformers.BertForMaskedLM(config)
    ids = torch.randint(0, config.vocab_size, (args.batch, args.seq))
    step = torch.compile(lambda i: model(input_ids=i, labels=i).loss, backend="torchfuse",
                         options={"interpret": True, "cache_dir": os.environ.get("TORCHFUSE_CACHE_DIR")})
    profile = cProfile.Profile() if args.profile else None
    known = {id(c) for c in backend.RECENT}
    with PhaseWindow() as window:
        if profile:
            profile.enable()
        step(ids).backward()
        if profile:
            profile.disable()
    graphs = []
    for compiled in (c for c in backend.RECENT if id(c) not in known):
        cache = compiled.plan_cache
        graphs.append({"name": compiled.name, "groups": len(compiled.segmentation.groups),
                       "segmentation_replayed": compiled.segmentation.replayed,
                       "graph_cache": cache.status if cache is not None else None,
                       **{k: v for k, v in compiled.stats.items() if k != "events"}})
    print(json.dumps({"phases": window.seconds, "graphs": graphs}))
    print(format_phases(window.seconds))
    if profile:
        profile.dump_stats(args.profile)


if __name__ == "__main__":
    main()
