"""The ``torchfuse`` command: ``torchfuse demo | bench | explain | report | conformance ...``.

Each subcommand lives in its own module and receives the remaining arguments.
"""
from __future__ import annotations

import argparse
import importlib
import sys

COMMANDS = {
    "demo": ("torchfuse.demo", "compile a real sentence-embedding model and compare it with eager"),
    "bench": ("torchfuse.bench.__main__", "benchmark torchfuse against eager and torch.compile"),
    "explain": ("torchfuse.report.explain_cli", "explain a named model (hf:bert-base, timm:resnet50, file.py:fn)"),
    "report": ("torchfuse.report.cli", "render a saved explain result (JSON) as one HTML page"),
    "conformance": ("torchfuse.conformance", "run PyTorch's OpInfo samples through torchfuse; op x dtype table"),
}


def parse_shard(text: str) -> tuple[int, int]:
    """``--shard I/N`` (1-based) as ``(I, N)``, for the subcommands that split their work.

    Raises:
        argparse.ArgumentTypeError: not two integers with ``1 <= I <= N``.
    """
    try:
        i, n = (int(x) for x in text.split("/"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"--shard takes I/N, e.g. 2/4 (got {text!r})") from None
    if not 1 <= i <= n:
        raise argparse.ArgumentTypeError(f"--shard I/N needs 1 <= I <= N (got {text!r})")
    return i, n


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help") or argv[0] not in COMMANDS:
        print("usage: torchfuse <command> [args]\n\ncommands:")
        for name, (_, help_text) in COMMANDS.items():
            print(f"  {name:12s} {help_text}")
        return 0 if argv and argv[0] in ("-h", "--help") else (0 if not argv else 2)
    module = importlib.import_module(COMMANDS[argv[0]][0])
    return int(module.main(argv[1:]) or 0)


if __name__ == "__main__":
    sys.exit(main())
